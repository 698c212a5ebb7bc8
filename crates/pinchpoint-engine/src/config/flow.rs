//! A flow as the plan gives it: a sequence of requests a user walks through, with what
//! each takes from its response (captures) and what it must find there (checks).
//! Paths, header values, bodies and expected values may name variables as `${name}`.

use std::time::Duration;

use serde::Deserialize;

use crate::config::{RequestSpec, Think};

/// What the engine calls to change a flow's request before it is sent (a flow step with
/// `hook`); `pinchpoint-py` implements it with a Python function. Run by `flow::hook`.
pub trait Hook: Send + Sync {
    /// Changes `request` (the step `endpoint`, as rendered with `vars`); Err: why it
    /// could not, and the request is not sent.
    fn call(&self, endpoint: u16, vars: &[(String, String)], request: &mut RequestSpec) -> Result<(), String>;
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub name: String,
    /// How often a user picks this flow against the others (0: never).
    pub weight: u32,
    pub steps: Vec<FlowStepSpec>,
    /// Rows of test data whose columns become variables.
    pub feed: Option<FeedSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowStepSpec {
    /// The step as the run's tables name it (`shop/login`): its run-time reasons begin so.
    pub name: String,
    /// The request; its weight is not used.
    pub request: RequestSpec,
    /// The pause after this step's response instead of the run's think time.
    pub think: Option<Think>,
    pub captures: Vec<CaptureSpec>,
    pub checks: Vec<CheckSpec>,
    /// Call the run's hook with this step's request before it is sent.
    pub hook: bool,
    /// What the user does when a check or a capture of this step fails (or the step got
    /// no response to check or capture from).
    pub on_fail: OnFail,
    /// A list variable (a capture with `pick = "all"`): the step is sent once per value,
    /// in order, with `${name[i]}` the value of this turn.
    #[serde(default)]
    pub foreach: Option<String>,
}

impl FlowStepSpec {
    /// A step that sends `request` and nothing more: no think time, capture, check or hook
    /// of its own; a failure restarts the flow.
    pub fn new(name: impl Into<String>, request: RequestSpec) -> Self {
        Self {
            name: name.into(),
            request,
            think: None,
            captures: vec![],
            checks: vec![],
            hook: false,
            on_fail: OnFail::Restart,
            foreach: None,
        }
    }
}

/// A message of a WebSocket step: a frame sent, the next one received, or both; what is
/// received is checked and captured from as a response body is.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageSpec {
    /// As the run's tables name it (`chat/echo/#1`).
    pub name: String,
    /// The frame to send (a template), if any.
    pub send: Option<String>,
    /// Send it as a binary frame (its text's UTF-8 bytes), not a text frame.
    pub binary: bool,
    /// Wait for the next frame from the server: the message's time is until it came.
    pub receive: bool,
    pub captures: Vec<CaptureSpec>,
    pub checks: Vec<CheckSpec>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFail {
    /// Go on to the next step (a failed capture leaves its variable as it was).
    Continue,
    /// Start a flow afresh.
    Restart,
    /// Send nothing more until the run ends.
    StopUser,
}

/// Which of the nodes (or matches) a capture selects it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pick {
    First,
    /// One at random, from the user's own seeded stream.
    Random,
    /// Every one, in order: a list variable, read as `${name[0]}`, `${name[-1]}` or, in a
    /// step with `foreach`, `${name[i]}`; `${name}` is the list as a JSON array.
    All,
}

/// A comparison of a JSON node with the expected value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// Numbers: the node is a JSON number (or a string holding one), the expected value
    /// arithmetic over numbers and variables (`flow::arith`).
    Eq,
    Gt,
    Lt,
    Ge,
    Le,
    /// The node's text differs from the expected text.
    Ne,
    /// The node's text is one of a JSON array's items (as text).
    In,
    /// The node (an array, object or string) has this many items or characters.
    Len,
}

impl Cmp {
    /// Whether it compares numbers (its expected value is arithmetic), not text.
    pub fn is_numeric(self) -> bool {
        matches!(self, Cmp::Eq | Cmp::Gt | Cmp::Lt | Cmp::Ge | Cmp::Le)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaptureFrom {
    /// A JSONPath (RFC 9535) into the body: the first node it selects.
    Json(String),
    /// A regular expression over the body: its first group, or the whole match.
    Regex(String),
    /// A response header's value.
    Header(String),
    /// A cookie's value in the user's jar after this response.
    Cookie(String),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(from = "CaptureFields")]
pub struct CaptureSpec {
    pub var: String,
    pub from: CaptureFrom,
    pub pick: Pick,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "CheckFields")]
pub enum CheckSpec {
    /// The status is one of these.
    Status(Vec<u16>),
    /// The body holds this text (a template).
    Contains(String),
    /// The body matches this regular expression.
    Matches(String),
    /// The first node a JSONPath selects equals this text (a template): a string node
    /// as it is, any other node as JSON.
    JsonEquals { path: String, expected: String },
    /// The first node a JSONPath selects compares so with this text (a template; for the
    /// numeric comparisons, arithmetic over numbers and variables).
    JsonCompare { path: String, op: Cmp, expected: String },
    /// A response header's value equals this text (a template).
    Header { name: String, expected: String },
    /// The response came within this many milliseconds.
    MaxMs(f64),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedSpec {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// One row per user for the whole run; else a new row per walk through the flow.
    pub per_user: bool,
    /// Rows drawn at random; else in order, cycled.
    pub random: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum CaptureKind {
    Json,
    Regex,
    Header,
    Cookie,
}

/// A capture `(variable, kind, text, pick)`.
#[derive(Deserialize)]
struct CaptureFields(String, CaptureKind, String, Pick);

impl From<CaptureFields> for CaptureSpec {
    fn from(CaptureFields(var, kind, text, pick): CaptureFields) -> Self {
        let from = match kind {
            CaptureKind::Json => CaptureFrom::Json(text),
            CaptureKind::Regex => CaptureFrom::Regex(text),
            CaptureKind::Header => CaptureFrom::Header(text),
            CaptureKind::Cookie => CaptureFrom::Cookie(text),
        };
        CaptureSpec { var, from, pick }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum CheckKind {
    Status,
    Contains,
    Matches,
    Json,
    JsonEquals,
    JsonGt,
    JsonLt,
    JsonGe,
    JsonLe,
    JsonNe,
    JsonIn,
    JsonLen,
    Header,
    MaxMs,
}

/// A check `(kind, text, expected)`: status (text: codes separated by commas),
/// contains, matches, json and json_<cmp> (text: the JSONPath; expected: the value, a
/// template, or arithmetic for json_equals, json_gt, json_lt, json_ge and json_le), header (text: its name; expected: the value, a template), or max_ms
/// (text: the milliseconds).
#[derive(Deserialize)]
struct CheckFields(CheckKind, String, String);

impl TryFrom<CheckFields> for CheckSpec {
    type Error = String;

    fn try_from(CheckFields(kind, text, expected): CheckFields) -> Result<Self, String> {
        Ok(match kind {
            CheckKind::Status => CheckSpec::Status(
                text.split(',')
                    .map(|c| c.trim().parse::<u16>().map_err(|_| format!("status {c:?} is not a code")))
                    .collect::<Result<_, _>>()?,
            ),
            CheckKind::Contains => CheckSpec::Contains(text),
            CheckKind::Matches => CheckSpec::Matches(text),
            CheckKind::Json => CheckSpec::JsonEquals { path: text, expected },
            CheckKind::JsonEquals => CheckSpec::JsonCompare { path: text, op: Cmp::Eq, expected },
            CheckKind::JsonGt => CheckSpec::JsonCompare { path: text, op: Cmp::Gt, expected },
            CheckKind::JsonLt => CheckSpec::JsonCompare { path: text, op: Cmp::Lt, expected },
            CheckKind::JsonGe => CheckSpec::JsonCompare { path: text, op: Cmp::Ge, expected },
            CheckKind::JsonLe => CheckSpec::JsonCompare { path: text, op: Cmp::Le, expected },
            CheckKind::JsonNe => CheckSpec::JsonCompare { path: text, op: Cmp::Ne, expected },
            CheckKind::JsonIn => CheckSpec::JsonCompare { path: text, op: Cmp::In, expected },
            CheckKind::JsonLen => CheckSpec::JsonCompare { path: text, op: Cmp::Len, expected },
            CheckKind::Header => CheckSpec::Header { name: text, expected },
            CheckKind::MaxMs => match text.trim().parse::<f64>() {
                Ok(ms) if ms.is_finite() && ms > 0.0 => CheckSpec::MaxMs(ms),
                _ => return Err(format!("max_ms {text:?} is not a positive number")),
            },
        })
    }
}

/// The variables every flow has: the user's index and its walks through flows so far.
pub const BUILTIN_VARS: [&str; 2] = ["user_index", "iteration"];


/// The longest time a flow's requests may take.
pub fn max_timeout(flows: &[FlowSpec], run: Duration) -> Duration {
    flows
        .iter()
        .flat_map(|f| &f.steps)
        .filter_map(|s| s.request.timeout)
        .fold(run, Duration::max)
}
