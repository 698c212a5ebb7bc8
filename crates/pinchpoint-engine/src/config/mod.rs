//! What a load run is asked to do.

use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

pub mod fields;
pub mod flow;
pub mod json;
mod wire;

use serde::Deserialize;

use self::flow::{FlowSpec, Hook};
use crate::rng::Rng;
use crate::schedule::{Arrivals, Phase};
use crate::weights::MAX_CYCLE;

/// One request of the plan. The path may carry its own query; the tag is appended.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// How often this request is sent against the others (0: never).
    pub weight: u32,
    /// This request's own timeout, instead of the run's.
    #[serde(rename = "timeout_s", deserialize_with = "wire::seconds_or_none")]
    pub timeout: Option<Duration>,
    /// The request is a WebSocket upgrade: the connection then carries `messages`, and
    /// is closed after them.
    #[serde(default)]
    pub ws: bool,
    #[serde(default)]
    pub messages: Vec<flow::MessageSpec>,
    /// A gRPC call instead: `path` is `/package.Service/Method`, `body` the request
    /// message as JSON (a template), `headers` its metadata.
    #[serde(default)]
    pub grpc: Option<GrpcSpec>,
}

/// Where a gRPC request's method is declared.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrpcSpec {
    /// `package.Service/Method`.
    pub method: String,
    /// The .proto file that declares it, compiled when the run is configured.
    pub proto: PathBuf,
    /// Folders its imports are found in, besides its own folder.
    pub import_paths: Vec<PathBuf>,
}

impl RequestSpec {
    /// A GET of weight 1 with the run's timeout.
    pub fn get(path: &str) -> Self {
        Self {
            method: "GET".into(),
            path: path.into(),
            headers: vec![],
            body: vec![],
            weight: 1,
            timeout: None,
            ws: false,
            messages: vec![],
            grpc: None,
        }
    }
}

/// A closed-loop load level held for a fixed time: `users` users, or, with
/// `ramp_from`, users going linearly from `ramp_from` to `users` over the duration.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub users: u32,
    #[serde(rename = "duration_s", deserialize_with = "wire::seconds")]
    pub duration: Duration,
    pub ramp_from: Option<u32>,
}

impl Step {
    pub fn hold(users: u32, duration: Duration) -> Self {
        Self { users, duration, ramp_from: None }
    }

    pub fn ramp(from: u32, to: u32, duration: Duration) -> Self {
        Self { users: to, duration, ramp_from: Some(from) }
    }

    /// Users active `elapsed` into the step.
    pub fn users_at(&self, elapsed: Duration) -> u32 {
        match self.ramp_from {
            None => self.users,
            Some(from) => {
                let f = (elapsed.as_secs_f64() / self.duration.as_secs_f64()).clamp(0.0, 1.0);
                (f64::from(from) + (f64::from(self.users) - f64::from(from)) * f).round() as u32
            }
        }
    }

    /// The step's load level: its users, or their mean over a ramp.
    pub fn level(&self) -> f64 {
        match self.ramp_from {
            None => f64::from(self.users),
            Some(from) => (f64::from(from) + f64::from(self.users)) / 2.0,
        }
    }
}

/// How long a closed-loop user waits between the end of a response and its next request.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "wire::ThinkFields")]
pub enum Think {
    Constant(Duration),
    Uniform { min: Duration, max: Duration },
    Exponential { mean: Duration },
}

impl Think {
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        match *self {
            Think::Constant(d) => d,
            Think::Uniform { min, max } => min + (max - min).mul_f64(1.0 - rng.unit()),
            // Capped at 50 means: an unlucky draw does not park a user for the run.
            Think::Exponential { mean } => mean.mul_f64(rng.exp1().min(50.0)),
        }
    }
}

/// An open-loop run: requests sent at the times the phases schedule, whether or not
/// earlier ones were answered.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLoop {
    pub phases: Vec<Phase>,
    #[serde(deserialize_with = "wire::arrivals")]
    pub arrivals: Arrivals,
    /// At most this many requests in flight (and connections open). A request due
    /// while all are busy waits for one and is counted late; one still waiting when
    /// the run ends is counted unsent.
    pub max_in_flight: u32,
}

/// The HTTP version spoken to the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum HttpVersion {
    #[default]
    #[serde(rename = "1.1")]
    Http1,
    /// HTTP/2: with prior knowledge over plain TCP (h2c), by ALPN over TLS.
    #[serde(rename = "2")]
    Http2,
}

/// How to verify the target's certificate.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// PEM certificates trusted besides the default (Mozilla's) roots.
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate: only when asked for explicitly.
    pub insecure: bool,
}

/// How requests travel to the target.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "wire::ProtocolFields")]
pub struct Protocol {
    pub http: HttpVersion,
    /// Some: https, with the certificate checked as these options say.
    pub tls: Option<TlsOptions>,
    /// HTTP/2: holders sharing one connection, each with one stream at a time (closed
    /// loop: users; open loop: requests in flight). 0: the default, 1 (a connection per
    /// user) in closed loop and [`OPEN_LOOP_STREAMS`] in open loop.
    pub streams_per_connection: u32,
}

/// HTTP/2 streams per connection in open loop unless the plan says otherwise (below
/// the 100 to 128 concurrent streams servers commonly allow).
pub const OPEN_LOOP_STREAMS: u32 = 100;

/// The run as Python's `load/engine_config.py` writes it (`EngineConfig`, whose keys
/// tests/load/test_engine_config_drift.py checks against these).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub run_id: String,
    pub host: String,
    pub port: u16,
    pub requests: Vec<RequestSpec>,
    /// Closed loop: the steps of users. Empty for an open-loop run.
    pub steps: Vec<Step>,
    pub think: Think,
    /// Open loop: the arrival phases; `steps` must then be empty.
    pub open: Option<OpenLoop>,
    /// Seeds Poisson arrivals and random think times.
    pub seed: u64,
    #[serde(rename = "timeout_s", deserialize_with = "wire::seconds")]
    pub timeout: Duration,
    /// Arrow IPC stream of request records, written while the run goes; None when
    /// nobody keeps them (the statistics are gathered all the same).
    pub records_path: Option<PathBuf>,
    /// Worker threads of the runtime; 0 means one per available core.
    pub threads: usize,
    /// Add the run tag to the URL query and the `X-Pinchpoint` header.
    pub tag: bool,
    /// HTTP/1.1 or HTTP/2, plain or TLS.
    pub protocol: Protocol,
    /// Closed loop: users walk these flows instead of sending `requests` (then empty).
    pub flows: Vec<FlowSpec>,
    /// Called for the flow steps that ask for it; a function, attached by the binding.
    #[serde(deserialize_with = "wire::hook_apart")]
    pub hook: Option<HookHandle>,
    /// The first request id: generators sharing a run take disjoint ranges.
    pub req_id_base: u64,
    /// Unix microseconds to start the first step at (generators sharing a run start
    /// together); None: at once. At most [`MAX_START_WAIT`] ahead.
    pub start_at_us: Option<i64>,
    /// The load level each step or phase is tagged and recorded with, when this
    /// generator sends a share of it: the whole run's users or rate. Empty: its own.
    pub tag_levels: Vec<f64>,
}

/// The longest a run waits for its start time.
pub const MAX_START_WAIT: Duration = Duration::from_secs(120);

/// A hook as the run's configuration holds it.
#[derive(Clone)]
pub struct HookHandle(pub Arc<dyn Hook>);

impl std::fmt::Debug for HookHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookHandle")
    }
}

impl RunConfig {
    /// Some request of the plan (or step of a flow) is a gRPC call.
    pub fn has_grpc(&self) -> bool {
        self.requests.iter().any(|r| r.grpc.is_some())
            || self.flows.iter().flat_map(|f| &f.steps).any(|s| s.request.grpc.is_some())
    }

    pub fn validate(&self) -> Result<(), String> {
        let grpc = self.has_grpc();
        if grpc && self.protocol.http != HttpVersion::Http2 {
            return Err("gRPC runs over HTTP/2: the protocol must be HTTP/2".into());
        }
        if !self.flows.is_empty() {
            return self.validate_flows();
        }
        if self.requests.is_empty() {
            return Err("no request to send".into());
        }
        match &self.open {
            None => {
                if self.steps.is_empty() {
                    return Err("no step to run".into());
                }
                if let Some(i) = self.steps.iter().position(|s| s.duration.is_zero()) {
                    return Err(format!("step {i}: duration must be above zero"));
                }
            }
            Some(open) => {
                if !self.steps.is_empty() {
                    return Err("an open-loop run has phases, not steps of users".into());
                }
                if open.phases.is_empty() {
                    return Err("no phase to run".into());
                }
                for (i, p) in open.phases.iter().enumerate() {
                    p.validate().map_err(|e| format!("phase {i}: {e}"))?;
                }
                if open.max_in_flight == 0 {
                    return Err("max_in_flight must be at least 1".into());
                }
            }
        }
        if let Think::Uniform { min, max } = self.think {
            if min > max {
                return Err(format!("think time: uniform minimum {min:?} is above its maximum {max:?}"));
            }
        }
        if self.protocol.http == HttpVersion::Http1 && self.protocol.streams_per_connection > 1 {
            return Err("streams per connection apply to HTTP/2 only".into());
        }
        if self.timeout.is_zero() {
            return Err("timeout must be above zero".into());
        }
        if !self.tag_levels.is_empty() && self.tag_levels.len() != self.levels().len() {
            return Err(format!("{} tag levels for {} steps", self.tag_levels.len(), self.levels().len()));
        }
        if !self
            .run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            || self.run_id.is_empty()
        {
            return Err(format!("run id {:?} may hold only letters, digits, '-', '_' and '.'", self.run_id));
        }
        for r in &self.requests {
            if !r.path.starts_with('/') {
                return Err(format!("request path {:?} must start with '/'", r.path));
            }
            if r.timeout.is_some_and(|t| t.is_zero()) {
                return Err(format!("request {:?}: timeout must be above zero", r.path));
            }
        }
        if self.open.is_none() && self.requests.iter().any(|r| r.ws) {
            return Err("in closed loop a WebSocket request is sent as a flow of one step".into());
        }
        if self.open.is_none() && self.requests.iter().any(|r| r.grpc.is_some()) {
            return Err("in closed loop a gRPC request is sent as a flow of one step".into());
        }
        let total: u64 = self.requests.iter().map(|r| u64::from(r.weight)).sum();
        if total == 0 {
            return Err("every request has weight 0: nothing to send".into());
        }
        if total > MAX_CYCLE {
            return Err(format!("request weights sum to {total}, above {MAX_CYCLE}"));
        }
        Ok(())
    }

    fn validate_flows(&self) -> Result<(), String> {
        if !self.requests.is_empty() {
            return Err("a run sends flows or requests, not both (a request is a flow of one step)".into());
        }
        if self.open.is_some() {
            return Err("flows run in closed loop: users walk them one request after another".into());
        }
        let total: u64 = self.flows.iter().map(|f| u64::from(f.weight)).sum();
        if total == 0 {
            return Err("every flow has weight 0: nothing to send".into());
        }
        if total > MAX_CYCLE {
            return Err(format!("flow weights sum to {total}, above {MAX_CYCLE}"));
        }
        let with_steps = Self { flows: Vec::new(), requests: vec![RequestSpec::get("/")], ..self.clone() };
        with_steps.validate()
    }

    /// The load level of each step or phase: users (closed loop) or requests per second.
    pub fn levels(&self) -> Vec<f64> {
        match &self.open {
            None => self.steps.iter().map(Step::level).collect(),
            Some(open) => open.phases.iter().map(Phase::level).collect(),
        }
    }

    /// The longest time a request may take: the run's timeout or a request's own.
    pub fn max_timeout(&self) -> Duration {
        let plain = self.requests.iter().filter_map(|r| r.timeout).fold(self.timeout, Duration::max);
        flow::max_timeout(&self.flows, plain)
    }
}
