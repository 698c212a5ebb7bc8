//! A generator sending its share of a run that several share: its request ids start
//! where it was told, its requests carry the run's load level, and it starts its first
//! step at the common start time.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

fn now_unix_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

#[test]
fn a_share_of_a_run_keeps_its_id_range_the_runs_level_and_the_common_start() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), server.port(), &["/"], steps(&[(2, 300), (3, 300)]));
    config.req_id_base = 7 << 40;
    config.tag_levels = vec![20.0, 30.0];
    let start_at = now_unix_us() + 400_000;
    config.start_at_us = Some(start_at);
    let summary = run(&config);
    let rows = parquet_rows(&config);
    assert!(rows.len() > 20);
    assert!(rows.iter().all(|r| r.req_id >= 7 << 40 && r.req_id < (7 << 40) + 1_000_000));
    for r in &rows {
        assert_eq!(r.users, [20, 30][r.step as usize], "request {} of step {}", r.req_id, r.step);
    }
    let tags: Vec<String> = server.received().iter().filter_map(|r| r.tag_header.clone()).collect();
    assert!(tags.iter().all(|t| t.contains("users=20;") || t.contains("users=30;")), "{tags:?}");
    assert!(tags.iter().any(|t| t.contains(&format!("req={}", 7u64 << 40))));
    let first = summary.windows[0].start_us;
    assert!(first >= start_at && first < start_at + 50_000, "started {} µs after", first - start_at);
    assert!(rows.iter().all(|r| r.start_us >= start_at));
}

#[test]
fn a_start_time_too_far_ahead_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(dir.path(), dead_port(), &["/"], steps(&[(1, 100)]));
    config.start_at_us = Some(now_unix_us() + Duration::from_secs(600).as_micros() as i64);
    let err = pinchpoint_engine::run(&config, Default::default(), Default::default()).err().unwrap();
    assert!(err.contains("ahead, more than"), "{err}");
}
