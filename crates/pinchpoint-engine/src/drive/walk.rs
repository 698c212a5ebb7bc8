//! A closed-loop user walking flows: pick a flow by weight, send its steps in order
//! (each rendered with the user's variables and cookies), check and capture from each
//! response, think, and start again. A step with `foreach` is sent once per value of its
//! list. A capture that finds nothing (or a step that got no response to capture from)
//! ends the walk unless the step says otherwise: the user starts a flow afresh.

use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender as RecordTx;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use crate::client::http1::{Tag, TagLevel};
use crate::client::{Kept, Outgoing};
use crate::drive::closed::{flush, pause, unix_us, unpack_step, until, Shared, Unsent, CONNECT_BACKOFF, PARKED_POLL};
use crate::drive::flow_step::{judge, on_fail, prepare, push, Next, State};
use crate::drive::walk_grpc::send_grpc_step;
use crate::drive::walk_ws::send_ws_step;
use crate::flow::jar::Jar;
use crate::flow::{Flow, Step, ITERATION_VAR, USER_VAR};
// (The flow language lives in `flow/`; this is the user that walks it.)
use crate::outcome::{note, ErrorClass};
use crate::record::{Record, Walk};
use crate::rng::Rng;

pub async fn run_flow_user(index: u32, shared: Arc<Shared>, tx: RecordTx<Vec<Record>>, mut done: watch::Receiver<bool>) {
    let flows = shared.flows.as_ref().expect("a flow user runs flows");
    let mut st = State {
        conn: None,
        out: Unsent::new(tx, Vec::new(), shared.abandoned.clone(), shared.in_flight.clone()),
        last_flush: Instant::now(),
        request: Outgoing::default(),
        rng: Rng::stream(shared.seed, u64::from(index)),
        jar: Jar::default(),
        kept: Kept::default(),
        vars: flows.flows.iter().map(|f| vec![String::new(); f.vars.len()]).collect(),
        lists: flows.flows.iter().map(|f| vec![Vec::new(); f.lists.len()]).collect(),
        scratch: Vec::new(),
        epoch: (Instant::now(), unix_us(SystemTime::now())),
        prepared: None,
        walk: Walk { user: index, iteration: 0 },
    };
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut turn = index as usize;
    let mut iteration = 0u64;
    while !*done.borrow() {
        let (_, users) = unpack_step(shared.current.load(Ordering::Acquire));
        if index >= users {
            flush(&st.out.tx, &mut st.out.batch, &mut st.last_flush, Instant::now());
            pause(&mut done, PARKED_POLL).await;
            continue;
        }
        let f = flows.cycle[turn % flows.cycle.len()] as usize;
        turn += 1;
        let flow = &flows.flows[f];
        begin_walk(flow, &mut st.vars[f], index, iteration, &mut st.rng);
        st.walk = Walk { user: index, iteration };
        iteration += 1;
        let mut stopped = false;
        'walk: for step in &flow.steps {
            let turns = step.foreach.map_or(1, |list| st.lists[f][list].len());
            for turn in 0..turns {
                if let Some(list) = step.foreach {
                    // A capture of the step itself may have shortened the list.
                    let Some(value) = st.lists[f][list].get(turn).cloned() else { break };
                    if let Some(slot) = flow.lists[list].turn {
                        st.vars[f][slot] = value;
                    }
                }
                let next = match (&step.ws, &step.grpc) {
                    (Some(messages), _) => send_ws_step(&shared, (flow, f), step, messages, index, &mut st, &done).await,
                    (_, Some(call)) => send_grpc_step(&shared, (flow, f), step, call, index, &mut st).await,
                    _ => send_step(&shared, flow, f, step, index, &mut st, timer.as_mut()).await,
                };
                if matches!(next, Next::Stop) || *done.borrow() {
                    break 'walk;
                }
                if matches!(next, Next::StopUser) {
                    stopped = true;
                    break 'walk;
                }
                let think = step.think.unwrap_or(shared.think).sample(&mut st.rng);
                if !think.is_zero() {
                    pause(&mut done, think).await;
                }
                if matches!(next, Next::Restart) {
                    break 'walk;
                }
            }
        }
        if stopped {
            // The user sends nothing more: its records go now, and it waits for the end.
            flush(&st.out.tx, &mut st.out.batch, &mut st.last_flush, Instant::now());
            st.conn = None;
            while !*done.borrow() {
                pause(&mut done, PARKED_POLL).await;
            }
        }
    }
    flush(&st.out.tx, &mut st.out.batch, &mut st.last_flush, Instant::now());
}

/// Sets the built-in variables and the feed's row for a new walk through `flow`.
fn begin_walk(flow: &Flow, vars: &mut [String], user: u32, iteration: u64, rng: &mut Rng) {
    vars[USER_VAR] = user.to_string();
    vars[ITERATION_VAR] = iteration.to_string();
    let Some(feed) = &flow.feed else { return };
    let n = feed.rows.len() as u64;
    let row = match (feed.per_user, feed.random) {
        (true, false) => u64::from(user) % n,
        (false, false) => feed.next.fetch_add(1, Ordering::Relaxed) % n,
        // Per user and random: the same draw on every walk, from the user's own stream.
        (true, true) => Rng::stream(u64::from(user), 0x5eed).next_u64() % n,
        (false, true) => rng.next_u64() % n,
    } as usize;
    for (slot, value) in feed.slots.iter().zip(&feed.rows[row]) {
        vars[*slot].clone_from(value);
    }
}

async fn send_step(
    shared: &Shared,
    flow: &Flow,
    f: usize,
    step: &Step,
    index: u32,
    st: &mut State,
    timer: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Next {
    let (step_no, active) = unpack_step(shared.current.load(Ordering::Acquire));
    if index >= active {
        return Next::Stop;
    }
    let users = shared.tagged_users(step_no, active);
    let req_id = shared.next_req_id.fetch_add(1, Ordering::Relaxed);
    let (epoch, epoch_us) = st.epoch;
    let mut record = Record {
        req_id,
        step: step_no,
        users,
        endpoint: step.endpoint,
        start_us: 0,
        intended_us: 0,
        latency_us: 0,
        service_us: 0,
        status: 0,
        error: None,
        bytes: 0,
        walk: Some(st.walk),
    };
    let started = Instant::now();
    let mut prepared = st.prepared.take().unwrap_or_else(|| step.base.clone());
    match prepare(shared, flow, f, step, st, &mut prepared).await {
        Ok(()) => {}
        Err(why) => {
            st.prepared = Some(prepared);
            note(ErrorClass::Capture, || format!("{}: {why}", step.name));
            record.start_us = epoch_us + (started - epoch).as_micros() as i64;
            record.intended_us = record.start_us;
            record.error = Some(ErrorClass::Capture);
            push(st, record);
            // Nothing was sent: without a pause the user would fail again at once,
            // never yielding its thread (a run that cannot stop, records without end).
            tokio::time::sleep(CONNECT_BACKOFF).await;
            return Next::Restart;
        }
    };
    let tag = Tag { run_id: &shared.run_id, trace_half: shared.trace_half, level: TagLevel::Users(users), req_id };
    shared.target.build(&prepared, shared.tag.then_some(&tag), &mut st.request);
    if st.conn.as_mut().is_some_and(|c| !c.is_reusable()) {
        st.conn = None;
    }
    st.kept.clear();
    st.kept.want_body = step.reads_body;
    let mut connecting = false;
    st.out.begin();
    let started = Instant::now();
    let deadline = (started + prepared.timeout).into();
    let outcome = {
        let (conn, request, kept) = (&mut st.conn, &mut st.request, &mut st.kept);
        until(timer, deadline, async {
            if conn.is_none() {
                connecting = true;
                *conn = Some(shared.target.connect(prepared.timeout).await?);
                connecting = false;
            }
            let c = conn.as_mut().expect("connected above");
            shared.target.exchange_keeping(c, request, &prepared, Some(kept)).await
        })
        .await
        .unwrap_or(Err(if connecting { ErrorClass::ConnectTimeout } else { ErrorClass::Timeout }))
    };
    st.out.end();
    let ended = Instant::now();
    record.start_us = epoch_us + (started - epoch).as_micros() as i64;
    record.intended_us = record.start_us;
    record.latency_us = (ended - started).as_micros() as i64;
    record.service_us = record.latency_us;
    let mut next = Next::Go;
    match outcome {
        Ok(resp) => {
            record.status = resp.status;
            record.bytes = resp.bytes;
            if resp.closing {
                st.conn = None;
            }
            let (class, walk) = judge(flow, f, step, resp.status, record.latency_us, st);
            record.error = class;
            next = walk;
        }
        Err(class) => {
            record.error = Some(class);
            st.conn = None;
            if !step.captures.is_empty() || !step.checks.is_empty() {
                next = on_fail(step);
            }
            if matches!(class, ErrorClass::ConnectRefused | ErrorClass::ConnectError | ErrorClass::ConnectTimeout | ErrorClass::Tls) {
                push(st, record);
                st.prepared = Some(prepared);
                tokio::time::sleep(CONNECT_BACKOFF).await;
                return next;
            }
        }
    }
    push(st, record);
    st.prepared = Some(prepared);
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::flow::{FeedSpec, FlowSpec, FlowStepSpec};
    use crate::config::RequestSpec;

    fn flow(per_user: bool, random: bool) -> Flow {
        let feed = FeedSpec {
            columns: vec!["name".into()],
            rows: ["a", "b", "c"].iter().map(|r| vec![r.to_string()]).collect(),
            per_user,
            random,
        };
        let step = FlowStepSpec::new("f/GET /${name}", RequestSpec::get("/${name}"));
        let spec = FlowSpec { name: "f".into(), weight: 1, steps: vec![step], feed: Some(feed) };
        crate::flow::compile(&[spec]).unwrap().flows.remove(0)
    }

    fn walks(f: &Flow, user: u32, n: u64) -> Vec<String> {
        let mut vars = vec![String::new(); f.vars.len()];
        let mut rng = Rng::new(7);
        (0..n)
            .map(|i| {
                begin_walk(f, &mut vars, user, i, &mut rng);
                assert_eq!((vars[USER_VAR].as_str(), vars[ITERATION_VAR].clone()), (user.to_string().as_str(), i.to_string()));
                vars[2].clone()
            })
            .collect()
    }

    #[test]
    fn feeds_give_rows_in_order_per_walk_or_one_per_user_or_at_random() {
        let f = flow(false, false);
        assert_eq!(walks(&f, 0, 2), ["a", "b"]);
        assert_eq!(walks(&f, 5, 3), ["c", "a", "b"]); // one sequence shared by the users
        let f = flow(true, false);
        assert_eq!(walks(&f, 1, 3), ["b", "b", "b"]);
        assert_eq!(walks(&f, 5, 1), ["c"]);
        let f = flow(false, true);
        let drawn = walks(&f, 0, 300);
        for row in ["a", "b", "c"] {
            let n = drawn.iter().filter(|d| *d == row).count();
            assert!((70..130).contains(&n), "{row}: {n} of 300");
        }
        let f = flow(true, true);
        let mine = walks(&f, 3, 5);
        assert!(mine.iter().all(|r| *r == mine[0]));
    }
}
