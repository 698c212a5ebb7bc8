//! What each record is: an HTTP request, a WebSocket session (its connection, from the
//! upgrade to the close) or one of its messages, a gRPC call or one message of a call's
//! answer stream. A record's kind follows from its `endpoint`: the run's [`Kinds`] give
//! each endpoint's, as the plan's requests and flow steps lay the endpoints out.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::flow::grpc::Call;
use crate::flow::ws::Message;
use crate::flow::Flows;
use crate::record::Record;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Kind {
    #[default]
    Request,
    WsSession,
    WsMessage,
    GrpcCall,
    GrpcMessage,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Request, Kind::WsSession, Kind::WsMessage, Kind::GrpcCall, Kind::GrpcMessage];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::WsSession => "ws_session",
            Kind::WsMessage => "ws_message",
            Kind::GrpcCall => "grpc_call",
            Kind::GrpcMessage => "grpc_message",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The records of one kind and how many of them failed (an error, or a status of 400
/// or more).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCount {
    pub requests: u64,
    pub errors: u64,
}

/// The counts of each kind, by [`Kind::index`].
pub type PerKind = [KindCount; Kind::ALL.len()];

/// The records of one kind and their failures so far, as the live counters keep them.
#[derive(Debug, Default)]
pub struct LiveKindCount {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
}

impl LiveKindCount {
    pub fn add(&self, n: KindCount) {
        if n.requests > 0 {
            self.requests.fetch_add(n.requests, Ordering::Relaxed);
            self.errors.fetch_add(n.errors, Ordering::Relaxed);
        }
    }

    pub fn load(&self) -> KindCount {
        KindCount { requests: self.requests.load(Ordering::Relaxed), errors: self.errors.load(Ordering::Relaxed) }
    }
}

/// Counts `r` into `counts` as `kind`.
pub fn count(counts: &mut PerKind, kind: Kind, r: &Record) {
    let c = &mut counts[kind.index()];
    c.requests += 1;
    c.errors += u64::from(r.error.is_some() || r.status >= 400);
}

/// The kind of each endpoint of a run; an endpoint past the table is a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kinds(Vec<Kind>);

impl Kinds {
    pub const EMPTY: Kinds = Kinds(Vec::new());

    pub fn of(&self, endpoint: u16) -> Kind {
        self.0.get(usize::from(endpoint)).copied().unwrap_or_default()
    }

    pub fn as_slice(&self) -> &[Kind] {
        &self.0
    }

    /// The endpoints of closed-loop users sending the plan's requests: one each.
    pub fn of_requests(count: usize) -> Self {
        Kinds(vec![Kind::Request; count])
    }

    /// The endpoints of every flow's steps, each followed by its messages'.
    pub fn of_flows(flows: &Flows) -> Self {
        let mut kinds = Kinds::default();
        for step in flows.flows.iter().flat_map(|f| &f.steps) {
            kinds.place(step.endpoint, step.ws.as_deref(), step.grpc.as_ref());
        }
        kinds
    }

    /// The endpoints of open-loop requests (`open_ws::sessions`): each request's, then
    /// its messages'.
    pub fn of_open(endpoints: &[u16], sessions: &[Option<Vec<Message>>], calls: &[Option<Call>]) -> Self {
        let mut kinds = Kinds::default();
        for ((&at, messages), call) in endpoints.iter().zip(sessions).zip(calls) {
            kinds.place(at, messages.as_deref(), call.as_ref());
        }
        kinds
    }

    /// A request at `at`: a WebSocket session with `messages`, a gRPC call, or HTTP.
    fn place(&mut self, at: u16, messages: Option<&[Message]>, call: Option<&Call>) {
        let own = match (messages, call) {
            (Some(_), _) => Kind::WsSession,
            (None, Some(_)) => Kind::GrpcCall,
            (None, None) => Kind::Request,
        };
        self.set(at, own);
        for m in messages.unwrap_or_default() {
            self.set(m.endpoint, Kind::WsMessage);
        }
        if let Some(streamed) = call.and_then(|c| c.message_endpoint) {
            self.set(streamed, Kind::GrpcMessage);
        }
    }

    fn set(&mut self, at: u16, kind: Kind) {
        let at = usize::from(at);
        if self.0.len() <= at {
            self.0.resize(at + 1, Kind::Request);
        }
        self.0[at] = kind;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::flow::{FlowSpec, FlowStepSpec, MessageSpec};
    use crate::config::RequestSpec;
    use crate::outcome::ErrorClass;

    fn upgrade(messages: usize) -> RequestSpec {
        let message = |i| MessageSpec {
            name: format!("m{i}"),
            send: Some("hi".into()),
            binary: false,
            receive: true,
            captures: vec![],
            checks: vec![],
        };
        RequestSpec { ws: true, messages: (0..messages).map(message).collect(), ..RequestSpec::get("/ws") }
    }

    #[test]
    fn kinds_are_listed_in_order() {
        let indices: Vec<usize> = Kind::ALL.iter().map(|k| k.index()).collect();
        assert_eq!(indices, (0..Kind::ALL.len()).collect::<Vec<_>>());
    }

    #[test]
    fn a_flows_sessions_are_followed_by_their_messages() {
        let steps = vec![FlowStepSpec::new("login", RequestSpec::get("/login")), FlowStepSpec::new("talk", upgrade(2)), FlowStepSpec::new("out", RequestSpec::get("/out"))];
        let flows = crate::flow::compile(&[FlowSpec { name: "chat".into(), weight: 1, steps, feed: None }]).expect("flows compile");
        let kinds = Kinds::of_flows(&flows);
        assert_eq!(
            kinds.as_slice(),
            [Kind::Request, Kind::WsSession, Kind::WsMessage, Kind::WsMessage, Kind::Request]
        );
        assert_eq!(kinds.of(4), Kind::Request);
        assert_eq!(kinds.of(99), Kind::Request);
    }

    #[test]
    fn open_loop_requests_take_their_messages_endpoints() {
        let requests = [upgrade(1), RequestSpec::get("/"), upgrade(2)];
        let (endpoints, sessions, calls) = crate::drive::open_ws::sessions(&requests).expect("sessions");
        let kinds = Kinds::of_open(&endpoints, &sessions, &calls);
        use Kind::*;
        assert_eq!(kinds.as_slice(), [WsSession, WsMessage, Request, WsSession, WsMessage, WsMessage]);
    }

    #[test]
    fn a_failure_is_an_error_or_a_status_of_400_or_more() {
        let mut counts = PerKind::default();
        let r = |status, error| Record {
            req_id: 0,
            step: 0,
            users: 1,
            endpoint: 0,
            start_us: 0,
            intended_us: 0,
            latency_us: 1,
            service_us: 1,
            status,
            error,
            bytes: 0,
            walk: None,
        };
        count(&mut counts, Kind::GrpcCall, &r(200, None));
        count(&mut counts, Kind::GrpcCall, &r(200, Some(ErrorClass::GrpcUnavailable)));
        count(&mut counts, Kind::Request, &r(503, None));
        count(&mut counts, Kind::Request, &r(399, None));
        assert_eq!(counts[Kind::GrpcCall.index()], KindCount { requests: 2, errors: 1 });
        assert_eq!(counts[Kind::Request.index()], KindCount { requests: 2, errors: 1 });
        assert_eq!(counts[Kind::WsMessage.index()], KindCount::default());
    }
}
