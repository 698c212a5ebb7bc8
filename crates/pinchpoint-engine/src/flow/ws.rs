//! WebSocket steps: the step's request is the upgrade (tagged like any request), and the
//! connection then carries the step's messages, each a frame sent, the next frame
//! received, or both. What a message receives is checked and captured from as a
//! response body is; each message is a record of its own (its own endpoint), and the
//! step's record is the connection's whole life.

use crate::config::flow::CheckSpec;
use crate::config::RequestSpec;
use crate::flow::extract::{Capture, Check, Source};
use crate::flow::template::Template;
use crate::flow::{compile_captures, List};

pub struct Message {
    /// The record's `endpoint`: the next after the step's and its earlier messages'.
    pub endpoint: u16,
    /// As the run's tables name it; its run-time reasons begin with it.
    pub name: String,
    pub send: Option<Template>,
    pub binary: bool,
    pub receive: bool,
    pub captures: Vec<Capture>,
    pub checks: Vec<Check>,
}

/// The messages of `request` if it is a WebSocket upgrade, numbered from `endpoint` on
/// (which is left past them).
pub fn compile(request: &RequestSpec, vars: &[String], lists: &[List], endpoint: &mut usize) -> Result<Option<Vec<Message>>, String> {
    if !request.ws {
        return if request.messages.is_empty() { Ok(None) } else { Err("messages without ws".into()) };
    }
    if request.method != "GET" {
        return Err(format!("a WebSocket upgrade is a GET, not {}", request.method));
    }
    if !request.body.is_empty() {
        return Err("a WebSocket upgrade has no body".into());
    }
    let index_of = |name: &str| vars.iter().position(|v| v == name);
    let mut messages = Vec::with_capacity(request.messages.len());
    for (k, m) in request.messages.iter().enumerate() {
        let at = |e: String| format!("message {k} ({}): {e}", m.name);
        if m.send.is_none() && !m.receive {
            return Err(at("sends nothing and receives nothing".into()));
        }
        if !m.receive && (!m.captures.is_empty() || !m.checks.is_empty()) {
            return Err(at("checks or captures need a frame received".into()));
        }
        let captures = compile_captures(&m.captures, vars, lists).map_err(at)?;
        if captures.iter().any(|c| matches!(c.source, Source::Header(_) | Source::Cookie(_))) {
            return Err(at("a frame has no headers or cookies: capture with json or regex".into()));
        }
        if m.checks.iter().any(|c| matches!(c, CheckSpec::Status(_) | CheckSpec::Header { .. })) {
            return Err(at("a frame has no status or headers: check contains, matches, json or max_ms".into()));
        }
        let checks = m.checks.iter().map(|c| Check::compile(c, &index_of)).collect::<Result<Vec<_>, _>>().map_err(at)?;
        let send = m.send.as_deref().map(|t| Template::parse(t, &index_of)).transpose().map_err(at)?;
        messages.push(Message {
            endpoint: u16::try_from(*endpoint).map_err(|_| at("too many flow steps".into()))?,
            name: m.name.clone(),
            send,
            binary: m.binary,
            receive: m.receive,
            captures,
            checks,
        });
        *endpoint += 1;
    }
    Ok(Some(messages))
}

#[cfg(test)]
mod tests {
    use crate::config::flow::{CaptureFrom, CaptureSpec, CheckSpec, FlowSpec, FlowStepSpec, MessageSpec, Pick};
    use crate::config::RequestSpec;
    use crate::flow::compile;

    fn message(send: Option<&str>, receive: bool) -> MessageSpec {
        MessageSpec { name: "m".into(), send: send.map(str::to_string), binary: false, receive, captures: vec![], checks: vec![] }
    }

    fn ws_step(messages: Vec<MessageSpec>) -> FlowStepSpec {
        FlowStepSpec::new("f/ws", RequestSpec { ws: true, messages, ..RequestSpec::get("/ws") })
    }

    fn flow(steps: Vec<FlowStepSpec>) -> Result<crate::flow::Flow, String> {
        compile(&[FlowSpec { name: "f".into(), weight: 1, steps, feed: None }]).map(|mut f| f.flows.remove(0))
    }

    #[test]
    fn each_message_is_an_endpoint_after_its_step_and_before_the_next_step() {
        let mut after = ws_step(vec![]);
        after.request.ws = false;
        let f = flow(vec![ws_step(vec![message(Some("a ${user_index}"), true), message(None, true)]), after]).unwrap();
        let messages = f.steps[0].ws.as_ref().unwrap();
        assert_eq!((f.steps[0].endpoint, messages[0].endpoint, messages[1].endpoint, f.steps[1].endpoint), (0, 1, 2, 3));
        assert!(messages[0].send.as_ref().unwrap().has_vars() && messages[1].send.is_none());
        assert!(f.steps[1].ws.is_none());
    }

    #[test]
    fn a_message_that_cannot_be_read_or_sent_is_refused_naming_it() {
        let refused = |m: MessageSpec| flow(vec![ws_step(vec![m])]).err().expect("refused");
        assert!(refused(message(None, false)).ends_with("message 0 (m): sends nothing and receives nothing"));
        let mut blind = message(Some("x"), false);
        blind.checks = vec![CheckSpec::Contains("x".into())];
        assert!(refused(blind).ends_with("checks or captures need a frame received"));
        let mut status = message(Some("x"), true);
        status.checks = vec![CheckSpec::Status(vec![200])];
        assert!(refused(status).contains("a frame has no status or headers"));
        let mut cookie = message(Some("x"), true);
        cookie.captures = vec![CaptureSpec { var: "c".into(), from: CaptureFrom::Cookie("c".into()), pick: Pick::First }];
        assert!(refused(cookie).contains("a frame has no headers or cookies"));
        let mut post = ws_step(vec![]);
        post.request.method = "POST".into();
        assert!(flow(vec![post]).err().unwrap().ends_with("a WebSocket upgrade is a GET, not POST"));
        let mut plain = ws_step(vec![message(Some("x"), true)]);
        plain.request.ws = false;
        assert!(flow(vec![plain]).err().unwrap().ends_with("messages without ws"));
    }
}
