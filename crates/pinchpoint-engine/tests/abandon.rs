//! Abandoning a run: after a stop, `abandon` drops the requests in flight at once, and
//! every request that ended before is still recorded.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pinchpoint_engine::{Arrivals, Live, Phase, RunConfig, RunSummary};

/// Runs `cfg`, stops it after `after` and abandons it 200 ms later (a first Ctrl-C,
/// then a second); the summary and how long the run took from the abandon to its end.
fn abandoned_after(cfg: &RunConfig, after: Duration) -> (RunSummary, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let abandon = Arc::new(AtomicBool::new(false));
    let (stop2, abandon2) = (stop.clone(), abandon.clone());
    let setter = std::thread::spawn(move || {
        std::thread::sleep(after);
        stop2.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
        abandon2.store(true, Ordering::Relaxed);
        Instant::now()
    });
    let summary = pinchpoint_engine::run_until(cfg, stop, abandon, Arc::new(Live::default())).expect("run");
    let ended = Instant::now();
    let abandoned_at = setter.join().unwrap();
    assert_eq!(summary.records_error, None);
    (summary, ended - abandoned_at)
}

fn answered(server: &TestServer, path: &str) -> u64 {
    server.received().iter().filter(|r| r.uri.split('?').next() == Some(path)).count() as u64
}

#[test]
fn abandon_ends_a_closed_loop_run_stuck_on_stalled_requests_at_once() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Users 0 and 2 send `/` first, then stall; users 1 and 3 stall at once. The two
    // answered requests sit in their users' batches, unsent, when the run is abandoned.
    let mut cfg = config(dir.path(), server.port(), &["/", "/stall"], steps(&[(4, 30_000)]));
    cfg.timeout = Duration::from_secs(30);
    let (s, took) = abandoned_after(&cfg, Duration::from_millis(400));
    let rows = parquet_rows(&cfg);
    eprintln!("closed loop abandoned: ended {took:?} after the abandon, {} records", s.records);
    assert!(s.interrupted);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(s.abandoned, 4, "each user was waiting on a stalled request");
    assert_eq!(answered(&server, "/"), 2);
    assert_eq!(rows.len(), 2, "every answered request is recorded");
    assert!(rows.iter().all(|r| r.status == 200 && r.error.is_none()));
    assert_eq!(s.records, 2);
}

#[test]
fn abandon_ends_an_open_loop_run_stuck_on_stalled_requests_at_once() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let phases = vec![Phase::rate(50.0, Duration::from_secs(30))];
    let mut cfg = open_config(dir.path(), server.port(), &["/", "/stall"], phases, Arrivals::Uniform, 100);
    cfg.timeout = Duration::from_secs(30);
    let (s, took) = abandoned_after(&cfg, Duration::from_millis(600));
    let rows = parquet_rows(&cfg);
    let ok = answered(&server, "/");
    eprintln!("open loop abandoned: ended {took:?} after, {} records, {} abandoned, {ok} answered", s.records, s.abandoned);
    assert!(s.interrupted);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(s.abandoned >= 10, "{}", s.abandoned);
    assert_eq!(s.records + s.abandoned + s.levels[0].unsent, s.levels[0].intended);
    // The stop waited for every `/` in flight: each one answered is recorded.
    assert_eq!(s.records, ok);
    assert_eq!(rows.len() as u64, s.records);
    assert!(rows.iter().all(|r| r.status == 200 && r.error.is_none()));
}
