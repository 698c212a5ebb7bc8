//! What every kind of step a flow user sends shares (plain HTTP in `walk.rs`,
//! WebSocket in `walk_ws.rs`, gRPC in `walk_grpc.rs`): the user's state, how a step
//! ended, its request rendered with the user's variables and cookies, its answer judged,
//! and its record kept.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::client::http1::Prepared;
use crate::client::{Conn, Kept, Outgoing};
use crate::config::flow::OnFail;
use crate::config::RequestSpec;
use crate::drive::closed::{flush, unpack_step, Shared, Unsent, BATCH_EVERY, BATCH_ROWS};
use crate::flow::extract::Answer;
use crate::flow::judge::{self, Values};
use crate::flow::jar::Jar;
use crate::flow::template::Into;
use crate::flow::{Flow, Step};
use crate::outcome::ErrorClass;
use crate::record::{Record, Walk};
use crate::rng::Rng;

/// What a user keeps from one request to the next.
pub(super) struct State {
    pub(super) conn: Option<Conn>,
    pub(super) out: Unsent,
    pub(super) last_flush: Instant,
    pub(super) request: Outgoing,
    pub(super) rng: Rng,
    pub(super) jar: Jar,
    pub(super) kept: Kept,
    /// Per flow, the value of each of its variables.
    pub(super) vars: Vec<Vec<String>>,
    /// Per flow, the values of each of its lists.
    pub(super) lists: Vec<Vec<Vec<String>>>,
    pub(super) scratch: Vec<u8>,
    pub(super) epoch: (Instant, i64),
    /// The step's request as last rendered: its buffers are reused, request after request.
    pub(super) prepared: Option<Prepared>,
    /// The walk under way, which its records carry.
    pub(super) walk: Walk,
}

/// How a step ended, for what the walk does next.
pub(super) enum Next {
    Go,
    /// A check or capture failed (or a step got no response to check or capture from)
    /// and the step says `restart`: start a flow afresh.
    Restart,
    /// The user was parked or the run ended.
    Stop,
    /// A check or capture failed and the step says `stop_user`: send nothing more.
    StopUser,
}

/// What the step's `on_fail` makes of a failed check or capture.
pub(super) fn on_fail(step: &Step) -> Next {
    match step.on_fail {
        OnFail::Continue => Next::Go,
        OnFail::Restart => Next::Restart,
        OnFail::StopUser => Next::StopUser,
    }
}

/// The step's request with the user's variables and cookies in place; Err: why not.
fn render(step: &Step, names: &[String], vars: &[String], jar: &Jar, scratch: &mut Vec<u8>) -> Result<RequestSpec, String> {
    let text = |scratch: &mut Vec<u8>| String::from_utf8_lossy(scratch).into_owned();
    scratch.clear();
    step.path.render(vars, Into::Path, scratch).map_err(|i| refused(names, i, "the path"))?;
    let path = text(scratch);
    let mut headers = Vec::with_capacity(step.headers.len() + 1);
    for (name, value) in &step.headers {
        scratch.clear();
        value.render(vars, Into::Header, scratch).map_err(|i| refused(names, i, &format!("header {name}")))?;
        headers.push((name.clone(), text(scratch)));
    }
    if !step.sets_cookie {
        scratch.clear();
        if jar.header_value(&path, scratch) {
            headers.push(("Cookie".to_string(), text(scratch)));
        }
    }
    let mut body = Vec::new();
    let _ = step.body.render(vars, Into::Raw, &mut body);
    Ok(RequestSpec { method: step.method.clone(), path, headers, body, weight: 1, timeout: step.timeout, ws: false, messages: vec![], grpc: None })
}

/// The step's request rendered into `out`; through the hook if it has one.
pub(super) async fn prepare(
    shared: &Shared,
    flow: &Flow,
    f: usize,
    step: &Step,
    st: &mut State,
    out: &mut Prepared,
) -> Result<(), String> {
    if let (true, Some(hook)) = (step.hook, &shared.hook) {
        let spec = render(step, &flow.vars, &st.vars[f], &st.jar, &mut st.scratch)?;
        let vars = flow.vars.iter().cloned().zip(st.vars[f].iter().cloned()).collect();
        let spec = hook.call(step.endpoint, vars, spec).await.map_err(|e| format!("hook: {e}"))?;
        *out = Prepared::new(&spec, shared.timeout)?;
        return Ok(());
    }
    render_into(step, &flow.vars, &st.vars[f], &st.jar, shared.target.is_h2(), shared.timeout, out)
}

/// The step's request with the user's variables and cookies, written into the buffers
/// of `p` (no allocation once they have grown); what rendering does not change comes
/// from the step's checked `base`.
pub(super) fn render_into(
    step: &Step,
    names: &[String],
    vars: &[String],
    jar: &Jar,
    h2: bool,
    timeout: Duration,
    p: &mut Prepared,
) -> Result<(), String> {
    let base = &step.base;
    p.method.clone_from(&base.method);
    let mut path = std::mem::take(&mut p.path).into_bytes();
    path.clear();
    let rendered = step.path.render(vars, Into::Path, &mut path);
    p.path = String::from_utf8(path).map_err(|_| "the path is not UTF-8".to_string())?;
    rendered.map_err(|i| refused(names, i, "the path"))?;
    p.query_sep = if p.path.contains('?') { '&' } else { '?' };
    p.headers.clear();
    p.fields.clear();
    for (name, value) in &step.headers {
        let at = p.headers.len() + name.len() + 2;
        p.headers.extend_from_slice(name.as_bytes());
        p.headers.extend_from_slice(b": ");
        value.render(vars, Into::Header, &mut p.headers).map_err(|i| refused(names, i, &format!("header {name}")))?;
        if h2 {
            p.fields.push((name.clone(), String::from_utf8_lossy(&p.headers[at..]).into_owned()));
        }
        p.headers.extend_from_slice(b"\r\n");
    }
    if !step.sets_cookie {
        let at = p.headers.len();
        p.headers.extend_from_slice(b"Cookie: ");
        if jar.header_value(&p.path, &mut p.headers) {
            if h2 {
                p.fields.push(("cookie".into(), String::from_utf8_lossy(&p.headers[at + 8..]).into_owned()));
            }
            p.headers.extend_from_slice(b"\r\n");
        } else {
            p.headers.truncate(at);
        }
    }
    p.body.clear();
    let _ = step.body.render(vars, if step.grpc.is_some() { Into::Json } else { Into::Raw }, &mut p.body);
    p.length_header.clear();
    if !base.length_header.is_empty() {
        p.length_header.extend_from_slice(format!("Content-Length: {}\r\n", p.body.len()).as_bytes());
    }
    p.has_host = base.has_host;
    p.has_traceparent = base.has_traceparent;
    p.has_baggage = base.has_baggage;
    p.head = base.head;
    p.timeout = step.timeout.unwrap_or(timeout);
    Ok(())
}

/// Why a value cannot go where a template puts it (the value is not quoted: it may be a
/// secret).
fn refused(names: &[String], slot: usize, place: &str) -> String {
    let name = names.get(slot).map_or("?", String::as_str);
    format!("${{{name}}} in {place} holds a CR, LF or NUL: not sent")
}

/// Takes the response's cookies, runs the checks then the captures: the record's error
/// class (the first that failed) and what the walk does next.
pub(super) fn judge(flow: &Flow, f: usize, step: &Step, status: u16, latency_us: i64, st: &mut State) -> (Option<ErrorClass>, Next) {
    let jar = &mut st.jar;
    st.kept.each_header(|name, value| {
        if name.eq_ignore_ascii_case("set-cookie") {
            if let Ok(value) = std::str::from_utf8(value) {
                jar.set_from_header(value);
            }
        }
    });
    let mut answer = Answer::new(status, &st.kept).with_latency(latency_us);
    let values = Values { vars: &mut st.vars[f], lists: &mut st.lists[f], jar: &st.jar, rng: &mut st.rng, scratch: &mut st.scratch };
    let keep_going = step.on_fail == OnFail::Continue;
    let class = judge::judge(flow, &step.name, &step.checks, &step.captures, keep_going, &mut answer, values, Some(status));
    let next = if class.is_some() { on_fail(step) } else { Next::Go };
    (class, next)
}

pub(super) fn push(st: &mut State, record: Record) {
    st.out.batch.push(record);
    let now = Instant::now();
    if st.out.batch.len() >= BATCH_ROWS || now - st.last_flush >= BATCH_EVERY {
        flush(&st.out.tx, &mut st.out.batch, &mut st.last_flush, now);
    }
}

/// A record for `endpoint` at the run's current step; None once the user is parked.
pub(super) fn new_record(shared: &Shared, endpoint: u16, index: u32, st: &State) -> Option<Record> {
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
        walk: Some(st.walk),
    })
}
