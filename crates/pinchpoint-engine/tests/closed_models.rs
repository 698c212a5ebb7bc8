//! Closed-loop load models beyond a held step: ramps of users, random think times,
//! weighted requests, per-request timeouts; and the open-loop columns in closed loop.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use pinchpoint_engine::{Step, Think};

/// The gaps between the end of one response and the next send, of a run of one user.
fn think_gaps(rows: &[Row]) -> Vec<i64> {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| r.start_us);
    sorted.windows(2).map(|w| w[1].start_us - (w[0].start_us + w[0].latency_us)).collect()
}

#[test]
fn a_ramp_of_users_adds_them_as_it_goes() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], vec![Step::ramp(1, 9, Duration::from_millis(1600))]);
    cfg.think = Think::Constant(Duration::from_millis(10));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let start = s.windows[0].start_us;
    let users_at = |from_ms: i64, to_ms: i64| -> Vec<u32> {
        let mut u: Vec<u32> = rows
            .iter()
            .filter(|r| r.start_us >= start + from_ms * 1000 && r.start_us < start + to_ms * 1000)
            .map(|r| r.users)
            .collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    let (early, late) = (users_at(0, 150), users_at(1450, 1600));
    eprintln!("ramp 1 → 9 users: users early {early:?}, late {late:?}; level {}", s.levels[0].level);
    assert!(early.iter().all(|&u| u <= 2), "{early:?}");
    assert!(late.iter().all(|&u| u >= 8), "{late:?}");
    assert_eq!(s.levels[0].level, 5.0, "the level of a ramp is its mean users");
    assert!(!s.levels[0].open_loop);
    // The tag carries the users active when each request was sent.
    let by_id: HashMap<u64, &Row> = rows.iter().map(|r| (r.req_id, r)).collect();
    for got in server.received() {
        let req: u64 = got.uri.rsplit("pp_req=").next().unwrap().parse().unwrap();
        let users = by_id[&req].users;
        assert!(got.uri.contains(&format!("pp_users={users}&")), "{}", got.uri);
    }
}

#[test]
fn closed_loop_intended_is_the_send_and_service_the_latency() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &["/"], steps(&[(2, 300)]));
    run(&cfg);
    let rows = parquet_rows(&cfg);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!((r.intended_us, r.service_us), (r.start_us, r.latency_us), "{r:?}");
    }
}

#[test]
fn uniform_think_time_stays_in_its_bounds() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], steps(&[(1, 1500)]));
    cfg.think = Think::Uniform { min: Duration::from_millis(20), max: Duration::from_millis(60) };
    run(&cfg);
    let gaps = think_gaps(&parquet_rows(&cfg));
    let mean = gaps.iter().sum::<i64>() as f64 / gaps.len() as f64;
    let (lo, hi) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
    eprintln!("uniform 20–60 ms: {} gaps, min {lo} µs, mean {mean:.0} µs, max {hi} µs", gaps.len());
    assert!(gaps.len() >= 20);
    assert!(lo >= 19_000, "{lo}");
    assert!(hi <= 75_000, "{hi}");
    assert!((30_000.0..52_000.0).contains(&mean), "{mean}");
    // Not constant: the draws spread over the range.
    assert!(hi - lo >= 20_000, "{lo}..{hi}");
}

#[test]
fn exponential_think_time_has_its_mean() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], steps(&[(4, 1500)]));
    cfg.think = Think::Exponential { mean: Duration::from_millis(20) };
    let s = run(&cfg);
    // Four users at 20 ms mean think (plus a fraction of a millisecond each request):
    // about 4 × 1.5 s / 21 ms = 285 requests.
    eprintln!("exponential 20 ms: {} requests from 4 users in 1.5 s", s.records);
    assert!((200..=340).contains(&s.records), "{}", s.records);
}

#[test]
fn weights_set_the_mix_in_closed_loop() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/a", "/b"], steps(&[(1, 400)]));
    cfg.requests[1].weight = 4;
    cfg.think = Think::Constant(Duration::from_millis(1));
    let s = run(&cfg);
    let paths = count_by(&server.received(), |r| r.uri.split('?').next().unwrap().to_string());
    eprintln!("weights 1:4 over {} requests: {paths:?}", s.records);
    assert!((paths["/b"] as i64 - 4 * paths["/a"] as i64).abs() <= 4, "{paths:?}");
    // Each record names its request, and each request has its own histogram.
    let rows = parquet_rows(&cfg);
    let by_endpoint = count_by(&rows, |r| r.endpoint);
    assert_eq!((by_endpoint[&0], by_endpoint[&1]), (paths["/a"], paths["/b"]));
    let step = &s.steps[0];
    let counted: Vec<u64> = step.endpoints.iter().map(|e| e.histogram.len()).collect();
    assert_eq!(counted, vec![paths["/a"], paths["/b"]]);
    assert_eq!(step.endpoints.iter().map(|e| e.requests).sum::<u64>(), step.requests);
    assert!(step.send_lag.is_none(), "a closed-loop step has no schedule to be late on");
}

#[test]
fn a_request_timeout_overrides_the_runs() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/stall", "/"], steps(&[(1, 600)]));
    cfg.timeout = Duration::from_secs(5);
    cfg.requests[0].timeout = Some(Duration::from_millis(100));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let timed_out: Vec<&Row> = rows.iter().filter(|r| r.error.is_some()).collect();
    eprintln!("request timeout: {} records, {} timed out", s.records, timed_out.len());
    assert!(timed_out.len() >= 4);
    for r in timed_out {
        assert_eq!(r.error.as_deref(), Some("timeout"));
        assert!((95_000..300_000).contains(&r.latency_us), "{r:?}");
    }
}
