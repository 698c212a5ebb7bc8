//! A gRPC call as a closed-loop user's step (`walk_grpc.rs`) or an open-loop arrival
//! (`open_grpc.rs`) sends it: on the user's (or sender's) HTTP/2 connection, within
//! the request's timeout. The call's record spans it whole, with the HTTP status and
//! the class of a status other than OK; each message of a server-streaming answer is a
//! record of its own, timed from the message before it (the first from the send).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::client::grpc::{Again, Reply};
use crate::client::h2conn::Outbound;
use crate::client::{Conn, Kept, Target};
use crate::flow::grpc::{decode_into, Call};
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// Sends the call on `conn` (opened first if there is none) and reads its answer;
/// `again` makes the call once more, should its closing connection not have sent it.
pub async fn exchange(
    target: &Target,
    conn: &mut Option<Conn>,
    (request, again): (Outbound, Again<'_>),
    keep: bool,
    timeout: Duration,
) -> Result<Reply, ErrorClass> {
    if conn.as_mut().is_some_and(|c| !c.is_reusable()) {
        *conn = None;
    }
    let mut connecting = false;
    let outcome = tokio::time::timeout(timeout, async {
        if conn.is_none() {
            connecting = true;
            *conn = Some(target.connect(timeout).await?);
            connecting = false;
        }
        target.call(conn.as_mut().expect("connected above"), request, again, keep, timeout).await
    })
    .await
    .unwrap_or(Err(if connecting { ErrorClass::ConnectTimeout } else { ErrorClass::Timeout }));
    if outcome.is_err() {
        *conn = None;
    }
    outcome
}

/// Sets the call's `record` from its outcome (its reasons noted as `name: why`), and
/// puts the record of each streamed message into `out`: the call's, with the next id
/// of `ids`, the message's endpoint, start and time.
pub fn settle(
    call: &Call,
    name: &str,
    outcome: &mut Result<Reply, ErrorClass>,
    record: &mut Record,
    (sent, sent_us): (Instant, i64),
    ids: &AtomicU64,
    out: &mut Vec<Record>,
) {
    let base = *record;
    let reply = match outcome {
        Ok(reply) => reply,
        Err(class) => {
            record.error = Some(*class);
            return;
        }
    };
    record.status = reply.http_status;
    record.bytes = reply.bytes;
    let count = reply.arrived.len();
    if call.message_endpoint.is_none() && reply.code == 0 && reply.broken.is_none() && count != 1 {
        reply.broken = Some(format!("a unary call answered OK with {count} messages"));
    }
    record.error = reply.class();
    if let Some(class) = record.error {
        note(class, || format!("{name}: {}", reply.why()));
    }
    let Some(endpoint) = call.message_endpoint else { return };
    let (mut before, mut before_us) = (sent, sent_us);
    for &(at, length) in &reply.arrived {
        let took = at.saturating_duration_since(before).as_micros() as i64;
        out.push(Record {
            req_id: ids.fetch_add(1, Ordering::Relaxed),
            endpoint,
            start_us: before_us,
            intended_us: before_us,
            latency_us: took,
            service_us: took,
            error: None,
            status: reply.http_status,
            bytes: length as u64 + 5,
            ..base
        });
        before = at;
        before_us += took;
    }
}

/// Keeps what checks and captures read of an answer in `kept`: its headers and
/// trailers, and its message as JSON (a server-streaming call's: an array of them).
pub fn keep_answer(call: &Call, reply: &Reply, kept: &mut Kept) -> Result<(), String> {
    kept.clear();
    kept.want_body = true;
    kept.head.extend_from_slice(&reply.head);
    let output = call.method.output();
    let streaming = call.message_endpoint.is_some();
    if streaming {
        kept.body.push(b'[');
    }
    for (i, payload) in reply.payloads.iter().enumerate() {
        if i > 0 {
            kept.body.push(b',');
        }
        decode_into(&output, payload, &mut kept.body)?;
    }
    if streaming {
        kept.body.push(b']');
    }
    kept.cut = reply.cut;
    Ok(())
}
