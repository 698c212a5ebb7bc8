//! One row per request sent, as it goes to disk.

use crate::outcome::ErrorClass;

#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub req_id: u64,
    pub step: u32,
    pub users: u32,
    /// When the request was sent, unix epoch microseconds.
    pub start_us: i64,
    pub latency_us: i64,
    /// 0 when no response arrived.
    pub status: u16,
    pub error: Option<ErrorClass>,
    pub bytes: u64,
}
