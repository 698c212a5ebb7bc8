use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use super::response::{parse_head, ChunkState, Chunked, Framing, Head};
use super::*;
use crate::config::RequestSpec;
use crate::outcome::ErrorClass;

fn spec(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> RequestSpec {
    RequestSpec {
        method: method.into(),
        path: path.into(),
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        body: body.to_vec(),
        weight: 1,
        timeout: None,
        ws: false,
        messages: vec![],
        grpc: None,
    }
}

fn built(s: &RequestSpec, tag: Option<&Tag>) -> String {
    let mut out = Vec::new();
    build(&Prepared::new(s, Duration::from_secs(1)).unwrap(), "h:1", tag, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn requests_are_laid_out_as_http_1_1() {
    assert_eq!(
        built(&spec("GET", "/a", &[], b""), None),
        "GET /a HTTP/1.1\r\nHost: h:1\r\n\r\n"
    );
    let tag = Tag::new("r-1", TagLevel::Users(7), 1234567890);
    assert_eq!(
        built(&spec("GET", "/a?x=1", &[("Accept", "*/*")], b""), Some(&tag)),
        format!(
            "GET /a?x=1&pp_run=r-1&pp_users=7&pp_req=1234567890 HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n\
             X-Pinchpoint: run=r-1; users=7; req=1234567890\r\n\
             traceparent: 00-{:016x}00000000499602d2-00000000932c05a5-01\r\n\
             baggage: pp.run=r-1,pp.users=7\r\n\r\n",
            trace_run_half("r-1")
        )
    );
    assert_eq!(
        built(
            &spec("POST", "/p", &[("host", "other"), ("X", "1"), ("x", "2")], b"{}"),
            None
        ),
        "POST /p HTTP/1.1\r\nhost: other\r\nx: 2\r\nContent-Length: 2\r\n\r\n{}"
    );
    assert_eq!(
        built(&spec("POST", "/p", &[], b""), None),
        "POST /p HTTP/1.1\r\nHost: h:1\r\nContent-Length: 0\r\n\r\n"
    );
    let tag = Tag::new("r", TagLevel::Users(0), 0);
    assert!(built(&spec("GET", "/", &[], b""), Some(&tag)).starts_with("GET /?pp_run=r&pp_users=0&pp_req=0 HTTP"));
    let tag = Tag::new("r", TagLevel::Rate("7.5"), 3);
    assert_eq!(
        built(&spec("GET", "/", &[], b""), Some(&tag)),
        format!(
            "GET /?pp_run=r&pp_rate=7.5&pp_req=3 HTTP/1.1\r\nHost: h:1\r\nX-Pinchpoint: run=r; rate=7.5; req=3\r\n\
             traceparent: 00-{:016x}0000000000000003-0000000000000007-01\r\nbaggage: pp.run=r,pp.rate=7.5\r\n\r\n",
            trace_run_half("r")
        )
    );
}

fn prepared(s: &RequestSpec) -> Result<Prepared, String> {
    Prepared::new(s, Duration::from_secs(1))
}

#[test]
fn bad_requests_are_refused_before_the_run() {
    assert!(prepared(&spec("GE T", "/", &[], b"")).is_err());
    assert!(prepared(&spec("GET", "/a b", &[], b"")).is_err());
    assert!(prepared(&spec("GET", "/", &[("Bad Name", "1")], b"")).is_err());
    assert!(prepared(&spec("GET", "/", &[("X", "a\r\nY: b")], b"")).is_err());
}

fn head(raw: &str, head_request: bool) -> Head {
    let (n, h) = parse_head(raw.as_bytes(), head_request)
        .unwrap()
        .expect("complete head");
    assert_eq!(n, raw.len());
    h
}

#[test]
fn response_framing() {
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false);
    assert_eq!(
        h,
        Head {
            status: 200,
            framing: Framing::Length(12),
            closing: false
        }
    );
    let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true);
    assert_eq!(h.framing, Framing::Empty);
    let h = head(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\ncontent-length: 3\r\n\r\n",
        false,
    );
    assert_eq!(h.framing, Framing::Chunked);
    let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false);
    assert_eq!((h.framing, h.closing), (Framing::ToClose, true));
    let h = head("HTTP/1.1 200 OK\r\n\r\n", false);
    assert_eq!((h.framing, h.closing), (Framing::ToClose, true));
    let h = head("HTTP/1.1 204 No Content\r\n\r\n", false);
    assert_eq!((h.framing, h.closing), (Framing::Empty, false));
    let h = head("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false);
    assert_eq!(h.framing, Framing::Empty);
    let h = head(
        "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(h.closing);
    let h = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert!(h.closing);
    assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Len", false), Ok(None));
    assert_eq!(
        parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false),
        Err(ErrorClass::Io)
    );
    assert_eq!(
        parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        ),
        Err(ErrorClass::Io)
    );
    assert_eq!(parse_head(b"garbage\r\n\r\n", false), Err(ErrorClass::Io));
}

#[test]
fn chunked_bodies_are_counted_across_any_split() {
    let body = b"4;ext=1\r\nRust\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n";
    for split in 0..body.len() {
        let mut c = Chunked::new();
        let mut pending = body[..split].to_vec();
        let used = c.feed(&pending).unwrap();
        pending.drain(..used);
        pending.extend_from_slice(&body[split..]);
        let used = c.feed(&pending).unwrap();
        assert_eq!(
            (c.state, c.bytes, used),
            (ChunkState::Done, 20, pending.len()),
            "split {split}"
        );
    }
    assert_eq!(Chunked::new().feed(b"zz\r\n"), Err(ErrorClass::Io));
    assert_eq!(Chunked::new().feed(b"2\r\nabXY"), Err(ErrorClass::Io));
}

// Over a real socket: a server on 127.0.0.1 that answers each request it reads with
// the next canned response, written in pieces of `piece` bytes.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

enum After {
    KeepOpen,
    Close,
    Reset,
}

async fn read_request(stream: &mut TcpStream, pending: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            return true;
        }
        let mut chunk = [0u8; 1024];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn serve(responses: Vec<Vec<u8>>, piece: usize, after: After) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut pending = Vec::new();
        for response in responses {
            if !read_request(&mut stream, &mut pending).await {
                return;
            }
            for part in response.chunks(piece.max(1)) {
                stream.write_all(part).await.unwrap();
                stream.flush().await.unwrap();
                if piece < response.len() {
                    tokio::task::yield_now().await;
                }
            }
        }
        match after {
            After::KeepOpen => std::future::pending::<()>().await,
            After::Close => drop(stream),
            After::Reset => {
                stream.set_zero_linger().unwrap();
                drop(stream);
            }
        }
    });
    addr
}

fn request(method: &str) -> Vec<u8> {
    let mut out = Vec::new();
    build(&prepared(&spec(method, "/", &[], b"")).unwrap(), "h", None, &mut out);
    out
}

/// Sends one GET (or HEAD) per element of `head_requests` on one connection.
async fn exchanges(
    responses: Vec<Vec<u8>>,
    piece: usize,
    after: After,
    head_requests: &[bool],
) -> Vec<Result<(u16, u64, bool), ErrorClass>> {
    let addr = serve(responses, piece, after).await;
    let mut conn = connect(addr, Duration::from_secs(2)).await.unwrap();
    let mut got = Vec::new();
    for &head in head_requests {
        let req = request(if head { "HEAD" } else { "GET" });
        let r = tokio::time::timeout(Duration::from_secs(5), exchange(&mut conn, &req, head))
            .await
            .expect("the exchange ends");
        got.push(r.map(|r| (r.status, r.bytes, r.closing)));
    }
    got
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn with_length(status: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nServer: test\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

#[test]
fn keep_alive_responses_in_any_pieces() {
    let rt = rt();
    let big = vec![b'x'; 300_000];
    for piece in [1, 3, 7, 1000, usize::MAX] {
        let responses = vec![
            with_length("200 OK", b"hello"),
            with_length("404 Not Found", b""),
            if piece < 1000 { with_length("200 OK", &big[..20_000]) } else { with_length("200 OK", &big) },
            b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n".to_vec(),
            [
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
                b"5;a=b\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n",
            ]
            .concat(),
            with_length("503 Service Unavailable", b"busy"),
        ];
        let big_len = if piece < 1000 { 20_000 } else { 300_000 };
        let heads = [false, false, false, false, false, true, false, false];
        let got = rt.block_on(exchanges(responses, piece, After::KeepOpen, &heads));
        assert_eq!(
            got,
            vec![
                Ok((200, 5, false)),
                Ok((404, 0, false)),
                Ok((200, big_len, false)),
                Ok((204, 0, false)),
                Ok((200, 2, false)),
                Ok((200, 0, false)),
                Ok((200, 31, false)),
                Ok((503, 4, false)),
            ],
            "pieces of {piece} bytes"
        );
    }
}

#[test]
fn a_head_larger_than_the_buffer_is_read_and_a_huge_one_refused() {
    let rt = rt();
    let filler = "a".repeat(100);
    let mut head = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..90 {
        head.push_str(&format!("X-Filler-{i}: {filler}\r\n"));
    }
    let mut ok = head.clone().into_bytes();
    ok.extend_from_slice(b"Content-Length: 3\r\n\r\nabc");
    let got = rt.block_on(exchanges(vec![ok.clone(), ok], 4096, After::KeepOpen, &[false, false]));
    assert_eq!(got, vec![Ok((200, 3, false)), Ok((200, 3, false))]);

    let mut huge = String::from("HTTP/1.1 200 OK\r\n");
    huge.push_str(&format!("X-Big: {}\r\n", "b".repeat(MAX_HEAD)));
    huge.push_str("Content-Length: 0\r\n\r\n");
    let got = rt.block_on(exchanges(vec![huge.into_bytes()], 8192, After::KeepOpen, &[false]));
    assert_eq!(got, vec![Err(ErrorClass::Io)]);
}

/// A user thinking frees its read buffer; the next exchange on the connection takes a
/// new one as large as the last response needed (512 bytes to 4 KiB), grown again for
/// a long head or a larger body, and reads the responses as before.
#[test]
fn a_shed_buffer_is_taken_again_by_the_next_exchange() {
    let rt = rt();
    let mut long = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..90 {
        long.push_str(&format!("X-Filler-{i}: {}\r\n", "a".repeat(100)));
    }
    long.push_str("Content-Length: 3\r\n\r\nabc");
    let big = vec![b'x'; 100_000];
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n".to_vec();
    let chunked = [chunked, vec![b'y'; 1000], b"\r\n0\r\n\r\n".to_vec()].concat();
    let hello = with_length("200 OK", b"hello");
    let responses = vec![long.into_bytes(), hello.clone(), hello.clone(), with_length("200 OK", &big), hello, chunked];
    let (got, capacities) = rt.block_on(async {
        let addr = serve(responses, usize::MAX, After::KeepOpen).await;
        let mut conn = connect(addr, Duration::from_secs(2)).await.unwrap();
        let (mut got, mut capacities) = (Vec::new(), Vec::new());
        for _ in 0..6 {
            let r = exchange(&mut conn, &request("GET"), false).await;
            got.push(r.map(|r| (r.status, r.bytes, r.closing)));
            capacities.push(conn.buffer_capacity());
            conn.shed_buffer();
            capacities.push(conn.buffer_capacity());
        }
        (got, capacities)
    });
    let five = Ok((200, 5, false));
    assert_eq!(got, vec![Ok((200, 3, false)), five, five, Ok((200, 100_000, false)), five, Ok((200, 1000, false))]);
    // The 9 KiB head doubled the buffer twice; the exchange after it starts at 4 KiB,
    // the one after a small response at 512 bytes, grown by a larger body (to 4 KiB
    // at most, 1 KiB for the chunked body of 1,000 bytes).
    assert_eq!(capacities, vec![16_384, 0, 4096, 0, 512, 0, 4096, 0, 4096, 0, 1024, 0]);
}

#[test]
fn the_end_of_the_connection() {
    let rt = rt();
    // Body up to the close.
    let got = rt.block_on(exchanges(
        vec![b"HTTP/1.1 200 OK\r\n\r\nuntil the end".to_vec()],
        4,
        After::Close,
        &[false],
    ));
    assert_eq!(got, vec![Ok((200, 13, true))]);
    // The server says it closes; HTTP/1.0 closes unless told otherwise.
    let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec();
    let got = rt.block_on(exchanges(vec![close], 1000, After::Close, &[false]));
    assert_eq!(got, vec![Ok((200, 2, true))]);
    let got = rt.block_on(exchanges(
        vec![b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()],
        1000,
        After::Close,
        &[false],
    ));
    assert_eq!(got, vec![Ok((200, 2, true))]);
    // More bytes than the response holds: the connection is not reused.
    let extra = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK".to_vec();
    let got = rt.block_on(exchanges(vec![extra], 1000, After::KeepOpen, &[false]));
    assert_eq!(got, vec![Ok((200, 2, true))]);
    // Cut short: before any byte, in the head, in a sized body, in a chunked body.
    let got = rt.block_on(exchanges(
        vec![with_length("200 OK", b"ok")],
        1000,
        After::Close,
        &[false, false],
    ));
    assert_eq!(got, vec![Ok((200, 2, false)), Err(ErrorClass::Closed)]);
    for cut in [
        b"HTTP/1.1 200 OK\r\nContent-Le".to_vec(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab".to_vec(),
    ] {
        let got = rt.block_on(exchanges(vec![cut.clone()], 1000, After::Close, &[false]));
        assert_eq!(got, vec![Err(ErrorClass::Closed)], "{}", String::from_utf8_lossy(&cut));
        let got = rt.block_on(exchanges(vec![cut.clone()], 1000, After::Reset, &[false]));
        assert_eq!(got, vec![Err(ErrorClass::Reset)], "{}", String::from_utf8_lossy(&cut));
    }
    let got = rt.block_on(exchanges(
        vec![b"SPDY/9 nonsense\r\n\r\n".to_vec()],
        1000,
        After::KeepOpen,
        &[false],
    ));
    assert_eq!(got, vec![Err(ErrorClass::Io)]);
}

#[test]
fn an_idle_connection_closed_by_the_server_is_not_reused() {
    rt().block_on(async {
        let addr = serve(vec![with_length("200 OK", b"ok")], 1000, After::Close).await;
        let mut conn = connect(addr, Duration::from_secs(2)).await.unwrap();
        let r = exchange(&mut conn, &request("GET"), false).await.unwrap();
        assert_eq!((r.status, r.bytes, r.closing), (200, 2, false));
        let mut reusable = true;
        for _ in 0..200 {
            // The close arrives through the runtime's event loop.
            tokio::time::sleep(Duration::from_millis(5)).await;
            reusable = conn.is_reusable();
            if !reusable {
                break;
            }
        }
        assert!(!reusable, "the server's close is seen before the next request");
    });
    rt().block_on(async {
        let addr = serve(
            vec![with_length("200 OK", b"ok"), with_length("200 OK", b"ok")],
            1000,
            After::KeepOpen,
        )
        .await;
        let mut conn = connect(addr, Duration::from_secs(2)).await.unwrap();
        exchange(&mut conn, &request("GET"), false).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(conn.is_reusable(), "an open idle connection is reused");
        exchange(&mut conn, &request("GET"), false).await.unwrap();
    });
}

#[test]
fn trace_ids_name_their_run_and_request_and_the_plan_can_set_its_own() {
    // FNV-1a 64 of "r-1" with the top bit set (computed independently in the Python tests).
    assert_eq!(trace_run_half("r-1") >> 63, 1);
    assert_ne!(trace_run_half("r-1"), trace_run_half("r-2"));
    assert_eq!(span_id(0), 1);
    let tag = Tag::new("r", TagLevel::Users(2), 9);
    let own = built(&spec("GET", "/", &[("traceparent", "00-1-2-00"), ("Baggage", "k=v")], b""), Some(&tag));
    assert!(own.contains("traceparent: 00-1-2-00\r\n") && own.contains("Baggage: k=v\r\n"));
    assert_eq!(own.matches("traceparent").count(), 1);
    assert_eq!(own.to_ascii_lowercase().matches("baggage").count(), 1);
    assert!(!built(&spec("GET", "/", &[], b""), None).contains("traceparent"));
}
