//! One HTTP/1.1 keep-alive connection per user: connect, send, read the whole body,
//! over plain TCP or TLS (any [`Stream`]; `tls.rs` makes the TLS one).
//!
//! A small client of its own rather than hyper's: a closed-loop user has exactly one
//! request in flight on its own connection, so it writes the request bytes and reads
//! the response straight from the socket in its own task. hyper's client runs each
//! connection as a separate task fed through channels, and builds and parses a header
//! map per request; on one core that cost the engine about a third of its requests per
//! CPU-second against wrk (see the README's performance section).
//!
//! Responses are framed as RFC 9112 §6.3 says: none for HEAD, 1xx, 204 and 304; chunked
//! when `Transfer-Encoding` ends in `chunked`; else `Content-Length`; else up to the
//! close. Interim 1xx responses (other than 101) are skipped. Bodies are counted, not
//! kept.

use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::RequestSpec;
use crate::outcome::{classify_connect, classify_io, ErrorClass};

/// Read buffer of a connection; it grows (up to [`MAX_HEAD`]) only for a larger head.
const READ_BUF: usize = 4096;
/// The longest response head (status line and headers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most response headers accepted, as hyper's default.
const MAX_HEADERS: usize = 100;

/// A request of the plan, checked and laid out once before the run.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub method: String,
    /// The path with its own query, ready for the tag to be appended.
    pub path: String,
    pub query_sep: char,
    /// `Name: value\r\n` for each header of the plan (the last value of a repeated name).
    pub headers: Vec<u8>,
    /// The same headers as names and values (for HTTP/2).
    pub fields: Vec<(String, String)>,
    /// The plan sets `Host` itself.
    pub has_host: bool,
    /// `Content-Length: n\r\n`, or empty when no body is announced (a GET without
    /// body) or the plan frames the body itself.
    pub length_header: Vec<u8>,
    pub body: Vec<u8>,
    /// The response to this request has no body whatever its headers say.
    pub head: bool,
    /// The request's own timeout, or the run's.
    pub timeout: Duration,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_header_value(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl Prepared {
    pub fn new(spec: &RequestSpec, default_timeout: Duration) -> Result<Self, String> {
        if !is_token(&spec.method) {
            return Err(format!("bad HTTP method {:?}", spec.method));
        }
        if spec.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("bad request path {:?}", spec.path));
        }
        // As a header map would: one value per name, the last one given.
        let mut kept: Vec<(&str, &str)> = Vec::with_capacity(spec.headers.len());
        for (k, v) in &spec.headers {
            if !is_token(k) {
                return Err(format!("bad header name {k:?}"));
            }
            if !is_header_value(v) {
                return Err(format!("bad value of header {k:?}"));
            }
            kept.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            kept.push((k, v.trim_matches([' ', '\t'])));
        }
        let named = |n: &str| kept.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut headers = Vec::new();
        for (k, v) in &kept {
            headers.extend_from_slice(k.as_bytes());
            headers.extend_from_slice(b": ");
            headers.extend_from_slice(v.as_bytes());
            headers.extend_from_slice(b"\r\n");
        }
        let frames_itself = named("content-length") || named("transfer-encoding");
        let announces_body = !spec.body.is_empty()
            || !matches!(
                spec.method.as_str(),
                "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE" | "CONNECT"
            );
        let length_header = if frames_itself || !announces_body {
            Vec::new()
        } else {
            format!("Content-Length: {}\r\n", spec.body.len()).into_bytes()
        };
        Ok(Self {
            method: spec.method.clone(),
            path: spec.path.clone(),
            query_sep: if spec.path.contains('?') { '&' } else { '?' },
            has_host: named("host"),
            headers,
            fields: kept.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            length_header,
            body: spec.body.clone(),
            head: spec.method == "HEAD",
            timeout: spec.timeout.unwrap_or(default_timeout),
        })
    }
}

/// The load level a request is sent at, as its tag gives it.
#[derive(Clone, Copy, Debug)]
pub enum Level<'a> {
    /// Closed loop: `users=<users of the step>`.
    Users(u32),
    /// Open loop: `rate=<requests per second, as text>`.
    Rate(&'a str),
}

/// The run's identity carried by a request.
#[derive(Clone, Copy, Debug)]
pub struct Tag<'a> {
    pub run_id: &'a str,
    pub level: Level<'a>,
    pub req_id: u64,
}

fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

pub(crate) fn push_tag_values(out: &mut Vec<u8>, first: &[u8], sep: &[u8], tag: &Tag) {
    out.extend_from_slice(first);
    out.extend_from_slice(tag.run_id.as_bytes());
    out.extend_from_slice(sep);
    match tag.level {
        Level::Users(users) => {
            out.extend_from_slice(b"users=");
            push_u64(out, u64::from(users));
        }
        Level::Rate(rate) => {
            out.extend_from_slice(b"rate=");
            out.extend_from_slice(rate.as_bytes());
        }
    }
    out.extend_from_slice(sep);
    out.extend_from_slice(b"req=");
    push_u64(out, tag.req_id);
}

/// Writes the whole request (head and body) into `out`, replacing what it held.
/// `host` is the `Host` header's value, used unless the plan sets its own.
pub fn build(prepared: &Prepared, host: &str, tag: Option<&Tag>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(prepared.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(prepared.path.as_bytes());
    if let Some(tag) = tag {
        out.push(prepared.query_sep as u8);
        push_tag_values(out, b"pp_run=", b"&pp_", tag);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !prepared.has_host {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&prepared.headers);
    if let Some(tag) = tag {
        push_tag_values(out, b"X-Pinchpoint: run=", b"; ", tag);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&prepared.length_header);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&prepared.body);
}

/// A byte stream a connection runs over: plain TCP, or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin {
    /// False when the peer has closed the stream (or sent bytes nobody asked for)
    /// while it was idle. Costs no system call unless the socket became readable.
    fn idle_open(&mut self) -> bool;
}

impl Stream for TcpStream {
    fn idle_open(&mut self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// An open keep-alive connection and its read buffer.
pub struct Conn<S = TcpStream> {
    stream: S,
    buf: Vec<u8>,
}

/// A TCP connection to `addr` with Nagle off, within `timeout`.
pub async fn connect_tcp(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, ErrorClass> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => return Err(ErrorClass::ConnectTimeout),
        Ok(Err(e)) => return Err(classify_connect(&e)),
        Ok(Ok(s)) => s,
    };
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Conn, ErrorClass> {
    Ok(Conn::new(connect_tcp(addr, timeout).await?))
}

impl<S: Stream> Conn<S> {
    pub fn new(stream: S) -> Self {
        Conn {
            stream,
            buf: vec![0; READ_BUF],
        }
    }

    /// False when the server has closed the connection (or sent bytes nobody asked
    /// for) while it was idle: the next request then goes on a new connection.
    pub fn is_reusable(&mut self) -> bool {
        self.stream.idle_open()
    }
}

pub struct Response {
    pub status: u16,
    pub bytes: u64,
    /// The connection cannot carry another request: the server said it closes it,
    /// the body ran to the close, or more bytes came than the response holds.
    pub closing: bool,
}

/// Writes all of `data` and flushes it (a no-op on TCP; TLS may hold encrypted bytes).
async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, data)).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        data = &data[n..];
    }
    poll_fn(|cx| Pin::new(&mut *stream).poll_flush(cx)).await
}

/// Reads what the socket has into `buf`; 0 at the end of the stream.
async fn read_some<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut [u8]) -> io::Result<usize> {
    poll_fn(|cx| {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    ToClose,
}

#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    framing: Framing,
    closing: bool,
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses a response head at the start of `buf`: None if it is not complete yet,
/// else its length and what it says. An interim 1xx head is returned as such.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<(usize, Head)>, ErrorClass> {
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ErrorClass::Io),
    };
    let status = resp.code.unwrap_or(0);
    let mut closing = resp.version == Some(0);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value.trim_ascii())
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(ErrorClass::Io)?;
            if length.is_some_and(|l| l != v) {
                return Err(ErrorClass::Io);
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") && has_token(h.value, "close") {
            closing = true;
        }
    }
    let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if transfer_encoding {
        if chunked {
            Framing::Chunked
        } else {
            Framing::ToClose
        }
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        Framing::ToClose
    };
    if status == 101 || framing == Framing::ToClose {
        closing = true;
    }
    Ok(Some((
        n,
        Head {
            status,
            framing,
            closing,
        },
    )))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Counts the data of a chunked body fed to it in pieces.
#[derive(Debug)]
struct Chunked {
    state: ChunkState,
    bytes: u64,
}

impl Chunked {
    fn new() -> Self {
        Self {
            state: ChunkState::Size,
            bytes: 0,
        }
    }

    /// Consumes what it can of `data`; the rest (an incomplete size or trailer line)
    /// must be fed again with what follows.
    fn feed(&mut self, data: &[u8]) -> Result<usize, ErrorClass> {
        let mut pos = 0;
        loop {
            let rest = &data[pos..];
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        pos += n;
                        self.state = ChunkState::Trailer;
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        pos += n;
                        self.state = ChunkState::Data(size);
                    }
                    Ok(httparse::Status::Partial) => return Ok(pos),
                    Err(_) => return Err(ErrorClass::Io),
                },
                ChunkState::Data(left) => {
                    let take = left.min(rest.len() as u64);
                    pos += take as usize;
                    self.bytes += take;
                    if take < left {
                        self.state = ChunkState::Data(left - take);
                        return Ok(pos);
                    }
                    self.state = ChunkState::DataEnd;
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorClass::Io);
                    }
                    pos += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => match rest.windows(2).position(|w| w == b"\r\n") {
                    None => return Ok(pos),
                    Some(0) => {
                        pos += 2;
                        self.state = ChunkState::Done;
                    }
                    Some(i) => pos += i + 2,
                },
                ChunkState::Done => return Ok(pos),
            }
        }
    }
}

/// Sends one request and reads its whole response. `request` is what [`build`] wrote;
/// `head_request` says whether it was a HEAD (its response has no body).
pub async fn exchange<S: Stream>(
    conn: &mut Conn<S>,
    request: &[u8],
    head_request: bool,
) -> Result<Response, ErrorClass> {
    let Conn { stream, buf } = conn;
    write_all(stream, request).await.map_err(|e| classify_io(&e))?;
    // Bytes buf[start..filled] are read and not yet used.
    let mut start = 0usize;
    let mut filled = 0usize;
    let head = loop {
        if filled > start {
            if let Some((n, head)) = parse_head(&buf[start..filled], head_request)? {
                start += n;
                if (100..200).contains(&head.status) && head.status != 101 {
                    continue;
                }
                break head;
            }
        }
        if start > 0 {
            buf.copy_within(start..filled, 0);
            filled -= start;
            start = 0;
        }
        if filled == buf.len() {
            if buf.len() >= MAX_HEAD {
                return Err(ErrorClass::Io);
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = read_some(stream, &mut buf[filled..])
            .await
            .map_err(|e| classify_io(&e))?;
        if n == 0 {
            return Err(ErrorClass::Closed);
        }
        filled += n;
    };
    let mut closing = head.closing;
    let buffered = (filled - start) as u64;
    let bytes = match head.framing {
        Framing::Empty => {
            closing |= buffered > 0;
            0
        }
        Framing::Length(len) => {
            closing |= buffered > len;
            let mut left = len.saturating_sub(buffered);
            while left > 0 {
                let n = read_some(stream, buf).await.map_err(|e| classify_io(&e))? as u64;
                if n == 0 {
                    return Err(ErrorClass::Closed);
                }
                closing |= n > left;
                left = left.saturating_sub(n);
            }
            len
        }
        Framing::ToClose => {
            let mut total = buffered;
            loop {
                let n = read_some(stream, buf).await.map_err(|e| classify_io(&e))?;
                if n == 0 {
                    break total;
                }
                total += n as u64;
            }
        }
        Framing::Chunked => {
            let mut body = Chunked::new();
            loop {
                start += body.feed(&buf[start..filled])?;
                if body.state == ChunkState::Done {
                    closing |= start < filled;
                    break body.bytes;
                }
                buf.copy_within(start..filled, 0);
                filled -= start;
                start = 0;
                if filled == buf.len() {
                    return Err(ErrorClass::Io);
                }
                let n = read_some(stream, &mut buf[filled..])
                    .await
                    .map_err(|e| classify_io(&e))?;
                if n == 0 {
                    return Err(ErrorClass::Closed);
                }
                filled += n;
            }
        }
    };
    Ok(Response {
        status: head.status,
        bytes,
        closing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> RequestSpec {
        RequestSpec {
            method: method.into(),
            path: path.into(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: body.to_vec(),
            weight: 1,
            timeout: None,
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
        let tag = Tag {
            run_id: "r-1",
            level: Level::Users(7),
            req_id: 1234567890,
        };
        assert_eq!(
            built(&spec("GET", "/a?x=1", &[("Accept", "*/*")], b""), Some(&tag)),
            "GET /a?x=1&pp_run=r-1&pp_users=7&pp_req=1234567890 HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n\
             X-Pinchpoint: run=r-1; users=7; req=1234567890\r\n\r\n"
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
        let tag = Tag {
            run_id: "r",
            level: Level::Users(0),
            req_id: 0,
        };
        assert!(built(&spec("GET", "/", &[], b""), Some(&tag)).starts_with("GET /?pp_run=r&pp_users=0&pp_req=0 HTTP"));
        let tag = Tag {
            run_id: "r",
            level: Level::Rate("7.5"),
            req_id: 3,
        };
        assert_eq!(
            built(&spec("GET", "/", &[], b""), Some(&tag)),
            "GET /?pp_run=r&pp_rate=7.5&pp_req=3 HTTP/1.1\r\nHost: h:1\r\nX-Pinchpoint: run=r; rate=7.5; req=3\r\n\r\n"
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
}
