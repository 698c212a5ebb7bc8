//! What the run measured: per-step histograms and counts, and the live counters
//! that a caller polls while the run goes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use hdrhistogram::Histogram;

use crate::kind::{self, Kinds, LiveKindCount, PerKind};
use crate::outcome::ErrorClass;
use crate::record::Record;

/// When a step or phase ran, in unix microseconds.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start_us: i64,
    pub end_us: i64,
}

/// Latencies are recorded in microseconds, from 1 µs to one hour, 3 significant digits.
pub const HIST_MAX_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, 3).expect("valid histogram bounds")
}

#[derive(Clone, Debug)]
pub struct StepStats {
    pub step: u32,
    pub users: u32,
    pub requests: u64,
    pub responses: u64,
    pub errors: [u64; ErrorClass::ALL.len()],
    pub statuses: BTreeMap<u16, u64>,
    pub bytes: u64,
    /// Latencies of the answered requests (any status); none of those that failed.
    pub histogram: Histogram<u64>,
    /// The same per request of the plan, indexed by the record's `endpoint`.
    pub endpoints: Vec<EndpointStats>,
    /// Open loop: how late every request left against its schedule; None in closed loop.
    pub send_lag: Option<SendLag>,
}

/// The send lags of a step's requests (`start_us - intended_us`, all of them, answered or
/// not): a histogram of the lags clamped into 1 µs .. one hour, as the latencies, and the
/// largest lag exactly.
#[derive(Clone, Debug)]
pub struct SendLag {
    pub histogram: Histogram<u64>,
    pub max_us: Option<i64>,
}

impl SendLag {
    fn new() -> Self {
        Self { histogram: new_histogram(), max_us: None }
    }

    fn add(&mut self, lag_us: i64) {
        let clamped = lag_us.clamp(1, HIST_MAX_US as i64) as u64;
        self.histogram.record(clamped).expect("lag clamped into the histogram's range");
        self.max_us = Some(self.max_us.map_or(lag_us, |m| m.max(lag_us)));
    }
}

#[derive(Clone, Debug)]
pub struct EndpointStats {
    pub requests: u64,
    /// Requests that got no response or an HTTP status of 400 or more.
    pub failed: u64,
    /// Latencies of the answered requests.
    pub histogram: Histogram<u64>,
}

impl EndpointStats {
    fn new() -> Self {
        Self { requests: 0, failed: 0, histogram: new_histogram() }
    }
}

impl StepStats {
    pub fn new(step: u32, users: u32) -> Self {
        Self {
            step,
            users,
            requests: 0,
            responses: 0,
            errors: [0; ErrorClass::ALL.len()],
            statuses: BTreeMap::new(),
            bytes: 0,
            histogram: new_histogram(),
            endpoints: Vec::new(),
            send_lag: None,
        }
    }

    /// An open-loop phase's statistics, which keep the send lag too.
    pub fn open(step: u32) -> Self {
        Self { send_lag: Some(SendLag::new()), ..Self::new(step, 0) }
    }

    pub fn add(&mut self, r: &Record) {
        self.requests += 1;
        self.bytes += r.bytes;
        match r.error {
            Some(e) => self.errors[e.index()] += 1,
            None => {
                self.responses += 1;
                *self.statuses.entry(r.status).or_insert(0) += 1;
            }
        }
        if let Some(lag) = self.send_lag.as_mut() {
            lag.add(r.start_us - r.intended_us);
        }
        let us = r.latency_us.clamp(1, HIST_MAX_US as i64) as u64;
        if r.error.is_none() {
            self.histogram.record(us).expect("latency clamped into the histogram's range");
        }
        let at = r.endpoint as usize;
        if self.endpoints.len() <= at {
            self.endpoints.resize_with(at + 1, EndpointStats::new);
        }
        let e = &mut self.endpoints[at];
        e.requests += 1;
        e.failed += u64::from(r.error.is_some() || r.status >= 400);
        if r.error.is_none() {
            e.histogram.record(us).expect("latency clamped into the histogram's range");
        }
    }
}

/// Latencies of the answered requests since the last time a watcher took them: the
/// live view's window, kept per request of the plan (the record's `endpoint`) with each
/// one's requests and failures so far.
pub struct LiveWindow {
    endpoints: Mutex<Vec<LiveEndpoint>>,
}

/// One request of the plan, live: its window of latencies and its counts so far.
#[derive(Clone)]
pub struct LiveEndpoint {
    pub window: Histogram<u64>,
    pub requests: u64,
    /// Failed, or answered with a status of 400 or more.
    pub failed: u64,
}

impl LiveEndpoint {
    fn new() -> Self {
        Self { window: new_histogram(), requests: 0, failed: 0 }
    }
}

impl Default for LiveWindow {
    fn default() -> Self {
        Self { endpoints: Mutex::new(Vec::new()) }
    }
}

impl std::fmt::Debug for LiveWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveWindow")
    }
}

/// Requests of a plan past this many share the last one's live counts (endpoint is u16).
pub const MAX_LIVE_ENDPOINTS: usize = 1024;

impl LiveWindow {
    fn add(&self, records: &[Record]) {
        let mut endpoints = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        for r in records {
            let at = (r.endpoint as usize).min(MAX_LIVE_ENDPOINTS - 1);
            if endpoints.len() <= at {
                endpoints.resize_with(at + 1, LiveEndpoint::new);
            }
            let e = &mut endpoints[at];
            e.requests += 1;
            e.failed += u64::from(r.error.is_some() || r.status >= 400);
            if r.error.is_none() {
                let us = r.latency_us.clamp(1, HIST_MAX_US as i64) as u64;
                e.window.record(us).expect("latency clamped into the histogram's range");
            }
        }
    }

    /// The latencies recorded since the previous take, all requests together and per
    /// request of the plan (with their counts so far), leaving the windows empty.
    pub fn take(&self) -> (Histogram<u64>, Vec<LiveEndpoint>) {
        let mut endpoints = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        let taken = endpoints.clone();
        for e in endpoints.iter_mut() {
            e.window.reset();
        }
        drop(endpoints);
        let mut all = new_histogram();
        for e in &taken {
            all.add(&e.window).expect("windows share their bounds");
        }
        (all, taken)
    }
}

/// Counters updated as records arrive, read by whoever watches the run.
#[derive(Default, Debug)]
pub struct Live {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub step: AtomicUsize,
    pub users: AtomicU32,
    pub latency_sum_us: AtomicU64,
    /// The current step's load level × 1000: users, or requests per second (open loop).
    pub level_milli: AtomicU64,
    /// Open loop: requests that waited for a free connection (the cap was reached).
    pub late: AtomicU64,
    /// Failed requests so far by class of error (ErrorClass::index), and answered with a
    /// status of 400 to 499 and of 500 or more.
    pub classes: [AtomicU64; ErrorClass::ALL.len()],
    pub status_4xx: AtomicU64,
    pub status_5xx: AtomicU64,
    pub window: LiveWindow,
    /// Requests sent and not yet answered, now.
    pub in_flight: Arc<AtomicU64>,
    /// The longest a request of the batches since the last take was sent after its
    /// intended time, in µs (open loop; 0 in closed loop).
    pub lag_max_us: AtomicU64,
    /// The same counts and window per step, by the step each request was sent in.
    pub steps: crate::live_steps::LiveSteps,
    /// Changes of users asked while the run goes (`control.rs`).
    pub control: crate::control::Control,
    /// The kind of each endpoint, set by the run before its first record (unset: every
    /// record is a request), and the records and failures of each kind so far.
    pub kinds: OnceLock<Kinds>,
    pub by_kind: [LiveKindCount; kind::Kind::ALL.len()],
}

/// The kinds of a run whose endpoints' kinds were not set: every record a request.
static NO_KINDS: Kinds = Kinds::EMPTY;

impl Live {
    pub fn add(&self, records: &[Record]) {
        // One pass over the batch, one atomic add per counter.
        let mut classes = [0u64; ErrorClass::ALL.len()];
        let kinds = self.kinds.get().unwrap_or(&NO_KINDS);
        let mut by_kind = PerKind::default();
        let (mut status_4xx, mut status_5xx, mut latency, mut lag) = (0u64, 0u64, 0i64, 0i64);
        for r in records {
            latency += r.latency_us.max(0);
            lag = lag.max(r.start_us - r.intended_us);
            kind::count(&mut by_kind, kinds.of(r.endpoint), r);
            match r.error {
                Some(e) => classes[e.index()] += 1,
                None if r.status >= 500 => status_5xx += 1,
                None if r.status >= 400 => status_4xx += 1,
                None => {}
            }
        }
        let errors = classes.iter().sum::<u64>() + status_4xx + status_5xx;
        self.requests.fetch_add(records.len() as u64, Ordering::Relaxed);
        self.errors.fetch_add(errors, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(latency as u64, Ordering::Relaxed);
        for (counter, n) in self.classes.iter().zip(classes) {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.status_4xx.fetch_add(status_4xx, Ordering::Relaxed);
        self.status_5xx.fetch_add(status_5xx, Ordering::Relaxed);
        if lag > 0 {
            self.lag_max_us.fetch_max(lag as u64, Ordering::Relaxed);
        }
        for (live, n) in self.by_kind.iter().zip(by_kind) {
            live.add(n);
        }
        self.window.add(records);
        self.steps.add(records, new_histogram, kinds);
    }
}
