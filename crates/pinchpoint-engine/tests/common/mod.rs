//! A small HTTP/1.1 test server on 127.0.0.1 and helpers to run the engine and read
//! its records back.
//!
//! The server answers by path:
//! - `/status/<code>`: that status, body [`status_body`];
//! - `/reset`: reads the request, then closes with SO_LINGER 0 (the client sees ECONNRESET);
//! - `/close`: reads the request, then closes cleanly without answering (FIN);
//! - `/stall`: reads the request and never answers;
//! - `/answer-close`: 200 with `Connection: close`, then closes;
//! - `/answer-eof`: 200 without `Connection: close`, then closes anyway;
//! - `/slow/<ms>`: 200 with [`BODY`] after that many milliseconds;
//! - anything else: 200 with [`BODY`].
//!
//! It counts the requests it read and keeps every request URI and `x-pinchpoint` header,
//! with when it read each. [`TestServer::pause_for`] holds every answer for a while.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_array::types::{Int64Type, UInt16Type, UInt32Type, UInt64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use pinchpoint_engine::{Live, RequestSpec, RunConfig, RunSummary, Step, Think};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const BODY: &[u8] = b"hello from the pinchpoint test server\n";

pub fn status_body(code: u16) -> Vec<u8> {
    format!("status {code}\n").into_bytes()
}

/// Engine runs measure time and load the machine: one at a time, so timing
/// assertions of one test are not disturbed by another's load.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub uri: String,
    pub tag_header: Option<String>,
    pub host: Option<String>,
    /// Every header as received, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the server read the request, unix epoch microseconds.
    pub at_us: i64,
}

#[derive(Default)]
struct State {
    requests: AtomicU64,
    received: Mutex<Vec<Received>>,
    /// No answer leaves before this instant.
    paused_until: Mutex<Option<tokio::time::Instant>>,
}

pub fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

pub struct TestServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    // Dropping the runtime closes the listener and every connection.
    runtime: Option<tokio::runtime::Runtime>,
}

impl TestServer {
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State::default());
        let st = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                tokio::spawn(serve(stream, st.clone()));
            }
        });
        Self { addr, state, runtime: Some(runtime) }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requests read completely (request line and headers).
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Holds every answer, to requests read before or during the pause, until `d` from now.
    pub fn pause_for(&self, d: Duration) {
        let until = Instant::now() + d;
        *self.state.paused_until.lock().unwrap() = Some(tokio::time::Instant::from_std(until));
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

struct Head {
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Head {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }
}

/// Reads one request head (and skips its body). None at a clean end of the connection.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Head> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let mut lines = head.split("\r\n");
            let mut request_line = lines.next()?.split(' ');
            let method = request_line.next()?.to_string();
            let uri = request_line.next()?.to_string();
            let mut headers = Vec::new();
            let mut content_length = 0;
            for line in lines {
                let (k, v) = line.split_once(':')?;
                let (k, v) = (k.to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    content_length = v.parse().ok()?;
                }
                headers.push((k, v));
            }
            while buf.len() < content_length {
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf.drain(..content_length).collect();
            return Some(Head { method, uri, headers, body });
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some(head) = read_request(&mut stream, &mut buf).await {
        state.received.lock().unwrap().push(Received {
            method: head.method.clone(),
            uri: head.uri.clone(),
            tag_header: head.header("x-pinchpoint"),
            host: head.header("host"),
            headers: head.headers.clone(),
            body: head.body.clone(),
            at_us: now_us(),
        });
        state.requests.fetch_add(1, Ordering::SeqCst);
        let path = head.uri.split('?').next().unwrap_or("");
        let mut close_after = false;
        let mut extra = "";
        let (code, body) = match path {
            "/reset" => {
                let _ = stream.set_zero_linger();
                return; // dropped with SO_LINGER 0: RST
            }
            "/close" => {
                let _ = stream.shutdown().await;
                return; // dropped normally: FIN
            }
            "/stall" => {
                std::future::pending::<()>().await;
                return;
            }
            "/answer-close" => {
                close_after = true;
                extra = "Connection: close\r\n";
                (200, BODY.to_vec())
            }
            "/answer-eof" => {
                close_after = true;
                (200, BODY.to_vec())
            }
            p if p.starts_with("/slow/") => {
                let ms: u64 = p["/slow/".len()..].parse().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                (200, BODY.to_vec())
            }
            p if p.starts_with("/status/") => {
                let code: u16 = p["/status/".len()..].parse().unwrap_or(500);
                (code, status_body(code))
            }
            _ => (200, BODY.to_vec()),
        };
        let head = format!(
            "HTTP/1.1 {code} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{extra}\r\n",
            reason(code),
            body.len()
        );
        let mut out = head.into_bytes();
        out.extend_from_slice(&body);
        let paused = *state.paused_until.lock().unwrap();
        if let Some(until) = paused {
            tokio::time::sleep_until(until).await;
        }
        if stream.write_all(&out).await.is_err() || close_after {
            return;
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Whatever",
    }
}

/// A port with nothing listening on it.
/// What most tests start from: a server of their own and a folder for the run, the
/// tests that time runs taken one at a time.
pub struct Local {
    pub server: TestServer,
    pub dir: tempfile::TempDir,
    // Dropped last: the next test starts once this one's server is gone.
    _serial: MutexGuard<'static, ()>,
}

impl Local {
    pub fn start() -> Self {
        let serial = serial();
        Self { server: TestServer::start(), dir: tempfile::tempdir().unwrap(), _serial: serial }
    }

    /// A closed-loop run of `paths` in `steps` against the server, into the folder.
    pub fn config(&self, paths: &[&str], steps: Vec<Step>) -> RunConfig {
        config(self.dir.path(), self.server.port(), paths, steps)
    }
}

pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}

pub fn get(path: &str) -> RequestSpec {
    RequestSpec::get(path)
}

pub fn steps(spec: &[(u32, u64)]) -> Vec<Step> {
    spec.iter()
        .map(|&(users, ms)| Step::hold(users, Duration::from_millis(ms)))
        .collect()
}

pub fn config(dir: &Path, port: u16, paths: &[&str], steps: Vec<Step>) -> RunConfig {
    RunConfig {
        run_id: "test-run_1.a".into(),
        host: "127.0.0.1".into(),
        port,
        requests: paths.iter().map(|p| get(p)).collect(),
        steps,
        think: Think::Constant(Duration::ZERO),
        open: None,
        seed: 1,
        timeout: Duration::from_secs(2),
        records_path: Some(dir.join("requests.arrows")),
        threads: 2,
        tag: true,
        protocol: Default::default(),
        flows: Vec::new(),
        hook: None,
        req_id_base: 0,
        start_at_us: None,
        tag_levels: Vec::new(),
    }
}

pub fn run(config: &RunConfig) -> RunSummary {
    run_with_stop(config, Arc::new(AtomicBool::new(false)))
}

pub fn run_with_stop(config: &RunConfig, stop: Arc<AtomicBool>) -> RunSummary {
    let summary = pinchpoint_engine::run(config, stop, Arc::new(Live::default())).expect("run");
    assert_eq!(summary.records_error, None, "records file written completely");
    summary
}

/// One request record as read back from Parquet.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub req_id: u64,
    pub step: u32,
    pub users: u32,
    pub endpoint: u16,
    pub start_us: i64,
    pub intended_us: i64,
    pub latency_us: i64,
    pub service_us: i64,
    pub status: u16,
    pub error: Option<String>,
    pub bytes: u64,
    /// (user_index, iteration) of the flow walk that sent it.
    pub walk: Option<(u32, u64)>,
}

/// Converts the run's records file to Parquet and reads every row back.
pub fn parquet_rows(config: &RunConfig) -> Vec<Row> {
    let src = config.records_path.as_ref().expect("a run with records");
    let dst: PathBuf = src.with_extension("parquet");
    let n = pinchpoint_engine::records_to_parquet(src, &dst).expect("to parquet");
    let rows = read_parquet(&dst);
    assert_eq!(rows.len() as u64, n, "rows returned by records_to_parquet");
    rows
}

pub fn read_parquet(path: &Path) -> Vec<Row> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("open parquet"))
        .expect("parquet metadata")
        .build()
        .expect("parquet reader");
    let mut rows = Vec::new();
    for batch in reader {
        let b = batch.expect("parquet batch");
        let col = |name: &str| b.column_by_name(name).unwrap_or_else(|| panic!("column {name}")).clone();
        let req_id = col("req_id");
        let step = col("step");
        let users = col("users");
        let endpoint = col("endpoint");
        let start = col("start_us");
        let intended = col("intended_us");
        let latency = col("latency_us");
        let service = col("service_us");
        let status = col("status");
        let error = col("error");
        let bytes = col("bytes");
        let user = col("user_index");
        let iteration = col("iteration");
        for i in 0..b.num_rows() {
            let (user, iteration) = (user.as_primitive::<UInt32Type>(), iteration.as_primitive::<UInt64Type>());
            let error = error.as_string::<i32>();
            rows.push(Row {
                req_id: req_id.as_primitive::<UInt64Type>().value(i),
                step: step.as_primitive::<UInt32Type>().value(i),
                users: users.as_primitive::<UInt32Type>().value(i),
                endpoint: endpoint.as_primitive::<UInt16Type>().value(i),
                start_us: start.as_primitive::<Int64Type>().value(i),
                intended_us: intended.as_primitive::<Int64Type>().value(i),
                latency_us: latency.as_primitive::<Int64Type>().value(i),
                service_us: service.as_primitive::<Int64Type>().value(i),
                status: status.as_primitive::<UInt16Type>().value(i),
                error: error.is_valid(i).then(|| error.value(i).to_string()),
                bytes: bytes.as_primitive::<UInt64Type>().value(i),
                walk: user.is_valid(i).then(|| (user.value(i), iteration.value(i))),
            });
        }
    }
    rows
}

pub fn count_by<K: std::hash::Hash + Eq, T>(items: &[T], key: impl Fn(&T) -> K) -> HashMap<K, u64> {
    let mut m = HashMap::new();
    for it in items {
        *m.entry(key(it)).or_insert(0) += 1;
    }
    m
}

/// A listener on 127.0.0.1 whose accept queue is full: the kernel drops further SYNs,
/// so a connect to it hangs (as to a server whose backlog overflows). Keep the
/// returned values alive for as long as the port must stay that way.
pub fn full_backlog() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.listen(0).unwrap().into_std().unwrap()
    });
    let addr = listener.local_addr().unwrap();
    let mut fill = Vec::new();
    // Connect until one does not complete: the queue is then full.
    for _ in 0..16 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            Ok(s) => fill.push(s),
            Err(_) => return (listener, fill),
        }
    }
    panic!("the accept queue of a listen(0) socket never filled");
}

/// An open-loop run of `phases` against `paths`, with at most `max_in_flight` in flight.
pub fn open_config(
    dir: &Path,
    port: u16,
    paths: &[&str],
    phases: Vec<pinchpoint_engine::Phase>,
    arrivals: pinchpoint_engine::Arrivals,
    max_in_flight: u32,
) -> RunConfig {
    let mut cfg = config(dir, port, paths, vec![]);
    cfg.open = Some(pinchpoint_engine::OpenLoop { phases, arrivals, max_in_flight });
    cfg
}

/// The value at quantile `q` (0..=1) of `values`, sorted in place.
pub fn quantile(values: &mut [i64], q: f64) -> i64 {
    assert!(!values.is_empty());
    values.sort_unstable();
    values[((values.len() - 1) as f64 * q).round() as usize]
}
