//! One row per request sent, as it goes to disk.

use crate::outcome::ErrorClass;

#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub req_id: u64,
    pub step: u32,
    /// Closed loop: users of the step (as in the tag). Open loop: 0.
    pub users: u32,
    /// Which of the plan's requests this was: its index in the plan.
    pub endpoint: u16,
    /// When the request was sent, unix epoch microseconds.
    pub start_us: i64,
    /// When the schedule meant it to be sent (open loop); `start_us` in closed loop.
    pub intended_us: i64,
    /// From the intended send time to the end of the response (or the error).
    pub latency_us: i64,
    /// From the actual send to the end of the response (or the error).
    pub service_us: i64,
    /// 0 when no response arrived.
    pub status: u16,
    pub error: Option<ErrorClass>,
    pub bytes: u64,
    /// The flow walk that sent it; None for a request not in a flow (open loop).
    pub walk: Option<Walk>,
}

/// A user's walk through a flow: numbered as the built-ins `${user_index}` and
/// `${iteration}` of that walk are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The user's index in the run, from 0.
    pub user: u32,
    /// The user's walks through flows before this one.
    pub iteration: u64,
}
