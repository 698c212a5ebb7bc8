//! gRPC calls against an in-process server on hyper's HTTP/2: unary calls answered OK,
//! a status other than OK (trailers only), a server that never answers, a stream of
//! messages each counted as a record, a message cut short by a bad length prefix, and
//! the same calls over TLS and in open loop. Every failure has its class and reason.

mod common;
mod servers;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{config, parquet_rows, run, steps, Row};
use futures_util::stream;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pinchpoint_engine::config::GrpcSpec;
use pinchpoint_engine::{
    Arrivals, CaptureFrom, CaptureSpec, CheckSpec, FlowSpec, FlowStepSpec, HttpVersion, OnFail, Phase, Pick, Protocol,
    RequestSpec, RunConfig, RunSummary, TlsOptions,
};
use servers::Certs;
use tokio::net::TcpListener;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

const PROTO: &str = r#"syntax = "proto3";
package test;
message GetRequest { string id = 1; int32 n = 2; }
message Item { string id = 1; string name = 2; int32 count = 3; }
service Shop {
  rpc Get(GetRequest) returns (Item);
  rpc Fail(GetRequest) returns (Item);
  rpc Never(GetRequest) returns (Item);
  rpc List(GetRequest) returns (stream Item);
  rpc Broken(GetRequest) returns (Item);
  rpc Upload(stream GetRequest) returns (Item);
}
"#;

/// Between the messages of `/test.Shop/List`.
const STREAM_GAP: Duration = Duration::from_millis(20);

type Body = BoxBody<Bytes, Infallible>;

/// What the server saw of each call: its path and its headers.
type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

/// `Item { id, name: "item <id>", count }`, protobuf-encoded and framed.
fn item(id: &[u8], count: u8) -> Bytes {
    let name = [b"item ".as_slice(), id].concat();
    let mut m = vec![0x0a, id.len() as u8];
    m.extend_from_slice(id);
    m.extend_from_slice(&[0x12, name.len() as u8]);
    m.extend_from_slice(&name);
    m.extend_from_slice(&[0x18, count]);
    [vec![0, 0, 0, 0, m.len() as u8], m].concat().into()
}

fn trailers(code: u32, message: &str) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", code.to_string().parse().unwrap());
    if !message.is_empty() {
        t.insert("grpc-message", message.parse().unwrap());
    }
    t
}

fn frames(frames: Vec<(Duration, Frame<Bytes>)>) -> Body {
    let stream = stream::unfold(frames.into_iter(), |mut left| async move {
        let (wait, frame) = left.next()?;
        tokio::time::sleep(wait).await;
        Some((Ok::<_, Infallible>(frame), left))
    });
    StreamBody::new(stream).boxed()
}

async fn answer(req: Request<Incoming>, seen: Seen) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    seen.lock().unwrap().push((req.uri().to_string(), req.headers().clone()));
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    // The request message's first field (the id), as its tag, length and bytes lay it out.
    let id = if body.len() > 7 && body[5] == 0x0a { body[7..7 + body[6] as usize].to_vec() } else { Vec::new() };
    let grpc = Response::builder().header("content-type", "application/grpc");
    let now = Duration::ZERO;
    let body = match path.as_str() {
        "/test.Shop/Get" => frames(vec![(now, Frame::data(item(&id, 1))), (now, Frame::trailers(trailers(0, "")))]),
        "/test.Shop/Fail" => {
            let only = grpc.header("grpc-status", "14").header("grpc-message", "down%20for%20maintenance");
            return Ok(only.body(frames(vec![])).unwrap());
        }
        "/test.Shop/Never" => frames(vec![(Duration::from_secs(3600), Frame::data(item(&id, 1)))]),
        "/test.Shop/List" => {
            let mut all: Vec<_> = (1..=3).map(|n| (STREAM_GAP, Frame::data(item(&id, n)))).collect();
            all.push((now, Frame::trailers(trailers(0, ""))));
            frames(all)
        }
        "/test.Shop/Broken" => {
            let cut = Bytes::from_static(&[0, 0, 0, 0, 100, 1, 2, 3]);
            frames(vec![(now, Frame::data(cut)), (now, Frame::trailers(trailers(0, "")))])
        }
        _ => return Ok(grpc.header("grpc-status", "12").body(frames(vec![])).unwrap()),
    };
    Ok(grpc.body(body).unwrap())
}

/// A gRPC server on its own runtime (h2c, or TLS offering h2): its port and what it saw.
fn server(tls: Option<&Certs>) -> (u16, Seen, tokio::runtime::Runtime) {
    let acceptor = tls.map(|certs| {
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certs.cert.clone()], PrivateKeyDer::Pkcs8(certs.key.clone_key()))
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec()];
        TlsAcceptor::from(Arc::new(config))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    runtime.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            // Headers, data and trailers go in writes of their own: without Nagle's wait.
            tcp.set_nodelay(true).unwrap();
            let (seen, acceptor) = (kept.clone(), acceptor.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, seen.clone()));
                let h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                match acceptor {
                    None => drop(h2.serve_connection(TokioIo::new(tcp), service).await),
                    Some(acceptor) => {
                        let Ok(stream) = acceptor.accept(tcp).await else { return };
                        drop(h2.serve_connection(TokioIo::new(stream), service).await);
                    }
                }
            });
        }
    });
    (port, seen, runtime)
}

fn call(dir: &Path, method: &str, data: &str) -> RequestSpec {
    let proto = dir.join("shop.proto");
    std::fs::write(&proto, PROTO).unwrap();
    RequestSpec {
        method: "POST".into(),
        path: format!("/test.Shop/{method}"),
        body: data.as_bytes().to_vec(),
        grpc: Some(GrpcSpec { method: format!("test.Shop/{method}"), proto, import_paths: vec![] }),
        ..RequestSpec::get("/")
    }
}

fn grpc_config(dir: &Path, port: u16, request: RequestSpec, checks: Vec<CheckSpec>, captures: Vec<CaptureSpec>) -> RunConfig {
    let step = FlowStepSpec { captures, checks, on_fail: OnFail::Continue, ..FlowStepSpec::new("g/call", request) };
    let mut c = config(dir, port, &[], steps(&[(2, 400)]));
    c.protocol = Protocol { http: HttpVersion::Http2, tls: None, streams_per_connection: 0 };
    c.timeout = Duration::from_millis(300);
    c.flows = vec![FlowSpec { name: "g".into(), weight: 1, steps: vec![step], feed: None }];
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

fn reasons(s: &RunSummary) -> Vec<String> {
    s.reasons.iter().flat_map(|(_, r)| r.clone()).collect()
}

/// Runs `method` with `data` (and the step's checks) on an h2c server.
fn grpc_run(method: &str, data: &str, checks: Vec<CheckSpec>) -> (Vec<Row>, RunSummary, Seen) {
    let _one_at_a_time = common::serial();
    let (port, seen, _server) = server(None);
    let dir = tempfile::tempdir().unwrap();
    let c = grpc_config(dir.path(), port, call(dir.path(), method, data), checks, vec![]);
    let summary = run(&c);
    (parquet_rows(&c), summary, seen)
}

#[test]
fn unary_calls_answered_ok_are_checked_on_their_json_and_tagged_in_their_metadata() {
    let checks = vec![CheckSpec::JsonEquals { path: "$.name".into(), expected: "item u${user_index}".into() }];
    let (rows, summary, seen) = grpc_run("Get", r#"{"id": "u${user_index}", "n": 2}"#, checks);
    let by = by_endpoint(&rows);
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), [0], "{by:?}");
    assert!(by[&0].0 > 20 && by[&0].1.is_empty(), "{by:?} {:?}", reasons(&summary));
    assert_eq!(by[&0].2.keys().copied().collect::<Vec<_>>(), [200]);
    let seen = seen.lock().unwrap();
    let (uri, headers) = &seen[0];
    assert!(uri.ends_with("/test.Shop/Get"), "no query after the method: {uri}");
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(headers["te"], "trailers");
    assert!(headers["x-pinchpoint"].to_str().unwrap().starts_with("run=test-run_1.a; users=2; req="));
    assert!(headers["traceparent"].to_str().unwrap().starts_with("00-"));
}

#[test]
fn a_status_other_than_ok_is_its_class_with_its_message() {
    let (rows, summary, _) = grpc_run("Fail", r#"{"id": "x"}"#, vec![]);
    let by = by_endpoint(&rows);
    assert_eq!(by[&0].1.keys().cloned().collect::<Vec<_>>(), ["grpc_unavailable"], "{by:?}");
    assert_eq!(by[&0].2.keys().copied().collect::<Vec<_>>(), [200]);
    let said = reasons(&summary);
    assert!(said.iter().any(|r| r == "g/call: grpc-status 14 UNAVAILABLE: down for maintenance"), "{said:?}");
}

#[test]
fn a_server_that_never_answers_times_each_call_out() {
    let (rows, _, _) = grpc_run("Never", "{}", vec![]);
    let by = by_endpoint(&rows);
    assert_eq!(by[&0].1.keys().cloned().collect::<Vec<_>>(), ["timeout"], "{by:?}");
    assert!(by[&0].1["timeout"] >= 2, "{by:?}");
    assert!(rows.iter().all(|r| r.latency_us >= 300_000 && r.latency_us < 600_000), "{rows:?}");
}

#[test]
fn each_message_of_a_stream_is_a_record_timed_from_the_one_before() {
    let checks = vec![CheckSpec::JsonCompare { path: "$".into(), op: pinchpoint_engine::config::flow::Cmp::Len, expected: "3".into() }];
    let (rows, summary, _) = grpc_run("List", r#"{"id": "s"}"#, checks);
    let by = by_endpoint(&rows);
    assert!(rows.iter().all(|r| r.error.is_none()), "{:?}", reasons(&summary));
    let (calls, messages) = (by[&0].0, by[&1].0);
    assert!(calls >= 4 && messages == 3 * calls, "{by:?}");
    let gap = STREAM_GAP.as_micros() as i64;
    // Timed from the message before: about one gap each. A late message makes the next
    // one look early by as much, so the low bound is half a gap, not the gap itself.
    for m in rows.iter().filter(|r| r.endpoint == 1) {
        assert!(m.latency_us >= gap / 2 && m.latency_us < gap * 4, "{m:?}");
    }
    for c in rows.iter().filter(|r| r.endpoint == 0) {
        assert!(c.latency_us >= 3 * gap, "{c:?}");
    }
    let mut ids: Vec<u64> = rows.iter().map(|r| r.req_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "every record has its own request id");
}

#[test]
fn a_message_cut_short_by_its_length_prefix_breaks_the_protocol() {
    let (rows, summary, _) = grpc_run("Broken", "{}", vec![]);
    let by = by_endpoint(&rows);
    assert_eq!(by[&0].1.keys().cloned().collect::<Vec<_>>(), ["grpc_protocol"], "{by:?}");
    let said = reasons(&summary);
    assert!(said.iter().any(|r| r.starts_with("g/call: the answer ended inside a message: 8 bytes") && r.ends_with("100 announced")), "{said:?}");
}

#[test]
fn calls_go_over_tls_by_alpn_and_captures_read_the_answer() {
    let _one_at_a_time = common::serial();
    let certs = Certs::new();
    let (port, _seen, _server) = server(Some(&certs));
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    certs.write_ca(&ca);
    let capture = CaptureSpec { var: "name".into(), from: CaptureFrom::Json("$.name".into()), pick: Pick::First };
    let check = CheckSpec::JsonEquals { path: "$.count".into(), expected: "1".into() };
    let mut c = grpc_config(dir.path(), port, call(dir.path(), "Get", r#"{"id": "t"}"#), vec![check], vec![capture]);
    c.host = "localhost".into();
    c.protocol.tls = Some(TlsOptions { ca_file: Some(ca), insecure: false });
    let summary = run(&c);
    let rows = parquet_rows(&c);
    assert!(rows.len() > 10 && rows.iter().all(|r| r.error.is_none() && r.status == 200), "{:?}", reasons(&summary));
}

#[test]
fn open_loop_arrivals_each_call_and_a_stream_takes_ids_as_it_comes() {
    let _one_at_a_time = common::serial();
    let (port, _seen, _server) = server(None);
    let dir = tempfile::tempdir().unwrap();
    let phases = vec![Phase::rate(100.0, Duration::from_millis(500))];
    let mut c = common::open_config(dir.path(), port, &[], phases, Arrivals::Uniform, 16);
    c.protocol = Protocol { http: HttpVersion::Http2, tls: None, streams_per_connection: 0 };
    c.requests = vec![call(dir.path(), "List", r#"{"id": "o"}"#), call(dir.path(), "Get", r#"{"id": "p"}"#)];
    let summary = run(&c);
    let rows = parquet_rows(&c);
    let by = by_endpoint(&rows);
    // Endpoints: the stream, its messages, the unary call.
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), [0, 1, 2], "{by:?}");
    assert!(rows.iter().all(|r| r.error.is_none()), "{:?}", reasons(&summary));
    let (streams, unary) = (by[&0].0, by[&2].0);
    assert!(streams + unary >= 48 && streams.abs_diff(unary) <= 1, "{by:?}");
    assert_eq!(by[&1].0, 3 * streams);
    let mut ids: Vec<u64> = rows.iter().map(|r| r.req_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "every record has its own request id");
    for r in rows.iter().filter(|r| r.endpoint != 1) {
        assert!(r.latency_us >= r.service_us && r.start_us >= r.intended_us, "{r:?}");
    }
}

#[test]
fn a_call_the_proto_cannot_make_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |request: RequestSpec, http: HttpVersion| {
        let mut c = grpc_config(dir.path(), 1, request, vec![], vec![]);
        c.protocol.http = http;
        pinchpoint_engine::run(&c, Arc::default(), Arc::default()).err().expect("refused")
    };
    let h2 = HttpVersion::Http2;
    assert!(refused(call(dir.path(), "Get", "{}"), HttpVersion::Http1).contains("gRPC runs over HTTP/2"));
    let mut missing = call(dir.path(), "Gone", "{}");
    missing.path = "/test.Shop/Gone".into();
    assert!(refused(missing, h2).contains("service test.Shop has no method Gone (it has: Get, Fail, Never, List, Broken, Upload)"));
    assert!(refused(call(dir.path(), "Upload", "{}"), h2).contains("streams its requests"));
    let unknown = refused(call(dir.path(), "Get", r#"{"id": "a", "colour": "red"}"#), h2);
    assert!(unknown.contains("colour: test.GetRequest has no field colour (it has: id, n)"), "{unknown}");
    let typed = refused(call(dir.path(), "Get", r#"{"n": "many"}"#), h2);
    assert!(typed.contains("not a test.GetRequest"), "{typed}");
    let mut gone = call(dir.path(), "Get", "{}");
    gone.grpc.as_mut().unwrap().proto = dir.path().join("none.proto");
    assert!(refused(gone, h2).contains("none.proto: no such file"));
}
