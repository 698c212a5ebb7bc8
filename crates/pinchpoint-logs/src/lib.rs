//! pinchpoint's nginx access log parser: an nginx `log_format` string compiled into a
//! matcher, and logs scanned in chunks for the records of one run.
//!
//! It gives exactly what the Python parser (`pinchpoint.logformats.nginx` with
//! `pinchpoint.collect.logs.reader.match_lines`) gives: the same records, field values and
//! counts. Lines it cannot decide alone are handed back for the Python parser.

pub mod format;
pub mod lines;
pub mod matcher;
pub mod scan;
pub mod shapes;
pub mod tag;
pub mod tiers;
pub mod values;

use std::fs::File;
use std::io;
use std::path::Path;

pub use format::{Format, FormatError};
pub use lines::{Lines, CHUNK};
pub use scan::{Batch, Class, Counts, Parser, Rows, Scanner, MAX_PARSE_LINE};
pub use tiers::{tiers_batch, TIERS_SCHEMA};

/// A scanner of the file at `path` from byte `offset` (see `Lines::open`).
pub fn scan_file(
    parser: Parser,
    path: &Path,
    offset: u64,
    max_line: usize,
) -> io::Result<Scanner<File>> {
    Ok(Scanner::new(
        parser,
        Lines::open(path, offset, CHUNK, max_line)?,
    ))
}
