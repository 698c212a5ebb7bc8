//! Changes of users asked while a closed-loop run goes: each starts a step of its own,
//! its records carry that step and its users, and the run still ends at its planned end.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pinchpoint_engine::{Arrivals, Live, Phase, RunConfig, RunSummary};

/// Runs `cfg` while `ask` changes its load from another thread: the summary, and how
/// long the run took.
fn run_while(cfg: &RunConfig, ask: impl FnOnce(Arc<Live>) + Send + 'static) -> (RunSummary, Duration) {
    let live = Arc::new(Live::default());
    let asker = live.clone();
    let began = Instant::now();
    let changes = std::thread::spawn(move || ask(asker));
    let summary = pinchpoint_engine::run(cfg, Arc::new(AtomicBool::new(false)), live).expect("run");
    let took = began.elapsed();
    changes.join().unwrap();
    (summary, took)
}

#[test]
fn a_change_starts_a_step_of_its_own_held_until_the_planned_end() {
    let local = Local::start();
    // Planned: 2 users for 600 ms, then 8 for 600 ms; changed to 5 after 300 ms, then 3.
    let cfg = local.config(&["/a"], steps(&[(2, 600), (8, 600)]));
    let (summary, took) = run_while(&cfg, |asker| {
        std::thread::sleep(Duration::from_millis(300));
        asker.control.ask(7, 5).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        asker.control.ask(8, 3).unwrap();
    });
    // The run ends when planned (1.2 s), not 300 + 600 + ... ms later.
    assert!(took >= Duration::from_millis(1_150) && took < Duration::from_millis(1_800), "{took:?}");
    let made: Vec<(u64, u32, u32)> = summary.changes.iter().map(|c| (c.id, c.step, c.users)).collect();
    assert_eq!(made, [(7, 1, 5), (8, 2, 3)]);
    assert_eq!(summary.windows.len(), 3);
    assert_eq!(summary.changes[0].at_us, summary.windows[1].start_us);
    // The plan's second step never ran: step 1 is the change's, with its users.
    let users: Vec<u32> = summary.steps.iter().map(|s| s.users).collect();
    assert_eq!(users, [2, 5, 3]);
    let levels: Vec<f64> = summary.levels.iter().map(|l| l.level).collect();
    assert_eq!(levels, [2.0, 5.0, 3.0]);
    let rows = parquet_rows(&cfg);
    for step in 0..3u32 {
        let of_step: Vec<&Row> = rows.iter().filter(|r| r.step == step).collect();
        assert!(of_step.len() > 10, "step {step}: {} requests", of_step.len());
        assert!(of_step.iter().all(|r| r.users == [2, 5, 3][step as usize]), "step {step}");
        assert_eq!(summary.steps[step as usize].requests, of_step.len() as u64);
    }
    assert!(rows.iter().all(|r| r.step < 3));
    // Each request left within its step's window.
    for r in &rows {
        let w = summary.windows[r.step as usize];
        assert!(r.start_us >= w.start_us - 1_000 && r.start_us <= w.end_us + 1_000, "{r:?}");
    }
}

#[test]
fn a_change_asked_past_the_cap_is_refused() {
    let live = Live::default();
    for i in 0..pinchpoint_engine::control::MAX_CHANGES as u64 {
        live.control.ask(i, 1).unwrap();
    }
    let refused = live.control.ask(9_999, 1).unwrap_err();
    assert_eq!(refused, "a run takes at most 1000 changes");
}

#[test]
fn a_change_of_rate_starts_a_phase_at_that_rate_until_the_planned_end() {
    let local = Local::start();
    // Planned: 50/s for 800 ms, then 100/s for 800 ms; changed to 200/s after 300 ms.
    let phases = vec![
        Phase::rate(50.0, Duration::from_millis(800)),
        Phase::rate(100.0, Duration::from_millis(800)),
    ];
    let cfg = open_config(local.dir.path(), local.server.port(), &["/a"], phases, Arrivals::Uniform, 64);
    let (summary, took) = run_while(&cfg, |asker| {
        std::thread::sleep(Duration::from_millis(300));
        asker.control.ask_rate(4, 200.0).unwrap();
    });
    assert!(took >= Duration::from_millis(1_550) && took < Duration::from_millis(2_300), "{took:?}");
    let made: Vec<(u64, u32, f64)> = summary.changes.iter().map(|c| (c.id, c.step, c.rate)).collect();
    assert_eq!(made, [(4, 1, 200.0)]);
    assert_eq!(summary.windows.len(), 2);
    let at_us = summary.changes[0].at_us;
    assert_eq!(at_us, summary.windows[1].start_us);
    assert_eq!(summary.windows[0].end_us, at_us);
    let levels: Vec<(f64, bool)> = summary.levels.iter().map(|l| (l.level, l.open_loop)).collect();
    assert_eq!(levels, [(50.0, true), (200.0, true)]);
    assert_eq!(summary.steps.len(), 2);
    assert!(summary.steps[1].send_lag.is_some(), "the change's phase keeps the send lag");
    let rows = parquet_rows(&cfg);
    assert!(rows.iter().all(|r| r.step < 2 && r.users == 0 && r.status == 200));
    let before: Vec<&Row> = rows.iter().filter(|r| r.step == 0).collect();
    assert!(before.iter().all(|r| r.intended_us < at_us));
    // 50/s: one every 20 ms from the start until the change.
    let expected_before = ((at_us - summary.windows[0].start_us) as f64 / 20_000.0).ceil() as usize;
    assert!(before.len().abs_diff(expected_before) <= 1, "{} before, {expected_before} expected", before.len());
    let mut after: Vec<i64> = rows.iter().filter(|r| r.step == 1).map(|r| r.intended_us).collect();
    after.sort_unstable();
    // 200/s from the change to the planned end (1.6 s from the start): one every 5 ms.
    let planned_end_us = summary.windows[0].start_us + 1_600_000;
    let expected = ((planned_end_us - at_us) as f64 / 5_000.0).ceil() as usize;
    assert!(after.len().abs_diff(expected) <= 1, "{} after, {expected} expected", after.len());
    assert_eq!(summary.levels[1].intended, after.len() as u64);
    assert!((after[0] - at_us).abs() <= 1, "the first arrival is at the change");
    for w in after.windows(2) {
        assert!((w[1] - w[0] - 5_000).abs() <= 2, "gap {} µs", w[1] - w[0]);
    }
    assert!(*after.last().unwrap() < planned_end_us);
    assert_eq!(summary.steps[1].requests, after.len() as u64);
    // Each request is tagged with its phase's rate: the plan's, then the change's.
    let step_of: std::collections::HashMap<u64, u32> = rows.iter().map(|r| (r.req_id, r.step)).collect();
    let received = local.server.received();
    assert_eq!(received.len(), rows.len());
    for got in &received {
        let req: u64 = got.uri.rsplit_once("pp_req=").unwrap().1.parse().unwrap();
        let rate = ["50", "200"][step_of[&req] as usize];
        assert!(got.uri.contains(&format!("&pp_rate={rate}&")), "{}", got.uri);
    }
}
