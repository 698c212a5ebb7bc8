//! A WebSocket session (`flow/ws.rs`), as a closed-loop user's step (`walk_ws.rs`) or an
//! open-loop arrival (`open.rs`) runs it: the upgrade on a connection of its own, each
//! message in turn, then the close. Each message is a record (its time: from its frame
//! sent to the next frame received); the connection's record spans its whole life, as a
//! proxy logs it, and carries the tag the upgrade request did.

use std::time::{Duration, Instant};

use crate::client::ws::{self, Upgrade};
use crate::client::Target;
use crate::flow::template::Into;
use crate::flow::ws::Message;
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// The status a WebSocket's records carry: the upgrade's.
pub const SWITCHED: u16 = 101;

/// What a session reads and writes beside its connection.
pub trait Side {
    /// A record for `endpoint` starting now; None once the run has no more of this
    /// session (it ended, or parked the user).
    fn record(&mut self, endpoint: u16) -> Option<Record>;
    /// The values the messages' templates read.
    fn vars(&self) -> &[String];
    /// The class of the first check or capture of `m` that failed on `payload`.
    fn judge(&mut self, m: &Message, payload: &[u8], latency_us: i64) -> Option<ErrorClass>;
    fn push(&mut self, record: Record);
}

/// How a session ended.
pub enum Ended {
    /// Every message went as its checks and captures wanted.
    Go,
    /// A check or capture failed, or the connection broke (`broke`).
    Failed { broke: bool },
    /// The run ended during it.
    Stopped,
}

/// The session on `target`: `request` is its upgrade with `key`, `name` its name in
/// reasons; `conn` its record, whose life counts from `since` (an open-loop arrival's
/// intended time) and its service from now.
#[allow(clippy::too_many_arguments)]
pub async fn session(
    side: &mut impl Side,
    target: &Target,
    (request, key): (&[u8], &str),
    timeout: Duration,
    name: &str,
    messages: &[Message],
    mut conn: Record,
    since: Instant,
) -> Ended {
    let started = Instant::now();
    let opened = tokio::time::timeout(timeout, ws::open(target, request, key, timeout)).await;
    let mut socket = match opened {
        Ok(Ok(Upgrade::Open(socket))) => socket,
        Ok(Ok(Upgrade::Refused(status, why))) => {
            note(ErrorClass::Check, || format!("{name}: {why}"));
            conn.status = status;
            return end(side, conn, (since, started), Some(ErrorClass::Check), Ended::Failed { broke: false });
        }
        Ok(Err(class)) => return end(side, conn, (since, started), Some(class), Ended::Failed { broke: true }),
        Err(_) => {
            note(ErrorClass::Timeout, || format!("{name}: the upgrade was not answered within {timeout:?}"));
            return end(side, conn, (since, started), Some(ErrorClass::Timeout), Ended::Failed { broke: true });
        }
    };
    conn.status = SWITCHED;
    let mut ended = Ended::Go;
    let mut broken = None;
    let mut scratch = Vec::new();
    for m in messages {
        let Some(mut record) = side.record(m.endpoint) else {
            ended = Ended::Stopped;
            break;
        };
        let sent = Instant::now();
        let exchanged = tokio::time::timeout(timeout, exchange(m, &mut socket, side.vars(), &mut scratch)).await;
        record.latency_us = sent.elapsed().as_micros() as i64;
        record.service_us = record.latency_us;
        record.status = SWITCHED;
        match exchanged {
            Ok(Ok((bytes, received))) => {
                record.bytes = bytes;
                if let Some(payload) = received {
                    record.error = side.judge(m, &payload, record.latency_us);
                    if record.error.is_some() {
                        ended = Ended::Failed { broke: false };
                    }
                }
            }
            Ok(Err(class)) => broken = Some(class),
            Err(_) => {
                note(ErrorClass::Timeout, || format!("{}: no frame within {timeout:?}", m.name));
                broken = Some(ErrorClass::Timeout);
            }
        }
        if let Some(class) = broken {
            record.error = Some(class);
            ended = Ended::Failed { broke: true };
        }
        side.push(record);
        if !matches!(ended, Ended::Go) {
            break;
        }
    }
    if broken.is_none() {
        let _ = tokio::time::timeout(timeout, ws::close(&mut socket)).await;
    }
    end(side, conn, (since, started), broken, ended)
}

/// Sends the message's frame (if it has one) and receives the next (if it waits for
/// one): the bytes sent and received, and the payload received.
async fn exchange(m: &Message, socket: &mut ws::Socket, vars: &[String], scratch: &mut Vec<u8>) -> Result<(u64, Option<Vec<u8>>), ErrorClass> {
    let mut bytes = 0;
    if let Some(send) = &m.send {
        scratch.clear();
        let _ = send.render(vars, Into::Raw, scratch);
        ws::send(socket, scratch, m.binary).await?;
        bytes += scratch.len() as u64;
    }
    if !m.receive {
        return Ok((bytes, None));
    }
    let payload = ws::receive(socket).await?;
    bytes += payload.len() as u64;
    Ok((bytes, Some(payload)))
}

/// Ends the connection's record: its life from `since`, its service from `started`.
fn end(side: &mut impl Side, mut conn: Record, (since, started): (Instant, Instant), error: Option<ErrorClass>, ended: Ended) -> Ended {
    let now = Instant::now();
    conn.latency_us = now.saturating_duration_since(since).as_micros() as i64;
    conn.service_us = now.saturating_duration_since(started).as_micros() as i64;
    conn.error = error;
    side.push(conn);
    ended
}
