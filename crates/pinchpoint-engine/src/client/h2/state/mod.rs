//! A connection's state, shared by its holders under one lock: the socket, the bytes
//! read and to write, the HPACK decoder, the streams; the frames are taken apart in
//! `frames.rs`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::ReadBuf;

mod frames;

use super::frame::{self, Head, HEADER_LEN, MAX_FRAME};
use super::hpack::Decoder;
use super::stream::{Stream, CONN_WINDOW, STREAM_WINDOW};
use crate::client::h2conn::Io;
use crate::client::h2::Failure;
use crate::outcome::{classify_io, note, ErrorClass};

/// The largest header list a response may send, as HTTP/1.1's head.
pub const MAX_HEADER_LIST: u32 = 64 << 10;
/// The read buffer's first size: a few small answers. It grows (to at most room for
/// two whole frames: a frame's start is moved to the front before a read) only when a
/// frame does not fit, so that many connections of small answers stay small.
const FIRST_READ_BUF: usize = 4096;
const READ_BUF: usize = 2 * (HEADER_LEN + MAX_FRAME);
/// The least room a read is given.
const MIN_READ: usize = 1024;
/// HTTP/2's initial windows, before the server's SETTINGS say otherwise.
const DEFAULT_WINDOW: i64 = 65_535;

/// What the server's SETTINGS allow us.
pub struct Peer {
    pub max_streams: usize,
    pub max_frame: usize,
    pub window: i64,
}

/// A connection error: the class each open stream fails with. Protocol errors are
/// noted by name as they are found.
type Fatal = ErrorClass;

pub struct State {
    io: Box<dyn Io>,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    pub wbuf: Vec<u8>,
    wsent: usize,
    decoder: Decoder,
    /// A header block gathered across CONTINUATION frames, and its stream and END_STREAM.
    block: Vec<u8>,
    continuing: Option<(u32, bool)>,
    got_settings: bool,
    pub streams: Vec<Stream>,
    pub next_id: u32,
    pub peer: Peer,
    /// What the server lets us send on the connection.
    send_window: i64,
    /// Bytes received on the connection and not yet given back.
    unacked: u32,
    /// The stream whose task reads the socket (its waker is the socket's).
    pub reader: Option<u32>,
    /// The stream whose task holds the lock and is reading now: not woken for its outcome.
    driving: Option<u32>,
    /// Streams woken for their outcome that have not taken it: the last to take one
    /// writes what their holders queued meanwhile, in one write.
    pub woken: usize,
    /// The last stream of the server's GOAWAY.
    pub away: Option<u32>,
    pub dead: Option<ErrorClass>,
    /// Holders waiting for the server to allow another stream.
    pub room: Vec<Waker>,
}

fn ctx(waker: &Waker) -> Context<'_> {
    Context::from_waker(waker)
}

impl State {
    /// A new connection on `io`: its preface, our SETTINGS and the connection window
    /// queued to write.
    pub fn new(io: Box<dyn Io>) -> Self {
        let mut wbuf = Vec::with_capacity(1024);
        wbuf.extend_from_slice(frame::PREFACE);
        frame::push_settings(
            &mut wbuf,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
            ],
        );
        frame::push_window_update(&mut wbuf, 0, CONN_WINDOW - DEFAULT_WINDOW as u32);
        State {
            io,
            rbuf: vec![0; FIRST_READ_BUF],
            rstart: 0,
            rend: 0,
            wbuf,
            wsent: 0,
            decoder: Decoder::new(),
            block: Vec::new(),
            continuing: None,
            got_settings: false,
            streams: Vec::new(),
            next_id: 1,
            peer: Peer { max_streams: usize::MAX, max_frame: MAX_FRAME, window: DEFAULT_WINDOW },
            send_window: DEFAULT_WINDOW,
            unacked: 0,
            reader: None,
            driving: None,
            woken: 0,
            away: None,
            dead: None,
            room: Vec::new(),
        }
    }

    pub fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Streams the server counts as open: sent and not yet answered.
    pub fn open_streams(&self) -> usize {
        self.streams.iter().filter(|s| s.outcome.is_none()).count()
    }

    /// Writes what is queued; Ok(false) while the socket takes no more (`waker` is
    /// woken when it does).
    pub fn flush(&mut self, waker: &Waker) -> io::Result<bool> {
        let mut cx = ctx(waker);
        while self.wsent < self.wbuf.len() {
            match Pin::new(&mut *self.io).poll_write(&mut cx, &self.wbuf[self.wsent..]) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => self.wsent += n,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(false),
            }
        }
        if self.wsent > 0 {
            self.wbuf.clear();
            self.wsent = 0;
            return match Pin::new(&mut *self.io).poll_flush(&mut cx) {
                Poll::Ready(r) => r.map(|()| true),
                Poll::Pending => Ok(false),
            };
        }
        Ok(true)
    }

    /// Flushes unless woken holders will (see `woken`); an error ends the connection.
    pub fn flush_unless_woken(&mut self, waker: &Waker) {
        if self.woken == 0 && self.wbuf.len() > self.wsent {
            if let Err(e) = self.flush(waker) {
                self.kill(classify_io(&e));
            }
        }
    }

    /// The last woken holder has taken its outcome: what they queued is written by the
    /// next to send a request, or by a waiting holder woken for it (after this one's
    /// task yields, by when it has usually sent its next request with the rest).
    pub fn owe_flush(&mut self) {
        if self.woken > 0 || self.wbuf.len() == self.wsent {
            return;
        }
        let reader = self.reader.and_then(|id| self.find(id));
        let waiting = reader.or_else(|| self.streams.iter().position(|s| s.is_waiting()));
        match waiting.and_then(|i| self.streams[i].waker.as_ref()) {
            Some(w) => w.wake_by_ref(),
            None => self.flush_unless_woken(Waker::noop()),
        }
    }

    /// Reads the socket for the reader's stream, taking apart what comes, until the
    /// socket has nothing more or no stream waits. `me` is the stream whose task runs.
    pub fn pump(&mut self, me: u32, waker: &Waker) {
        self.driving = Some(me);
        // The reader's waker: ours, or that of the stream we hand the reading to.
        let mut other: Option<Waker> = None;
        loop {
            if let Err(class) = self.process() {
                self.kill(class);
            }
            let w = other.as_ref().unwrap_or(waker);
            self.flush_unless_woken(w);
            if self.dead.is_some() {
                break;
            }
            let reading = self.reader.and_then(|id| self.find(id));
            if reading.is_none_or(|i| self.streams[i].outcome.is_some()) {
                match self.streams.iter().find(|s| s.is_waiting() && s.id != me) {
                    Some(s) => {
                        self.reader = Some(s.id);
                        other = s.waker.clone();
                    }
                    None => {
                        self.reader = None;
                        break;
                    }
                }
            }
            let w = other.as_ref().unwrap_or(waker);
            match self.read(w) {
                Poll::Pending => break,
                Poll::Ready(Ok(0)) => {
                    note(ErrorClass::Closed, || "the server closed the HTTP/2 connection".into());
                    self.kill(ErrorClass::Closed);
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => self.kill(classify_io(&e)),
            }
        }
        self.driving = None;
    }

    /// Takes in what an idle connection has been sent (a GOAWAY, the close), without
    /// waiting: nobody reads it while no stream is open.
    pub fn probe(&mut self) {
        if self.dead.is_some() || self.reader.is_some() || self.open_streams() > 0 {
            return;
        }
        loop {
            match self.read(Waker::noop()) {
                Poll::Pending => break,
                Poll::Ready(Ok(0)) => self.kill(ErrorClass::Closed),
                Poll::Ready(Ok(_)) => {
                    if let Err(class) = self.process() {
                        self.kill(class);
                    }
                }
                Poll::Ready(Err(e)) => self.kill(classify_io(&e)),
            }
            if self.dead.is_some() {
                return;
            }
        }
        self.flush_unless_woken(Waker::noop());
    }

    fn read(&mut self, waker: &Waker) -> Poll<io::Result<usize>> {
        if self.rstart == self.rend {
            (self.rstart, self.rend) = (0, 0);
        } else if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            (self.rstart, self.rend) = (0, self.rend - self.rstart);
        }
        let pending = if self.rend >= HEADER_LEN { HEADER_LEN + Head::parse(&self.rbuf).len } else { HEADER_LEN };
        let want = pending.max(self.rend + MIN_READ);
        if self.rbuf.len() < want {
            self.rbuf.resize(want.next_power_of_two().min(READ_BUF), 0);
        }
        let mut rb = ReadBuf::new(&mut self.rbuf[self.rend..]);
        match Pin::new(&mut *self.io).poll_read(&mut ctx(waker), &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                self.rend += n;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Takes apart every whole frame read.
    fn process(&mut self) -> Result<(), Fatal> {
        let buf = std::mem::take(&mut self.rbuf);
        let result = self.frames(&buf);
        self.rbuf = buf;
        result
    }

    fn frames(&mut self, buf: &[u8]) -> Result<(), Fatal> {
        while self.rend - self.rstart >= HEADER_LEN {
            let head = Head::parse(&buf[self.rstart..]);
            if head.len > MAX_FRAME {
                let what = if self.got_settings { "a frame larger than SETTINGS_MAX_FRAME_SIZE" } else { "an answer that is not HTTP/2" };
                return Err(self.protocol(frame::FRAME_SIZE_ERROR, what));
            }
            if self.rend - self.rstart < HEADER_LEN + head.len {
                break;
            }
            let at = self.rstart + HEADER_LEN;
            self.rstart = at + head.len;
            self.frame(head, &buf[at..at + head.len])?;
        }
        Ok(())
    }

    /// Sends what the windows let go of the bodies still to send.
    fn send_bodies(&mut self) {
        for i in 0..self.streams.len() {
            if !self.streams[i].body.is_empty() {
                let body = std::mem::take(&mut self.streams[i].body);
                let sent = self.send_body(i, &body);
                self.streams[i].body = body;
                self.streams[i].body.drain(..sent);
            }
        }
    }

    /// Queues as much of `body` as the windows allow on stream `i`, in DATA frames, the
    /// last with END_STREAM: the bytes queued.
    pub fn send_body(&mut self, i: usize, body: &[u8]) -> usize {
        let mut sent = 0;
        while sent < body.len() {
            let s = &mut self.streams[i];
            let room = s.send_window.min(self.send_window).min(self.peer.max_frame as i64);
            if room <= 0 {
                break;
            }
            let n = (body.len() - sent).min(room as usize);
            let end = sent + n == body.len();
            frame::push_head(&mut self.wbuf, n, frame::DATA, if end { frame::END_STREAM } else { 0 }, s.id);
            self.wbuf.extend_from_slice(&body[sent..sent + n]);
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            sent += n;
        }
        sent
    }

    /// Stream `i` has its outcome: its holder is woken for it (unless it is the one
    /// reading).
    pub fn finish(&mut self, i: usize, outcome: Result<crate::client::http1::Response, Failure>) {
        let driving = self.driving;
        let s = &mut self.streams[i];
        if s.outcome.is_some() {
            return;
        }
        s.outcome = Some(outcome);
        s.body = Vec::new();
        if Some(s.id) != driving {
            if let Some(w) = &s.waker {
                w.wake_by_ref();
                s.woken = true;
                self.woken += 1;
            }
        }
    }

    /// A stream the server got wrong: reset, and failed as `io`.
    fn stream_error(&mut self, i: usize, what: &'static str) {
        note(ErrorClass::Io, || format!("HTTP/2: {what}"));
        frame::push_rst(&mut self.wbuf, self.streams[i].id, frame::PROTOCOL_ERROR);
        self.finish(i, Err(Failure::Failed(ErrorClass::Io)));
    }

    /// A connection error of ours to tell the server: noted, GOAWAY queued, `io`.
    fn protocol(&mut self, code: u32, what: &'static str) -> Fatal {
        note(ErrorClass::Io, || format!("HTTP/2 {}: {what}", frame::error_name(code)));
        frame::push_goaway(&mut self.wbuf, 0, code);
        ErrorClass::Io
    }

    /// The connection is over: every stream still open fails with `class`.
    pub fn kill(&mut self, class: ErrorClass) {
        if self.dead.is_some() {
            return;
        }
        self.dead = Some(class);
        self.reader = None;
        let _ = self.flush(Waker::noop());
        for i in 0..self.streams.len() {
            self.finish(i, Err(Failure::Failed(class)));
        }
        self.wake_room();
    }

    pub fn wake_room(&mut self) {
        for w in self.room.drain(..) {
            w.wake();
        }
    }
}
