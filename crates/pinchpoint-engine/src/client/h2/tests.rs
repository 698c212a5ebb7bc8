//! The client against real nginx (h2c) and against a server of frames written here
//! that sends what nginx does not: CONTINUATION, padded one-byte DATA, PING, a small
//! SETTINGS_MAX_CONCURRENT_STREAMS, and GOAWAY while streams are open.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::frame::{self, Head, HEADER_LEN};
use super::hpack::{self, Decoder};
use super::Client;
use crate::client::http1::{Prepared, Tag, TagLevel};
use crate::client::{Kept, Outgoing, Target};
use crate::config::{HttpVersion, Protocol, RequestSpec};

/// What nginx serves at `/big`: more than a stream's window and the connection's.
fn big() -> Vec<u8> {
    (0..6_000_000u32).map(|i| (i % 251) as u8).collect()
}

fn prepared(headers: &[(&str, String)]) -> Prepared {
    request("GET", "/a", headers, Vec::new())
}

fn request(method: &str, path: &str, headers: &[(&str, String)], body: Vec<u8>) -> Prepared {
    let spec = RequestSpec {
        method: method.into(),
        path: path.into(),
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        body,
        weight: 1,
        timeout: None,
        ws: false,
        messages: vec![],
        grpc: None,
    };
    Prepared::new(&spec, Duration::from_secs(5)).expect("a valid request")
}

fn target(addr: SocketAddr, streams: u32) -> Target {
    let protocol = Protocol { http: HttpVersion::Http2, tls: None, streams_per_connection: streams };
    Target::new(addr, addr.to_string(), "127.0.0.1", &protocol, (false, false)).expect("a target")
}

/// `rounds` requests in turn by each of `users` holders, each kept: (status, bytes, head, body)
/// of every one, or its error.
async fn load(target: &Target, prepared: &Prepared, users: u64, rounds: u64) -> Vec<Result<(u16, u64, String, Vec<u8>), String>> {
    let user = |u: u64| async move {
        let mut conn = None;
        let mut out = Outgoing::default();
        let mut answers = Vec::new();
        for r in 0..rounds {
            if conn.as_mut().is_some_and(|c: &mut crate::client::Conn| !c.is_reusable()) {
                conn = None;
            }
            if conn.is_none() {
                conn = Some(target.connect(Duration::from_secs(5)).await.expect("connects"));
            }
            let tag = Tag::new("run", TagLevel::Users(users as u32), u * 1000 + r);
            target.build(prepared, Some(&tag), &mut out);
            let mut kept = Kept { want_body: true, ..Kept::default() };
            let c = conn.as_mut().expect("connected");
            let answer = target.exchange_keeping(c, &mut out, prepared, Some(&mut kept)).await;
            answers.push(
                answer
                    .map(|a| (a.status, a.bytes, String::from_utf8_lossy(&kept.head).into_owned(), kept.body.clone()))
                    .map_err(|e| format!("{e:?}")),
            );
        }
        answers
    };
    let all = futures_util::future::join_all((0..users).map(user)).await;
    all.into_iter().flatten().collect()
}

/// A server on loopback, each of its connections answered by `serve`.
fn serving<F, Fut>(rt: &tokio::runtime::Runtime, serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bound");
    let addr = listener.local_addr().expect("an address");
    rt.spawn(async move {
        while let Ok((io, _)) = listener.accept().await {
            tokio::spawn(serve(io));
        }
    });
    addr
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// nginx, and the folder of its configuration and logs (removed after it).
struct Nginx(Child, tempfile::TempDir);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nginx(port: u16) -> Nginx {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path().display();
    let user = if is_root() { "user root;" } else { "" };
    let conf = format!(
        "{user}\nmaster_process off;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{ access_log off; client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};\n\
         uwsgi_temp_path {d}; scgi_temp_path {d}; keepalive_requests 25;\n\
         server {{ listen 127.0.0.1:{port} http2;\n\
         location / {{ add_header x-seen $http_x_pinchpoint; return 200 \"ok\"; }}\n\
         location = /big {{ alias {d}/big; default_type application/octet-stream; }}\n\
         location /put/ {{ root {d}; dav_methods PUT; client_max_body_size 1m; }} }} }}\n"
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).expect("written");
    std::fs::write(dir.path().join("big"), big()).expect("written");
    let bin = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("nginx is installed");
    let child = Command::new(bin)
        .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf"), "-e", &format!("{d}/error.log")])
        .spawn()
        .expect("nginx starts");
    let nginx = Nginx(child, dir);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return nginx;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nginx did not listen on {port}");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port()
}

#[test]
fn nginx_answers_every_stream_and_its_goaways_lose_no_request() {
    let port = free_port();
    let _nginx = nginx(port);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let target = target(addr, 10);
    let plan = prepared(&[("Accept", "*/*".into())]);
    let answers = runtime().block_on(load(&target, &plan, 20, 15));
    assert_eq!(answers.len(), 300);
    for (i, a) in answers.iter().enumerate() {
        let (status, _, head, body) = a.as_ref().expect("answered: nginx's GOAWAY after 25 requests refuses none we send");
        assert_eq!((*status, &body[..]), (200, &b"ok"[..]));
        assert!(head.starts_with("HTTP/1.1 200 -\r\n"), "{head}");
        assert!(head.contains("content-length: 2\r\n"), "{head}");
        let (user, round) = (i / 15, i % 15);
        assert!(head.contains(&format!("x-seen: run=run; users=20; req={}\r\n", user * 1000 + round)), "{head}");
    }
}

#[test]
fn nginx_sends_more_than_the_windows_and_takes_a_body_past_its_own() {
    let port = free_port();
    let nginx = nginx(port);
    std::fs::create_dir(nginx.1.path().join("put")).expect("made");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let target = target(addr, 2);
    let download = request("GET", "/big", &[], Vec::new());
    let rt = runtime();
    let within = Duration::from_secs(30);
    let answers = rt.block_on(async { tokio::time::timeout(within, load(&target, &download, 2, 2)).await }).expect("in time");
    for a in answers {
        let (status, bytes, _, body) = a.expect("answered");
        assert_eq!((status, bytes), (200, 6_000_000));
        assert!(body == big()[..crate::client::MAX_KEPT_BODY], "the first 4 MiB kept, in order");
    }
    // nginx's stream window is 64 KiB: the body waits for its WINDOW_UPDATEs, and
    // nginx answers once it has it all (written to a file by PUT).
    let upload = request("PUT", "/put/file", &[], vec![b'u'; 300_000]);
    let answers = rt.block_on(async { tokio::time::timeout(within, load(&target, &upload, 2, 3)).await }).expect("in time");
    assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|(status, ..)| [201, 204].contains(status))), "{answers:?}");
    let put = std::fs::read(nginx.1.path().join("put/file")).expect("the file PUT");
    assert_eq!(put, vec![b'u'; 300_000]);
}

/// What the test server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicU64,
    requests: AtomicU64,
    ping_acks: AtomicU64,
    /// The longest request header value, as the server decoded it.
    longest: AtomicU64,
}

const BODY: &[u8] = b"hello";
/// Streams a connection of the test server answers before its GOAWAY.
const PER_CONNECTION: u64 = 10;

async fn read_frame(io: &mut TcpStream) -> Option<(Head, Vec<u8>)> {
    let mut head = [0u8; HEADER_LEN];
    io.read_exact(&mut head).await.ok()?;
    let head = Head::parse(&head);
    let mut payload = vec![0; head.len];
    io.read_exact(&mut payload).await.ok()?;
    Some((head, payload))
}

/// One connection: SETTINGS allowing 3 streams; each request answered with a PING
/// first, its head in HEADERS and two CONTINUATIONs, its body in padded one-byte DATA;
/// after [`PER_CONNECTION`] requests a GOAWAY naming the last one answered, refusing
/// those sent after it, and the close.
async fn serve(mut io: TcpStream, seen: Arc<Seen>) {
    seen.connections.fetch_add(1, Ordering::Relaxed);
    let mut preface = [0u8; 24];
    if io.read_exact(&mut preface).await.is_err() || preface != frame::PREFACE {
        return;
    }
    let mut out = Vec::new();
    frame::push_settings(&mut out, &[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 3)]);
    io.write_all(&out).await.expect("written");
    let (mut decoder, mut block, mut answered) = (Decoder::new(), Vec::new(), 0u64);
    while let Some((head, payload)) = read_frame(&mut io).await {
        match head.kind {
            frame::PING if head.flags & frame::ACK != 0 => {
                seen.ping_acks.fetch_add(1, Ordering::Relaxed);
            }
            frame::HEADERS | frame::CONTINUATION => {
                block.extend_from_slice(&payload);
                if head.flags & frame::END_HEADERS == 0 {
                    continue;
                }
                decoder
                    .decode(&block, |_, v| {
                        let mut text = Vec::new();
                        v.push_to(&mut text).expect("valid");
                        seen.longest.fetch_max(text.len() as u64, Ordering::Relaxed);
                    })
                    .expect("our request decodes");
                block.clear();
                seen.requests.fetch_add(1, Ordering::Relaxed);
                if answered == PER_CONNECTION {
                    continue;
                }
                answered += 1;
                let mut out = Vec::new();
                frame::push_head(&mut out, 8, frame::PING, 0, 0);
                out.extend_from_slice(b"pingpong");
                let mut fields = Vec::new();
                hpack::push_indexed(&mut fields, 8);
                hpack::push_named(&mut fields, 28, b"5");
                // With indexing: the client's table must follow.
                fields.push(0x40);
                hpack::push_integer(&mut fields, 0, 7, 5);
                fields.extend_from_slice(b"x-big");
                hpack::push_integer(&mut fields, 0, 7, 300);
                fields.extend_from_slice(&[b'v'; 300]);
                fields.push(0x80 | 62);
                let third = fields.len() / 3;
                frame::push_head(&mut out, third, frame::HEADERS, 0, head.stream);
                out.extend_from_slice(&fields[..third]);
                frame::push_head(&mut out, third, frame::CONTINUATION, 0, head.stream);
                out.extend_from_slice(&fields[third..2 * third]);
                frame::push_head(&mut out, fields.len() - 2 * third, frame::CONTINUATION, frame::END_HEADERS, head.stream);
                out.extend_from_slice(&fields[2 * third..]);
                for (i, b) in BODY.iter().enumerate() {
                    let end = if i == BODY.len() - 1 { frame::END_STREAM } else { 0 };
                    frame::push_head(&mut out, 4, frame::DATA, end | frame::PADDED, head.stream);
                    out.extend_from_slice(&[2, *b, 0, 0]);
                }
                if answered == PER_CONNECTION {
                    frame::push_goaway(&mut out, head.stream, frame::NO_ERROR);
                }
                if io.write_all(&out).await.is_err() {
                    return;
                }
            }
            _ => {}
        }
    }
}

#[test]
fn continuation_padding_pings_few_streams_and_goaway_mid_run() {
    let rt = runtime();
    let seen = Arc::new(Seen::default());
    let server_seen = seen.clone();
    let addr = serving(&rt, move |io| serve(io, server_seen.clone()));
    // 20 KB of one header: more than a frame, so our HEADERS needs a CONTINUATION.
    let plan = prepared(&[("x-long", "l".repeat(20_000))]);
    let target = target(addr, 3);
    let answers = rt.block_on(load(&target, &plan, 6, 10));
    assert_eq!(answers.len(), 60);
    for a in &answers {
        let (status, _, head, body) = a.as_ref().expect("answered, after a retry if refused");
        assert_eq!((*status, &body[..]), (200, BODY));
        let big = format!("x-big: {}\r\n", "v".repeat(300));
        assert_eq!(head.matches(&big).count(), 2, "by literal and by its index: {head}");
        assert!(head.starts_with("HTTP/1.1 200 -\r\ncontent-length: 5\r\n"), "{head}");
    }
    let connections = seen.connections.load(Ordering::Relaxed);
    assert!(connections >= 60 / PER_CONNECTION, "a connection per {PER_CONNECTION} answers: {connections}");
    assert!(seen.requests.load(Ordering::Relaxed) > 60, "requests past a GOAWAY were sent again");
    // Each PING is acknowledged with the next write: not the last of a connection left.
    let acks = seen.ping_acks.load(Ordering::Relaxed);
    assert!((60 - connections..=60).contains(&acks), "{acks} PINGs acknowledged");
    assert_eq!(seen.longest.load(Ordering::Relaxed), 20_000);
}

/// Answers each request whose path has `fast` in it with 204 (after 400 ms if it has
/// `later` too), and none other; counts the streams the client resets.
async fn serve_fast_only(mut io: TcpStream, resets: Arc<AtomicU64>) {
    let mut preface = [0u8; 24];
    if io.read_exact(&mut preface).await.is_err() {
        return;
    }
    let mut out = Vec::new();
    frame::push_settings(&mut out, &[]);
    io.write_all(&out).await.expect("written");
    let mut decoder = Decoder::new();
    while let Some((head, payload)) = read_frame(&mut io).await {
        match head.kind {
            frame::RST_STREAM => {
                resets.fetch_add(1, Ordering::Relaxed);
            }
            frame::HEADERS => {
                let mut fast = false;
                decoder
                    .decode(&payload, |n, v| {
                        let mut text = Vec::new();
                        v.push_to(&mut text).expect("valid");
                        fast |= n == b":path" && text.windows(4).any(|w| w == b"fast");
                    })
                    .expect("our request decodes");
                if fast {
                    if payload.windows(5).any(|w| w == b"later") {
                        tokio::time::sleep(Duration::from_millis(400)).await;
                    }
                    let mut out = Vec::new();
                    frame::push_head(&mut out, 1, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, head.stream);
                    out.push(0x80 | 9);
                    io.write_all(&out).await.expect("written");
                }
            }
            _ => {}
        }
    }
}

fn block(path: &str) -> Vec<u8> {
    let mut block = Vec::new();
    hpack::push_indexed(&mut block, 2);
    hpack::push_indexed(&mut block, 6);
    hpack::push_named(&mut block, 1, b"h");
    hpack::push_named(&mut block, 4, path.as_bytes());
    block
}

#[test]
fn a_holder_that_gives_up_resets_its_stream_and_hands_the_reading_on() {
    let rt = runtime();
    let resets = Arc::new(AtomicU64::new(0));
    let server_resets = resets.clone();
    let addr = serving(&rt, move |io| serve_fast_only(io, server_resets.clone()));
    rt.block_on(async {
        let io = TcpStream::connect(addr).await.expect("connects");
        let client = Client::handshake(Box::new(io)).await.expect("a handshake");
        let (slow, later, fast) = (block("/slow"), block("/fast-later"), block("/fast"));
        // The first to wait reads for both; it gives up before the other's answer comes.
        let gives_up = tokio::time::timeout(Duration::from_millis(200), client.exchange(&slow, b"", None));
        // A task of its own: woken only by the connection.
        let other = client.clone();
        let waits = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let started = std::time::Instant::now();
            // Polled again when its timeout fires, it would find its answer then: the
            // answer must come when it does (400 ms), not then.
            let answer = tokio::time::timeout(Duration::from_secs(3), other.exchange(&later, b"", None)).await;
            (answer, started.elapsed())
        });
        assert!(gives_up.await.is_err(), "no answer to /slow");
        let (waited, took) = waits.await.expect("the task ends");
        assert!(took < Duration::from_secs(2), "woken for its answer, not by its timeout: {took:?}");
        let answer = waited.expect("answered after the reader left").expect("a response");
        assert_eq!((answer.status, answer.bytes), (204, 0));
        let again = client.exchange(&fast, b"", None).await.expect("the connection goes on");
        assert_eq!(again.status, 204);
        assert!(!client.is_closed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    });
    assert_eq!(resets.load(Ordering::Relaxed), 1, "the stream given up is reset");
}
