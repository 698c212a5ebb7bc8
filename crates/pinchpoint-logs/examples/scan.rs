//! Scans an nginx access log with the Rust parser and prints the counts and the rate:
//! `cargo run --release -p pinchpoint-logs --example scan -- <log> <log_format> <run id>`.

use std::path::Path;
use std::time::Instant;

use pinchpoint_logs::{scan_file, Format, Parser};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, log_format, run_id] = args.as_slice() else {
        return Err("usage: scan <log> <log_format> <run id>".into());
    };
    let parser = Parser::new(Format::compile(log_format)?, run_id, false);
    let started = Instant::now();
    let mut scanner = scan_file(parser, Path::new(path), 0, 1 << 20)?;
    let (mut read, mut rows, mut deferred) = (0u64, 0usize, 0u64);
    let mut counts = pinchpoint_logs::Counts::default();
    loop {
        let batch = scanner.next_batch(65536)?;
        read += batch.read;
        rows += batch.rows.len();
        deferred += u64::from(batch.deferred.is_some());
        counts.lines += batch.counts.lines;
        counts.matched += batch.counts.matched;
        counts.other_run += batch.counts.other_run;
        counts.untagged += batch.counts.untagged;
        counts.unparseable += batch.counts.unparseable;
        if batch.done {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("{counts:?} rows {rows} deferred {deferred}");
    println!(
        "{read} lines in {secs:.3} s: {:.0} lines/s",
        read as f64 / secs
    );
    Ok(())
}
