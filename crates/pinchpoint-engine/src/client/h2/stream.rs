//! A stream of a connection: one request and what has come of its response.

use std::task::Waker;

use crate::client::http1::Response;
use crate::client::h2::Failure;
use crate::client::Kept;

/// A stream's receive window, as our SETTINGS give it, and the connection's (hyper's
/// client's: 2 and 5 MiB, not HTTP/2's 64 KiB, which a large answer would wait on).
pub const STREAM_WINDOW: u32 = 2 << 20;
pub const CONN_WINDOW: u32 = 5 << 20;

pub struct Stream {
    pub id: u32,
    /// The holder's task, woken when the response is complete (or failed).
    pub waker: Option<Waker>,
    /// The final status; 0 until the final head has come.
    pub status: u16,
    pub bytes: u64,
    pub kept: Option<Kept>,
    /// Bytes received and not yet given back by WINDOW_UPDATE.
    pub unacked: u32,
    /// What the server lets us send on the stream.
    pub send_window: i64,
    /// Body bytes the windows have not let go yet.
    pub body: Vec<u8>,
    pub outcome: Option<Result<Response, Failure>>,
    /// Its holder was woken for its outcome and has not taken it yet.
    pub woken: bool,
}

impl Stream {
    pub fn new(id: u32, send_window: i64, keep: Option<bool>) -> Self {
        Stream {
            id,
            waker: None,
            status: 0,
            bytes: 0,
            kept: keep.map(|want_body| Kept { want_body, ..Kept::default() }),
            unacked: 0,
            send_window,
            body: Vec::new(),
            outcome: None,
            woken: false,
        }
    }

    /// Waiting for its response, with a task to wake.
    pub fn is_waiting(&self) -> bool {
        self.outcome.is_none() && self.waker.is_some()
    }

    /// The response so far, complete.
    pub fn response(&self) -> Response {
        Response { status: self.status, bytes: self.bytes, closing: false }
    }
}
