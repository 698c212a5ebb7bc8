//! `pinchpoint._engine.NginxScanner`: an nginx access log scanned in Rust, in batches of
//! columns, with the GIL released while it reads and parses.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;

use pinchpoint_logs::{scan_file, Format, Parser, Scanner};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// The records of one run in one nginx access log, from a byte offset on.
#[pyclass(module = "pinchpoint._engine")]
pub struct NginxScanner {
    inner: Mutex<Scanner<File>>,
}

fn column<T: Copy, const N: usize>(
    py: Python<'_>,
    values: &[T],
    bytes: fn(T) -> [u8; N],
) -> Py<PyBytes> {
    let out: Vec<u8> = values.iter().flat_map(|v| bytes(*v)).collect();
    PyBytes::new(py, &out).unbind()
}

/// Values (a missing one as the default) and a validity byte per row (1: present).
fn nullable<T: Copy + Default, const N: usize>(
    py: Python<'_>,
    values: &[Option<T>],
    bytes: fn(T) -> [u8; N],
) -> (Py<PyBytes>, Py<PyBytes>) {
    let data: Vec<T> = values.iter().map(|v| v.unwrap_or_default()).collect();
    let valid: Vec<u8> = values.iter().map(|v| u8::from(v.is_some())).collect();
    (column(py, &data, bytes), PyBytes::new(py, &valid).unbind())
}

#[pymethods]
impl NginxScanner {
    /// `log_format` compiled, the file at `path` opened at `offset` (a missing file has
    /// no lines); lines longer than `max_line` bytes are cut. `compensated_sum`: sum
    /// upstream retries as Python 3.12+ `sum()` does.
    #[new]
    #[pyo3(signature = (path, offset, log_format, run_id, max_line, compensated_sum))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        offset: u64,
        log_format: &str,
        run_id: &str,
        max_line: usize,
        compensated_sum: bool,
    ) -> PyResult<Self> {
        let format =
            Format::compile(log_format).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let parser = Parser::new(format, run_id, compensated_sum);
        let scanner = py.allow_threads(|| scan_file(parser, &path, offset, max_line))?;
        Ok(NginxScanner {
            inner: Mutex::new(scanner),
        })
    }

    /// Reads up to `max_lines` lines with the GIL released. A dict: `rows` and the
    /// columns as native-endian bytes (`users` u32, `req_id` u64, `ts`, `duration_s`,
    /// `upstream_s` f64, `status` i32; `<name>_valid` one byte per row for the nullable
    /// ones); `read`, the lines read (blank and deferred ones included); the counts
    /// (`lines`, `matched`, `other_run`, `untagged`, `unparseable`); `unparseable_lines`
    /// (from 1 at the batch's first counted line); `deferred`, a line left to the Python
    /// parser, which ends the batch, or None; and `done`.
    fn next_batch<'py>(&self, py: Python<'py>, max_lines: usize) -> PyResult<Bound<'py, PyDict>> {
        let batch = py.allow_threads(|| {
            let mut scanner = self
                .inner
                .lock()
                .map_err(|_| PyRuntimeError::new_err("poisoned"))?;
            scanner.next_batch(max_lines).map_err(PyErr::from)
        })?;
        let d = PyDict::new(py);
        let r = &batch.rows;
        d.set_item("rows", r.len())?;
        d.set_item("users", column(py, &r.users, u32::to_ne_bytes))?;
        d.set_item("duration_s", column(py, &r.duration_s, f64::to_ne_bytes))?;
        for (name, (data, valid)) in [
            ("req_id", nullable(py, &r.req_id, u64::to_ne_bytes)),
            ("ts", nullable(py, &r.ts, f64::to_ne_bytes)),
            ("upstream_s", nullable(py, &r.upstream_s, f64::to_ne_bytes)),
            ("status", nullable(py, &r.status, i32::to_ne_bytes)),
        ] {
            d.set_item(name, data)?;
            d.set_item(format!("{name}_valid"), valid)?;
        }
        let c = &batch.counts;
        d.set_item("read", batch.read)?;
        d.set_item("lines", c.lines)?;
        d.set_item("matched", c.matched)?;
        d.set_item("other_run", c.other_run)?;
        d.set_item("untagged", c.untagged)?;
        d.set_item("unparseable", c.unparseable)?;
        d.set_item("unparseable_lines", batch.unparseable_lines)?;
        d.set_item(
            "deferred",
            batch.deferred.map(|line| PyBytes::new(py, &line)),
        )?;
        d.set_item("done", batch.done)?;
        Ok(d)
    }
}
