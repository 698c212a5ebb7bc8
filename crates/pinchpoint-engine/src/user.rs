//! A closed-loop user: send, wait for the whole response, think, repeat, on one
//! keep-alive connection that it reopens after an error.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender as RecordTx;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper::header::HeaderValue;
use tokio::sync::watch;

use crate::http::{self, Prepared, Sender};
use crate::outcome::ErrorClass;
use crate::record::Record;

const BATCH_ROWS: usize = 128;
const BATCH_EVERY: Duration = Duration::from_millis(100);
/// After a failed connect a user pauses this long, so a dead target is not hammered
/// in a tight loop that only fills the records file.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
const PARKED_POLL: Duration = Duration::from_millis(20);

/// What every user reads: the target, the plan's requests and the current step.
pub struct Shared {
    pub addr: SocketAddr,
    pub host: HeaderValue,
    pub run_id: String,
    pub tag: bool,
    pub requests: Vec<Prepared>,
    pub think_time: Duration,
    pub timeout: Duration,
    /// The current step and its users, read together: `step << 32 | users`. Two
    /// separate atomics let a user read the users of one step and the index of the
    /// next, and tag a request with the wrong load level.
    pub current: AtomicU64,
    pub next_req_id: AtomicU64,
}

pub fn pack_step(step: u32, users: u32) -> u64 {
    (u64::from(step) << 32) | u64::from(users)
}

pub fn unpack_step(current: u64) -> (u32, u32) {
    ((current >> 32) as u32, current as u32)
}

pub fn unix_us(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

pub async fn run_user(
    index: u32,
    shared: std::sync::Arc<Shared>,
    tx: RecordTx<Vec<Record>>,
    mut done: watch::Receiver<bool>,
) {
    let mut conn: Option<Sender> = None;
    let mut batch: Vec<Record> = Vec::with_capacity(BATCH_ROWS);
    let mut last_flush = Instant::now();
    let mut uri = String::with_capacity(256);
    let mut turn = index as usize;
    while !*done.borrow() {
        let (step, users) = unpack_step(shared.current.load(Ordering::Acquire));
        if index >= users {
            flush(&tx, &mut batch, &mut last_flush);
            pause(&mut done, PARKED_POLL).await;
            continue;
        }
        let prepared = &shared.requests[turn % shared.requests.len()];
        turn += 1;
        let req_id = shared.next_req_id.fetch_add(1, Ordering::Relaxed);
        uri.clear();
        uri.push_str(&prepared.path);
        let tag = if shared.tag {
            let _ = write!(
                uri,
                "{}pp_run={}&pp_users={}&pp_req={}",
                prepared.query_sep, shared.run_id, users, req_id
            );
            HeaderValue::from_str(&format!("run={}; users={}; req={}", shared.run_id, users, req_id)).ok()
        } else {
            None
        };

        let sent_at = SystemTime::now();
        let started = Instant::now();
        // Whether the request's time ran out while connecting: connect's own timeout is
        // the same length, so which of the two timers fires first is a matter of chance.
        let mut connecting = false;
        let outcome = tokio::time::timeout(shared.timeout, async {
            if conn.as_ref().is_none_or(|c| c.is_closed()) {
                connecting = true;
                conn = Some(http::connect(shared.addr, shared.timeout).await?);
                connecting = false;
            }
            let req = http::build(prepared, &uri, &shared.host, tag)?;
            http::exchange(conn.as_mut().expect("connected above"), req).await
        })
        .await
        .unwrap_or(Err(if connecting { ErrorClass::ConnectTimeout } else { ErrorClass::Timeout }));
        let latency_us = started.elapsed().as_micros() as i64;

        let mut record = Record {
            req_id,
            step,
            users,
            start_us: unix_us(sent_at),
            latency_us,
            status: 0,
            error: None,
            bytes: 0,
        };
        let mut backoff = Duration::ZERO;
        match outcome {
            Ok(resp) => {
                record.status = resp.status;
                record.bytes = resp.bytes;
                if resp.closing {
                    conn = None;
                }
            }
            Err(class) => {
                record.error = Some(class);
                conn = None;
                if matches!(
                    class,
                    ErrorClass::ConnectRefused | ErrorClass::ConnectError | ErrorClass::ConnectTimeout
                ) {
                    backoff = CONNECT_BACKOFF;
                }
            }
        }
        batch.push(record);
        if batch.len() >= BATCH_ROWS || last_flush.elapsed() >= BATCH_EVERY {
            flush(&tx, &mut batch, &mut last_flush);
        }
        let wait = shared.think_time.max(backoff);
        if !wait.is_zero() {
            pause(&mut done, wait).await;
        }
    }
    flush(&tx, &mut batch, &mut last_flush);
}

fn flush(tx: &RecordTx<Vec<Record>>, batch: &mut Vec<Record>, last_flush: &mut Instant) {
    if !batch.is_empty() {
        let full = std::mem::replace(batch, Vec::with_capacity(BATCH_ROWS));
        let _ = tx.send(full);
    }
    *last_flush = Instant::now();
}

/// Sleeps, but wakes at once when the run ends.
async fn pause(done: &mut watch::Receiver<bool>, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = done.changed() => {}
    }
}
