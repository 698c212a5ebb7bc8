//! Prometheus remote write: samples as a `WriteRequest` (protobuf, prompb's types),
//! snappy-compressed (the block format, not the framed one), the body a receiver reads;
//! and that body read back, for tests and for a receiver of one's own.

use prost::Message;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[derive(Clone, PartialEq, Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

type Series = (Vec<(String, String)>, f64);
/// A series read back: its labels and its (value, timestamp_ms) samples.
type ReadSeries = (Vec<(String, String)>, Vec<(f64, i64)>);

/// The body of one remote-write request: each (labels, value) a series of one sample at
/// `timestamp_ms`; the labels (`__name__` among them) sorted by name, as receivers ask.
#[pyfunction]
pub fn remote_write_body<'py>(
    py: Python<'py>,
    series: Vec<Series>,
    timestamp_ms: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let request = WriteRequest {
        timeseries: series
            .into_iter()
            .map(|(mut labels, value)| {
                labels.sort();
                TimeSeries {
                    labels: labels
                        .into_iter()
                        .map(|(name, value)| Label { name, value })
                        .collect(),
                    samples: vec![Sample {
                        value,
                        timestamp: timestamp_ms,
                    }],
                }
            })
            .collect(),
    };
    let body = snap::raw::Encoder::new()
        .compress_vec(&request.encode_to_vec())
        .map_err(|e| PyValueError::new_err(format!("snappy: {e}")))?;
    Ok(PyBytes::new(py, &body))
}

/// A remote-write body read back: each series' labels and its (value, timestamp_ms).
#[pyfunction]
pub fn remote_write_read(body: &[u8]) -> PyResult<Vec<ReadSeries>> {
    let raw = snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| PyValueError::new_err(format!("snappy: {e}")))?;
    let request = WriteRequest::decode(raw.as_slice())
        .map_err(|e| PyValueError::new_err(format!("WriteRequest: {e}")))?;
    Ok(request
        .timeseries
        .into_iter()
        .map(|s| {
            let labels = s.labels.into_iter().map(|l| (l.name, l.value)).collect();
            (
                labels,
                s.samples
                    .into_iter()
                    .map(|x| (x.value, x.timestamp))
                    .collect(),
            )
        })
        .collect())
}
