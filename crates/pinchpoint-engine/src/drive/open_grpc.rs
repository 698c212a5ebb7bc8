//! gRPC in open loop: a request with `grpc` sends its call (`grpc.rs`) at each arrival
//! on the sender's HTTP/2 connection; the call's latency counts from the arrival's
//! intended time, as a request's does, and each streamed message takes a request id as
//! it comes.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::client::Conn;
use crate::drive::grpc::{exchange, settle};
use crate::drive::open_ws::Arrival;
use crate::flow::grpc::{encode, Call};
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// The arrival's call on `conn`, its records into `out`; streamed messages take their
/// ids from `ids`.
pub async fn arrive(a: Arrival<'_>, call: &Call, conn: &mut Option<Conn>, ids: &AtomicU64, out: &mut Vec<Record>) {
    let name = format!("gRPC {}", a.request.path);
    let mut record = a.conn;
    let message = match &call.fixed {
        Some(message) => Ok(message.clone()),
        None => encode(&call.method, &a.request.body),
    };
    let message = message.map_err(|why| note(ErrorClass::Capture, || format!("{name}: {why}")));
    let make = |message: &bytes::Bytes| a.target.grpc_request(a.request, a.tag.as_ref(), message.clone());
    let request = match &message {
        Ok(message) => make(message),
        Err(()) => Err(ErrorClass::Capture),
    };
    let unix_now = |t: Instant| a.clock.1 + t.saturating_duration_since(a.clock.0).as_micros() as i64;
    let sent = Instant::now();
    record.start_us = unix_now(sent);
    let mut outcome = match request {
        Ok(request) => {
            let again = || make(message.as_ref().expect("the first request was made"));
            exchange(a.target, conn, (request, &again), false, a.request.timeout).await
        }
        Err(class) => Err(class),
    };
    let done = Instant::now();
    record.latency_us = done.saturating_duration_since(a.intended).as_micros() as i64;
    record.service_us = done.saturating_duration_since(sent).as_micros() as i64;
    let mut messages = Vec::new();
    let sent_us = record.start_us;
    settle(call, &name, &mut outcome, &mut record, (sent, sent_us), ids, &mut messages);
    out.push(record);
    out.append(&mut messages);
}
