//! A user's WebSocket step (`flow/ws.rs`): the upgrade on a connection of its own, each
//! message in turn, then the close. Each message is a record (its time: from its frame
//! sent to the next frame received); the step's record is the connection's whole life,
//! as a proxy logs it, and carries the tag the upgrade request did.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::sync::watch;

use crate::client::http1::{self, Tag, TagLevel};
use crate::client::ws::{self, Upgrade};
use crate::config::flow::OnFail;
use crate::drive::closed::{unpack_step, Shared, CONNECT_BACKOFF};
use crate::drive::walk::{on_fail, push, render_into, Next, State};
use crate::flow::extract::Answer;
use crate::flow::judge::{judge, Values};
use crate::flow::template::Into;
use crate::flow::ws::Message;
use crate::flow::{Flow, Step};
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// The status a WebSocket's records carry: the upgrade's.
const SWITCHED: u16 = 101;

/// The step's connection, its messages and its close; the messages stop when the run
/// ends (`done`). The connection is the request in flight meanwhile: a run abandoned
/// during it counts it abandoned, and keeps the messages that ended.
pub(super) async fn send_ws_step(
    shared: &Shared,
    (flow, f): (&Flow, usize),
    step: &Step,
    messages: &[Message],
    index: u32,
    st: &mut State,
    done: &watch::Receiver<bool>,
) -> Next {
    let Some(conn) = new_record(shared, step.endpoint, index, st) else { return Next::Stop };
    st.out.begin();
    let next = connection(shared, (flow, f), step, messages, index, st, done, conn).await;
    st.out.end();
    next
}

#[allow(clippy::too_many_arguments)]
async fn connection(
    shared: &Shared,
    (flow, f): (&Flow, usize),
    step: &Step,
    messages: &[Message],
    index: u32,
    st: &mut State,
    done: &watch::Receiver<bool>,
    mut conn: Record,
) -> Next {
    let started = Instant::now();
    let mut prepared = step.base.clone();
    if let Err(why) = render_into(step, &flow.vars, &st.vars[f], &st.jar, false, shared.timeout, &mut prepared) {
        note(ErrorClass::Capture, || format!("{}: {why}", step.name));
        conn.error = Some(ErrorClass::Capture);
        push(st, conn);
        tokio::time::sleep(CONNECT_BACKOFF).await;
        return Next::Restart;
    }
    let key = tokio_tungstenite::tungstenite::handshake::client::generate_key();
    ws::upgrade_headers(&key, &mut prepared.headers);
    let tag = Tag { run_id: &shared.run_id, trace_half: shared.trace_half, level: TagLevel::Users(conn.users), req_id: conn.req_id };
    let mut request = Vec::new();
    http1::build(&prepared, &shared.target.host, shared.tag.then_some(&tag), &mut request);
    let timeout = prepared.timeout;
    let opened = tokio::time::timeout(timeout, ws::open(&shared.target, &request, &key, timeout)).await;
    let mut socket = match opened {
        Ok(Ok(Upgrade::Open(socket))) => socket,
        Ok(Ok(Upgrade::Refused(status, why))) => {
            note(ErrorClass::Check, || format!("{}: {why}", step.name));
            conn.status = status;
            return end(st, conn, started, Some(ErrorClass::Check), on_fail(step));
        }
        Ok(Err(class)) => {
            let next = end(st, conn, started, Some(class), on_fail(step));
            tokio::time::sleep(CONNECT_BACKOFF).await;
            return next;
        }
        Err(_) => {
            note(ErrorClass::Timeout, || format!("{}: the upgrade was not answered within {timeout:?}", step.name));
            return end(st, conn, started, Some(ErrorClass::Timeout), on_fail(step));
        }
    };
    conn.status = SWITCHED;
    let mut next = Next::Go;
    let mut broken = None;
    for m in messages {
        if *done.borrow() {
            next = Next::Stop;
            break;
        }
        let Some(mut record) = new_record(shared, m.endpoint, index, st) else {
            next = Next::Stop;
            break;
        };
        let sent = Instant::now();
        let exchanged = tokio::time::timeout(timeout, exchange(m, &mut socket, &st.vars[f], &mut st.scratch)).await;
        record.latency_us = sent.elapsed().as_micros() as i64;
        record.service_us = record.latency_us;
        record.status = SWITCHED;
        match exchanged {
            Ok(Ok((bytes, received))) => {
                record.bytes = bytes;
                if let Some(payload) = received {
                    st.kept.clear();
                    st.kept.want_body = true;
                    st.kept.keep_body(&payload);
                    let mut answer = Answer::new(SWITCHED, &st.kept).with_latency(record.latency_us);
                    let values = Values { vars: &mut st.vars[f], lists: &mut st.lists[f], jar: &st.jar, rng: &mut st.rng, scratch: &mut st.scratch };
                    let keep_going = step.on_fail == OnFail::Continue;
                    record.error = judge(flow, &m.name, &m.checks, &m.captures, keep_going, &mut answer, values, None);
                    if record.error.is_some() {
                        next = on_fail(step);
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
            next = if m.captures.is_empty() && m.checks.is_empty() { Next::Go } else { on_fail(step) };
        }
        push(st, record);
        if broken.is_some() || !matches!(next, Next::Go) {
            break;
        }
    }
    if broken.is_none() {
        let _ = tokio::time::timeout(timeout, ws::close(&mut socket)).await;
    }
    end(st, conn, started, broken, next)
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

/// A record for `endpoint` at the run's current step; None once the user is parked.
fn new_record(shared: &Shared, endpoint: u16, index: u32, st: &State) -> Option<Record> {
    let (step, active) = unpack_step(shared.current.load(Ordering::Acquire));
    if index >= active {
        return None;
    }
    let (epoch, epoch_us) = st.epoch;
    let start_us = epoch_us + epoch.elapsed().as_micros() as i64;
    Some(Record {
        req_id: shared.next_req_id.fetch_add(1, Ordering::Relaxed),
        step,
        users: shared.tagged_users(step, active),
        endpoint,
        start_us,
        intended_us: start_us,
        latency_us: 0,
        service_us: 0,
        status: 0,
        error: None,
        bytes: 0,
    })
}

/// Ends the connection's record: its whole life from `started`.
fn end(st: &mut State, mut conn: Record, started: Instant, error: Option<ErrorClass>, next: Next) -> Next {
    conn.latency_us = started.elapsed().as_micros() as i64;
    conn.service_us = conn.latency_us;
    conn.error = error;
    push(st, conn);
    next
}
