//! The live counters of each step by the step its requests were sent in (the record's
//! `step`), not the step current when a watcher reads them: a second that straddles two
//! steps is split between them, and each part is counted for its own step.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hdrhistogram::Histogram;

use crate::kind::{self, Kinds, PerKind};
use crate::outcome::ErrorClass;
use crate::record::Record;

/// One step's counts so far and the latencies of its answered requests since the last take.
#[derive(Clone)]
pub struct StepLive {
    pub step: u32,
    /// The users its last request was tagged with (0 in open loop).
    pub users: u32,
    pub requests: u64,
    /// Failed, or answered with a status of 400 or more.
    pub errors: u64,
    /// Failed requests by class (ErrorClass::index), and answered 4xx and 5xx.
    pub classes: [u64; ErrorClass::ALL.len()],
    pub status_4xx: u64,
    pub status_5xx: u64,
    /// Its records and failures of each kind (a request, a WebSocket session or message,
    /// a gRPC call or streamed message).
    pub kinds: PerKind,
    /// When its earliest request was sent, unix µs: about when the step began.
    pub first_start_us: i64,
    pub window: Histogram<u64>,
    changed: bool,
}

impl StepLive {
    fn new(step: u32, window: Histogram<u64>) -> Self {
        Self {
            step,
            users: 0,
            requests: 0,
            errors: 0,
            classes: [0; ErrorClass::ALL.len()],
            status_4xx: 0,
            status_5xx: 0,
            kinds: PerKind::default(),
            first_start_us: i64::MAX,
            window,
            changed: false,
        }
    }

    fn add(&mut self, r: &Record, kinds: &Kinds) {
        self.requests += 1;
        kind::count(&mut self.kinds, kinds.of(r.endpoint), r);
        self.users = r.users;
        self.first_start_us = self.first_start_us.min(r.start_us);
        self.changed = true;
        match r.error {
            Some(e) => self.classes[e.index()] += 1,
            None if r.status >= 500 => self.status_5xx += 1,
            None if r.status >= 400 => self.status_4xx += 1,
            None => {}
        }
        if r.error.is_some() || r.status >= 400 {
            self.errors += 1;
        }
        if r.error.is_none() {
            let us = r.latency_us.clamp(1, self.window.high() as i64) as u64;
            self.window.record(us).expect("latency clamped into the histogram's range");
        }
    }
}

/// The steps of a run so far (as many as the plan has), fed by the recorder.
#[derive(Default)]
pub struct LiveSteps {
    steps: Mutex<BTreeMap<u32, StepLive>>,
}

impl std::fmt::Debug for LiveSteps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveSteps")
    }
}

impl LiveSteps {
    /// Counts `records`, each as the kind `kinds` give its endpoint; a step's first gets
    /// a window made by `new_window`.
    pub fn add(&self, records: &[Record], new_window: fn() -> Histogram<u64>, kinds: &Kinds) {
        let mut steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        for r in records {
            steps.entry(r.step).or_insert_with(|| StepLive::new(r.step, new_window())).add(r, kinds);
        }
    }

    /// The steps that had requests end since the previous take, in step order, with
    /// their counts so far and their windows, which are left empty.
    pub fn take(&self) -> Vec<StepLive> {
        let mut steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for s in steps.values_mut().filter(|s| s.changed) {
            out.push(s.clone());
            s.window.reset();
            s.changed = false;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(step: u32, start_us: i64, status: u16, error: Option<ErrorClass>) -> Record {
        Record {
            req_id: 0,
            step,
            users: step + 1,
            endpoint: 0,
            start_us,
            intended_us: start_us,
            latency_us: 2_000,
            service_us: 2_000,
            status,
            error,
            bytes: 0,
            walk: None,
        }
    }

    #[test]
    fn a_batch_across_two_steps_counts_each_for_its_own() {
        let window = || Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
        let live = LiveSteps::default();
        live.add(&[
            record(0, 100, 200, None),
            record(0, 90, 503, None),
            record(1, 200, 200, None),
            record(1, 210, 0, Some(ErrorClass::Timeout)),
            record(1, 220, 404, None),
        ], window, &Kinds::default());
        let taken = live.take();
        assert_eq!(taken.len(), 2);
        let (a, b) = (&taken[0], &taken[1]);
        assert_eq!((a.step, a.users, a.requests, a.errors, a.status_5xx), (0, 1, 2, 1, 1));
        assert_eq!(a.first_start_us, 90);
        assert_eq!(a.window.len(), 2);
        assert_eq!((b.step, b.users, b.requests, b.errors, b.status_4xx), (1, 2, 3, 2, 1));
        assert_eq!(b.classes[ErrorClass::Timeout.index()], 1);
        assert_eq!(b.window.len(), 2);
        // Only the steps with new requests come back, their windows emptied, counts kept.
        live.add(&[record(1, 300, 200, None)], window, &Kinds::default());
        let again = live.take();
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].step, again[0].requests, again[0].window.len()), (1, 4, 1));
        assert!(live.take().is_empty());
    }

    #[test]
    fn each_step_counts_its_records_by_their_endpoints_kind() {
        let window = || Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
        let mut specs = [crate::config::RequestSpec::get("/"), crate::config::RequestSpec::get("/ws")];
        specs[1].ws = true;
        let (endpoints, sessions, calls) = crate::drive::open_ws::sessions(&specs).expect("sessions");
        let kinds = Kinds::of_open(&endpoints, &sessions, &calls);
        let at = |endpoint, step, status, error| Record { endpoint, ..record(step, 0, status, error) };
        let live = LiveSteps::default();
        live.add(&[at(0, 0, 200, None), at(1, 0, 101, None), at(1, 0, 0, Some(ErrorClass::ConnectRefused)), at(0, 1, 500, None)], window, &kinds);
        let taken = live.take();
        let count = |s: &StepLive, k: crate::kind::Kind| (s.kinds[k.index()].requests, s.kinds[k.index()].errors);
        assert_eq!(count(&taken[0], crate::kind::Kind::Request), (1, 0));
        assert_eq!(count(&taken[0], crate::kind::Kind::WsSession), (2, 1));
        assert_eq!(count(&taken[1], crate::kind::Kind::Request), (1, 1));
        assert_eq!(count(&taken[1], crate::kind::Kind::WsSession), (0, 0));
    }
}
