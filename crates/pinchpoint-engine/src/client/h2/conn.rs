//! A connection shared by its holders, with no task of its own: a holder waiting for
//! its response reads the socket for all of them (one at a time, the reader), takes
//! apart what comes and wakes the holders whose responses are complete; when its own
//! is, it hands the reading to another waiting holder. With one stream per connection
//! a request costs what it does over HTTP/1.1: a write and a read in the holder's task.
//!
//! Writes are coalesced: holders woken by one read queue their next requests, and the
//! last of them writes them all at once (its own with them, as it will usually send
//! one as soon as it has its outcome; else a waiting holder is woken to write them).

use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use super::frame;
use super::state::State;
use super::stream::Stream;
use crate::client::h2conn::Io;
use crate::client::http1::Response;
use crate::client::h2::Failure;
use crate::client::Kept;
use crate::outcome::{classify_io, ErrorClass};

/// A handle on a connection; cloned for each holder.
#[derive(Clone)]
pub struct Client {
    state: Arc<Mutex<State>>,
}

impl Client {
    /// HTTP/2 on `io` (prior knowledge, or TLS whose ALPN said h2): the preface, our
    /// SETTINGS and connection window written. The server's SETTINGS are read with the
    /// first response.
    pub async fn handshake(io: Box<dyn Io>) -> Result<Client, ErrorClass> {
        let mut state = State::new(io);
        poll_fn(|cx| match state.flush(cx.waker()) {
            Ok(true) => Poll::Ready(Ok(())),
            Ok(false) => Poll::Pending,
            Err(e) => Poll::Ready(Err(classify_io(&e))),
        })
        .await?;
        Ok(Client { state: Arc::new(Mutex::new(state)) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection takes no new stream: it ended, or the server said GOAWAY.
    pub fn is_closed(&self) -> bool {
        let mut st = self.lock();
        st.probe();
        st.dead.is_some() || st.away.is_some()
    }

    /// Sends a request (its header block and body) on a stream of its own and waits
    /// for its whole response, keeping its head and body in `keep` if given.
    pub async fn exchange(&self, block: &[u8], body: &[u8], keep: Option<&mut Kept>) -> Result<Response, Failure> {
        let want = keep.as_ref().map(|k| k.want_body);
        let id = poll_fn(|cx| self.submit(cx.waker(), block, body, want)).await?;
        let mut open = Open { client: self, id: Some(id) };
        let (outcome, kept) = poll_fn(|cx| self.drive(cx.waker(), id)).await;
        open.id = None;
        if let (Some(keep), Some(kept)) = (keep, kept) {
            *keep = kept;
        }
        outcome
    }

    /// Queues the request on a new stream once the server allows one; written now
    /// unless woken holders will write it with theirs.
    fn submit(&self, waker: &Waker, block: &[u8], body: &[u8], keep: Option<bool>) -> Poll<Result<u32, Failure>> {
        let mut st = self.lock();
        if st.dead.is_some() || st.away.is_some() || st.next_id > 0x7fff_ffff {
            return Poll::Ready(Err(Failure::Refused));
        }
        if st.open_streams() >= st.peer.max_streams {
            st.room.push(waker.clone());
            return Poll::Pending;
        }
        let id = st.next_id;
        st.next_id += 2;
        let max_frame = st.peer.max_frame;
        frame::push_headers(&mut st.wbuf, id, block, body.is_empty(), max_frame);
        let window = st.peer.window;
        st.streams.push(Stream::new(id, window, keep));
        if !body.is_empty() {
            let i = st.streams.len() - 1;
            let sent = st.send_body(i, body);
            st.streams[i].body.extend_from_slice(&body[sent..]);
        }
        st.flush_unless_woken(waker);
        Poll::Ready(Ok(id))
    }

    /// Waits for stream `id`'s outcome, reading the socket if nobody else is.
    fn drive(&self, waker: &Waker, id: u32) -> Poll<(Result<Response, Failure>, Option<Kept>)> {
        let mut st = self.lock();
        let Some(mut i) = st.find(id) else {
            return Poll::Ready((Err(Failure::Failed(ErrorClass::Io)), None));
        };
        if st.streams[i].outcome.is_none() {
            if !st.streams[i].waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                st.streams[i].waker = Some(waker.clone());
            }
            if st.reader.is_none() && st.dead.is_none() {
                st.reader = Some(id);
            }
            if st.reader == Some(id) {
                st.pump(id, waker);
            } else {
                st.flush_unless_woken(waker);
            }
            i = st.find(id).expect("a stream leaves only when its holder takes its outcome");
            if st.streams[i].outcome.is_none() {
                return Poll::Pending;
            }
        }
        let mut s = st.streams.swap_remove(i);
        if s.woken {
            st.woken -= 1;
            st.owe_flush();
        }
        if let Some(w) = st.room.pop() {
            w.wake();
        }
        let outcome = s.outcome.take().expect("checked above");
        Poll::Ready((outcome, s.kept.take()))
    }
}

/// A stream whose holder has not taken its outcome: if the holder gives up (a
/// timeout), the stream is reset and leaves, and another holder takes the reading.
struct Open<'a> {
    client: &'a Client,
    id: Option<u32>,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut st = self.client.lock();
        let Some(i) = st.find(id) else { return };
        let s = st.streams.swap_remove(i);
        if s.woken {
            st.woken -= 1;
        }
        if s.outcome.is_none() && st.dead.is_none() {
            frame::push_rst(&mut st.wbuf, id, frame::CANCEL);
        }
        if st.reader == Some(id) {
            st.reader = None;
            if let Some(next) = st.streams.iter().find(|s| s.is_waiting()) {
                if let Some(w) = &next.waker {
                    w.wake_by_ref();
                }
            }
        }
        st.flush_unless_woken(Waker::noop());
        if let Some(w) = st.room.pop() {
            w.wake();
        }
    }
}
