//! A closed-loop user's gRPC step: the request message rendered with the user's
//! variables and encoded, the call on the user's HTTP/2 connection (`grpc.rs`), its
//! answer decoded to JSON for the step's checks and captures, and what `on_fail` makes
//! of a call that failed.

use std::time::Instant;

use crate::client::http1::{Tag, TagLevel};
use crate::drive::closed::{Shared, CONNECT_BACKOFF};
use crate::drive::grpc::{exchange, keep_answer, settle};
use crate::drive::flow_step::{judge, new_record, on_fail, prepare, push, Next, State};
use crate::flow::grpc::{encode, Call};
use crate::flow::{Flow, Step};
use crate::outcome::{note, ErrorClass};

pub(super) async fn send_grpc_step(shared: &Shared, (flow, f): (&Flow, usize), step: &Step, call: &Call, index: u32, st: &mut State) -> Next {
    let Some(mut record) = new_record(shared, step.endpoint, index, st) else { return Next::Stop };
    let mut prepared = st.prepared.take().unwrap_or_else(|| step.base.clone());
    let made = match prepare(shared, flow, f, step, st, &mut prepared).await {
        Ok(()) => match (&call.fixed, step.hook) {
            (Some(message), false) => Ok(message.clone()),
            _ => encode(&call.method, &prepared.body),
        },
        Err(why) => Err(why),
    };
    let tag = Tag { run_id: &shared.run_id, trace_half: shared.trace_half, level: TagLevel::Users(record.users), req_id: record.req_id };
    let make = |message: &bytes::Bytes| shared.target.grpc_request(&prepared, shared.tag.then_some(&tag), message.clone());
    let request = made.as_ref().map(make);
    let request = match request {
        Ok(Ok(request)) => request,
        failed => {
            let class = match failed {
                Ok(Err(class)) => class,
                Err(why) => {
                    note(ErrorClass::Capture, || format!("{}: {why}", step.name));
                    ErrorClass::Capture
                }
                Ok(Ok(_)) => unreachable!("matched above"),
            };
            record.error = Some(class);
            push(st, record);
            st.prepared = Some(prepared);
            tokio::time::sleep(CONNECT_BACKOFF).await;
            return Next::Restart;
        }
    };
    st.out.begin();
    let (epoch, epoch_us) = st.epoch;
    let sent = Instant::now();
    let again = || make(made.as_ref().expect("the first request was made"));
    let mut outcome = exchange(&shared.target, &mut st.conn, (request, &again), step.reads_body, prepared.timeout).await;
    st.out.end();
    let ended = Instant::now();
    record.start_us = epoch_us + sent.saturating_duration_since(epoch).as_micros() as i64;
    record.intended_us = record.start_us;
    record.latency_us = ended.saturating_duration_since(sent).as_micros() as i64;
    record.service_us = record.latency_us;
    let mut messages = Vec::new();
    let sent_us = record.start_us;
    settle(call, &step.name, &mut outcome, &mut record, (sent, sent_us), &shared.next_req_id, &mut messages);
    let mut next = Next::Go;
    match &outcome {
        Ok(reply) if record.error.is_none() && step.reads_body => match keep_answer(call, reply, &mut st.kept) {
            Ok(()) => {
                let (class, walk) = judge(flow, f, step, reply.http_status, record.latency_us, st);
                record.error = class;
                next = walk;
            }
            Err(why) => {
                note(ErrorClass::GrpcProtocol, || format!("{}: {why}", step.name));
                record.error = Some(ErrorClass::GrpcProtocol);
                next = on_fail(step);
            }
        },
        _ if record.error.is_some() && (!step.captures.is_empty() || !step.checks.is_empty()) => next = on_fail(step),
        _ => {}
    }
    let broke = matches!(outcome, Err(ErrorClass::ConnectRefused | ErrorClass::ConnectError | ErrorClass::ConnectTimeout | ErrorClass::Tls));
    push(st, record);
    for m in messages {
        push(st, m);
    }
    st.prepared = Some(prepared);
    if broke {
        tokio::time::sleep(CONNECT_BACKOFF).await;
    }
    next
}
