//! Drives the load: a step plan's closed-loop users (`closed.rs`) held for each step's
//! duration, or open-loop arrivals (`open.rs`) at the times of a schedule
//! (`schedule.rs`); then collects.

pub mod closed;
pub mod flow_step;
pub mod grpc;
pub mod open;
pub mod open_grpc;
pub mod open_ws;
pub mod walk;
pub mod walk_grpc;
pub mod walk_ws;
pub mod ws;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::Target;
use crate::config::RunConfig;
use crate::control::{Applied, Asked};
use crate::client::http1::{trace_run_half, Prepared};
use crate::drive::open::{self as open_loop, OpenShared, PhaseCounts};
use crate::kind::Kinds;
use crate::outcome::{self, ErrorClass, Reasons};
use crate::recorder::Recorder;
use crate::stats::{Live, StepStats, Window};
use crate::drive::closed::{pack_step, run_user, unix_us, Shared};
use crate::drive::walk::run_flow_user;

const STOP_POLL: Duration = Duration::from_millis(20);
/// Beyond the request timeout, how long users get to finish when the run ends.
const END_GRACE: Duration = Duration::from_secs(1);

/// A step or phase as a load level, with what the open-loop schedule could not send on time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    pub step: u32,
    pub open_loop: bool,
    /// Users (closed loop; their mean over a ramp) or target requests per second
    /// (open loop; the mean over a ramp).
    pub level: f64,
    /// Open loop: requests the schedule emitted in the part of the phase that ran.
    pub intended: u64,
    /// Open loop: requests that waited for a connection because `max_in_flight` were busy.
    pub late: u64,
    /// Open loop: late requests still waiting when the run ended, never sent.
    pub unsent: u64,
}

pub struct RunSummary {
    pub steps: Vec<StepStats>,
    /// One per step or phase of the plan.
    pub levels: Vec<Level>,
    /// When each step that ran began and ended; shorter than `steps` if interrupted.
    pub windows: Vec<Window>,
    pub records: u64,
    pub interrupted: bool,
    pub started_us: i64,
    pub ended_us: i64,
    /// The records file could not be written completely.
    pub records_error: Option<String>,
    /// Why requests failed: the first distinct messages of each class of error.
    pub reasons: Vec<(ErrorClass, Vec<String>)>,
    /// Requests still in flight when the run ended that were dropped unanswered: after
    /// `abandon`, or past the request timeout and the end's grace. Not recorded.
    pub abandoned: u64,
    /// The changes of users or rate asked while the run went, each the start of its step.
    pub changes: Vec<Applied>,
    /// The kind of each endpoint: what its records are.
    pub kinds: Kinds,
}

pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))
}

/// Runs the plan to its end, or until `stop` is set. Blocks the calling thread.
pub fn run(config: &RunConfig, stop: Arc<AtomicBool>, live: Arc<Live>) -> Result<RunSummary, String> {
    run_until(config, stop, Arc::new(AtomicBool::new(false)), live)
}

/// As [`run`]; after a `stop`, setting `abandon` drops the requests still in flight at
/// once instead of waiting up to their timeout. Every request that ended before is
/// recorded: a user's unsent records go to the recorder as its task is dropped.
pub fn run_until(
    config: &RunConfig,
    stop: Arc<AtomicBool>,
    abandon: Arc<AtomicBool>,
    live: Arc<Live>,
) -> Result<RunSummary, String> {
    config.validate()?;
    let addr = resolve(&config.host, config.port)?;
    let flows = (!config.flows.is_empty()).then(|| crate::flow::compile(&config.flows)).transpose()?;
    let hook = config.hook.as_ref().map(|h| crate::flow::hook::HookRunner::start(h.0.clone())).transpose()?;
    let requests = config
        .requests
        .iter()
        .map(|r| Prepared::new(r, config.timeout))
        .collect::<Result<Vec<_>, _>>()?;
    let cycle = crate::weights::cycle(&config.requests.iter().map(|r| r.weight).collect::<Vec<_>>());
    if config.host.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("bad host {:?}", config.host));
    }
    let host = format!("{}:{}", config.host, config.port);
    let target = Target::new(addr, host, &config.host, &config.protocol, (config.open.is_some(), config.has_grpc()))?;
    let levels = config.levels();
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        config.threads
    };
    // Closed loop on one thread: a current-thread runtime runs the users on this thread,
    // without the multi-thread scheduler's cross-thread bookkeeping. (The open-loop
    // scheduler blocks this thread, so its connections need worker threads.)
    let mut builder = if threads == 1 && config.open.is_none() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    // Every thread of the run (its workers, and this one: it runs a current-thread
    // runtime and the open-loop scheduler) notes why requests fail.
    let reasons = Arc::new(Reasons::default());
    let _noting = outcome::noting(reasons.clone());
    let noted = reasons.clone();
    let runtime = builder
        .on_thread_start(move || {
            outcome::note_into(Some(noted.clone()));
        })
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;

    let (tx, rx) = mpsc::channel();
    let recorder = Recorder {
        rx,
        path: config.records_path.clone(),
        steps: match &config.open {
            None => config.steps.iter().enumerate().map(|(i, s)| StepStats::new(i as u32, s.users)).collect(),
            Some(open) => (0..open.phases.len()).map(|i| StepStats::open(i as u32)).collect(),
        },
        open_loop: config.open.is_some(),
        live: live.clone(),
    };
    let recorder = std::thread::Builder::new()
        .name("pinchpoint-recorder".into())
        .spawn(move || recorder.run())
        .map_err(|e| format!("cannot start the recorder: {e}"))?;

    if let Some(at) = config.start_at_us {
        wait_until(at, &stop)?;
    }
    let started_us = unix_us(SystemTime::now());
    let mut counts = vec![PhaseCounts::default(); levels.len()];
    let abandoned = Arc::new(AtomicU64::new(0));
    let (windows, interrupted) = match &config.open {
        None => {
            let kinds = flows.as_ref().map_or_else(|| Kinds::of_requests(config.requests.len()), Kinds::of_flows);
            let _ = live.kinds.set(kinds);
            let shared = Arc::new(Shared {
                target,
                run_id: config.run_id.clone(),
                trace_half: trace_run_half(&config.run_id),
                tag: config.tag,
                requests,
                cycle,
                think: config.think,
                seed: config.seed,
                timeout: config.timeout,
                current: AtomicU64::new(pack_step(0, 0)),
                next_req_id: AtomicU64::new(config.req_id_base),
                abandoned: abandoned.clone(),
                in_flight: live.in_flight.clone(),
                flows,
                hook,
                tag_users: config.tag_levels.iter().map(|&l| l.round() as u32).collect(),
            });
            runtime.block_on(drive(config, shared, tx, &stop, &abandon, &live))
        }
        Some(open) => {
            let base = Instant::now();
            let base_unix_us = unix_us(SystemTime::now());
            let mut open_shared = OpenShared::new(
                target,
                config.run_id.clone(),
                config.tag,
                requests,
                cycle,
                if config.tag_levels.is_empty() { &levels } else { &config.tag_levels },
                base,
                base_unix_us,
            );
            (open_shared.endpoints, open_shared.sessions, open_shared.calls) = open_ws::sessions(&config.requests)?;
            let _ = live.kinds.set(Kinds::of_open(&open_shared.endpoints, &open_shared.sessions, &open_shared.calls));
            open_shared.abandoned = abandoned.clone();
            open_shared.in_flight = live.in_flight.clone();
            let shared = Arc::new(open_shared);
            let driven = open_loop::drive(
                open,
                config.seed,
                &levels,
                config.req_id_base,
                shared,
                runtime.handle(),
                tx,
                &stop,
                &live,
            );
            counts = driven.counts;
            let end_by = tokio::time::Instant::now() + config.max_timeout() + END_GRACE;
            runtime.block_on(finish(driven.tasks, end_by, &abandon));
            (driven.windows, driven.interrupted)
        }
    };
    // Dropping the tasks still running counts the requests they abandon.
    runtime.shutdown_timeout(Duration::from_secs(1));
    let abandoned = abandoned.load(Ordering::Relaxed);
    let ended_us = unix_us(SystemTime::now());
    let (recorded, written) = recorder.join().map_err(|_| "the recorder thread panicked".to_string())?;
    let mut levels: Vec<Level> = levels
        .iter()
        .zip(&counts)
        .enumerate()
        .map(|(i, (&level, c))| Level {
            step: i as u32,
            open_loop: config.open.is_some(),
            level,
            intended: c.intended,
            late: c.late,
            unsent: c.unsent,
        })
        .collect();
    let mut steps = recorded.steps;
    let changes = live.control.applied();
    if !changes.is_empty() {
        // The plan's steps after the first change never ran.
        steps.truncate(windows.len());
        levels.truncate(windows.len());
        for c in &changes {
            while steps.len() <= c.step as usize {
                let step = steps.len() as u32;
                steps.push(if config.open.is_some() { StepStats::open(step) } else { StepStats::new(step, c.users) });
            }
            steps[c.step as usize].users = c.users;
            let c_counts = counts.get(c.step as usize).copied().unwrap_or_default();
            let level = Level {
                step: c.step,
                open_loop: config.open.is_some(),
                level: if config.open.is_some() { c.rate } else { f64::from(c.users) },
                intended: c_counts.intended,
                late: c_counts.late,
                unsent: c_counts.unsent,
            };
            match levels.get_mut(c.step as usize) {
                Some(l) => *l = level,
                None => levels.push(level),
            }
        }
    }
    Ok(RunSummary {
        steps,
        levels,
        changes,
        windows,
        records: recorded.records,
        interrupted,
        started_us,
        ended_us,
        records_error: written.err(),
        reasons: reasons.by_class(),
        abandoned,
        kinds: live.kinds.get().cloned().unwrap_or_default(),
    })
}

/// Sleeps until unix time `at_us` (a shared start), or until `stop`.
fn wait_until(at_us: i64, stop: &AtomicBool) -> Result<(), String> {
    let ahead = Duration::from_micros((at_us - unix_us(SystemTime::now())).max(0) as u64);
    if ahead > crate::config::MAX_START_WAIT {
        return Err(format!("the start time is {ahead:?} ahead, more than {:?}", crate::config::MAX_START_WAIT));
    }
    let until = Instant::now() + ahead;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(STOP_POLL));
    }
    Ok(())
}

async fn drive(
    config: &RunConfig,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<crate::record::Record>>,
    stop: &AtomicBool,
    abandon: &AtomicBool,
    live: &Live,
) -> (Vec<Window>, bool) {
    let (done_tx, done_rx) = watch::channel(false);
    let mut users = Users { tasks: Vec::new(), shared, tx, done: done_rx };
    let mut windows = Vec::with_capacity(config.steps.len());
    let mut interrupted = false;
    let planned_end = Instant::now() + config.steps.iter().map(|s| s.duration).sum::<Duration>();
    let mut asked = None;
    for (i, step) in config.steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        live.step.store(i, Ordering::Relaxed);
        live.level_milli.store((step.level() * 1000.0).round() as u64, Ordering::Relaxed);
        let start_us = unix_us(SystemTime::now());
        let began = Instant::now();
        let deadline = began + step.duration;
        let mut active = None;
        // A ramp changes its users as it goes; a held step sets them once.
        let held = hold(deadline, stop, live, |now| {
            let want = step.users_at(now - began);
            if active != Some(want) {
                active = Some(want);
                users.set(i as u32, want, live);
            }
        })
        .await;
        match held {
            Held::Until => {}
            Held::Stopped => interrupted = true,
            Held::Asked(change) => asked = Some(change),
        }
        windows.push(Window { start_us, end_us: unix_us(SystemTime::now()) });
        if interrupted || asked.is_some() {
            break;
        }
    }
    // A change ends the plan's steps: each is a step of its own, held until the planned
    // end or the next change.
    while let Some(change) = asked.take() {
        if interrupted {
            break;
        }
        let step = windows.len() as u32;
        let start_us = unix_us(SystemTime::now());
        live.step.store(step as usize, Ordering::Relaxed);
        live.level_milli.store(u64::from(change.users) * 1000, Ordering::Relaxed);
        users.set(step, change.users, live);
        live.control.made(Applied { id: change.id, step, users: change.users, rate: 0.0, at_us: start_us });
        match hold(planned_end, stop, live, |_| {}).await {
            Held::Until => {}
            Held::Stopped => interrupted = true,
            Held::Asked(next) => asked = Some(next),
        }
        windows.push(Window { start_us, end_us: unix_us(SystemTime::now()) });
    }
    let _ = done_tx.send(true);
    let Users { tasks, tx, .. } = users;
    drop(tx);
    let end_by = tokio::time::Instant::now() + config.max_timeout() + END_GRACE;
    finish(tasks, end_by, abandon).await;
    (windows, interrupted)
}

/// How holding a step ended.
enum Held {
    Until,
    Stopped,
    Asked(Asked),
}

/// Holds the load until `until`, a stop or a change asked from outside, calling `tick`
/// on each wake before anything else (a ramp sets its users there).
async fn hold(until: Instant, stop: &AtomicBool, live: &Live, mut tick: impl FnMut(Instant)) -> Held {
    loop {
        let now = Instant::now();
        tick(now);
        if now >= until {
            return Held::Until;
        }
        if stop.load(Ordering::Relaxed) {
            return Held::Stopped;
        }
        if let Some(change) = live.control.next() {
            return Held::Asked(change);
        }
        live.control.sleep_unless_asked((until - now).min(STOP_POLL)).await;
    }
}

/// The closed-loop users of a run: their tasks, started as the steps need them (a user
/// past the current step's count waits parked).
struct Users {
    tasks: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<crate::record::Record>>,
    done: watch::Receiver<bool>,
}

impl Users {
    /// From now, `want` users send the requests of `step`.
    fn set(&mut self, step: u32, want: u32, live: &Live) {
        self.shared.current.store(pack_step(step, want), Ordering::Release);
        live.users.store(want, Ordering::Relaxed);
        while self.tasks.len() < want as usize {
            let index = self.tasks.len() as u32;
            let (shared, tx, done) = (self.shared.clone(), self.tx.clone(), self.done.clone());
            self.tasks.push(if shared.flows.is_some() {
                tokio::spawn(run_flow_user(index, shared, tx, done))
            } else {
                tokio::spawn(run_user(index, shared, tx, done))
            });
        }
    }
}

/// Waits for the tasks to end, until `end_by` or until `abandon` is set; then aborts
/// those still running.
async fn finish(tasks: Vec<JoinHandle<()>>, end_by: tokio::time::Instant, abandon: &AtomicBool) {
    for mut task in tasks {
        loop {
            let now = tokio::time::Instant::now();
            if now >= end_by || abandon.load(Ordering::Relaxed) {
                task.abort();
                break;
            }
            if tokio::time::timeout_at(end_by.min(now + STOP_POLL), &mut task).await.is_ok() {
                break;
            }
        }
    }
}

/// Converts a records stream left by a run (complete or cut short) to Parquet.
pub fn records_to_parquet(src: &Path, dst: &Path) -> Result<u64, String> {
    crate::arrow_io::ipc_to_parquet(src, dst).map_err(|e| format!("{}: {e}", src.display()))
}
