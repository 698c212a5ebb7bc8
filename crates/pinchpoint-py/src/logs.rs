//! `pinchpoint._engine.NginxScanner`: an nginx access log scanned in Rust, in batches of
//! columns, with the GIL released while it reads and parses; `TiersBatch`: a batch's
//! records as `tiers.parquet`'s columns, handed to pyarrow without a copy.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;

use arrow_array::ffi::to_ffi;
use arrow_array::{Array, RecordBatch, StructArray};
use pinchpoint_logs::{scan_file, tiers_batch, Batch, Format, Parser, Scanner};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict};

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
        let batch = py.allow_threads(|| self.scan(max_lines))?;
        let d = counts(py, &batch)?;
        let r = &batch.rows;
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
        Ok(d)
    }

    /// As `next_batch`, the records as `tiers` instead of columns of bytes: a `TiersBatch`
    /// of `tiers.parquet`'s columns for component `component`, or None when none matched.
    fn next_tiers<'py>(
        &self,
        py: Python<'py>,
        max_lines: usize,
        component: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (batch, tiers) = py.allow_threads(|| {
            let mut batch = self.scan(max_lines)?;
            let rows = std::mem::take(&mut batch.rows);
            let tiers = (!rows.is_empty()).then(|| tiers_batch(component, rows));
            Ok::<_, PyErr>((batch, tiers))
        })?;
        let tiers = tiers
            .transpose()
            .map_err(|e| PyRuntimeError::new_err(format!("tiers batch of {component}: {e}")))?;
        let d = counts(py, &batch)?;
        d.set_item("rows", tiers.as_ref().map_or(0, RecordBatch::num_rows))?;
        d.set_item("tiers", tiers.map(|batch| TiersBatch { batch }))?;
        Ok(d)
    }
}

impl NginxScanner {
    fn scan(&self, max_lines: usize) -> PyResult<Batch> {
        let mut scanner = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("poisoned"))?;
        scanner.next_batch(max_lines).map_err(PyErr::from)
    }
}

/// What a batch read, with its rows' number but not its rows: see `next_batch`.
fn counts<'py>(py: Python<'py>, batch: &Batch) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let c = &batch.counts;
    set_items!(d;
        "rows" => batch.rows.len(),
        "read" => batch.read,
        "lines" => c.lines,
        "matched" => c.matched,
        "other_run" => c.other_run,
        "untagged" => c.untagged,
        "unparseable" => c.unparseable,
        "unparseable_lines" => &batch.unparseable_lines,
    );
    d.set_item(
        "deferred",
        batch.deferred.as_ref().map(|line| PyBytes::new(py, line)),
    )?;
    d.set_item("done", batch.done)?;
    Ok(d)
}

/// Rows of `tiers.parquet` built in Rust; `pyarrow.record_batch(tiers)` takes them
/// through the Arrow PyCapsule interface, without a copy.
#[pyclass(module = "pinchpoint._engine", frozen)]
pub struct TiersBatch {
    batch: RecordBatch,
}

#[pymethods]
impl TiersBatch {
    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    /// The batch as a struct array of the Arrow C data interface: the capsules of its
    /// schema and of its array. `requested_schema` is ignored (the schema is fixed).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let array = StructArray::from(self.batch.clone()).into_data();
        let (array, schema) =
            to_ffi(&array).map_err(|e| PyRuntimeError::new_err(format!("tiers batch: {e}")))?;
        Ok((
            PyCapsule::new(py, schema, Some(c"arrow_schema".to_owned()))?,
            PyCapsule::new(py, array, Some(c"arrow_array".to_owned()))?,
        ))
    }
}
