//! WebSockets in open loop: a request with `ws` opens a session (`ws.rs`) at each
//! arrival, its connection's record counting from the arrival's intended time.

use std::time::Instant;

use crate::client::http1::{Prepared, Tag};
use crate::client::ws::upgrade_request;
use crate::client::{Kept, Target};
use crate::config::RequestSpec;
use crate::drive::ws::{session, Side, SWITCHED};
use crate::flow::extract::Answer;
use crate::flow::judge::check_all;
use crate::flow::ws::Message;
use crate::outcome::ErrorClass;
use crate::record::Record;

/// Each request's messages if it is a WebSocket upgrade.
pub type Sessions = Vec<Option<Vec<Message>>>;

/// Each request's call if it is a gRPC call.
pub type Calls = Vec<Option<crate::flow::grpc::Call>>;

/// Each request's record endpoint, its messages if it is a WebSocket upgrade and its
/// call if it is a gRPC call (whose messages, or streamed answers, take the endpoints
/// after its own). Open-loop requests have no variables.
pub fn sessions(requests: &[RequestSpec]) -> Result<(Vec<u16>, Sessions, Calls), String> {
    let mut endpoint = 0usize;
    let mut endpoints = Vec::with_capacity(requests.len());
    let mut sessions = Vec::with_capacity(requests.len());
    let mut calls = Vec::with_capacity(requests.len());
    for r in requests {
        endpoints.push(u16::try_from(endpoint).map_err(|_| "too many requests and messages".to_string())?);
        endpoint += 1;
        let at = |e: String| format!("request {:?}: {e}", r.path);
        sessions.push(crate::flow::ws::compile(r, &[], &[], &mut endpoint).map_err(at)?);
        calls.push(crate::flow::grpc::compile(r, &mut endpoint).map_err(at)?);
    }
    Ok((endpoints, sessions, calls))
}

/// An arrival that opens a WebSocket: what its session needs of the run.
pub struct Arrival<'a> {
    pub target: &'a Target,
    /// The upgrade request as prepared (without the tag).
    pub request: &'a Prepared,
    pub tag: Option<Tag<'a>>,
    /// The connection's record: its id, step and endpoint; its messages take the ids
    /// after it.
    pub conn: Record,
    pub intended: Instant,
    /// The run's start, and the same moment in unix microseconds.
    pub clock: (Instant, i64),
}

/// Now in unix microseconds, by `clock` (an instant and the same moment in unix µs).
fn unix_now(clock: (Instant, i64)) -> i64 {
    clock.1 + clock.0.elapsed().as_micros() as i64
}

/// A record like `conn`'s for `endpoint` with `req_id`, starting now.
fn record_now(conn: &Record, clock: (Instant, i64), req_id: u64, endpoint: u16) -> Record {
    let now = unix_now(clock);
    Record { req_id, endpoint, start_us: now, intended_us: now, latency_us: 0, service_us: 0, status: 0, error: None, bytes: 0, ..*conn }
}

/// An arrival's side of its session: only checks judge (it captures nothing).
struct Arriving<'a> {
    conn: Record,
    clock: (Instant, i64),
    out: &'a mut Vec<Record>,
    next_id: u64,
}

impl Side for Arriving<'_> {
    fn record(&mut self, endpoint: u16) -> Option<Record> {
        self.next_id += 1;
        Some(record_now(&self.conn, self.clock, self.next_id, endpoint))
    }

    fn vars(&self) -> &[String] {
        &[]
    }

    fn judge(&mut self, m: &Message, payload: &[u8], latency_us: i64) -> Option<ErrorClass> {
        let kept = Kept { head: Vec::new(), body: payload.to_vec(), cut: false, want_body: true };
        let mut answer = Answer::new(SWITCHED, &kept).with_latency(latency_us);
        check_all(&m.name, &m.checks, &mut answer, &[], &mut Vec::new())
    }

    fn push(&mut self, record: Record) {
        self.out.push(record);
    }
}

/// The arrival's session, its records into `out`: the connection's life counts from
/// the intended time, as a request's does.
pub async fn arrive(a: Arrival<'_>, messages: &[Message], out: &mut Vec<Record>) {
    let (request, key) = upgrade_request(a.request, &a.target.host, a.tag.as_ref());
    let conn = Record { start_us: unix_now(a.clock), ..a.conn };
    let name = format!("WS {}", a.request.path);
    let mut side = Arriving { conn: a.conn, clock: a.clock, out, next_id: a.conn.req_id };
    session(&mut side, a.target, (&request, &key), a.request.timeout, &name, messages, conn, a.intended).await;
}
