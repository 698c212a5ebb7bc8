//! Converting the records stream to Parquet, complete or cut short by a killed run.

mod common;

use std::fs::{File, OpenOptions};
use std::path::Path;

use arrow_schema::DataType;
use common::{read_parquet, Row};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use pinchpoint_engine::arrow_io::IpcSink;
use pinchpoint_engine::record::{Record, Walk};
use pinchpoint_engine::{records_to_parquet, ErrorClass};

fn records(first_id: u64, n: usize) -> Vec<Record> {
    (0..n as u64)
        .map(|i| Record {
            req_id: first_id + i,
            step: (i % 3) as u32,
            users: 1 + (i % 3) as u32,
            endpoint: (i % 2) as u16,
            start_us: 1_700_000_000_000_000 + i as i64,
            intended_us: 1_700_000_000_000_000 + i as i64 - 7,
            latency_us: 100 + i as i64,
            service_us: 93 + i as i64,
            status: if i % 5 == 0 { 0 } else { 200 },
            error: (i % 5 == 0).then_some(ErrorClass::Reset),
            bytes: if i % 5 == 0 { 0 } else { 42 },
            walk: (i % 4 != 0).then_some(Walk { user: (i % 7) as u32, iteration: i / 7 }),
        })
        .collect()
}

/// Writes batches of the given sizes; returns the file length after each batch.
fn write_stream(path: &Path, sizes: &[usize], finish: bool) -> Vec<u64> {
    let mut sink = IpcSink::create(path).unwrap();
    let mut ends = Vec::new();
    let mut next = 0u64;
    for &n in sizes {
        sink.write(&records(next, n)).unwrap();
        next += n as u64;
        ends.push(std::fs::metadata(path).unwrap().len());
    }
    if finish {
        sink.finish().unwrap();
    } else {
        drop(sink);
    }
    ends
}

fn truncate(path: &Path, len: u64) {
    OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn convert(src: &Path) -> (u64, Vec<Row>) {
    let dst = src.with_extension("parquet");
    let n = records_to_parquet(src, &dst).expect("conversion succeeds");
    let rows = read_parquet(&dst);
    assert_eq!(rows.len() as u64, n);
    (n, rows)
}

#[test]
fn complete_stream_converts_every_row_with_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    write_stream(&src, &[100, 200, 50], true);
    let (n, rows) = convert(&src);
    assert_eq!(n, 350);
    assert_eq!(rows.iter().map(|r| r.req_id).collect::<Vec<_>>(), (0..350).collect::<Vec<_>>());
    let expected = records(0, 100);
    assert_eq!(rows[5].error.as_deref(), Some("reset"));
    assert_eq!(rows[6].error, None);
    assert_eq!((rows[7].step, rows[7].users, rows[7].latency_us), (expected[7].step, expected[7].users, 107));
    assert_eq!((rows[7].start_us - rows[7].intended_us, rows[7].service_us), (7, 100));
    assert_eq!((rows[7].endpoint, rows[8].endpoint), (1, 0));
    assert_eq!((rows[8].walk, rows[9].walk), (None, Some((2, 1))));

    let file = File::open(src.with_extension("parquet")).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let fields: Vec<(String, DataType, bool)> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
        .collect();
    let want = [
        ("req_id", DataType::UInt64, false),
        ("step", DataType::UInt32, false),
        ("users", DataType::UInt32, false),
        ("endpoint", DataType::UInt16, false),
        ("start_us", DataType::Int64, false),
        ("intended_us", DataType::Int64, false),
        ("latency_us", DataType::Int64, false),
        ("service_us", DataType::Int64, false),
        ("status", DataType::UInt16, false),
        ("error", DataType::Utf8, true),
        ("bytes", DataType::UInt64, false),
        ("user_index", DataType::UInt32, true),
        ("iteration", DataType::UInt64, true),
    ];
    let want: Vec<(String, DataType, bool)> = want.iter().map(|(n, t, z)| (n.to_string(), t.clone(), *z)).collect();
    assert_eq!(fields, want);
}

#[test]
fn stream_cut_in_the_last_batch_keeps_the_complete_batches() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    let ends = write_stream(&src, &[100, 200, 50], false);
    // The middle of the last batch.
    truncate(&src, (ends[1] + ends[2]) / 2);
    let (n, rows) = convert(&src);
    assert_eq!(n, 300);
    assert_eq!(rows.last().unwrap().req_id, 299);
}

#[test]
fn stream_cut_anywhere_in_the_last_batch_keeps_the_complete_batches() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    let ends = write_stream(&src, &[100, 200, 50], false);
    let full = std::fs::read(&src).unwrap();
    // Cuts from the end of batch 2 to just before the end of batch 3: in the continuation
    // marker, the metadata length, the metadata, the body.
    // Every byte through the message's head, then a stride through the rest.
    let cuts = (ends[1]..ends[1] + 64).chain((ends[1] + 64..ends[2]).step_by(29));
    for cut in cuts {
        std::fs::write(&src, &full[..cut as usize]).unwrap();
        let dst = src.with_extension("parquet");
        let n = records_to_parquet(&src, &dst).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(n, 300, "cut at {cut} of {}", ends[2]);
    }
}

#[test]
fn stream_cut_at_a_batch_boundary_without_end_marker() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    let ends = write_stream(&src, &[100, 200], false);
    truncate(&src, ends[1]);
    assert_eq!(convert(&src).0, 300);
    truncate(&src, ends[0]);
    assert_eq!(convert(&src).0, 100);
}

#[test]
fn stream_of_a_run_killed_before_its_first_batch_converts_to_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    // A killed process runs no destructor: nothing buffered reaches the file.
    std::mem::forget(IpcSink::create(&src).unwrap());
    let (n, rows) = convert(&src);
    assert_eq!(n, 0);
    assert!(rows.is_empty());
}

#[test]
fn batches_written_are_on_disk_before_the_sink_is_finished() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    let mut sink = IpcSink::create(&src).unwrap();
    sink.write(&records(0, 10)).unwrap();
    sink.write(&records(10, 5)).unwrap();
    std::mem::forget(sink);
    assert_eq!(convert(&src).0, 15);
}

#[test]
fn a_long_run_is_written_in_row_groups_a_scan_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("requests.arrows");
    write_stream(&src, &[100_000, 100_000, 100_000], true);
    let (n, _rows) = convert(&src);
    assert_eq!(n, 300_000);
    let file = File::open(src.with_extension("parquet")).unwrap();
    let meta = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().metadata().clone();
    let sizes: Vec<i64> = meta.row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(sizes, vec![131_072, 131_072, 300_000 - 2 * 131_072]);
}
