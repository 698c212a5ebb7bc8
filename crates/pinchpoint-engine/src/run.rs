//! Runs a step plan: holds each step's users for its duration, then collects.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hyper::header::HeaderValue;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::RunConfig;
use crate::http::Prepared;
use crate::recorder::Recorder;
use crate::stats::{Live, StepStats};
use crate::user::{pack_step, run_user, unix_us, Shared};

const STOP_POLL: Duration = Duration::from_millis(20);
/// Beyond the request timeout, how long users get to finish when the run ends.
const END_GRACE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start_us: i64,
    pub end_us: i64,
}

pub struct RunSummary {
    pub steps: Vec<StepStats>,
    /// When each step that ran began and ended; shorter than `steps` if interrupted.
    pub windows: Vec<Window>,
    pub records: u64,
    pub interrupted: bool,
    pub started_us: i64,
    pub ended_us: i64,
    /// The records file could not be written completely.
    pub records_error: Option<String>,
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
    config.validate()?;
    let addr = resolve(&config.host, config.port)?;
    let requests = config.requests.iter().map(Prepared::new).collect::<Result<Vec<_>, _>>()?;
    let host = HeaderValue::from_str(&format!("{}:{}", config.host, config.port))
        .map_err(|_| format!("bad host {:?}", config.host))?;
    let shared = Arc::new(Shared {
        addr,
        host,
        run_id: config.run_id.clone(),
        tag: config.tag,
        requests,
        think_time: config.think_time,
        timeout: config.timeout,
        current: AtomicU64::new(pack_step(0, 0)),
        next_req_id: AtomicU64::new(0),
    });
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        config.threads
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;

    let (tx, rx) = mpsc::channel();
    let recorder = Recorder {
        rx,
        path: config.records_path.clone(),
        steps: config
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| StepStats::new(i as u32, s.users))
            .collect(),
        live: live.clone(),
    };
    let recorder = std::thread::Builder::new()
        .name("pinchpoint-recorder".into())
        .spawn(move || recorder.run())
        .map_err(|e| format!("cannot start the recorder: {e}"))?;

    let started_us = unix_us(SystemTime::now());
    let (windows, interrupted) = runtime.block_on(drive(config, shared, tx, &stop, &live));
    runtime.shutdown_timeout(Duration::from_secs(1));
    let ended_us = unix_us(SystemTime::now());
    let (recorded, written) = recorder.join().map_err(|_| "the recorder thread panicked".to_string())?;
    Ok(RunSummary {
        steps: recorded.steps,
        windows,
        records: recorded.records,
        interrupted,
        started_us,
        ended_us,
        records_error: written.err(),
    })
}

async fn drive(
    config: &RunConfig,
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<crate::record::Record>>,
    stop: &AtomicBool,
    live: &Live,
) -> (Vec<Window>, bool) {
    let (done_tx, done_rx) = watch::channel(false);
    let mut users: Vec<JoinHandle<()>> = Vec::new();
    let mut windows = Vec::with_capacity(config.steps.len());
    let mut interrupted = false;
    for (i, step) in config.steps.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        shared.current.store(pack_step(i as u32, step.users), Ordering::Release);
        live.step.store(i, Ordering::Relaxed);
        live.users.store(step.users, Ordering::Relaxed);
        let start_us = unix_us(SystemTime::now());
        while users.len() < step.users as usize {
            let index = users.len() as u32;
            users.push(tokio::spawn(run_user(index, shared.clone(), tx.clone(), done_rx.clone())));
        }
        let deadline = Instant::now() + step.duration;
        loop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            tokio::time::sleep((deadline - now).min(STOP_POLL)).await;
        }
        windows.push(Window { start_us, end_us: unix_us(SystemTime::now()) });
        if interrupted {
            break;
        }
    }
    let _ = done_tx.send(true);
    drop(tx);
    let end_by = tokio::time::Instant::now() + config.timeout + END_GRACE;
    for mut handle in users {
        if tokio::time::timeout_at(end_by, &mut handle).await.is_err() {
            handle.abort();
        }
    }
    (windows, interrupted)
}

/// Converts a records stream left by a run (complete or cut short) to Parquet.
pub fn records_to_parquet(src: &Path, dst: &Path) -> Result<u64, String> {
    crate::arrow_io::ipc_to_parquet(src, dst).map_err(|e| format!("{}: {e}", src.display()))
}
