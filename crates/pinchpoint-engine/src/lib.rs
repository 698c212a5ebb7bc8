//! pinchpoint's load engine: closed-loop users stepping through a plan, or
//! open-loop arrivals sent at their scheduled times, over HTTP/1.1 or HTTP/2, plain or
//! TLS; an HdrHistogram per step or phase, and one record per request streamed to disk.

pub mod arrow_io;
pub mod client;
pub mod config;
pub mod control;
pub mod drive;
pub mod flow;
pub mod kind;
pub mod live_steps;
pub mod outcome;
pub mod record;
pub mod recorder;
pub mod rng;
pub mod schedule;
pub mod stats;
pub mod weights;

pub use config::{HookHandle, HttpVersion, OpenLoop, Protocol, RequestSpec, RunConfig, Step, Think, TlsOptions};
pub use config::flow::{CaptureFrom, CaptureSpec, CheckSpec, FeedSpec, FlowSpec, FlowStepSpec, Hook, MessageSpec, OnFail, Pick};
pub use kind::{Kind, KindCount, Kinds, PerKind};
pub use outcome::ErrorClass;
pub use control::{Applied, Control};
pub use drive::{records_to_parquet, run, run_until, Level, RunSummary};
pub use stats::Window;
pub use schedule::{Arrivals, Phase, PhaseKind};
pub use stats::{EndpointStats, Live, SendLag, StepStats};
