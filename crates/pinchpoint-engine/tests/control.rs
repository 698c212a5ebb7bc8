//! Changes of users asked while a closed-loop run goes: each starts a step of its own,
//! its records carry that step and its users, and the run still ends at its planned end.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pinchpoint_engine::Live;

#[test]
fn a_change_starts_a_step_of_its_own_held_until_the_planned_end() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Planned: 2 users for 600 ms, then 8 for 600 ms; changed to 5 after 300 ms, then 3.
    let cfg = config(dir.path(), server.port(), &["/a"], steps(&[(2, 600), (8, 600)]));
    let live = Arc::new(Live::default());
    let asker = live.clone();
    let began = Instant::now();
    let changes = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        asker.control.ask(7, 5).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        asker.control.ask(8, 3).unwrap();
    });
    let summary = pinchpoint_engine::run(&cfg, Arc::new(AtomicBool::new(false)), live).expect("run");
    let took = began.elapsed();
    changes.join().unwrap();
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
