//! Flows: each user walks through a sequence of requests, taking values from one
//! response (captures) into the next request (`${name}` in its path, headers or body),
//! checking what each response says, and keeping its cookies. The plan's flows are
//! compiled once (`compile`) and walked by the users of `drive/walk.rs`; a Python hook
//! (`hook.rs`) may change a request before it goes.

pub mod compare;
pub mod extract;
pub mod hook;
pub mod jar;
pub mod jsonpath;
pub mod template;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::client::http1::Prepared;
use crate::config::{RequestSpec, Think};
use crate::flow::extract::{Capture, Check};
use crate::config::flow::{FeedSpec, FlowSpec, OnFail, BUILTIN_VARS};
use crate::flow::template::Template;

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
}

pub struct Flow {
    pub name: String,
    pub steps: Vec<Step>,
    /// Variable names; a user's values are kept in a vector of the same order.
    pub vars: Vec<String>,
    pub feed: Option<Feed>,
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
    let captured: Vec<usize> =
        spec.steps.iter().flat_map(|s| &s.captures).map(|c| slot(&mut vars, &c.var)).collect();
    let mut captured = captured.into_iter();
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
        let captures = s
            .captures
            .iter()
            .map(|c| Capture::compile(c, captured.next().expect("one slot per capture")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(at)?;
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
        });
        *endpoint += 1;
    }
    Ok(Flow { name: spec.name.clone(), steps, vars, feed })
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
