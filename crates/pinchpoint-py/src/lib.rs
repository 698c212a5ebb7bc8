//! `pinchpoint._engine`: starts a load run on its own threads and lets Python watch,
//! stop and collect it without holding the GIL; and scans nginx access logs
//! (`NginxScanner`, in `logs.rs`).

/// Sets each `"key" => value` on a Python dict, in order, returning the first error.
macro_rules! set_items {
    ($d:expr; $($key:literal => $value:expr),+ $(,)?) => {
        $($d.set_item($key, $value)?;)+
    };
}

mod config;
mod flows;
mod logs;
mod remote_write;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use pinchpoint_engine::stats::new_histogram;
use pinchpoint_engine::{ErrorClass, Kind, KindCount, Kinds, Level, Live, RunSummary, StepStats};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{name}: {value} is not a duration in seconds")))
}

/// A load run going on in the background.
#[pyclass]
struct LoadRun {
    /// Open loop: the live level is a target rate, not users.
    open_loop: bool,
    /// Why `set_users` is refused for this run (None: it is taken).
    fixed: Option<&'static str>,
    stop: Arc<AtomicBool>,
    abandon: Arc<AtomicBool>,
    live: Arc<Live>,
    result: Mutex<Option<Receiver<Result<RunSummary, String>>>>,
}

#[pymethods]
impl LoadRun {
    /// Asks the run to stop after the requests in flight; `wait` then returns it.
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops the run and drops the requests in flight at once; `wait` then returns it
    /// with every request that ended before (`abandoned`: how many were dropped).
    fn abandon(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.abandon.store(true, Ordering::Relaxed);
    }

    /// From the driver's next look (within 20 ms), `users` users in a step of their own,
    /// held until the run's planned end or the next change; `id` names the change in the
    /// summary's `changes`. A ValueError says why a run cannot take it.
    fn set_users(&self, id: u64, users: u32) -> PyResult<()> {
        if let Some(why) = self.fixed {
            return Err(PyValueError::new_err(why));
        }
        if self.open_loop {
            return Err(PyValueError::new_err("an open-loop run takes a rate, not users"));
        }
        if users == 0 {
            return Err(PyValueError::new_err("users: at least 1"));
        }
        self.live.control.ask(id, users).map_err(PyValueError::new_err)
    }

    /// Open loop: from the scheduler's next look (within 20 ms), arrivals at `rate` per
    /// second in a phase of their own until the planned end or the next change, spread
    /// as the plan's arrivals; as `set_users` otherwise.
    fn set_rate(&self, id: u64, rate: f64) -> PyResult<()> {
        if let Some(why) = self.fixed {
            return Err(PyValueError::new_err(why));
        }
        if !self.open_loop {
            return Err(PyValueError::new_err("a closed-loop run takes users, not a rate"));
        }
        self.live.control.ask_rate(id, rate).map_err(PyValueError::new_err)
    }

    /// Live counters: requests and errors so far, the current step, its users and its
    /// level (`kind` users, or rate: target requests/s), requests late so far (open loop).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        set_items!(d;
            "requests" => self.live.requests.load(Ordering::Relaxed),
            "errors" => self.live.errors.load(Ordering::Relaxed),
            "step" => self.live.step.load(Ordering::Relaxed),
            "users" => self.live.users.load(Ordering::Relaxed),
            "latency_sum_us" => self.live.latency_sum_us.load(Ordering::Relaxed),
            "kind" => if self.open_loop { "rate" } else { "users" },
            "level" => self.live.level_milli.load(Ordering::Relaxed) as f64 / 1000.0,
            "late" => self.live.late.load(Ordering::Relaxed),
            "in_flight" => self.live.in_flight.load(Ordering::Relaxed),
        );
        // The longest send lag of the requests recorded since the previous snapshot.
        d.set_item("send_lag_max_us", self.live.lag_max_us.swap(0, Ordering::Relaxed))?;
        d.set_item("errors_by_class", live_classes(py, &self.live)?)?;
        let by_kind: Vec<KindCount> = self.live.by_kind.iter().map(|k| k.load()).collect();
        d.set_item("by_kind", kind_counts(py, &by_kind)?)?;
        // Latencies since the previous snapshot: the live view's last window, and whole
        // (V2) for those who want any percentile of it or to add windows up.
        let (window, endpoints) = self.live.window.take();
        d.set_item("window_requests", window.len())?;
        if !window.is_empty() {
            d.set_item("window_p50_us", window.value_at_quantile(0.5))?;
            d.set_item("window_p99_us", window.value_at_quantile(0.99))?;
            d.set_item("window_hdr_v2", PyBytes::new(py, &v2(&window)?))?;
        }
        // Per request of the plan (by the records' `endpoint`): counts so far, and the
        // window's latencies when it has any.
        let list = PyList::empty(py);
        for e in &endpoints {
            let one = PyDict::new(py);
            one.set_item("requests", e.requests)?;
            one.set_item("errors", e.failed)?;
            if !e.window.is_empty() {
                one.set_item("window_hdr_v2", PyBytes::new(py, &v2(&e.window)?))?;
            }
            list.append(one)?;
        }
        d.set_item("endpoints", list)?;
        d.set_item("by_step", live_steps(py, &self.live)?)?;
        Ok(d)
    }

    /// Waits up to `timeout_s` with the GIL released; the summary when the run has
    /// ended, None while it goes on.
    fn wait<'py>(&self, py: Python<'py>, timeout_s: f64) -> PyResult<Option<Bound<'py, PyDict>>> {
        let timeout = seconds("timeout_s", timeout_s)?;
        let taken = self.result.lock().map_err(|_| PyRuntimeError::new_err("poisoned"))?.take();
        let Some(rx) = taken else {
            return Err(PyRuntimeError::new_err("the run's result was already taken"));
        };
        let (rx, got) = py.allow_threads(move || {
            let got = rx.recv_timeout(timeout);
            (rx, got)
        });
        match got {
            Err(RecvTimeoutError::Timeout) => {
                *self.result.lock().map_err(|_| PyRuntimeError::new_err("poisoned"))? = Some(rx);
                Ok(None)
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err(PyRuntimeError::new_err("the load engine thread died"))
            }
            Ok(result) => {
                let summary = result.map_err(PyRuntimeError::new_err)?;
                Ok(Some(summary_dict(py, &summary)?))
            }
        }
    }
}

fn v2(histogram: &Histogram<u64>) -> PyResult<Vec<u8>> {
    let mut hdr = Vec::new();
    V2Serializer::new()
        .serialize(histogram, &mut hdr)
        .map_err(|e| PyRuntimeError::new_err(format!("histogram serialization: {e:?}")))?;
    Ok(hdr)
}

/// The records and failures of each kind that has records, by the kind's name.
fn kind_counts<'py>(py: Python<'py>, counts: &[KindCount]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (kind, n) in Kind::ALL.iter().zip(counts) {
        if n.requests > 0 {
            let one = PyDict::new(py);
            one.set_item("requests", n.requests)?;
            one.set_item("errors", n.errors)?;
            d.set_item(kind.name(), one)?;
        }
    }
    Ok(d)
}

/// A step's records of each kind that has any, from its endpoints': their requests,
/// those that `failed` and the latencies of their answers.
fn step_kinds<'py>(py: Python<'py>, s: &StepStats, kinds: &Kinds) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for kind in Kind::ALL {
        let mine: Vec<_> = s.endpoints.iter().enumerate().filter(|(i, _)| kinds.of(*i as u16) == kind).map(|(_, e)| e).collect();
        let requests: u64 = mine.iter().map(|e| e.requests).sum();
        if requests == 0 {
            continue;
        }
        let mut histogram = new_histogram();
        for e in &mine {
            histogram.add(&e.histogram).map_err(|e| PyRuntimeError::new_err(format!("histogram: {e:?}")))?;
        }
        let one = PyDict::new(py);
        one.set_item("requests", requests)?;
        one.set_item("failed", mine.iter().map(|e| e.failed).sum::<u64>())?;
        latency_items(py, &one, &histogram)?;
        d.set_item(kind.name(), one)?;
    }
    Ok(d)
}

fn step_dict<'py>(py: Python<'py>, s: &StepStats, level: Option<&Level>, kinds: &Kinds) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("step", s.step)?;
    d.set_item("users", s.users)?;
    if let Some(l) = level {
        set_items!(d;
            "kind" => if l.open_loop { "rate" } else { "users" },
            "level" => l.level,
            "intended" => l.intended,
            "late" => l.late,
            "unsent" => l.unsent,
        );
    }
    d.set_item("requests", s.requests)?;
    d.set_item("responses", s.responses)?;
    d.set_item("bytes", s.bytes)?;
    let errors = PyDict::new(py);
    for class in ErrorClass::ALL {
        let n = s.errors[class.index()];
        if n > 0 {
            errors.set_item(class.name(), n)?;
        }
    }
    d.set_item("errors", errors)?;
    let statuses = PyDict::new(py);
    for (code, n) in &s.statuses {
        statuses.set_item(*code, *n)?;
    }
    d.set_item("statuses", statuses)?;
    latency_items(py, &d, &s.histogram)?;
    let endpoints = PyList::empty(py);
    for (i, e) in s.endpoints.iter().enumerate() {
        let ed = PyDict::new(py);
        ed.set_item("endpoint", i)?;
        ed.set_item("requests", e.requests)?;
        ed.set_item("failed", e.failed)?;
        latency_items(py, &ed, &e.histogram)?;
        endpoints.append(ed)?;
    }
    d.set_item("endpoints", endpoints)?;
    d.set_item("kinds", step_kinds(py, s, kinds)?)?;
    // Open loop: the send lag of the step's requests, whole (V2) and its exact max.
    if let Some(lag) = &s.send_lag {
        if let Some(max_us) = lag.max_us {
            d.set_item("send_lag_hdr_v2", PyBytes::new(py, &v2(&lag.histogram)?))?;
            d.set_item("send_lag_max_us", max_us)?;
        }
    }
    Ok(d)
}

/// A histogram's percentiles, min, max and mean (µs), and the histogram itself
/// (HdrHistogram V2 encoding) into `d`.
/// The failed requests so far by class: the engine's error classes, and `http_4xx` and
/// `http_5xx` for those answered with such a status; classes with none are left out.
fn live_classes<'py>(py: Python<'py>, live: &Live) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for class in ErrorClass::ALL {
        let n = live.classes[class.index()].load(Ordering::Relaxed);
        if n > 0 {
            d.set_item(class.name(), n)?;
        }
    }
    for (name, n) in [("http_4xx", &live.status_4xx), ("http_5xx", &live.status_5xx)] {
        let n = n.load(Ordering::Relaxed);
        if n > 0 {
            d.set_item(name, n)?;
        }
    }
    Ok(d)
}

/// The steps whose requests ended since the previous snapshot, each counted by the step
/// its requests were sent in: counts so far, errors by class, when its first request
/// left (unix µs) and the window's latencies (V2) when it has any.
fn live_steps<'py>(py: Python<'py>, live: &Live) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in live.steps.take() {
        let d = PyDict::new(py);
        set_items!(d;
            "step" => s.step,
            "users" => s.users,
            "requests" => s.requests,
            "errors" => s.errors,
            "first_start_us" => s.first_start_us,
        );
        let classes = PyDict::new(py);
        for class in ErrorClass::ALL {
            if s.classes[class.index()] > 0 {
                classes.set_item(class.name(), s.classes[class.index()])?;
            }
        }
        for (name, n) in [("http_4xx", s.status_4xx), ("http_5xx", s.status_5xx)] {
            if n > 0 {
                classes.set_item(name, n)?;
            }
        }
        d.set_item("errors_by_class", classes)?;
        d.set_item("by_kind", kind_counts(py, &s.kinds)?)?;
        d.set_item("window_requests", s.window.len())?;
        if !s.window.is_empty() {
            d.set_item("window_p50_us", s.window.value_at_quantile(0.5))?;
            d.set_item("window_p99_us", s.window.value_at_quantile(0.99))?;
            d.set_item("window_hdr_v2", PyBytes::new(py, &v2(&s.window)?))?;
        }
        list.append(d)?;
    }
    Ok(list)
}

fn latency_items(py: Python<'_>, d: &Bound<'_, PyDict>, h: &Histogram<u64>) -> PyResult<()> {
    let pct = PyDict::new(py);
    if !h.is_empty() {
        for q in [50.0, 90.0, 95.0, 99.0, 99.9, 99.99] {
            pct.set_item(format!("p{q}"), h.value_at_quantile(q / 100.0))?;
        }
        d.set_item("min_us", h.min())?;
        d.set_item("max_us", h.max())?;
        d.set_item("mean_us", h.mean())?;
    }
    d.set_item("percentiles_us", pct)?;
    let mut hdr = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut hdr)
        .map_err(|e| PyRuntimeError::new_err(format!("histogram serialization: {e:?}")))?;
    d.set_item("hdr_v2", PyBytes::new(py, &hdr))?;
    Ok(())
}

fn summary_dict<'py>(py: Python<'py>, s: &RunSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let steps = PyList::empty(py);
    for st in &s.steps {
        steps.append(step_dict(py, st, s.levels.get(st.step as usize), &s.kinds)?)?;
    }
    d.set_item("steps", steps)?;
    let windows: Vec<(i64, i64)> = s.windows.iter().map(|w| (w.start_us, w.end_us)).collect();
    set_items!(d;
        "windows" => windows,
        "records" => s.records,
        "interrupted" => s.interrupted,
        "started_us" => s.started_us,
        "ended_us" => s.ended_us,
        "records_error" => s.records_error.clone(),
    );
    let reasons = PyDict::new(py);
    for (class, messages) in &s.reasons {
        reasons.set_item(class.name(), messages.clone())?;
    }
    d.set_item("error_reasons", reasons)?;
    d.set_item("abandoned", s.abandoned)?;
    let changes = PyList::empty(py);
    for c in &s.changes {
        let one = PyDict::new(py);
        set_items!(one;
            "id" => c.id,
            "step" => c.step,
            "users" => c.users,
            "rate" => c.rate,
            "at_us" => c.at_us,
        );
        changes.append(one)?;
    }
    d.set_item("changes", changes)?;
    // The kind of each endpoint index of the records (past the list: a request).
    d.set_item("endpoint_kinds", s.kinds.as_slice().iter().map(|k| k.name()).collect::<Vec<_>>())?;
    Ok(d)
}

/// Starts a run on background threads and returns at once. A ValueError names the
/// key of `config` that is wrong, or says why the run cannot go.
#[pyfunction]
fn start(config: &Bound<'_, PyDict>) -> PyResult<LoadRun> {
    let config = config::run_config(config)?;
    config.validate().map_err(PyValueError::new_err)?;
    let open_loop = config.open.is_some();
    let fixed = if !config.tag_levels.is_empty() {
        Some("a generator's share of the load cannot be changed while the run goes")
    } else {
        None
    };
    let stop = Arc::new(AtomicBool::new(false));
    let abandon = Arc::new(AtomicBool::new(false));
    let live = Arc::new(Live::default());
    let (tx, rx) = mpsc::channel();
    let (stop2, abandon2, live2) = (stop.clone(), abandon.clone(), live.clone());
    std::thread::Builder::new()
        .name("pinchpoint-engine".into())
        .spawn(move || {
            let _ = tx.send(pinchpoint_engine::run_until(&config, stop2, abandon2, live2));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the engine thread: {e}")))?;
    Ok(LoadRun { open_loop, fixed, stop, abandon, live, result: Mutex::new(Some(rx)) })
}

/// Converts a records stream (complete, or cut short by a killed run) to Parquet;
/// returns the number of rows.
#[pyfunction]
fn records_to_parquet(py: Python<'_>, src: PathBuf, dst: PathBuf) -> PyResult<u64> {
    py.allow_threads(|| pinchpoint_engine::records_to_parquet(&src, &dst))
        .map_err(PyRuntimeError::new_err)
}

/// The latency of the histograms (V2 bytes, as `hdr_v2` holds them) added together,
/// as a step's: `percentiles_us`, `min_us`, `max_us`, `mean_us` (none of the last
/// three when they hold no value) and the sum's `hdr_v2`.
#[pyfunction]
fn merged_latency<'py>(py: Python<'py>, histograms: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyDict>> {
    let mut total = new_histogram();
    let mut reader = Deserializer::new();
    for bytes in &histograms {
        let one: Histogram<u64> = reader
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| PyValueError::new_err(format!("not a V2 histogram: {e:?}")))?;
        total
            .add(&one)
            .map_err(|e| PyValueError::new_err(format!("histograms that do not add: {e:?}")))?;
    }
    let d = PyDict::new(py);
    latency_items(py, &d, &total)?;
    Ok(d)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(start, m)?)?;
    m.add_function(wrap_pyfunction!(records_to_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(merged_latency, m)?)?;
    m.add_function(wrap_pyfunction!(flows::expression_error, m)?)?;
    m.add_function(wrap_pyfunction!(flows::flows_error, m)?)?;
    m.add_function(wrap_pyfunction!(flows::grpc_method, m)?)?;
    m.add_function(wrap_pyfunction!(config::config_records, m)?)?;
    m.add_function(wrap_pyfunction!(remote_write::remote_write_body, m)?)?;
    m.add_function(wrap_pyfunction!(remote_write::remote_write_read, m)?)?;
    m.add_class::<LoadRun>()?;
    m.add_class::<logs::NginxScanner>()?;
    m.add_class::<logs::TiersBatch>()?;
    m.add("ERROR_CLASSES", ErrorClass::ALL.iter().map(|c| c.name()).collect::<Vec<_>>())?;
    m.add("KINDS", Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>())?;
    Ok(())
}
