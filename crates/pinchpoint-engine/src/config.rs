//! What a load run is asked to do.

use std::path::PathBuf;
use std::time::Duration;

/// One request of the plan. The path may carry its own query; the tag is appended.
#[derive(Clone, Debug)]
pub struct RequestSpec {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A load level held for a fixed time.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub users: u32,
    pub duration: Duration,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub run_id: String,
    pub host: String,
    pub port: u16,
    pub requests: Vec<RequestSpec>,
    pub steps: Vec<Step>,
    pub think_time: Duration,
    pub timeout: Duration,
    /// Arrow IPC stream of request records, written while the run goes.
    pub records_path: PathBuf,
    /// Worker threads of the runtime; 0 means one per available core.
    pub threads: usize,
    /// Add the run tag to the URL query and the `X-Pinchpoint` header.
    pub tag: bool,
}

impl RunConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.requests.is_empty() {
            return Err("no request to send".into());
        }
        if self.steps.is_empty() {
            return Err("no step to run".into());
        }
        if let Some(i) = self.steps.iter().position(|s| s.duration.is_zero()) {
            return Err(format!("step {i}: duration must be above zero"));
        }
        if self.timeout.is_zero() {
            return Err("timeout must be above zero".into());
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
        }
        Ok(())
    }
}
