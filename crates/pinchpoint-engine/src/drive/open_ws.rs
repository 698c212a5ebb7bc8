//! WebSockets in open loop: a request with `ws` opens a session (`ws.rs`) at each
//! arrival, its connection's record counting from the arrival's intended time.

use std::time::Instant;

use crate::client::http1::{Prepared, Tag};
use crate::client::{Kept, Target};
use crate::config::RequestSpec;
use crate::drive::ws::{session, Side, SWITCHED};
use crate::flow::extract::{self, Answer};
use crate::flow::ws::Message;
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// Each request's messages if it is a WebSocket upgrade.
pub type Sessions = Vec<Option<Vec<Message>>>;

/// Each request's record endpoint and its messages if it is a WebSocket upgrade (whose
/// messages take the endpoints after its own). Open-loop requests have no variables.
pub fn sessions(requests: &[RequestSpec]) -> Result<(Vec<u16>, Sessions), String> {
    let mut endpoint = 0usize;
    let mut endpoints = Vec::with_capacity(requests.len());
    let mut sessions = Vec::with_capacity(requests.len());
    for r in requests {
        endpoints.push(u16::try_from(endpoint).map_err(|_| "too many requests and messages".to_string())?);
        endpoint += 1;
        sessions.push(crate::flow::ws::compile(r, &[], &[], &mut endpoint).map_err(|e| format!("request {:?}: {e}", r.path))?);
    }
    Ok((endpoints, sessions))
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

/// A record like `conn`'s for `endpoint` with `req_id`, starting now.
fn record_now(conn: &Record, clock: (Instant, i64), req_id: u64, endpoint: u16) -> Record {
    let now = clock.1 + clock.0.elapsed().as_micros() as i64;
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
        let mut scratch = Vec::new();
        for check in &m.checks {
            if let Err(why) = extract::check(check, &mut answer, &[], &mut scratch) {
                note(ErrorClass::Check, || format!("{}: {why}", m.name));
                return Some(ErrorClass::Check);
            }
        }
        None
    }

    fn push(&mut self, record: Record) {
        self.out.push(record);
    }
}

/// The arrival's session, its records into `out`: the connection's life counts from
/// the intended time, as a request's does.
pub async fn arrive(a: Arrival<'_>, messages: &[Message], out: &mut Vec<Record>) {
    let mut prepared = a.request.clone();
    let key = tokio_tungstenite::tungstenite::handshake::client::generate_key();
    crate::client::ws::upgrade_headers(&key, &mut prepared.headers);
    let mut request = Vec::new();
    crate::client::http1::build(&prepared, &a.target.host, a.tag.as_ref(), &mut request);
    let mut conn = record_now(&a.conn, a.clock, a.conn.req_id, a.conn.endpoint);
    conn.intended_us = a.conn.intended_us;
    let name = format!("{} {}", prepared.method, a.request.path);
    let mut side = Arriving { conn: a.conn, clock: a.clock, out, next_id: a.conn.req_id };
    session(&mut side, a.target, (&request, &key), prepared.timeout, &name, messages, conn, a.intended).await;
}
