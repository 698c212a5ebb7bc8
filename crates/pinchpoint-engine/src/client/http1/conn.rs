//! The connection: connect, write the request, read the response off the socket.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::response::{parse_head, ChunkState, Chunked, Framing, Response};
use crate::client::Kept;
use crate::outcome::{classify_connect, classify_io, note, ErrorClass};

/// Read buffer of a connection; it grows (up to [`MAX_HEAD`]) only for a larger head,
/// and is given back while the connection idles (see [`Conn::shed_buffer`]).
const READ_BUF: usize = 4096;
/// The least a buffer is taken with: enough for a small response whole.
const MIN_READ_BUF: usize = 512;
/// The longest response head (status line and headers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;

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
    /// The size a shed buffer is taken again with (and the first one): the last
    /// response's bytes, rounded up to a power of two, from [`MIN_READ_BUF`] to
    /// [`READ_BUF`]. Users in step all read at once, and 10,000 of them would hold
    /// 40 MB of 4 KiB buffers for responses of 150 bytes.
    want: usize,
}

/// A TCP connection to `addr` with Nagle off, within `timeout`.
pub async fn connect_tcp(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, ErrorClass> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => {
            note(ErrorClass::ConnectTimeout, || format!("no connection to {addr} within {timeout:?}"));
            return Err(ErrorClass::ConnectTimeout);
        }
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
            buf: Vec::new(),
            want: MIN_READ_BUF,
        }
    }

    /// False when the server has closed the connection (or sent bytes nobody asked
    /// for) while it was idle: the next request then goes on a new connection.
    pub fn is_reusable(&mut self) -> bool {
        self.stream.idle_open()
    }

    /// Frees the read buffer until the next exchange: nothing is kept in it between
    /// two, and a user thinking for seconds need not hold 4 KiB (or a head's 64 KiB).
    pub fn shed_buffer(&mut self) {
        self.buf = Vec::new();
    }

    #[cfg(test)]
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }
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

/// Sends one request and reads its whole response. `request` is what [`build`](super::build) wrote;
/// `head_request` says whether it was a HEAD (its response has no body).
pub async fn exchange<S: Stream>(
    conn: &mut Conn<S>,
    request: &[u8],
    head_request: bool,
) -> Result<Response, ErrorClass> {
    exchange_keeping(conn, request, head_request, None).await
}

/// As [`exchange`]; with `keep`, the response's headers and (de-chunked) body are kept
/// there too, for a flow to capture from and check.
pub async fn exchange_keeping<S: Stream>(
    conn: &mut Conn<S>,
    request: &[u8],
    head_request: bool,
    mut keep: Option<&mut Kept>,
) -> Result<Response, ErrorClass> {
    let Conn { stream, buf, want } = conn;
    if buf.is_empty() {
        buf.resize(*want, 0);
    }
    // Bytes read off the socket for this response, for the next buffer's size.
    let mut read = 0usize;
    write_all(stream, request).await.map_err(|e| classify_io(&e))?;
    // Bytes buf[start..filled] are read and not yet used.
    let mut start = 0usize;
    let mut filled = 0usize;
    let head = loop {
        if filled > start {
            let parsed = parse_head(&buf[start..filled], head_request)
                .inspect_err(|&c| note(c, || "the response head does not parse as HTTP/1.1".into()))?;
            if let Some((n, head)) = parsed {
                let at = start;
                start += n;
                if (100..200).contains(&head.status) && head.status != 101 {
                    continue;
                }
                if let Some(kept) = keep.as_deref_mut() {
                    kept.keep_head(&buf[at..start]);
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
                note(ErrorClass::Io, || format!("a response head longer than {MAX_HEAD} bytes"));
                return Err(ErrorClass::Io);
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = read_some(stream, &mut buf[filled..])
            .await
            .map_err(|e| classify_io(&e))?;
        read += n;
        if n == 0 {
            let when = if filled == 0 { "without answering" } else { "in the middle of the response head" };
            return Err(closed(when));
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
            if let Some(kept) = keep.as_deref_mut() {
                kept.keep_body(&buf[start..filled.min(start + len as usize)]);
            }
            let mut left = len.saturating_sub(buffered);
            while left > 0 {
                let n = read_some(stream, buf).await.map_err(|e| classify_io(&e))? as u64;
                if n == 0 {
                    return Err(closed("before the end of the response body"));
                }
                read += n as usize;
                grow_if_filled(buf, n as usize);
                if let Some(kept) = keep.as_deref_mut() {
                    kept.keep_body(&buf[..n.min(left) as usize]);
                }
                closing |= n > left;
                left = left.saturating_sub(n);
            }
            len
        }
        Framing::ToClose => {
            let mut total = buffered;
            if let Some(kept) = keep.as_deref_mut() {
                kept.keep_body(&buf[start..filled]);
            }
            loop {
                let n = read_some(stream, buf).await.map_err(|e| classify_io(&e))?;
                if n == 0 {
                    break total;
                }
                read += n;
                grow_if_filled(buf, n);
                if let Some(kept) = keep.as_deref_mut() {
                    kept.keep_body(&buf[..n]);
                }
                total += n as u64;
            }
        }
        Framing::Chunked => {
            let mut body = Chunked::new();
            loop {
                start += body
                    .feed_into(&buf[start..filled], keep.as_deref_mut())
                    .inspect_err(|&c| note(c, || "a chunked response body that does not parse".into()))?;
                if body.state == ChunkState::Done {
                    closing |= start < filled;
                    break body.bytes;
                }
                buf.copy_within(start..filled, 0);
                filled -= start;
                start = 0;
                if filled == buf.len() {
                    if buf.len() >= READ_BUF {
                        note(ErrorClass::Io, || "a chunk size line longer than the read buffer".into());
                        return Err(ErrorClass::Io);
                    }
                    buf.resize(buf.len() * 2, 0);
                }
                let n = read_some(stream, &mut buf[filled..])
                    .await
                    .map_err(|e| classify_io(&e))?;
                if n == 0 {
                    return Err(closed("before the end of the chunked response body"));
                }
                read += n;
                filled += n;
                if filled == buf.len() && buf.len() < READ_BUF {
                    buf.resize(buf.len() * 2, 0);
                }
            }
        }
    };
    *want = read.next_power_of_two().clamp(MIN_READ_BUF, READ_BUF);
    Ok(Response {
        status: head.status,
        bytes,
        closing,
    })
}

/// Doubles `buf`, up to [`READ_BUF`], after a read of `n` bytes filled it: a body
/// larger than the last response's is then read in fewer system calls. What the
/// buffer held has been used.
fn grow_if_filled(buf: &mut Vec<u8>, n: usize) {
    if n == buf.len() && buf.len() < READ_BUF {
        buf.resize(buf.len() * 2, 0);
    }
}

/// The server closed the connection `when`: noted, and classified `closed`.
fn closed(when: &str) -> ErrorClass {
    note(ErrorClass::Closed, || format!("the server closed the connection {when}"));
    ErrorClass::Closed
}
