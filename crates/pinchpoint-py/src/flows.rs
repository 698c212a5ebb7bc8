//! Flows from Python: a Python function as the engine's `Hook`, and checks of a
//! JSONPath or regular expression, or of whole flows, for the plan to refuse before
//! the run.

use std::path::PathBuf;

use pinchpoint_engine::config::GrpcSpec;
use pinchpoint_engine::flow::arith::Expr;
use pinchpoint_engine::flow::{extract, grpc};
use pinchpoint_engine::{Hook, RequestSpec};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// A Python function `hook(request, vars)`: `request` a dict (method, path, headers as
/// a list of pairs, body as bytes) it may change in place or replace by returning one.
pub struct PyHook(pub Py<PyAny>);

impl Hook for PyHook {
    fn call(&self, endpoint: u16, vars: &[(String, String)], request: &mut RequestSpec) -> Result<(), String> {
        Python::with_gil(|py| {
            let given = PyDict::new(py);
            set_items!(given;
                "step" => endpoint,
                "method" => &request.method,
                "path" => &request.path,
                "headers" => PyList::new(py, request.headers.iter())?,
                "body" => PyBytes::new(py, &request.body),
            );
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

/// None if `text` compiles as a capture or check of `kind` (json or regex, or arith: a
/// numeric check's expected value, whatever its variables), else why not.
#[pyfunction]
pub fn expression_error(kind: &str, text: &str) -> PyResult<Option<String>> {
    Ok(match kind {
        "json" => extract::json_path(text).err(),
        "regex" => extract::regex(text).err(),
        "arith" => Expr::parse(text, &|_| Some(0)).err(),
        other => return Err(PyValueError::new_err(format!("unknown expression kind {other:?}"))),
    })
}

/// None if the engine compiles `flows` as it would for a run (templates, captures,
/// checks, feeds), else why not: what the plan's own check must have refused before.
#[pyfunction]
pub fn flows_error(flows: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let specs = crate::config::flow_specs(flows)?;
    Ok(pinchpoint_engine::flow::compile(&specs).err())
}

/// Whether the gRPC method `method` (`package.Service/Method`) of `proto` answers with
/// a stream, after checking that `data` (the request message as JSON, its strings
/// possibly templates) is one of its messages. A ValueError's args name the plan's
/// field at fault (`proto`, `grpc` or `data`) and why.
#[pyfunction]
pub fn grpc_method(method: String, proto: PathBuf, import_paths: Vec<PathBuf>, data: &str) -> PyResult<bool> {
    let spec = GrpcSpec { method, proto, import_paths };
    let found = grpc::method(&spec).map_err(|(field, why)| PyValueError::new_err((field, why)))?;
    grpc::check_data(&found.input(), data).map_err(|why| PyValueError::new_err(("data", why)))?;
    Ok(found.is_server_streaming())
}
