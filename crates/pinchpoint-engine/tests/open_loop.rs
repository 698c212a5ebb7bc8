//! Open-loop runs against a local test server: achieved rate, Poisson arrivals, pauses,
//! ramps, exact counts, the in-flight cap and coordinated omission.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pinchpoint_engine::{Arrivals, Phase, RunSummary};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn all_ok(s: &RunSummary) -> bool {
    s.steps.iter().all(|st| st.errors.iter().all(|&n| n == 0) && st.responses == st.requests)
}

/// Requests per second between the first and the last actual send.
fn send_rate(rows: &[Row]) -> f64 {
    let first = rows.iter().map(|r| r.start_us).min().unwrap();
    let last = rows.iter().map(|r| r.start_us).max().unwrap();
    (rows.len() - 1) as f64 / ((last - first) as f64 / 1e6)
}

fn lags(rows: &[Row]) -> Vec<i64> {
    rows.iter().map(|r| r.start_us - r.intended_us).collect()
}

fn achieved_rate(target: f64) {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::rate(target, secs(2.0))], Arrivals::Uniform, 1000);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let rate = send_rate(&rows);
    let mut lag = lags(&rows);
    let (p50, p99, max) = (quantile(&mut lag, 0.5), quantile(&mut lag, 0.99), quantile(&mut lag, 1.0));
    let window = s.windows[0];
    let in_window = rows.iter().filter(|r| r.start_us >= window.start_us && r.start_us < window.end_us).count();
    let achieved = in_window as f64 / ((window.end_us - window.start_us) as f64 / 1e6);
    eprintln!(
        "open loop {target} req/s: {} sent, {achieved:.1} req/s in the window, {rate:.1} req/s between first and last send, \
         send lag p50 {p50} µs p99 {p99} µs max {max} µs, {} connections' worth of late",
        rows.len(),
        s.levels[0].late
    );
    let expected = (target * 2.0) as u64;
    assert_eq!(s.records, expected, "every scheduled request sent");
    assert_eq!(server.requests(), expected);
    assert!(all_ok(&s), "errors {:?}", s.steps[0].errors);
    assert!((achieved / target - 1.0).abs() < 0.01, "achieved {achieved} req/s for {target}");
    assert!((rate / target - 1.0).abs() < 0.01, "sends at {rate} req/s for {target}");
    assert_eq!((s.levels[0].intended, s.levels[0].late, s.levels[0].unsent), (expected, 0, 0));
    assert_eq!(s.levels[0].level, target);
    assert!(s.levels[0].open_loop);
    // Intended times are the schedule's: evenly spaced.
    let mut intended: Vec<i64> = rows.iter().map(|r| r.intended_us).collect();
    intended.sort_unstable();
    let step_us = 1e6 / target;
    for (k, t) in intended.iter().enumerate() {
        let want = intended[0] as f64 + k as f64 * step_us;
        assert!((*t as f64 - want).abs() <= 1.0, "arrival {k} at {t}, meant {want}");
    }
    for r in &rows {
        assert!(r.start_us >= r.intended_us, "sent before its time: {r:?}");
        assert!(r.latency_us >= r.service_us, "{r:?}");
        assert_eq!(r.users, 0);
    }
}

#[test]
fn achieved_rate_is_within_one_percent_at_500_per_second() {
    let _serial = serial();
    achieved_rate(500.0);
}

#[test]
fn achieved_rate_is_within_one_percent_at_2000_per_second() {
    let _serial = serial();
    achieved_rate(2000.0);
}

#[test]
fn poisson_arrivals_have_the_mean_rate_and_exponential_gaps() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::rate(2000.0, secs(2.0))], Arrivals::Poisson, 1000);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let mut intended: Vec<i64> = rows.iter().map(|r| r.intended_us).collect();
    intended.sort_unstable();
    let gaps: Vec<f64> = intended.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    eprintln!("poisson 2000 req/s over 2 s: {} requests, mean gap {mean:.1} µs, cv {:.3}", rows.len(), sd / mean);
    // 4000 expected, standard deviation 63: ±4 of them.
    assert!((rows.len() as f64 - 4000.0).abs() < 253.0, "{} requests", rows.len());
    assert!((sd / mean - 1.0).abs() < 0.1, "coefficient of variation {}", sd / mean);
    assert_eq!(server.requests(), s.records);
    assert_eq!(s.levels[0].intended, s.records);
    assert!(all_ok(&s));
}

#[test]
fn a_pause_sends_nothing() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let phases = vec![Phase::rate(200.0, secs(0.5)), Phase::pause(secs(1.0)), Phase::rate(200.0, secs(0.5))];
    let cfg = open_config(dir.path(), server.port(), &["/"], phases, Arrivals::Poisson, 100);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let pause = s.windows[1];
    let during = server.received().iter().filter(|r| r.at_us > pause.start_us + 50_000 && r.at_us < pause.end_us).count();
    let per_phase: Vec<u64> = s.steps.iter().map(|st| st.requests).collect();
    eprintln!("pause: requests per phase {per_phase:?}, {during} read by the server during the pause");
    assert_eq!(s.windows.len(), 3);
    assert!((pause.end_us - pause.start_us - 1_000_000).abs() <= 1, "{pause:?}");
    assert_eq!(during, 0);
    assert_eq!(per_phase[1], 0);
    assert_eq!(s.levels[1].intended, 0);
    assert!(per_phase[0] > 50 && per_phase[2] > 50, "{per_phase:?}");
    assert!(rows.iter().all(|r| r.intended_us < pause.start_us || r.intended_us >= pause.end_us));
}

#[test]
fn a_ramp_sends_the_integral_of_its_rate() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    // 0 → 400 req/s over 1 s: 200 requests, 50 of them in the first half.
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::ramp(0.0, 400.0, secs(1.0))], Arrivals::Uniform, 100);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let start = s.windows[0].start_us;
    let first_half = rows.iter().filter(|r| r.intended_us < start + 500_000).count();
    eprintln!("ramp 0 → 400 req/s over 1 s: {} requests, {first_half} in the first half", rows.len());
    assert_eq!(rows.len(), 200);
    assert!((49..=51).contains(&first_half), "{first_half}");
    assert_eq!(s.levels[0].level, 200.0, "the level of a ramp is its mean rate");
    assert_eq!(server.requests(), 200);
    assert!(all_ok(&s));
}

#[test]
fn an_arrival_count_is_sent_exactly() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    for arrivals in [Arrivals::Uniform, Arrivals::Poisson] {
        let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::count(37, secs(0.5))], arrivals, 100);
        let s = run(&cfg);
        let rows = parquet_rows(&cfg);
        let w = s.windows[0];
        assert_eq!(rows.len(), 37, "{arrivals:?}");
        assert!(rows.iter().all(|r| r.intended_us >= w.start_us && r.intended_us <= w.end_us), "{arrivals:?}");
    }
    assert_eq!(server.requests(), 74);
}

/// 100 req/s against a server that takes 200 ms, with two connections: they carry 10
/// req/s, the rest waits for them (late) and what still waits at the end is unsent.
#[test]
fn the_cap_counts_late_and_unsent_requests() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/slow/200"], vec![Phase::rate(100.0, secs(1.0))], Arrivals::Uniform, 2);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let l = s.levels[0];
    eprintln!("cap 2: {} sent, intended {}, late {}, unsent {}", rows.len(), l.intended, l.late, l.unsent);
    assert_eq!(l.intended, 100);
    assert_eq!(rows.len() as u64 + l.unsent, 100, "every request sent or counted unsent");
    assert!((8..=16).contains(&rows.len()), "{} sent", rows.len());
    assert!(l.late >= 90 && l.late <= 98, "late {}", l.late);
    assert!(l.unsent >= 80 && l.unsent <= l.late, "unsent {}", l.unsent);
    assert_eq!(server.requests(), s.records);
    // A request that waited shows it in its latency, from its intended time.
    let waited: Vec<&Row> = rows.iter().filter(|r| r.start_us - r.intended_us > 100_000).collect();
    assert!(waited.len() >= 5, "{} waited", waited.len());
    for r in waited {
        assert!(r.latency_us >= r.service_us + (r.start_us - r.intended_us) - 1_000, "{r:?}");
    }
    // The phase keeps the send lag of every request sent: its histogram holds each
    // record's lag (under 1 µs as 1 µs) and its max is the records' exactly.
    let kept = s.steps[0].send_lag.as_ref().expect("an open-loop phase keeps its send lag");
    let lag = lags(&rows);
    assert_eq!(kept.max_us, lag.iter().copied().max());
    assert_eq!(kept.histogram.len(), rows.len() as u64);
    let mut expected = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    for &l in &lag {
        expected.record(l.max(1) as u64).unwrap();
    }
    assert_eq!(kept.histogram, expected);
}

/// The target stops answering for 1 s. With 4 connections, requests scheduled during
/// the stall wait for a free one: their service time (from the actual send) is short,
/// but their latency (from the intended time) holds the stall, as a user arriving then
/// would have seen it.
#[test]
fn a_stall_shows_in_latency_from_the_intended_time() {
    let _serial = serial();
    let server = Arc::new(TestServer::start());
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::rate(200.0, secs(3.0))], Arrivals::Uniform, 4);
    let staller = {
        let server = server.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1000));
            let from = now_us();
            server.pause_for(Duration::from_secs(1));
            (from, from + 1_000_000)
        })
    };
    let s = run(&cfg);
    let (p0, p1) = staller.join().unwrap();
    let rows = parquet_rows(&cfg);
    let stalled: Vec<&Row> = rows.iter().filter(|r| r.intended_us >= p0 + 20_000 && r.intended_us < p1 - 20_000).collect();
    let short_service = stalled.iter().filter(|r| r.service_us < 50_000).count();
    let mut lat: Vec<i64> = rows.iter().map(|r| r.latency_us).collect();
    let mut svc: Vec<i64> = rows.iter().map(|r| r.service_us).collect();
    let (lat99, svc99) = (quantile(&mut lat, 0.99), quantile(&mut svc, 0.99));
    let p99_hist = s.steps[0].histogram.value_at_quantile(0.99);
    eprintln!(
        "stall: {} requests scheduled during it, {short_service} of them with service < 50 ms; \
         p99 latency {lat99} µs (histogram {p99_hist}), p99 service {svc99} µs; late {}",
        stalled.len(),
        s.levels[0].late
    );
    assert_eq!(s.records, 600, "every request sent once the stall is over");
    assert!(all_ok(&s));
    assert!(stalled.len() >= 180, "{}", stalled.len());
    for r in &stalled {
        // It could not complete before the stall ended.
        assert!(r.intended_us + r.latency_us >= p1 - 10_000, "{r:?}");
        assert!(r.latency_us >= r.service_us, "{r:?}");
    }
    assert!(short_service * 10 >= stalled.len() * 9, "most waited unsent, then were served fast");
    assert!(lat99 >= 800_000, "the stall is in the latency percentiles: p99 {lat99} µs");
    assert!(p99_hist >= 800_000, "and in the step's histogram: p99 {p99_hist} µs");
    assert!(svc99 < 500_000, "service time alone hides it: p99 {svc99} µs");
    assert!(s.levels[0].late >= 150);
    assert_eq!(s.levels[0].unsent, 0);
}

#[test]
fn open_loop_tag_carries_the_rate_of_the_phase() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let phases = vec![Phase::rate(100.0, secs(0.3)), Phase::ramp(10.0, 5.0, secs(0.4))];
    let cfg = open_config(dir.path(), server.port(), &["/a", "/b?x=1"], phases, Arrivals::Uniform, 10);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let received = server.received();
    assert_eq!(received.len() as u64, s.records);
    assert_eq!(rows.len(), 30 + 3);
    let mut ids = HashSet::new();
    for got in &received {
        let (path, query) = got.uri.split_once(if got.uri.starts_with("/b") { '&' } else { '?' }).unwrap();
        let fields: Vec<(&str, &str)> = query.split('&').map(|kv| kv.split_once('=').unwrap()).collect();
        assert_eq!(fields[0], ("pp_run", cfg.run_id.as_str()), "{}", got.uri);
        assert_eq!(fields[1].0, "pp_rate", "{}", got.uri);
        assert_eq!(fields[2].0, "pp_req");
        let req: u64 = fields[2].1.parse().unwrap();
        let row = rows.iter().find(|r| r.req_id == req).unwrap();
        let rate = ["100", "7.5"][row.step as usize];
        assert_eq!(fields[1].1, rate, "{}", got.uri);
        assert!(["/a", "/b?x=1"].contains(&path));
        assert_eq!(
            got.tag_header.as_deref(),
            Some(format!("run={}; rate={rate}; req={req}", cfg.run_id).as_str())
        );
        assert!(ids.insert(req));
    }
}

#[test]
fn weights_set_the_mix_of_requests() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = open_config(dir.path(), server.port(), &["/a", "/b", "/c"], vec![Phase::rate(400.0, secs(0.5))], Arrivals::Poisson, 50);
    cfg.requests[0].weight = 3;
    cfg.requests[2].weight = 0;
    let s = run(&cfg);
    let paths = count_by(&server.received(), |r| r.uri.split('?').next().unwrap().to_string());
    eprintln!("weights 3:1:0 over {} requests: {paths:?}", s.records);
    let (a, b) = (paths["/a"], paths["/b"]);
    assert!(!paths.contains_key("/c"));
    assert!(a.abs_diff(3 * b) <= 3, "{a} against {b}");
}

#[test]
fn stop_ends_an_open_loop_run_early() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::rate(100.0, secs(30.0)), Phase::rate(200.0, secs(30.0))], Arrivals::Uniform, 10);
    let stop = Arc::new(AtomicBool::new(false));
    let setter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let t0 = Instant::now();
    let s = run_with_stop(&cfg, stop);
    let took = t0.elapsed();
    setter.join().unwrap();
    let rows = parquet_rows(&cfg);
    eprintln!("open-loop stop: took {took:?}, {} records", s.records);
    assert!(s.interrupted);
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(s.windows.len(), 1);
    let w = s.windows[0];
    assert!((w.end_us - w.start_us - 500_000).abs() < 100_000, "{w:?}");
    assert!((40..=60).contains(&rows.len()), "{}", rows.len());
    assert_eq!(s.levels[0].intended, s.records);
    assert_eq!(s.levels[1].intended, 0);
    assert_eq!(server.requests(), s.records);
}

#[test]
fn stop_before_an_open_loop_run_sends_nothing() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), server.port(), &["/"], vec![Phase::rate(100.0, secs(5.0))], Arrivals::Uniform, 10);
    let s = run_with_stop(&cfg, Arc::new(AtomicBool::new(true)));
    assert!(s.interrupted);
    assert!(s.windows.is_empty());
    assert_eq!(s.records, 0);
    assert_eq!(server.requests(), 0);
}

#[test]
fn a_dead_target_is_refused_at_the_schedule_rate() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let cfg = open_config(dir.path(), dead_port(), &["/"], vec![Phase::rate(100.0, secs(0.5))], Arrivals::Uniform, 10);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    assert_eq!(rows.len(), 50, "no retry storm, no backoff: one attempt per arrival");
    assert_eq!(s.steps[0].errors[pinchpoint_engine::ErrorClass::ConnectRefused.index()], 50);
    assert!(rows.iter().all(|r| r.error.as_deref() == Some("connect_refused")));
}

#[test]
fn open_loop_config_errors_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = open_config(dir.path(), 1, &["/"], vec![Phase::ramp(-1.0, 5.0, secs(1.0))], Arrivals::Uniform, 10);
    assert!(cfg.validate().unwrap_err().contains("phase 0"));
    cfg.open.as_mut().unwrap().phases = vec![Phase::rate(5.0, Duration::ZERO)];
    assert!(cfg.validate().unwrap_err().contains("duration"));
    cfg.open.as_mut().unwrap().phases = vec![Phase::rate(5.0, secs(1.0))];
    cfg.open.as_mut().unwrap().max_in_flight = 0;
    assert!(cfg.validate().unwrap_err().contains("max_in_flight"));
    cfg.open.as_mut().unwrap().max_in_flight = 1;
    cfg.steps = steps(&[(1, 100)]);
    assert!(cfg.validate().is_err(), "steps and phases together");
}
