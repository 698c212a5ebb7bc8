//! Changes of load asked while a run goes (from its live page or `pinchpoint control`):
//! each starts a new step at that many users from the moment the driver takes it, held
//! until the run's planned end or the next change: users in closed loop, a constant
//! arrival rate in open loop.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Changes a run takes at most: each is a step, kept in memory and in run.json.
pub const MAX_CHANGES: usize = 1000;

/// A change as asked: `id` is the asker's, to find who asked it in the summary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Asked {
    pub id: u64,
    /// Closed loop: the users (0 in open loop).
    pub users: u32,
    /// Open loop: requests per second (0 in closed loop).
    pub rate: f64,
}

/// A change as the driver made it: the step it began, and when (unix µs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Applied {
    pub id: u64,
    pub step: u32,
    pub users: u32,
    pub rate: f64,
    pub at_us: i64,
}

/// The changes asked and not yet taken, and those made, in order.
#[derive(Debug, Default)]
pub struct Control {
    asked: Mutex<VecDeque<Asked>>,
    applied: Mutex<Vec<Applied>>,
    /// Wakes the driver as a change is asked, rather than at its next poll.
    asking: Notify,
}

impl Control {
    /// Queues a change of users (closed loop); refused past MAX_CHANGES asked in the run.
    pub fn ask(&self, id: u64, users: u32) -> Result<(), String> {
        self.queue(Asked { id, users, rate: 0.0 })
    }

    /// Queues a change of rate (open loop), in requests per second above zero.
    pub fn ask_rate(&self, id: u64, rate: f64) -> Result<(), String> {
        if !rate.is_finite() || rate <= 0.0 {
            return Err(format!("rate: {rate}: requests per second above 0"));
        }
        self.queue(Asked { id, users: 0, rate })
    }

    fn queue(&self, change: Asked) -> Result<(), String> {
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        let made = self.applied.lock().unwrap_or_else(|e| e.into_inner()).len();
        if made + asked.len() >= MAX_CHANGES {
            return Err(format!("a run takes at most {MAX_CHANGES} changes"));
        }
        asked.push_back(change);
        self.asking.notify_one();
        Ok(())
    }

    /// The change asked first and not yet taken.
    pub fn next(&self) -> Option<Asked> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }

    pub fn made(&self, change: Applied) {
        self.applied.lock().unwrap_or_else(|e| e.into_inner()).push(change);
    }

    /// Sleeps `d`, or less when a change is asked meanwhile.
    pub async fn sleep_unless_asked(&self, d: std::time::Duration) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.asking.notified() => {}
        }
    }

    /// The changes made, in order.
    pub fn applied(&self) -> Vec<Applied> {
        self.applied.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
