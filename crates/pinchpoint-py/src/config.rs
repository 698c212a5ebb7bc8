//! The run's configuration from Python: the dict `load/engine_config.py` builds
//! (`EngineConfig`), read as data by the engine's own types, which define its keys
//! (`pinchpoint_engine::config`); the hook, a function, is attached apart.

use std::collections::BTreeMap;
use std::sync::Arc;

use pinchpoint_engine::config::{fields, json};
use pinchpoint_engine::{FlowSpec, HookHandle, RunConfig};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

use crate::flows::PyHook;

/// The engine's configuration of `config`; a ValueError names the key that is wrong.
pub(crate) fn run_config(config: &Bound<'_, PyDict>) -> PyResult<RunConfig> {
    let hook = config.get_item("hook")?.filter(|h| !h.is_none()).map(Bound::unbind);
    let data = config.copy()?;
    if data.contains("hook")? {
        data.set_item("hook", config.py().None())?;
    }
    let mut run: RunConfig = read(data.as_any(), "engine config")?;
    run.hook = hook.map(|f| HookHandle(Arc::new(PyHook(f))));
    Ok(run)
}

/// The flows of a run's configuration (its `flows`).
pub(crate) fn flow_specs(flows: &Bound<'_, PyAny>) -> PyResult<Vec<FlowSpec>> {
    read(flows, "engine flows")
}

fn read<T: DeserializeOwned>(data: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    serde_json::from_value(plain(data)?).or_else(|e| {
        // The data was consumed: read it again to find the key that is wrong.
        let why = json::error_at::<T>(&plain(data)?).unwrap_or_else(|| e.to_string());
        Err(PyValueError::new_err(format!("{what}: {why}")))
    })
}

/// The keys of each record of the configuration, by path (`flows[].steps[]`; "" the
/// whole), each true if its value may be None: what `EngineConfig` must match.
#[pyfunction]
pub fn config_records() -> PyResult<BTreeMap<String, BTreeMap<&'static str, bool>>> {
    fields::run_config_records().map_err(PyValueError::new_err)
}

/// `value` as JSON data: bytes as a list of their values, a path as its text.
fn plain(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_value(value).map_err(|e| PyTypeError::new_err(format!("engine config: {}: {}", e.path(), e.why)))
}

/// What is not data, and where (innermost key first).
struct NotData {
    under: Vec<String>,
    why: String,
}

impl NotData {
    fn new(why: String) -> Self {
        NotData { under: Vec::new(), why }
    }

    fn under(mut self, key: String) -> Self {
        self.under.push(key);
        self
    }

    fn path(&self) -> String {
        let path: String = self.under.iter().rev().map(String::as_str).collect::<Vec<_>>().join("");
        path.strip_prefix('.').map(str::to_owned).unwrap_or(path)
    }
}

fn to_value(v: &Bound<'_, PyAny>) -> Result<Value, NotData> {
    let why = |e: PyErr| NotData::new(e.to_string());
    // Text first: most of a large configuration is a feed's cells.
    if let Ok(s) = v.downcast::<PyString>() {
        return Ok(Value::String(s.to_str().map_err(why)?.to_owned()));
    }
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        return match (v.extract::<i64>(), v.extract::<u64>()) {
            (Ok(i), _) => Ok(i.into()),
            (_, Ok(u)) => Ok(u.into()),
            _ => Err(NotData::new(format!("{v} is beyond 64 bits"))),
        };
    }
    if let Ok(f) = v.downcast::<PyFloat>() {
        let n = f.value();
        return Number::from_f64(n).map(Value::Number).ok_or_else(|| NotData::new(format!("{n} is not a finite number")));
    }
    if let Ok(b) = v.downcast::<PyBytes>() {
        return Ok(Value::Array(b.as_bytes().iter().map(|&x| Value::from(x)).collect()));
    }
    if let Ok(d) = v.downcast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, x) in d.iter() {
            let key = k.downcast::<PyString>().map_err(|_| NotData::new(format!("the key {k} is not text")))?;
            let key = key.to_str().map_err(why)?.to_owned();
            let value = to_value(&x).map_err(|e| e.under(format!(".{key}")))?;
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = v.downcast::<PyList>() {
        return items(l.iter());
    }
    if let Ok(t) = v.downcast::<PyTuple>() {
        return items(t.iter());
    }
    if v.hasattr("__fspath__").map_err(why)? {
        let path = v.call_method0("__fspath__").and_then(|p| p.extract::<String>()).map_err(why)?;
        return Ok(Value::String(path));
    }
    let kind = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    Err(NotData::new(format!("type {kind} is not data")))
}

fn items<'py>(items: impl Iterator<Item = Bound<'py, PyAny>>) -> Result<Value, NotData> {
    items
        .enumerate()
        .map(|(i, x)| to_value(&x).map_err(|e| e.under(format!("[{i}]"))))
        .collect::<Result<_, _>>()
        .map(Value::Array)
}
