//! Scanning a log for the records of one run, in batches of columns, with the counts of
//! `pinchpoint.collect.logs.match_lines`.
//!
//! Every line is classified as the Python collector does: blank lines are not counted;
//! a line that does not match the format is unparseable; a record without a valid tag
//! is untagged; a tag of another run is counted; a record of this run without a duration
//! is unparseable; the rest are matched and become rows.
//!
//! A line holding a non-ASCII byte (nginx escapes those unless told not to), or one this
//! parser cannot decide (see `matcher`, `values::IsoTime::Unsure`), ends the batch
//! uncounted: the caller parses it with the Python parser, so results stay identical.

use std::io::{self, Read};

use crate::format::{Field, Format, TAG_FIELDS};
use crate::lines::Lines;
use crate::matcher::{match_line, Outcome, Spans};
use crate::shapes::is_space;
use crate::tag::Fields;
use crate::values::{self, IsoTime};

/// Unparseable line numbers kept per batch (the collector keeps the first five).
pub const EXAMPLES: usize = 5;
/// Longest line parsed, in bytes (without its line ending): a longer line is unparseable
/// before any matching, as in the Python parsers (`MAX_LINE_CHARS` in `logformats/base.py`).
pub const MAX_PARSE_LINE: usize = 64 * 1024;

/// Lines read and how each was classified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lines: u64,
    pub matched: u64,
    pub other_run: u64,
    pub untagged: u64,
    pub unparseable: u64,
}

/// The matched records of a batch, one vector per column of `tiers.parquet`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    pub users: Vec<u32>,
    pub req_id: Vec<Option<u64>>,
    pub ts: Vec<Option<f64>>,
    pub duration_s: Vec<f64>,
    pub upstream_s: Vec<Option<f64>>,
    pub status: Vec<Option<i32>>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    pub rows: Rows,
    /// Lines read, blank and deferred ones included.
    pub read: u64,
    pub counts: Counts,
    /// Numbers of the first unparseable lines, counting from 1 at the batch's first
    /// counted line.
    pub unparseable_lines: Vec<u64>,
    /// The line (as read, cut to the longest line) that ended the batch for the Python
    /// parser to classify; it is not in `counts`.
    pub deferred: Option<Vec<u8>>,
    /// The log has no more lines.
    pub done: bool,
}

/// What one line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Blank,
    Defer,
    Unparseable,
    Untagged,
    OtherRun,
    Matched,
}

/// A compiled format and the run whose records are kept.
pub struct Parser {
    format: Format,
    run_id: Vec<u8>,
    compensated_sum: bool,
}

impl Parser {
    /// `compensated_sum`: sum upstream retries as Python 3.12+ `sum()` does.
    pub fn new(format: Format, run_id: &str, compensated_sum: bool) -> Parser {
        Parser {
            format,
            run_id: run_id.as_bytes().to_vec(),
            compensated_sum,
        }
    }

    /// Classifies one line (without its newline); a matched record is pushed to `rows`.
    pub fn classify(&self, raw: &[u8], rows: &mut Rows) -> Class {
        if !raw.is_ascii() {
            return Class::Defer;
        }
        let mut line = raw;
        while let [rest @ .., b'\r' | b'\n'] = line {
            line = rest;
        }
        if line.iter().all(|b| is_space(*b)) {
            return Class::Blank;
        }
        if line.len() > MAX_PARSE_LINE {
            return Class::Unparseable;
        }
        let mut spans = Spans::default();
        match match_line(&self.format, line, &mut spans) {
            Outcome::Matched => {}
            Outcome::NoMatch => return Class::Unparseable,
            Outcome::TooHard => return Class::Defer,
        }
        let get = |field: Field| spans.0[field as usize].map(|(a, b)| &line[a..b]);
        let mut fields = Fields::default();
        for field in TAG_FIELDS {
            if let Some(text) = get(field) {
                fields.add_query(text);
            }
        }
        let mut tag = fields.tag();
        if tag.is_none() {
            if let Some(header) = get(Field::TagHeader).filter(|h| !h.is_empty()) {
                let mut fields = Fields::default();
                fields.add_header(header);
                tag = fields.tag();
            }
        }
        let Some(tag) = tag else {
            return Class::Untagged;
        };
        if tag.run != self.run_id.as_slice() {
            return Class::OtherRun;
        }
        let Some(duration) = get(Field::RequestTime)
            .and_then(values::number)
            .and_then(values::duration)
        else {
            return Class::Unparseable;
        };
        let mut ts = get(Field::Msec).and_then(values::number);
        if ts.is_none() {
            ts = get(Field::TimeLocal).and_then(values::clf_time);
        }
        if ts.is_none() {
            if let Some(text) = get(Field::TimeIso8601) {
                match values::iso_time(text) {
                    IsoTime::Seconds(s) => ts = Some(s),
                    IsoTime::Invalid => {}
                    IsoTime::Unsure => return Class::Defer,
                }
            }
        }
        rows.users.push(tag.users);
        rows.req_id.push(tag.req);
        rows.ts.push(ts);
        rows.duration_s.push(duration);
        rows.upstream_s.push(
            get(Field::UpstreamResponseTime)
                .and_then(|t| values::sum_upstream(t, self.compensated_sum))
                .and_then(values::duration),
        );
        rows.status
            .push(get(Field::Status).and_then(values::status));
        Class::Matched
    }
}

/// A log being scanned.
pub struct Scanner<R> {
    parser: Parser,
    lines: Option<Lines<R>>,
}

impl<R: Read> Scanner<R> {
    /// `lines` None: a log that does not exist, with no lines.
    pub fn new(parser: Parser, lines: Option<Lines<R>>) -> Scanner<R> {
        Scanner { parser, lines }
    }

    /// Reads up to `max_lines` lines (blank ones included), stopping early at a line to
    /// defer or at the end of the log.
    pub fn next_batch(&mut self, max_lines: usize) -> io::Result<Batch> {
        let mut batch = Batch::default();
        let Some(lines) = self.lines.as_mut() else {
            batch.done = true;
            return Ok(batch);
        };
        let c = &mut batch.counts;
        for _ in 0..max_lines.max(1) {
            let Some(range) = lines.next_line()? else {
                batch.done = true;
                break;
            };
            let line = lines.line(range);
            batch.read += 1;
            let class = self.parser.classify(line, &mut batch.rows);
            match class {
                Class::Blank => continue,
                Class::Defer => {
                    batch.deferred = Some(line.to_vec());
                    break;
                }
                _ => {}
            }
            c.lines += 1;
            match class {
                Class::Unparseable => {
                    c.unparseable += 1;
                    if batch.unparseable_lines.len() < EXAMPLES {
                        batch.unparseable_lines.push(c.lines);
                    }
                }
                Class::Untagged => c.untagged += 1,
                Class::OtherRun => c.other_run += 1,
                _ => c.matched += 1,
            }
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pinchpoint's nginx format with the `X-Pinchpoint` header logged, as for gRPC.
    const GRPC_FORMAT: &str = concat!(
        r#"$remote_addr [$time_local] "$request" $status $body_bytes_sent "#,
        "rt=$request_time urt=$upstream_response_time uct=$upstream_connect_time ",
        r#"uht=$upstream_header_time msec=$msec tag="$http_x_pinchpoint""#
    );

    fn line(request: &str, tag: &str) -> String {
        format!(
            r#"127.0.0.1 [27/Nov/2026:11:40:00 +0000] "{request}" 200 17 rt=0.021 urt=0.020 uct=0.000 uht=0.020 msec=1795779600.250 tag="{tag}""#
        )
    }

    #[test]
    fn a_grpc_call_is_matched_by_the_tag_of_its_logged_metadata() {
        let parser = Parser::new(Format::compile(GRPC_FORMAT).unwrap(), "r1", false);
        let mut rows = Rows::default();
        let echo = "POST /test.Shop/Echo HTTP/2.0";
        assert_eq!(parser.classify(line(echo, "run=r1; users=4; req=17").as_bytes(), &mut rows), Class::Matched);
        assert_eq!(parser.classify(line(echo, "run=r1; rate=7.5; req=3").as_bytes(), &mut rows), Class::Matched);
        assert_eq!(parser.classify(line(echo, "run=r2; users=4; req=18").as_bytes(), &mut rows), Class::OtherRun);
        // No metadata logged (`-`), or none that makes a tag: the path takes no query.
        assert_eq!(parser.classify(line(echo, "-").as_bytes(), &mut rows), Class::Untagged);
        assert_eq!(parser.classify(line(echo, "run=r1; users=x").as_bytes(), &mut rows), Class::Untagged);
        // A tag in the request line comes first, as for HTTP requests.
        let get = "GET /a?pp_run=r1&pp_users=2&pp_req=5 HTTP/1.1";
        assert_eq!(parser.classify(line(get, "run=r1; users=9; req=6").as_bytes(), &mut rows), Class::Matched);
        assert_eq!(rows.users, [4, 0, 2]);
        assert_eq!(rows.req_id, [Some(17), Some(3), Some(5)]);
        assert_eq!(rows.duration_s, [0.021; 3]);
        assert_eq!(rows.upstream_s, [Some(0.020); 3]);
        assert_eq!(rows.status, [Some(200); 3]);
    }
}
