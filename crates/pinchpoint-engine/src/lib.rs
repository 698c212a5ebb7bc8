//! pinchpoint's load engine: closed-loop HTTP/1.1 users stepping through a plan,
//! an HdrHistogram per step, and one record per request streamed to disk.

pub mod arrow_io;
pub mod config;
pub mod http;
pub mod outcome;
pub mod record;
pub mod recorder;
pub mod run;
pub mod stats;
pub mod user;

pub use config::{RequestSpec, RunConfig, Step};
pub use outcome::ErrorClass;
pub use run::{records_to_parquet, run, RunSummary, Window};
pub use stats::{Live, StepStats};
