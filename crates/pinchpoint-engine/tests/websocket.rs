//! WebSocket steps against servers that misbehave as real ones do: a frame answered
//! after pings, a server that never answers, one that closes at the first frame, one
//! that sends a frame above what is kept, and an upgrade refused. Each connection and
//! message is a record; every failure has its class and reason, and no user hangs.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, parquet_rows, run, steps, Row};
use futures_util::{SinkExt, StreamExt};
use pinchpoint_engine::{Arrivals, CheckSpec, FlowSpec, FlowStepSpec, MessageSpec, OnFail, Phase, RequestSpec, RunConfig};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;

/// A WebSocket server on its own thread: its port, and the upgrade targets it saw.
fn server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = std_listener.local_addr().unwrap().port();
    std_listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let seen = kept.clone();
                tokio::spawn(async move {
                    let mut path = String::new();
                    // Its error type is tungstenite's.
                    #[allow(clippy::result_large_err)]
                    let callback = |req: &Request, resp: Response| {
                        path = req.uri().to_string();
                        seen.lock().unwrap().push(path.clone());
                        if path.starts_with("/refuse") {
                            let mut refused = tokio_tungstenite::tungstenite::handshake::server::ErrorResponse::new(None);
                            *refused.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::FORBIDDEN;
                            return Err(refused);
                        }
                        Ok(resp)
                    };
                    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else { return };
                    behave(&path, &mut ws).await;
                });
            }
        });
    });
    (port, seen)
}

async fn behave(path: &str, ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>) {
    while let Some(Ok(frame)) = ws.next().await {
        if !(frame.is_text() || frame.is_binary()) {
            continue;
        }
        if path.starts_with("/silent") {
            continue;
        }
        if path.starts_with("/close") {
            let _ = ws.close(None).await;
            return;
        }
        if path.starts_with("/big") {
            let _ = ws.send(Message::binary(vec![b'x'; 5 << 20])).await;
            continue;
        }
        if path.starts_with("/ping") {
            for _ in 0..50 {
                let _ = ws.send(Message::Ping(vec![1].into())).await;
            }
        }
        let _ = ws.send(frame).await;
    }
}

fn message(name: &str, send: &str) -> MessageSpec {
    MessageSpec {
        name: format!("w/s/{name}"),
        send: Some(send.into()),
        binary: false,
        receive: true,
        captures: vec![],
        checks: vec![CheckSpec::Contains(send.into())],
    }
}

fn ws_config(dir: &Path, port: u16, path: &str, on_fail: OnFail) -> RunConfig {
    let messages = vec![message("a", "one ${user_index}"), message("b", "two")];
    let step = FlowStepSpec { on_fail, ..FlowStepSpec::new("w/s", RequestSpec { ws: true, messages, ..RequestSpec::get(path) }) };
    let mut c = config(dir, port, &[], steps(&[(2, 600)]));
    c.timeout = Duration::from_millis(300);
    c.flows = vec![FlowSpec { name: "w".into(), weight: 1, steps: vec![step], feed: None }];
    c
}

/// An endpoint's records: their count, errors by class and statuses.
type Counts = (u64, BTreeMap<String, u64>, BTreeMap<u16, u64>);

fn by_endpoint(rows: &[Row]) -> BTreeMap<u16, Counts> {
    let mut out: BTreeMap<u16, Counts> = BTreeMap::new();
    for r in rows {
        let e = out.entry(r.endpoint).or_default();
        e.0 += 1;
        if let Some(class) = &r.error {
            *e.1.entry(class.clone()).or_default() += 1;
        }
        *e.2.entry(r.status).or_default() += 1;
    }
    out
}

fn ws_run(path: &str, on_fail: OnFail) -> (Vec<Row>, pinchpoint_engine::RunSummary, Vec<String>) {
    let _one_at_a_time = common::serial();
    let (port, seen) = server();
    let dir = tempfile::tempdir().unwrap();
    let config = ws_config(dir.path(), port, path, on_fail);
    let summary = run(&config);
    let rows = parquet_rows(&config);
    let seen = seen.lock().unwrap().clone();
    (rows, summary, seen)
}

fn reasons(s: &pinchpoint_engine::RunSummary) -> Vec<String> {
    s.reasons.iter().flat_map(|(_, r)| r.clone()).collect()
}

#[test]
fn frames_answered_after_pings_pass_and_each_upgrade_carries_the_tag() {
    let (rows, summary, seen) = ws_run("/ping", OnFail::Restart);
    let by = by_endpoint(&rows);
    let connections = by[&0].0;
    assert!(connections > 10, "{by:?}");
    for e in [0, 1, 2] {
        assert!(by[&e].1.is_empty(), "{by:?} {:?}", reasons(&summary));
        assert_eq!(by[&e].2.keys().copied().collect::<Vec<_>>(), [101]);
    }
    assert!(by[&1].0 <= connections && by[&1].0 + 2 >= connections, "{by:?}");
    assert!(seen.iter().all(|p| p.starts_with("/ping?pp_run=test-run_1.a&pp_users=")), "{seen:?}");
    assert!(summary.abandoned <= 2);
    // Each walk of each of the 2 users is its connection and the connection's two
    // messages, numbered from 0 without a gap; a user's last may be cut by the run's end.
    let mut walks: BTreeMap<(u32, u64), Vec<u16>> = BTreeMap::new();
    for r in &rows {
        walks.entry(r.walk.expect("a flow's record names its walk")).or_default().push(r.endpoint);
    }
    for user in [0, 1] {
        let mine: Vec<_> = walks.iter().filter(|((u, _), _)| *u == user).collect();
        assert_eq!(mine.iter().map(|((_, i), _)| *i).collect::<Vec<_>>(), (0..mine.len() as u64).collect::<Vec<_>>());
        for (_, endpoints) in &mine[..mine.len() - 1] {
            assert_eq!(endpoints.iter().copied().collect::<std::collections::BTreeSet<_>>().len(), 3, "{endpoints:?}");
            assert_eq!(endpoints.len(), 3, "{endpoints:?}");
        }
    }
}

#[test]
fn a_server_that_never_answers_times_each_connection_out_and_the_run_ends() {
    let (rows, summary, _) = ws_run("/silent", OnFail::Restart);
    let by = by_endpoint(&rows);
    assert_eq!(by[&1].1.keys().cloned().collect::<Vec<_>>(), ["timeout"], "{by:?}");
    assert!(by[&1].1["timeout"] >= 2, "{by:?}");
    // The connection ends with the message that broke it; its second message never went.
    assert!(!by.contains_key(&2), "{by:?}");
    assert!(reasons(&summary).iter().any(|r| r == "w/s/a: no frame within 300ms"), "{:?}", reasons(&summary));
    assert!(rows.iter().filter(|r| r.endpoint == 1).all(|r| r.latency_us >= 300_000 && r.latency_us < 600_000));
}

#[test]
fn a_server_that_closes_or_sends_too_much_fails_the_message_with_its_class() {
    let (rows, summary, _) = ws_run("/close", OnFail::Restart);
    let by = by_endpoint(&rows);
    assert!(by[&1].1["closed"] >= 2 && by[&0].1["closed"] >= 2, "{by:?}");
    assert!(!by.contains_key(&2));
    assert!(reasons(&summary).iter().any(|r| r.contains("closed")), "{:?}", reasons(&summary));

    let (rows, summary, _) = ws_run("/big", OnFail::Restart);
    let by = by_endpoint(&rows);
    assert!(by[&1].1["io"] >= 2, "{by:?}");
    assert!(reasons(&summary).iter().any(|r| r.starts_with("WebSocket: ") && r.contains("too long")), "{:?}", reasons(&summary));
}

#[test]
fn a_refused_upgrade_is_a_failed_check_with_its_status() {
    let (rows, summary, _) = ws_run("/refuse", OnFail::Continue);
    let by = by_endpoint(&rows);
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), [0]);
    assert_eq!(by[&0].1.keys().cloned().collect::<Vec<_>>(), ["check"]);
    assert_eq!(by[&0].2.keys().copied().collect::<Vec<_>>(), [403]);
    assert!(reasons(&summary).iter().any(|r| r == "w/s: the upgrade was answered 403, not 101 Switching Protocols"));
}

#[test]
fn open_loop_arrivals_each_open_a_session_timed_from_their_intended_time() {
    let _one_at_a_time = common::serial();
    let (port, seen) = server();
    let dir = tempfile::tempdir().unwrap();
    let phases = vec![Phase::rate(200.0, Duration::from_millis(500))];
    let mut c = common::open_config(dir.path(), port, &[], phases, Arrivals::Uniform, 16);
    let two = RequestSpec { ws: true, messages: vec![message("a", "one"), message("b", "two")], ..RequestSpec::get("/ping") };
    let one = RequestSpec { ws: true, messages: vec![message("c", "three")], ..RequestSpec::get("/echo") };
    c.requests = vec![two, one];
    let summary = run(&c);
    let rows = parquet_rows(&c);
    let by = by_endpoint(&rows);
    // Endpoints: the first request, its two messages, the second, its message.
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 4], "{by:?}");
    assert!(rows.iter().all(|r| r.error.is_none()), "{:?}", reasons(&summary));
    let (first, second) = (by[&0].0, by[&3].0);
    assert!(first + second >= 95 && first.abs_diff(second) <= 1, "{by:?}");
    assert_eq!((by[&1].0, by[&2].0, by[&4].0), (first, first, second));
    let mut ids: Vec<u64> = rows.iter().map(|r| r.req_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "every record has its own request id");
    // A connection's life counts from its intended time; its messages from their sends.
    for conn in rows.iter().filter(|r| r.endpoint == 0) {
        assert!(conn.latency_us >= conn.service_us && conn.start_us >= conn.intended_us);
        let messages = rows.iter().filter(|r| r.req_id > conn.req_id && r.req_id <= conn.req_id + 2);
        assert!(messages.map(|m| m.latency_us).sum::<i64>() <= conn.service_us);
    }
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().all(|p| p.contains("pp_run=test-run_1.a&pp_rate=200&pp_req=")), "{seen:?}");
}
