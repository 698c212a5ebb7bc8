//! Open-loop load: a scheduler emits every request at its intended send time, whether
//! or not earlier ones were answered, and a pool of connections sends them.
//!
//! The scheduler runs on the engine's own thread and sleeps with the OS timer (tokio's
//! timer ticks in whole milliseconds, too coarse for thousands of requests a second).
//! At each intended time it hands the request to an idle connection (the one idle
//! last: keep-alive connections are reused before new ones are opened), or opens a new
//! connection while fewer than `max_in_flight` exist, or else queues the request: it is
//! counted late and sent as soon as a connection frees. Requests still queued when the
//! run ends are counted unsent. Each connection is a task that sends one request at a
//! time, so requests in flight never exceed the cap.
//!
//! Each record keeps the intended time: latency is measured from it (what a user
//! arriving then would see, the stall of a saturated server included — no coordinated
//! omission), service time from the actual send.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender as RecordTx;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::task::JoinHandle;

use crate::config::OpenLoop;
use crate::drive::open_grpc;
use crate::drive::open_ws::{self, Calls, Sessions};
use crate::client::{Conn, Outgoing, Target};
use crate::client::http1::{trace_run_half, Prepared, Tag, TagLevel};
use crate::outcome::ErrorClass;
use crate::record::Record;
use crate::control::Applied;
use crate::schedule::{Arrival, Schedule};
use crate::stats::{Live, Window};
use crate::drive::closed::Unsent;

const BATCH_ROWS: usize = 128;
const BATCH_EVERY: Duration = Duration::from_millis(100);
/// Longest single sleep of the scheduler, so a stop is seen quickly.
const STOP_POLL: Duration = Duration::from_millis(20);
/// Requests queued behind the cap beyond this many are counted unsent at once, to
/// bound memory when the target stops answering.
pub const MAX_BACKLOG: usize = 1_000_000;

/// What every connection task reads.
pub struct OpenShared {
    pub target: Target,
    pub run_id: String,
    /// `trace_run_half(run_id)`, for each request's traceparent.
    pub trace_half: u64,
    pub tag: bool,
    pub requests: Vec<Prepared>,
    pub cycle: Vec<u32>,
    /// Each request's record `endpoint`: its index, past the messages of the WebSocket
    /// requests before it.
    pub endpoints: Vec<u16>,
    pub sessions: Sessions,
    pub calls: Calls,
    /// The next request id: the scheduler's arrivals take theirs in order, and each
    /// message a gRPC call streams takes one as it comes.
    pub next_id: AtomicU64,
    /// Each planned phase's load level as it appears in the tag (`pp_rate=`).
    pub rates: Vec<Arc<str>>,
    /// The start of the schedule, and the same moment in unix microseconds.
    pub base: Instant,
    pub base_unix_us: i64,
    /// Requests dropped in flight when the run ended (see [`Unsent`]).
    pub abandoned: Arc<AtomicU64>,
    /// Requests in flight now (the live counters').
    pub in_flight: Arc<AtomicU64>,
    pool: Mutex<Pool>,
}

impl OpenShared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target: Target,
        run_id: String,
        tag: bool,
        requests: Vec<Prepared>,
        cycle: Vec<u32>,
        levels: &[f64],
        base: Instant,
        base_unix_us: i64,
    ) -> Self {
        Self {
            target,
            trace_half: trace_run_half(&run_id),
            run_id,
            tag,
            endpoints: (0..requests.len() as u16).collect(),
            sessions: requests.iter().map(|_| None).collect(),
            calls: requests.iter().map(|_| None).collect(),
            next_id: AtomicU64::new(0),
            requests,
            cycle,
            rates: levels.iter().map(|&r| rate_text(r).into()).collect(),
            base,
            base_unix_us,
            abandoned: Arc::default(),
            in_flight: Arc::default(),
            pool: Mutex::new(Pool::default()),
        }
    }

    fn unix_us(&self, t: Instant) -> i64 {
        self.base_unix_us + t.saturating_duration_since(self.base).as_micros() as i64
    }
}

/// A rate for the tag: a whole number, or up to three decimals (`5`, `7.5`, `0.833`).
pub fn rate_text(rate: f64) -> String {
    let s = format!("{:.3}", rate.max(0.0));
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[derive(Clone, Debug)]
struct Job {
    req_id: u64,
    /// The request it sends (an index into `requests`).
    index: u32,
    phase: u32,
    /// The phase's rate as the tag gives it.
    rate: Arc<str>,
    intended: Instant,
    intended_us: i64,
}

#[derive(Default)]
struct Pool {
    /// Connections waiting for a request, the one idle last at the end.
    idle: Vec<UnboundedSender<Option<Job>>>,
    /// Requests due while every connection was busy and the cap reached.
    backlog: VecDeque<Job>,
    workers: u32,
    closed: bool,
}

/// Per phase: requests the schedule emitted, those that waited for the cap, and
/// those still waiting when the run ended (never sent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounts {
    pub intended: u64,
    pub late: u64,
    pub unsent: u64,
}

pub struct Driven {
    pub windows: Vec<Window>,
    pub interrupted: bool,
    pub counts: Vec<PhaseCounts>,
    pub tasks: Vec<JoinHandle<()>>,
}

/// Runs the schedule on the calling thread until its end or `stop`, spawning the
/// connection tasks on `runtime`. A change of rate asked (`live.control`) ends the
/// current phase and starts one of its own at that rate until the planned end. Returns
/// once every request was handed out; the caller then waits for `tasks`.
#[allow(clippy::too_many_arguments)]
pub fn drive(
    open: &OpenLoop,
    seed: u64,
    levels: &[f64],
    first_req_id: u64,
    shared: Arc<OpenShared>,
    runtime: &Handle,
    tx: RecordTx<Vec<Record>>,
    stop: &AtomicBool,
    live: &Live,
) -> Driven {
    precise_sleep();
    let mut bounds = Schedule::bounds(&open.phases);
    let mut levels = levels.to_vec();
    let mut rates = shared.rates.clone();
    let mut schedule = Schedule::new(open.phases.clone(), open.arrivals, seed);
    let mut next: Option<Arrival> = None;
    let mut counts = vec![PhaseCounts::default(); open.phases.len()];
    let mut tasks = Vec::new();
    let planned_end = bounds.last().map_or(0.0, |b| b.1);
    let end = shared.base + Duration::from_secs_f64(planned_end);
    // Phases whose start time has come.
    let mut began = 0usize;
    let mut interrupted = false;
    shared.next_id.store(first_req_id, Ordering::Relaxed);
    let mut arrivals = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(shared.base).as_secs_f64();
        while began < bounds.len() && elapsed >= bounds[began].0 {
            live.step.store(began, Ordering::Relaxed);
            live.level_milli.store((levels[began] * 1000.0).round() as u64, Ordering::Relaxed);
            began += 1;
        }
        if let Some(change) = live.control.next() {
            // Phase `began` is the change's, from now; the one going ends now.
            let at = elapsed.min(planned_end);
            bounds.truncate(began);
            bounds[began - 1].1 = at;
            bounds.push((at, planned_end));
            levels.truncate(began);
            levels.push(change.rate);
            rates.truncate(began);
            rates.push(rate_text(change.rate).into());
            counts.truncate(began);
            counts.push(PhaseCounts::default());
            schedule.switch(began, at, change.rate, planned_end);
            next = None;
            let at_us = shared.unix_us(shared.base + Duration::from_secs_f64(at));
            live.control.made(Applied { id: change.id, step: began as u32, users: 0, rate: change.rate, at_us });
            continue;
        }
        if next.is_none() {
            next = schedule.next();
        }
        let due = match next {
            None if now >= end => break,
            None => end,
            Some(a) => shared.base + Duration::from_secs_f64(a.at),
        };
        if due > now {
            std::thread::sleep((due - now).min(STOP_POLL));
            continue;
        }
        let Some(Arrival { phase: p, at }) = next.take() else { continue };
        let intended = shared.base + Duration::from_secs_f64(at);
        let index = shared.cycle[(arrivals % shared.cycle.len() as u64) as usize];
        arrivals += 1;
        // A WebSocket's messages take the ids after its connection's.
        let ids = 1 + shared.sessions[index as usize].as_ref().map_or(0, |m| m.len() as u64);
        let req_id = shared.next_id.fetch_add(ids, Ordering::Relaxed);
        let rate = rates[p as usize].clone();
        let job = Job { req_id, index, phase: p, rate, intended, intended_us: shared.unix_us(intended) };
        let c = &mut counts[p as usize];
        c.intended += 1;
        match dispatch(&shared, job, open.max_in_flight) {
            Dispatch::Given => {}
            Dispatch::Spawn(job) => {
                tasks.push(runtime.spawn(connection(shared.clone(), job, tx.clone())));
            }
            Dispatch::Late => {
                c.late += 1;
                live.late.fetch_add(1, Ordering::Relaxed);
            }
            Dispatch::Unsent => {
                c.late += 1;
                c.unsent += 1;
                live.late.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let stopped_at = Instant::now();
    {
        let mut pool = shared.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.closed = true;
        for job in pool.backlog.drain(..) {
            counts[job.phase as usize].unsent += 1;
        }
        for idle in pool.idle.drain(..) {
            let _ = idle.send(None);
        }
    }
    drop(tx);
    // Every phase that began, at its scheduled times; the one a stop cut short ends then.
    let windows = bounds[..began]
        .iter()
        .map(|&(a, b)| {
            let start = shared.base + Duration::from_secs_f64(a);
            let end = (shared.base + Duration::from_secs_f64(b)).min(stopped_at.max(start));
            Window { start_us: shared.unix_us(start), end_us: shared.unix_us(end) }
        })
        .collect();
    Driven { windows, interrupted, counts, tasks }
}

/// Lets this thread's sleeps end within a microsecond of their time instead of the
/// default 50 µs timer slack (Linux): the scheduler's lag is then its wake-up alone.
fn precise_sleep() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer and changes only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

enum Dispatch {
    /// Handed to an idle connection.
    Given,
    /// No idle connection, below the cap: open a new one for it.
    Spawn(Job),
    /// Queued until a connection frees.
    Late,
    /// The queue is full: never sent.
    Unsent,
}

fn dispatch(shared: &OpenShared, mut job: Job, cap: u32) -> Dispatch {
    let mut pool = shared.pool.lock().unwrap_or_else(|e| e.into_inner());
    while let Some(idle) = pool.idle.pop() {
        match idle.send(Some(job)) {
            Ok(()) => return Dispatch::Given,
            Err(refused) => job = refused.0.expect("a job was sent"),
        }
        // That connection's task is gone (it panicked): it no longer counts.
        pool.workers = pool.workers.saturating_sub(1);
    }
    if pool.workers < cap {
        pool.workers += 1;
        Dispatch::Spawn(job)
    } else if pool.backlog.len() < MAX_BACKLOG {
        pool.backlog.push_back(job);
        Dispatch::Late
    } else {
        Dispatch::Unsent
    }
}

enum Next {
    Job(Job),
    Wait,
    Exit,
}

/// One connection: sends the request it was opened for, then the queued ones, then
/// waits idle for the scheduler to hand it more.
async fn connection(shared: Arc<OpenShared>, first: Job, tx: RecordTx<Vec<Record>>) {
    let (job_tx, mut job_rx) = unbounded_channel::<Option<Job>>();
    let mut conn: Option<Conn> = None;
    let mut out = Unsent::new(tx, Vec::with_capacity(BATCH_ROWS), shared.abandoned.clone(), shared.in_flight.clone());
    let mut last_flush = Instant::now();
    let mut request = Outgoing::default();
    let mut job = first;
    loop {
        out.begin();
        let index = job.index as usize;
        match (&shared.sessions[index], &shared.calls[index]) {
            (Some(messages), _) => open_ws::arrive(arrival(&shared, &job, index), messages, &mut out.batch).await,
            (_, Some(call)) => {
                let ids = &shared.next_id;
                open_grpc::arrive(arrival(&shared, &job, index), call, &mut conn, ids, &mut out.batch).await;
            }
            _ => {
                let record = send(&shared, &mut conn, &job, index, &mut request).await;
                out.batch.push(record);
            }
        }
        out.end();
        if out.batch.len() >= BATCH_ROWS || last_flush.elapsed() >= BATCH_EVERY {
            flush(&out.tx, &mut out.batch, &mut last_flush);
        }
        let next = {
            let mut pool = shared.pool.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(j) = pool.backlog.pop_front() {
                Next::Job(j)
            } else if pool.closed {
                Next::Exit
            } else {
                pool.idle.push(job_tx.clone());
                Next::Wait
            }
        };
        job = match next {
            Next::Job(j) => j,
            Next::Exit => break,
            Next::Wait => {
                let got = if out.batch.is_empty() {
                    job_rx.recv().await
                } else {
                    let left = BATCH_EVERY.saturating_sub(last_flush.elapsed());
                    match tokio::time::timeout(left, job_rx.recv()).await {
                        Ok(got) => got,
                        Err(_) => {
                            flush(&out.tx, &mut out.batch, &mut last_flush);
                            job_rx.recv().await
                        }
                    }
                };
                match got {
                    Some(Some(j)) => j,
                    _ => break,
                }
            }
        };
    }
    flush(&out.tx, &mut out.batch, &mut last_flush);
}

async fn send(shared: &OpenShared, conn: &mut Option<Conn>, job: &Job, index: usize, request: &mut Outgoing) -> Record {
    let prepared = &shared.requests[index];
    let rate = &job.rate;
    let tag = Tag {
        run_id: &shared.run_id,
        trace_half: shared.trace_half,
        level: TagLevel::Rate(rate),
        req_id: job.req_id,
    };
    shared.target.build(prepared, shared.tag.then_some(&tag), request);
    if conn.as_mut().is_some_and(|c| !c.is_reusable()) {
        *conn = None;
    }
    let sent = Instant::now();
    let mut connecting = false;
    let outcome = tokio::time::timeout(prepared.timeout, async {
        if conn.is_none() {
            connecting = true;
            *conn = Some(shared.target.connect(prepared.timeout).await?);
            connecting = false;
        }
        shared.target.exchange(conn.as_mut().expect("connected above"), request, prepared).await
    })
    .await
    .unwrap_or(Err(if connecting { ErrorClass::ConnectTimeout } else { ErrorClass::Timeout }));
    let done = Instant::now();
    let mut record = Record {
        req_id: job.req_id,
        step: job.phase,
        users: 0,
        endpoint: shared.endpoints[index],
        start_us: shared.unix_us(sent),
        intended_us: job.intended_us,
        latency_us: done.saturating_duration_since(job.intended).as_micros() as i64,
        service_us: done.saturating_duration_since(sent).as_micros() as i64,
        status: 0,
        error: None,
        bytes: 0,
        walk: None,
    };
    match outcome {
        Ok(resp) => {
            record.status = resp.status;
            record.bytes = resp.bytes;
            if resp.closing {
                *conn = None;
            }
        }
        Err(class) => {
            record.error = Some(class);
            *conn = None;
        }
    }
    record
}

/// What `job`'s WebSocket session needs of the run.
fn arrival<'a>(shared: &'a OpenShared, job: &'a Job, index: usize) -> open_ws::Arrival<'a> {
    let rate = &job.rate;
    let tag = Tag { run_id: &shared.run_id, trace_half: shared.trace_half, level: TagLevel::Rate(rate), req_id: job.req_id };
    let conn = Record {
        req_id: job.req_id,
        step: job.phase,
        users: 0,
        endpoint: shared.endpoints[index],
        start_us: 0,
        intended_us: job.intended_us,
        latency_us: 0,
        service_us: 0,
        status: 0,
        error: None,
        bytes: 0,
        walk: None,
    };
    open_ws::Arrival {
        target: &shared.target,
        request: &shared.requests[index],
        tag: shared.tag.then_some(tag),
        conn,
        intended: job.intended,
        clock: (shared.base, shared.base_unix_us),
    }
}

fn flush(tx: &RecordTx<Vec<Record>>, batch: &mut Vec<Record>, last_flush: &mut Instant) {
    if !batch.is_empty() {
        let full = std::mem::replace(batch, Vec::with_capacity(BATCH_ROWS));
        let _ = tx.send(full);
    }
    *last_flush = Instant::now();
}

#[cfg(test)]
mod tests {
    use super::rate_text;

    #[test]
    fn rates_in_the_tag() {
        assert_eq!(rate_text(5.0), "5");
        assert_eq!(rate_text(7.5), "7.5");
        assert_eq!(rate_text(100.0 / 120.0), "0.833");
        assert_eq!(rate_text(0.0), "0");
        assert_eq!(rate_text(2000.0), "2000");
    }
}
