//! Flows from Python: the plan's `[[flow]]` as the engine's `FlowSpec`, a Python
//! function as the engine's `Hook`, and a check of a JSONPath or regular expression
//! for the plan to refuse before the run.

use pinchpoint_engine::flow::extract;
use pinchpoint_engine::{CaptureFrom, CaptureSpec, CheckSpec, FeedSpec, FlowSpec, FlowStepSpec, Hook, RequestSpec};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::{PyRequest, PyThink};

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PyFeed {
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
    per_user: bool,
    random: bool,
}

/// A capture `(variable, kind, text)`, kind json, regex, header or cookie; a check
/// `(kind, text, expected)`, kind status (text: codes separated by commas), contains,
/// matches or json (expected: the value, a template).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PyFlowStep {
    request: PyRequest,
    think: Option<PyThink>,
    captures: Vec<(String, String, String)>,
    checks: Vec<(String, String, String)>,
    hook: bool,
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct PyFlow {
    name: String,
    weight: u32,
    steps: Vec<PyFlowStep>,
    feed: Option<PyFeed>,
}

fn capture_from(kind: &str, text: String) -> PyResult<CaptureFrom> {
    Ok(match kind {
        "json" => CaptureFrom::Json(text),
        "regex" => CaptureFrom::Regex(text),
        "header" => CaptureFrom::Header(text),
        "cookie" => CaptureFrom::Cookie(text),
        other => return Err(PyValueError::new_err(format!("unknown capture kind {other:?}"))),
    })
}

fn check(kind: &str, text: String, expected: String) -> PyResult<CheckSpec> {
    Ok(match kind {
        "status" => CheckSpec::Status(
            text.split(',')
                .map(|c| c.trim().parse::<u16>().map_err(|_| PyValueError::new_err(format!("status {c:?} is not a code"))))
                .collect::<PyResult<_>>()?,
        ),
        "contains" => CheckSpec::Contains(text),
        "matches" => CheckSpec::Matches(text),
        "json" => CheckSpec::JsonEquals { path: text, expected },
        other => return Err(PyValueError::new_err(format!("unknown check kind {other:?}"))),
    })
}

impl PyFlow {
    pub fn into_spec(self) -> PyResult<FlowSpec> {
        let steps = self
            .steps
            .into_iter()
            .map(|s| {
                Ok(FlowStepSpec {
                    request: s.request.into_spec()?,
                    think: s.think.map(PyThink::into_think).transpose()?,
                    captures: s
                        .captures
                        .into_iter()
                        .map(|(var, kind, text)| Ok(CaptureSpec { var, from: capture_from(&kind, text)? }))
                        .collect::<PyResult<_>>()?,
                    checks: s.checks.into_iter().map(|(k, t, e)| check(&k, t, e)).collect::<PyResult<_>>()?,
                    hook: s.hook,
                })
            })
            .collect::<PyResult<_>>()?;
        let feed = self.feed.map(|f| FeedSpec { columns: f.columns, rows: f.rows, per_user: f.per_user, random: f.random });
        Ok(FlowSpec { name: self.name, weight: self.weight, steps, feed })
    }
}

/// A Python function `hook(request, vars)`: `request` a dict (method, path, headers as
/// a list of pairs, body as bytes) it may change in place or replace by returning one.
pub struct PyHook(pub Py<PyAny>);

impl Hook for PyHook {
    fn call(&self, endpoint: u16, vars: &[(String, String)], request: &mut RequestSpec) -> Result<(), String> {
        Python::with_gil(|py| {
            let given = PyDict::new(py);
            given.set_item("step", endpoint)?;
            given.set_item("method", &request.method)?;
            given.set_item("path", &request.path)?;
            given.set_item("headers", PyList::new(py, request.headers.iter())?)?;
            given.set_item("body", PyBytes::new(py, &request.body))?;
            let values = PyDict::new(py);
            for (k, v) in vars {
                values.set_item(k, v)?;
            }
            let returned = self.0.call1(py, (given.clone(), values))?;
            let out = if returned.is_none(py) { given } else { returned.into_bound(py).downcast_into::<PyDict>()? };
            let item = |k: &str| out.get_item(k).ok().flatten().ok_or_else(|| PyValueError::new_err(format!("no {k:?}")));
            request.method = item("method")?.extract()?;
            request.path = item("path")?.extract()?;
            request.headers = item("headers")?.extract()?;
            let body = item("body")?;
            request.body = match body.extract::<String>() {
                Ok(text) => text.into_bytes(),
                Err(_) => body.extract::<Vec<u8>>()?,
            };
            Ok(())
        })
        .map_err(|e: PyErr| Python::with_gil(|py| describe(py, &e)))
    }
}

fn describe(py: Python<'_>, e: &PyErr) -> String {
    let name = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
    format!("{name}: {}", e.value(py))
}

/// None if `text` compiles as a capture or check of `kind` (json or regex), else why not.
#[pyfunction]
pub fn expression_error(kind: &str, text: &str) -> PyResult<Option<String>> {
    Ok(match kind {
        "json" => extract::json_path(text).err(),
        "regex" => extract::regex(text).err(),
        other => return Err(PyValueError::new_err(format!("unknown expression kind {other:?}"))),
    })
}

/// None if the engine compiles `flows` as it would for a run (templates, captures,
/// checks, feeds), else why not: what the plan's own check must have refused before.
#[pyfunction]
pub fn flows_error(flows: Vec<PyFlow>) -> PyResult<Option<String>> {
    let specs = flows.into_iter().map(PyFlow::into_spec).collect::<PyResult<Vec<_>>>()?;
    Ok(pinchpoint_engine::flow::compile(&specs).err())
}
