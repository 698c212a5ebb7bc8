//! Flows: each user walks through a sequence of requests, taking values from one
//! response (captures) into the next request (`${name}` in its path, headers or body),
//! checking what each response says, and keeping its cookies. The plan's flows are
//! compiled once (`compile`) and walked by the users of `drive/walk.rs`; a Python hook
//! (`hook.rs`) may change a request before it goes.

pub mod arith;
pub mod compare;
pub mod extract;
pub mod grpc;
pub mod hook;
pub mod jar;
pub mod judge;
pub mod jsonpath;
pub mod template;
pub mod ws;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::client::http1::Prepared;
use crate::config::{RequestSpec, Think};
use crate::flow::extract::{Answer, Capture, Check};
use crate::config::flow::{CaptureSpec, CheckSpec, FeedSpec, FlowSpec, FlowStepSpec, OnFail, Pick, BUILTIN_VARS};
use crate::flow::template::{element, Element, Template};

/// A flow step ready to render: templates resolved to variable slots.
pub struct Step {
    /// The record's `endpoint`: the step's index among every flow's steps.
    pub endpoint: u16,
    /// As the run's tables name it; each run-time reason begins with it.
    pub name: String,
    pub method: String,
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Template,
    pub timeout: Option<Duration>,
    /// The plan sets `Cookie` itself: the jar's cookies are not added.
    pub sets_cookie: bool,
    /// The request with its templates as written: checked once, and the source of what
    /// rendering does not change (which headers the plan sets, the method's framing).
    pub base: Prepared,
    pub think: Option<Think>,
    pub captures: Vec<Capture>,
    pub checks: Vec<Check>,
    /// Captures or checks read the body: it is kept.
    pub reads_body: bool,
    pub hook: bool,
    /// What the user does when a check or capture fails.
    pub on_fail: OnFail,
    /// The list (an index into the flow's `lists`) the step is sent once per value of.
    pub foreach: Option<usize>,
    /// A WebSocket step: the request is the upgrade, and the connection carries these.
    pub ws: Option<Vec<ws::Message>>,
    /// A gRPC call: the body is its request message as JSON.
    pub grpc: Option<grpc::Call>,
}

/// A list variable: what a capture with `pick = "all"` found.
pub struct List {
    /// The slot of `${name}`: the list as a JSON array.
    pub slot: usize,
    /// The slots of the `${name[k]}` the flow reads, each with its index.
    pub elements: Vec<(usize, i64)>,
    /// The slot of `${name[i]}`, set on each turn of a step with `foreach`.
    pub turn: Option<usize>,
}

pub struct Flow {
    pub name: String,
    pub steps: Vec<Step>,
    /// Variable names; a user's values are kept in a vector of the same order.
    pub vars: Vec<String>,
    pub feed: Option<Feed>,
    pub lists: Vec<List>,
}

pub struct Feed {
    /// The variable slot of each column.
    pub slots: Vec<usize>,
    pub rows: Vec<Vec<String>>,
    pub per_user: bool,
    pub random: bool,
    /// The next row of a sequential feed per walk.
    pub next: AtomicU64,
}

impl Flow {
    /// Sets the list `l` from every value `capture` found: `${name}` as a JSON
    /// array and each `${name[k]}` the flow reads; Err when one of those has no value.
    pub fn take_list(&self, l: usize, capture: &Capture, answer: &mut Answer, vars: &mut [String], values: &mut Vec<String>) -> Result<(), String> {
        let list = &self.lists[l];
        *values = extract::capture_all(capture, answer)?;
        vars[list.slot] = serde_json::to_string(values).expect("a list of strings is JSON");
        for &(slot, k) in &list.elements {
            let at = if k < 0 { values.len() as i64 + k } else { k };
            match usize::try_from(at).ok().and_then(|at| values.get(at)) {
                Some(value) => vars[slot].clone_from(value),
                None => return Err(format!("capture {}: {} values, none for ${{{}}}", capture.text, values.len(), self.vars[slot])),
            }
        }
        Ok(())
    }
}

/// Every flow of the run and the order users pick them in.
pub struct Flows {
    pub flows: Vec<Flow>,
    pub cycle: Vec<u32>,
}

/// Slot of the built-in `user_index` and `iteration` variables.
pub const USER_VAR: usize = 0;
pub const ITERATION_VAR: usize = 1;

/// Compiles the plan's flows; an error names the flow and step.
pub fn compile(specs: &[FlowSpec]) -> Result<Flows, String> {
    let mut flows = Vec::with_capacity(specs.len());
    let mut endpoint = 0usize;
    for spec in specs {
        flows.push(compile_flow(spec, &mut endpoint).map_err(|e| format!("flow {:?}: {e}", spec.name))?);
    }
    if endpoint > usize::from(u16::MAX) {
        return Err(format!("{endpoint} flow steps, above {}", u16::MAX));
    }
    let weights: Vec<u32> = specs.iter().map(|f| f.weight).collect();
    Ok(Flows { flows, cycle: crate::weights::cycle(&weights) })
}

fn compile_flow(spec: &FlowSpec, endpoint: &mut usize) -> Result<Flow, String> {
    if spec.steps.is_empty() {
        return Err("no step".into());
    }
    let mut vars: Vec<String> = BUILTIN_VARS.iter().map(|s| s.to_string()).collect();
    let slot = |vars: &mut Vec<String>, name: &str| match vars.iter().position(|v| v == name) {
        Some(i) => i,
        None => {
            vars.push(name.to_string());
            vars.len() - 1
        }
    };
    let feed = spec.feed.as_ref().map(|f| compile_feed(f, &mut vars, slot)).transpose()?;
    // Every name a capture sets is known from the first step: a variable used before
    // its capture ran holds the value of the user's previous walk (empty at first).
    for s in &spec.steps {
        for c in s.captures.iter().chain(s.request.messages.iter().flat_map(|m| &m.captures)) {
            slot(&mut vars, &c.var);
        }
    }
    let lists = compile_lists(spec, &mut vars, slot)?;
    let mut steps = Vec::with_capacity(spec.steps.len());
    for (i, s) in spec.steps.iter().enumerate() {
        let at = |e: String| format!("step {i} ({}): {e}", s.name);
        let index_of = |name: &str| vars.iter().position(|v| v == name);
        let r: &RequestSpec = &s.request;
        if !r.path.starts_with('/') {
            return Err(at(format!("path {:?} must start with '/'", r.path)));
        }
        let base = Prepared::new(r, Duration::from_secs(1)).map_err(at)?;
        let headers = r
            .headers
            .iter()
            .map(|(k, v)| Template::parse(v, &index_of).map(|t| (k.clone(), t)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(at)?;
        let captures = compile_captures(&s.captures, &vars, &lists).map_err(at)?;
        let foreach = foreach_of(s, &vars, &lists).map_err(at)?;
        let checks = s.checks.iter().map(|c| Check::compile(c, &index_of)).collect::<Result<Vec<_>, _>>().map_err(at)?;
        let reads_body = captures.iter().any(|c| !matches!(c.source, extract::Source::Header(_) | extract::Source::Cookie(_)))
            || checks.iter().any(Check::reads_body);
        steps.push(Step {
            endpoint: u16::try_from(*endpoint).map_err(|_| at("too many flow steps".into()))?,
            name: s.name.clone(),
            method: r.method.clone(),
            path: Template::parse(&r.path, &index_of).map_err(at)?,
            body: Template::parse(&String::from_utf8_lossy(&r.body), &index_of).map_err(at)?,
            sets_cookie: r.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("cookie")),
            base,
            headers,
            timeout: r.timeout,
            think: s.think,
            captures,
            checks,
            reads_body,
            hook: s.hook,
            on_fail: s.on_fail,
            foreach,
            ws: None,
            grpc: None,
        });
        *endpoint += 1;
        let step = steps.last_mut().expect("pushed above");
        step.ws = ws::compile(r, &vars, &lists, endpoint).map_err(at)?;
        step.grpc = grpc::compile(r, endpoint).map_err(at)?;
    }
    Ok(Flow { name: spec.name.clone(), steps, vars, feed, lists })
}

/// The captures of a step or message, each with its variable's slot and its list.
pub(crate) fn compile_captures(specs: &[CaptureSpec], vars: &[String], lists: &[List]) -> Result<Vec<Capture>, String> {
    specs
        .iter()
        .map(|c| {
            // A flow gives each capture a slot; an open-loop request has no variables.
            let var = vars.iter().position(|v| *v == c.var).ok_or_else(|| format!("capture {}: no flow to keep it in", c.var))?;
            let mut capture = Capture::compile(c, var)?;
            capture.list = lists.iter().position(|l| l.slot == var && c.pick == Pick::All);
            Ok(capture)
        })
        .collect()
}

/// The texts of a step that may hold `${name}`.
fn templates(s: &FlowStepSpec) -> Vec<&str> {
    let r = &s.request;
    let mut texts: Vec<&str> = vec![&r.path];
    texts.extend(r.headers.iter().map(|(_, v)| v.as_str()));
    texts.extend(std::str::from_utf8(&r.body));
    texts.extend(expected(&s.checks));
    for m in &r.messages {
        texts.extend(m.send.as_deref());
        texts.extend(expected(&m.checks));
    }
    texts
}

/// The expected values of `checks` (templates).
fn expected(checks: &[CheckSpec]) -> impl Iterator<Item = &str> {
    checks.iter().filter_map(|c| match c {
        CheckSpec::Contains(t) => Some(t.as_str()),
        CheckSpec::JsonEquals { expected, .. } | CheckSpec::JsonCompare { expected, .. } | CheckSpec::Header { expected, .. } => {
            Some(expected.as_str())
        }
        _ => None,
    })
}

/// The flow's list variables (its captures with `pick = "all"`), with a slot for each
/// `${name[k]}` and `${name[i]}` its steps read; Err names a value read of a variable
/// that is not a list.
fn compile_lists(spec: &FlowSpec, vars: &mut Vec<String>, slot: impl Fn(&mut Vec<String>, &str) -> usize) -> Result<Vec<List>, String> {
    let mut lists: Vec<List> = Vec::new();
    for c in spec.steps.iter().flat_map(|s| &s.captures).filter(|c| c.pick == Pick::All) {
        let at = slot(vars, &c.var);
        if lists.iter().all(|l| l.slot != at) {
            lists.push(List { slot: at, elements: Vec::new(), turn: None });
        }
    }
    for (i, s) in spec.steps.iter().enumerate() {
        for name in templates(s).into_iter().flat_map(Template::names) {
            let Some((base, which)) = element(&name) else { continue };
            let Some(list) = vars.iter().position(|v| v == base).and_then(|b| lists.iter().position(|l| l.slot == b)) else {
                return Err(format!("step {i} ({}): ${{{name}}} reads a list, but {base} is not captured with pick = \"all\"", s.name));
            };
            if which == Element::Turn && s.foreach.as_deref() != Some(base) {
                return Err(format!("step {i} ({}): ${{{name}}} is read outside a step with foreach = {base:?}", s.name));
            }
            let at = slot(vars, &name);
            let list = &mut lists[list];
            match which {
                Element::At(k) if list.elements.iter().all(|(s, _)| *s != at) => list.elements.push((at, k)),
                Element::At(_) => {}
                Element::Turn => list.turn = Some(at),
            }
        }
    }
    Ok(lists)
}

/// The list a step with `foreach` is sent once per value of.
fn foreach_of(s: &FlowStepSpec, vars: &[String], lists: &[List]) -> Result<Option<usize>, String> {
    let Some(name) = &s.foreach else { return Ok(None) };
    let found = vars.iter().position(|v| v == name).and_then(|b| lists.iter().position(|l| l.slot == b));
    found.map(Some).ok_or_else(|| format!("foreach = {name:?}: not a variable captured with pick = \"all\""))
}

fn compile_feed(
    f: &FeedSpec,
    vars: &mut Vec<String>,
    slot: impl Fn(&mut Vec<String>, &str) -> usize,
) -> Result<Feed, String> {
    if f.rows.is_empty() {
        return Err("the feed has no row".into());
    }
    if let Some((i, row)) = f.rows.iter().enumerate().find(|(_, r)| r.len() != f.columns.len()) {
        return Err(format!("feed row {i} has {} values for {} columns", row.len(), f.columns.len()));
    }
    if let Some(c) = f.columns.iter().find(|c| BUILTIN_VARS.contains(&c.as_str())) {
        return Err(format!("feed column {c:?} is a built-in variable"));
    }
    Ok(Feed {
        slots: f.columns.iter().map(|c| slot(vars, c)).collect(),
        rows: f.rows.clone(),
        per_user: f.per_user,
        random: f.random,
        next: AtomicU64::new(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Kept;
    use crate::config::flow::{CaptureFrom, CaptureSpec, FlowStepSpec};

    fn step(path: &str, capture: Option<(&str, Pick)>, foreach: Option<&str>) -> FlowStepSpec {
        let captures = capture
            .map(|(var, pick)| CaptureSpec { var: var.into(), from: CaptureFrom::Json("$.items[*].id".into()), pick })
            .into_iter()
            .collect();
        FlowStepSpec { captures, foreach: foreach.map(str::to_string), ..FlowStepSpec::new(format!("f/{path}"), RequestSpec::get(path)) }
    }

    fn flow(steps: Vec<FlowStepSpec>) -> Result<Flow, String> {
        let spec = FlowSpec { name: "f".into(), weight: 1, steps, feed: None };
        compile(&[spec]).map(|mut f| f.flows.remove(0))
    }

    #[test]
    fn a_list_gives_its_values_by_index_from_either_end_and_as_a_json_array() {
        let f = flow(vec![
            step("/list", Some(("ids", Pick::All)), None),
            step("/first/${ids[0]}/last/${ids[-1]}", None, None),
            step("/each/${ids[i]}", None, Some("ids")),
        ])
        .unwrap();
        assert_eq!(f.steps[2].foreach, Some(0));
        let list = &f.lists[0];
        let turn = list.turn.expect("the foreach step reads ids[i]");
        assert_eq!(f.vars[turn], "ids[i]");
        let body = Kept { head: b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), body: br#"{"items":[{"id":7},{"id":"x y"},{"id":9}]}"#.to_vec(), cut: false, want_body: true };
        let capture = &f.steps[0].captures[0];
        assert_eq!(capture.list, Some(0));
        let (mut vars, mut values) = (vec![String::new(); f.vars.len()], Vec::new());
        f.take_list(0, capture, &mut Answer::new(200, &body), &mut vars, &mut values).unwrap();
        assert_eq!(values, ["7", "x y", "9"]);
        assert_eq!(vars[list.slot], r#"["7","x y","9"]"#);
        let of = |name: &str| vars[f.vars.iter().position(|v| v == name).unwrap()].clone();
        assert_eq!((of("ids[0]"), of("ids[-1]")), ("7".to_string(), "9".to_string()));

        let short = Kept { body: br#"{"items":[]}"#.to_vec(), ..body };
        let e = f.take_list(0, capture, &mut Answer::new(200, &short), &mut vars, &mut values).unwrap_err();
        assert_eq!(e, "capture json $.items[*].id: 0 values, none for ${ids[0]}");
    }

    #[test]
    fn a_value_of_a_list_is_read_only_from_a_list_and_its_turn_only_in_its_foreach() {
        let e = |steps| flow(steps).err().expect("refused");
        let first = e(vec![step("/list", Some(("ids", Pick::First)), None), step("/${ids[0]}", None, None)]);
        assert_eq!(first, r#"flow "f": step 1 (f//${ids[0]}): ${ids[0]} reads a list, but ids is not captured with pick = "all""#);
        let outside = e(vec![step("/list", Some(("ids", Pick::All)), None), step("/${ids[i]}", None, None)]);
        assert_eq!(outside, r#"flow "f": step 1 (f//${ids[i]}): ${ids[i]} is read outside a step with foreach = "ids""#);
        let not_list = e(vec![step("/list", Some(("ids", Pick::Random)), None), step("/x", None, Some("ids"))]);
        assert_eq!(not_list, r#"flow "f": step 1 (f//x): foreach = "ids": not a variable captured with pick = "all""#);
    }
}
