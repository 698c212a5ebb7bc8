//! The engine against a local test server: counts, tag, statuses, transport errors,
//! timeouts, think time and stopping.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pinchpoint_engine::{ErrorClass, RequestSpec, RunSummary, Think};

fn error_total(s: &RunSummary, class: ErrorClass) -> u64 {
    s.steps.iter().map(|st| st.errors[class.index()]).sum()
}

fn no_errors(s: &RunSummary) -> bool {
    s.steps.iter().all(|st| st.errors.iter().all(|&n| n == 0))
}

#[test]
fn counts_match_the_server_and_the_records() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &["/"], steps(&[(1, 1000), (3, 1000)]));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    eprintln!(
        "counts: records {} (step 0: {}, step 1: {}), server {}",
        s.records,
        s.steps[0].requests,
        s.steps[1].requests,
        server.requests()
    );

    assert!(!s.interrupted);
    assert_eq!(s.windows.len(), 2);
    assert!(s.records > 10, "a local server answers many requests in 2 s");
    // The run waits for the requests in flight: nothing is lost at the end.
    assert_eq!(server.requests(), s.records, "server received == engine records");
    assert_eq!(rows.len() as u64, s.records);
    assert_eq!(s.steps.iter().map(|st| st.requests).sum::<u64>(), s.records);

    let per_step = count_by(&rows, |r| r.step);
    for (i, st) in s.steps.iter().enumerate() {
        assert_eq!(st.step, i as u32);
        assert_eq!(st.users, [1, 3][i]);
        assert!(st.requests > 0, "step {i} sent requests");
        assert_eq!(per_step.get(&(i as u32)).copied().unwrap_or(0), st.requests, "step {i}");
        assert_eq!(st.responses, st.requests, "step {i}: every request answered");
        assert_eq!(st.statuses, BTreeMap::from([(200, st.requests)]));
        assert!(st.errors.iter().all(|&n| n == 0));
        assert_eq!(st.bytes, BODY.len() as u64 * st.responses);
        assert_eq!(st.histogram.len(), st.requests);
    }
    for r in &rows {
        assert_eq!(r.users, s.steps[r.step as usize].users, "{r:?}");
        assert_eq!((r.status, r.error.as_deref(), r.bytes), (200, None, BODY.len() as u64));
        assert!(r.latency_us > 0);
        assert!(r.start_us >= s.started_us && r.start_us <= s.ended_us, "{r:?}");
    }
    let ids: HashSet<u64> = rows.iter().map(|r| r.req_id).collect();
    assert_eq!(ids.len(), rows.len(), "request ids unique");
}

#[test]
fn without_a_records_path_nothing_is_written_and_every_request_is_counted() {
    let local = Local::start();
    let mut cfg = local.config(&["/"], steps(&[(2, 500)]));
    cfg.records_path = None;
    let s = run(&cfg);
    assert!(s.records > 10, "a local server answers many requests in 0.5 s");
    assert_eq!(local.server.requests(), s.records);
    assert_eq!(s.steps[0].requests, s.records);
    assert_eq!(s.steps[0].histogram.len(), s.records);
    assert_eq!(s.records_error, None);
    assert_eq!(std::fs::read_dir(local.dir.path()).unwrap().count(), 0, "no file in the run's folder");
}

/// Splits a received URI into the plan's path and the tag's three values.
fn split_tag(uri: &str) -> (String, char, Vec<(String, String)>) {
    let at = uri.find("pp_run=").unwrap_or_else(|| panic!("no tag in {uri:?}"));
    let sep = uri[..at].chars().last().expect("a separator before the tag");
    let path = uri[..at - 1].to_string();
    let pairs = uri[at..]
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("bad pair in {uri:?}"));
            (k.to_string(), v.to_string())
        })
        .collect();
    (path, sep, pairs)
}

#[test]
fn every_request_carries_the_tag() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let paths = ["/plain", "/search?q=a%20b&n=1"];
    let mut cfg = config(dir.path(), server.port(), &paths, steps(&[(1, 500), (3, 500)]));
    cfg.think = Think::Constant(Duration::from_millis(5));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let by_id: HashMap<u64, &Row> = rows.iter().map(|r| (r.req_id, r)).collect();
    let received = server.received();
    assert_eq!(received.len() as u64, s.records);

    let mut seen = HashSet::new();
    let mut by_path = HashMap::new();
    for got in &received {
        let (path, sep, pairs) = split_tag(&got.uri);
        *by_path.entry(path.clone()).or_insert(0) += 1;
        let expected_sep = if path.contains('?') { '&' } else { '?' };
        assert_eq!(sep, expected_sep, "{:?}", got.uri);
        assert!(paths.contains(&path.as_str()), "{:?}", got.uri);
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["pp_run", "pp_users", "pp_req"], "{:?}", got.uri);
        assert_eq!(pairs[0].1, cfg.run_id);
        let users: u32 = pairs[1].1.parse().unwrap();
        let req: u64 = pairs[2].1.parse().unwrap();
        assert!(seen.insert(req), "request id {req} sent twice");
        let row = by_id.get(&req).unwrap_or_else(|| panic!("no record of request {req}"));
        assert_eq!(users, row.users, "{:?}", got.uri);
        assert_eq!(users, cfg.steps[row.step as usize].users, "users of the request's step");
        assert_eq!(
            got.tag_header.as_deref(),
            Some(format!("run={}; users={users}; req={req}", cfg.run_id).as_str())
        );
    }
    let ids: HashSet<u64> = by_id.keys().copied().collect();
    assert_eq!(seen, ids, "tagged ids == recorded ids");
    assert_eq!(by_path.len(), 2, "both requests of the plan sent: {by_path:?}");
}

#[test]
fn no_tag_when_tagging_is_off() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let paths = ["/plain", "/search?q=1"];
    let mut cfg = config(dir.path(), server.port(), &paths, steps(&[(2, 300)]));
    cfg.tag = false;
    cfg.think = Think::Constant(Duration::from_millis(5));
    let s = run(&cfg);
    let received = server.received();
    assert!(!received.is_empty());
    assert_eq!(received.len() as u64, s.records);
    for got in &received {
        assert!(paths.contains(&got.uri.as_str()), "untouched URI, got {:?}", got.uri);
        assert_eq!(got.tag_header, None);
    }
}

#[test]
fn error_statuses_are_responses() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/status/503", "/status/404"], steps(&[(2, 500)]));
    cfg.think = Think::Constant(Duration::from_millis(2));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let st = &s.steps[0];
    assert!(no_errors(&s), "no error class for a 503 or a 404");
    assert_eq!(st.responses, st.requests);
    assert_eq!(st.statuses.keys().copied().collect::<Vec<_>>(), [404, 503]);
    assert_eq!(st.statuses.values().sum::<u64>(), st.requests);
    let body_bytes = |code: u16| status_body(code).len() as u64;
    assert_eq!(st.bytes, st.statuses[&404] * body_bytes(404) + st.statuses[&503] * body_bytes(503));
    assert_eq!(server.requests(), s.records);
    for r in &rows {
        assert!(matches!(r.status, 404 | 503), "{r:?}");
        assert_eq!(r.error, None, "{r:?}");
        assert_eq!(r.bytes, body_bytes(r.status));
    }
    assert_eq!(count_by(&rows, |r| r.status)[&503], st.statuses[&503]);
}

#[test]
fn server_down_gives_connect_refused_at_a_bounded_rate() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let users = 2;
    let cfg = config(dir.path(), dead_port(), &["/"], steps(&[(users, 1000)]));
    let t0 = Instant::now();
    let s = run(&cfg);
    let took = t0.elapsed();
    let rows = parquet_rows(&cfg);
    eprintln!("server down: {} records from {users} users in 1 s, run took {took:?}", s.records);
    assert!(!s.interrupted);
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(s.records > 0);
    assert_eq!(error_total(&s, ErrorClass::ConnectRefused), s.records);
    assert_eq!(s.steps[0].responses, 0);
    // No latency percentiles: only answered requests have a latency to count.
    assert!(s.steps[0].histogram.is_empty() && s.steps[0].endpoints[0].histogram.is_empty());
    let [(class, reasons)] = &s.reasons[..] else { panic!("{:?}", s.reasons) };
    assert_eq!(*class, ErrorClass::ConnectRefused);
    assert!(reasons.len() == 1 && reasons[0].starts_with("Connection refused"), "{reasons:?}");
    // The connect backoff (10 ms) bounds each user to about 100 attempts a second.
    assert!(s.records <= users as u64 * 130, "{} attempts: the dead port is hammered", s.records);
    for r in &rows {
        assert_eq!((r.status, r.error.as_deref(), r.bytes), (0, Some("connect_refused"), 0), "{r:?}");
    }
}

fn transport_error_run(path: &str) -> (RunSummary, Vec<Row>, u64) {
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &[path], steps(&[(2, 500)]));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    (s, rows, server.requests())
}

#[test]
fn reset_without_answer_is_classified_reset() {
    let _serial = serial();
    let (s, rows, received) = transport_error_run("/reset");
    eprintln!("reset: {} records, server read {received}", s.records);
    assert!(s.records > 0);
    assert_eq!(received, s.records, "each reset request reached the server");
    assert_eq!(error_total(&s, ErrorClass::Reset), s.records, "errors {:?}", s.steps[0].errors);
    for r in &rows {
        assert_eq!((r.status, r.error.as_deref(), r.bytes), (0, Some("reset"), 0), "{r:?}");
    }
}

#[test]
fn clean_close_without_answer_is_classified_closed() {
    let _serial = serial();
    let (s, rows, received) = transport_error_run("/close");
    eprintln!("close: {} records, server read {received}", s.records);
    assert!(s.records > 0);
    assert_eq!(received, s.records, "each closed request reached the server");
    assert_eq!(error_total(&s, ErrorClass::Closed), s.records, "errors {:?}", s.steps[0].errors);
    let why = vec![(ErrorClass::Closed, vec!["the server closed the connection without answering".to_string()])];
    assert_eq!(s.reasons, why);
    for r in &rows {
        assert_eq!((r.status, r.error.as_deref(), r.bytes), (0, Some("closed"), 0), "{r:?}");
    }
}

#[test]
fn stalled_server_times_out() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    // 1100 ms: each user has a request in flight when the step ends, 100 ms before its timeout.
    let mut cfg = config(dir.path(), server.port(), &["/stall"], steps(&[(2, 1100)]));
    cfg.timeout = Duration::from_millis(200);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let last_step_end = s.windows.last().unwrap().end_us;
    let tail_ms = (s.ended_us - last_step_end) as f64 / 1000.0;
    let lat: Vec<i64> = rows.iter().map(|r| r.latency_us).collect();
    eprintln!("stall: {} records, latencies µs {lat:?}, run ended {tail_ms:.0} ms after its last step", s.records);
    assert!(!rows.is_empty());
    assert_eq!(error_total(&s, ErrorClass::Timeout), s.records);
    // 2 users × 6 requests (at 0, 200, …, 1000 ms), the last ones in flight at the end.
    assert!((10..=14).contains(&rows.len()), "{} records", rows.len());
    let in_flight = rows.iter().filter(|r| r.start_us + r.latency_us > last_step_end).count();
    assert!(in_flight >= 1, "requests in flight at the end were waited for and recorded");
    for r in &rows {
        assert_eq!((r.status, r.error.as_deref()), (0, Some("timeout")), "{r:?}");
        assert!((190_000..=400_000).contains(&r.latency_us), "latency {} µs", r.latency_us);
    }
    assert!(tail_ms <= 1200.0, "run ended {tail_ms} ms after its last step");
    assert_eq!(server.requests(), s.records, "every timed-out request reached the server");
}

#[test]
fn think_time_paces_a_user() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], steps(&[(1, 1000)]));
    cfg.think = Think::Constant(Duration::from_millis(100));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    eprintln!("think time: {} requests in 1 s", s.records);
    assert!((9..=11).contains(&s.records), "{} requests with 100 ms think time in 1 s", s.records);
    assert_eq!(rows.len() as u64, s.records);
    let mut starts: Vec<i64> = rows.iter().map(|r| r.start_us).collect();
    starts.sort_unstable();
    for w in starts.windows(2) {
        assert!(w[1] - w[0] >= 100_000, "requests {} µs apart", w[1] - w[0]);
    }
}

#[test]
fn stop_flag_ends_the_run_early_and_keeps_the_records() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], steps(&[(2, 30_000), (4, 30_000)]));
    cfg.think = Think::Constant(Duration::from_millis(1));
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
    eprintln!("stop: run took {took:?}, {} records", s.records);
    assert!(s.interrupted);
    assert!(took < Duration::from_secs(3), "stopped run took {took:?}");
    assert_eq!(s.windows.len(), 1, "only the first step ran");
    assert!(s.records > 0);
    assert_eq!(rows.len() as u64, s.records, "every record kept");
    assert_eq!(s.steps[1].requests, 0);
    assert_eq!(server.requests(), s.records);
}

#[test]
fn stop_before_start_runs_nothing() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &["/"], steps(&[(2, 5_000)]));
    let s = run_with_stop(&cfg, Arc::new(AtomicBool::new(true)));
    assert!(s.interrupted);
    assert!(s.windows.is_empty());
    assert_eq!(s.records, 0);
    assert_eq!(parquet_rows(&cfg).len(), 0);
}

/// Connecting to a listener whose accept queue is full hangs: each attempt must end as
/// `connect_timeout` at the request timeout (not `timeout`: the connect's own timer and
/// the request's have the same length, and either may fire first).
#[test]
fn connect_that_hangs_is_a_connect_timeout() {
    let _serial = serial();
    let (listener, _fill) = full_backlog();
    let dir = tempfile::tempdir().unwrap();
    let users = 10;
    let mut cfg = config(dir.path(), listener.local_addr().unwrap().port(), &["/"], steps(&[(users, 1000)]));
    cfg.timeout = Duration::from_millis(100);
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    eprintln!("hanging connect: {} records, errors {:?}", s.records, s.steps[0].errors);
    assert!(rows.len() >= users as usize);
    assert!(rows.len() <= users as usize * 12, "{} records", rows.len());
    assert_eq!(error_total(&s, ErrorClass::ConnectTimeout), s.records, "errors {:?}", s.steps[0].errors);
    for r in &rows {
        assert_eq!((r.status, r.error.as_deref()), (0, Some("connect_timeout")), "{r:?}");
        assert!((95_000..=300_000).contains(&r.latency_us), "latency {} µs", r.latency_us);
    }
}

#[test]
fn records_carry_the_users_of_their_step_across_many_step_changes() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let plan: Vec<(u32, u64)> = (0..150).map(|i| (if i % 2 == 0 { 8 } else { 3 }, 10)).collect();
    let cfg = config(dir.path(), server.port(), &["/"], steps(&plan));
    let s = run(&cfg);
    let rows = parquet_rows(&cfg);
    let wrong: Vec<&Row> = rows.iter().filter(|r| r.users != cfg.steps[r.step as usize].users).collect();
    eprintln!("{} records over {} steps, {} with the users of another step", rows.len(), plan.len(), wrong.len());
    assert!(wrong.is_empty(), "{:?}", &wrong[..wrong.len().min(5)]);
    assert_eq!(server.requests(), s.records);
}

#[test]
fn server_closing_after_each_answer_with_connection_close() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &["/answer-close"], steps(&[(2, 500)]));
    let s = run(&cfg);
    eprintln!("connection close: {} records, errors {:?}", s.records, s.steps[0].errors);
    assert!(s.records > 10);
    assert!(no_errors(&s), "a new connection for each request: {:?}", s.steps[0].errors);
    assert_eq!(s.steps[0].statuses, BTreeMap::from([(200, s.records)]));
    assert_eq!(server.requests(), s.records);
}

#[test]
fn method_body_and_plan_headers_reach_the_server() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), server.port(), &["/"], steps(&[(1, 200)]));
    cfg.think = Think::Constant(Duration::from_millis(20));
    cfg.requests = vec![RequestSpec {
        method: "POST".into(),
        path: "/submit".into(),
        headers: vec![("Content-Type".into(), "application/json".into()), ("X-Custom".into(), "yes".into())],
        body: br#"{"a": 1}"#.to_vec(),
        weight: 1,
        timeout: None,
        ws: false,
        messages: vec![],
        grpc: None,
    }];
    let s = run(&cfg);
    let received = server.received();
    assert!(!received.is_empty());
    assert_eq!(received.len() as u64, s.records);
    assert!(no_errors(&s));
    for got in &received {
        let header = |name: &str| got.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(got.method, "POST");
        assert!(got.uri.starts_with("/submit?pp_run="), "{}", got.uri);
        assert_eq!(got.body, br#"{"a": 1}"#);
        assert_eq!(header("content-length"), Some("8"));
        assert_eq!(header("content-type"), Some("application/json"));
        assert_eq!(header("x-custom"), Some("yes"));
        assert_eq!(got.host.as_deref(), Some(format!("127.0.0.1:{}", server.port()).as_str()));
    }
}

/// A server that closes after answering without saying `Connection: close` races the
/// next request on that connection: the engine may send it before it sees the close, and
/// records it as `closed` or `reset` although the server never read it. Every answer the
/// server gave is still recorded, and no other error appears.
#[test]
fn server_closing_after_each_answer_without_saying_so() {
    let _serial = serial();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), server.port(), &["/answer-eof"], steps(&[(2, 500)]));
    let s = run(&cfg);
    let st = &s.steps[0];
    let raced = st.errors[ErrorClass::Reset.index()] + st.errors[ErrorClass::Closed.index()];
    eprintln!(
        "silent close: {} records, {} answered, {raced} lost to the close race, server read {}",
        s.records,
        st.responses,
        server.requests()
    );
    assert!(st.responses > 10);
    assert_eq!(st.statuses, BTreeMap::from([(200, server.requests())]), "every answer recorded");
    assert_eq!(st.responses + raced, s.records, "only reset or closed besides the answers");
}
