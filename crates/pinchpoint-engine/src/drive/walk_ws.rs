//! A closed-loop user's WebSocket step: the upgrade rendered with the user's variables
//! and cookies, the session (`ws.rs`), and what the step's `on_fail` makes of it.

use std::time::Instant;

use tokio::sync::watch;

use crate::client::http1::{Tag, TagLevel};
use crate::client::ws;
use crate::config::flow::OnFail;
use crate::drive::closed::{Shared, CONNECT_BACKOFF};
use crate::drive::flow_step::{new_record, on_fail, push, render_into, Next, State};
use crate::drive::ws::{session, Ended, Side};
use crate::flow::extract::Answer;
use crate::flow::judge::{judge, Values};
use crate::flow::ws::Message;
use crate::flow::{Flow, Step};
use crate::outcome::{note, ErrorClass};
use crate::record::Record;

/// The user's side of a session.
struct User<'a> {
    shared: &'a Shared,
    flow: &'a Flow,
    f: usize,
    index: u32,
    st: &'a mut State,
    done: &'a watch::Receiver<bool>,
    keep_going: bool,
}

impl Side for User<'_> {
    fn record(&mut self, endpoint: u16) -> Option<Record> {
        if *self.done.borrow() {
            return None;
        }
        new_record(self.shared, endpoint, self.index, self.st)
    }

    fn vars(&self) -> &[String] {
        &self.st.vars[self.f]
    }

    fn judge(&mut self, m: &Message, payload: &[u8], latency_us: i64) -> Option<ErrorClass> {
        let st = &mut *self.st;
        st.kept.clear();
        st.kept.want_body = true;
        st.kept.keep_body(payload);
        let mut answer = Answer::new(crate::drive::ws::SWITCHED, &st.kept).with_latency(latency_us);
        let values = Values { vars: &mut st.vars[self.f], lists: &mut st.lists[self.f], jar: &st.jar, rng: &mut st.rng, scratch: &mut st.scratch };
        judge(self.flow, &m.name, &m.checks, &m.captures, self.keep_going, &mut answer, values, None)
    }

    fn push(&mut self, record: Record) {
        push(self.st, record);
    }
}

/// The step's session; its messages stop when the run ends (`done`). The connection is
/// the request in flight meanwhile: a run abandoned during it counts it abandoned, and
/// keeps the messages that ended.
pub(super) async fn send_ws_step(
    shared: &Shared,
    (flow, f): (&Flow, usize),
    step: &Step,
    messages: &[Message],
    index: u32,
    st: &mut State,
    done: &watch::Receiver<bool>,
) -> Next {
    let Some(mut conn) = new_record(shared, step.endpoint, index, st) else { return Next::Stop };
    let since = Instant::now();
    let mut prepared = step.base.clone();
    if let Err(why) = render_into(step, &flow.vars, &st.vars[f], &st.jar, false, shared.timeout, &mut prepared) {
        note(ErrorClass::Capture, || format!("{}: {why}", step.name));
        conn.error = Some(ErrorClass::Capture);
        push(st, conn);
        tokio::time::sleep(CONNECT_BACKOFF).await;
        return Next::Restart;
    }
    let tag = Tag { run_id: &shared.run_id, trace_half: shared.trace_half, level: TagLevel::Users(conn.users), req_id: conn.req_id };
    let (request, key) = ws::upgrade_request(&prepared, &shared.target.host, shared.tag.then_some(&tag));
    st.out.begin();
    let keep_going = step.on_fail == OnFail::Continue;
    let mut user = User { shared, flow, f, index, st, done, keep_going };
    let ended = session(&mut user, &shared.target, (&request, &key), prepared.timeout, &step.name, messages, conn, since).await;
    st.out.end();
    match ended {
        Ended::Go => Next::Go,
        Ended::Stopped => Next::Stop,
        Ended::Failed { broke } => {
            if broke {
                tokio::time::sleep(CONNECT_BACKOFF).await;
            }
            on_fail(step)
        }
    }
}
