//! HTTP/2 streams on the h2 crate itself, without hyper's client: one task per
//! connection drives it, and a request's stream is opened in the sender's own task, its
//! headers and body queued together so that the connection writes them at once (hyper's
//! client spawns a task per request, two with a body, and hands each to its connection
//! task through a channel).
//!
//! Each holder of a connection (`http2.rs`) has its own [`Sender`], a handle on the
//! connection's streams: one stream at a time.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{Reason, RecvStream};
use http::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::outcome::{classify_io, ErrorClass};

/// A stream's receive window and the connection's (hyper's client's: 2 and 5 MiB, not
/// HTTP/2's 64 KiB, which a large answer would wait on).
const STREAM_WINDOW: u32 = 2 << 20;
const CONN_WINDOW: u32 = 5 << 20;
/// The most a connection buffers of its streams' bodies beyond their windows.
const SEND_BUFFER: usize = 1 << 20;
/// The largest header list an answer may send, as HTTP/1.1's head (h2's own is 16 MiB).
const MAX_HEADER_LIST: u32 = 64 << 10;

/// The byte stream under a connection: TCP or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A request as HTTP/2 sends it: its head (pseudo-headers from its method and URI, its
/// fields), then its body, if it has one.
pub struct Outbound {
    pub head: Request<()>,
    pub body: Bytes,
}

/// A handle on a connection's streams; cloned for each holder.
#[derive(Clone)]
pub struct Sender {
    send: SendRequest<Bytes>,
    /// Set when the connection's task has ended (an error, the server's close).
    closed: Arc<AtomicBool>,
}

impl Sender {
    /// HTTP/2 on `io` (prior knowledge, or TLS whose ALPN said h2): the preface and
    /// settings sent, the connection driven by a task of its own from now on.
    pub async fn handshake(io: Box<dyn Io>) -> Result<Sender, ErrorClass> {
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .max_send_buffer_size(SEND_BUFFER)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false)
            .handshake::<_, Bytes>(io)
            .await
            .map_err(|e| inspect(&e).class)?;
        let closed = Arc::new(AtomicBool::new(false));
        let ended = closed.clone();
        tokio::spawn(async move {
            let _ = connection.await;
            ended.store(true, Ordering::Release);
        });
        Ok(Sender { send, closed })
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends `request` on a stream of its own (once the connection takes another) and
    /// waits for its answer's head; Err says why, and whether it was never sent.
    pub async fn send(&mut self, request: Outbound) -> Result<Response<RecvStream>, Seen> {
        poll_fn(|cx| self.send.poll_ready(cx)).await.map_err(|e| unsent(&e))?;
        let end = request.body.is_empty();
        let (response, mut stream) = self.send.send_request(request.head, end).map_err(|e| unsent(&e))?;
        if !end {
            stream.send_data(request.body, true).map_err(|e| inspect(&e))?;
        }
        response.await.map_err(|e| inspect(&e))
    }
}

/// The next piece of an answer's body, its bytes given back to the server's window.
pub async fn next(body: &mut RecvStream) -> Option<Result<Bytes, h2::Error>> {
    let data = body.data().await?;
    if let Ok(data) = &data {
        let _ = body.flow_control().release_capacity(data.len());
    }
    Some(data)
}

/// What a failed HTTP/2 exchange says about itself.
#[derive(Debug)]
pub struct Seen {
    pub class: ErrorClass,
    /// The connection said GOAWAY (or ended): it takes no new stream.
    pub go_away: bool,
    /// The request was never sent, or never processed: safe to send again.
    pub refused: bool,
    /// A GOAWAY without error (a graceful close).
    pub graceful: bool,
}

/// The error class of a failed HTTP/2 exchange: a stream reset is `reset`, GOAWAY
/// `closed`, I/O errors as on HTTP/1.1. A stream above a GOAWAY's last stream, or
/// refused by the server (REFUSED_STREAM), was not processed (RFC 9113 §8.7).
pub fn inspect(e: &h2::Error) -> Seen {
    let go_away = e.is_go_away();
    let class = if let Some(io) = e.get_io() {
        classify_io(io)
    } else if go_away {
        ErrorClass::Closed
    } else if e.is_reset() {
        ErrorClass::Reset
    } else {
        ErrorClass::Io
    };
    Seen {
        class,
        go_away,
        refused: e.is_remote() && (go_away || e.reason() == Some(Reason::REFUSED_STREAM)),
        graceful: go_away && e.reason() == Some(Reason::NO_ERROR),
    }
}

/// A request the connection would not take: it had ended (a GOAWAY, as nginx sends
/// after `keepalive_requests`, or an error), so the request was never sent. A request
/// h2 finds malformed is an `io` error.
fn unsent(e: &h2::Error) -> Seen {
    let ended = e.is_io() || e.reason().is_some();
    Seen {
        class: if ended { ErrorClass::Closed } else { ErrorClass::Io },
        go_away: ended,
        refused: ended,
        graceful: false,
    }
}
