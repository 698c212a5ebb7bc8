//! The request: checked and laid out once before the run, then written with its tag.

use std::sync::OnceLock;
use std::time::Duration;

use crate::config::RequestSpec;

/// A request of the plan, checked and laid out once before the run.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub method: String,
    /// The path with its own query, ready for the tag to be appended.
    pub path: String,
    pub query_sep: char,
    /// `Name: value\r\n` for each header of the plan (the last value of a repeated name).
    pub headers: Vec<u8>,
    /// The same headers as names and values (for HTTP/2).
    pub fields: Vec<(String, String)>,
    /// The same headers as HTTP/2 sends them, HPACK-encoded (without those it forbids):
    /// encoded by the HTTP/2 client at its first request.
    pub h2_fields: OnceLock<Vec<u8>>,
    /// The plan sets `Host` itself.
    pub has_host: bool,
    /// The plan sets its own trace context (`traceparent`, `baggage`): the tag's stays out.
    pub has_traceparent: bool,
    pub has_baggage: bool,
    /// `Content-Length: n\r\n`, or empty when no body is announced (a GET without
    /// body) or the plan frames the body itself.
    pub length_header: Vec<u8>,
    pub body: Vec<u8>,
    /// The response to this request has no body whatever its headers say.
    pub head: bool,
    /// The request's own timeout, or the run's.
    pub timeout: Duration,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn is_header_value(s: &str) -> bool {
    s.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl Prepared {
    pub fn new(spec: &RequestSpec, default_timeout: Duration) -> Result<Self, String> {
        if !is_token(&spec.method) {
            return Err(format!("bad HTTP method {:?}", spec.method));
        }
        if spec.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(format!("bad request path {:?}", spec.path));
        }
        // As a header map would: one value per name, the last one given.
        let mut kept: Vec<(&str, &str)> = Vec::with_capacity(spec.headers.len());
        for (k, v) in &spec.headers {
            if !is_token(k) {
                return Err(format!("bad header name {k:?}"));
            }
            if !is_header_value(v) {
                return Err(format!("bad value of header {k:?}"));
            }
            kept.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            kept.push((k, v.trim_matches([' ', '\t'])));
        }
        let named = |n: &str| kept.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        let mut headers = Vec::new();
        for (k, v) in &kept {
            headers.extend_from_slice(k.as_bytes());
            headers.extend_from_slice(b": ");
            headers.extend_from_slice(v.as_bytes());
            headers.extend_from_slice(b"\r\n");
        }
        let frames_itself = named("content-length") || named("transfer-encoding");
        let announces_body = !spec.body.is_empty()
            || !matches!(
                spec.method.as_str(),
                "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE" | "CONNECT"
            );
        let length_header = if frames_itself || !announces_body {
            Vec::new()
        } else {
            format!("Content-Length: {}\r\n", spec.body.len()).into_bytes()
        };
        Ok(Self {
            method: spec.method.clone(),
            path: spec.path.clone(),
            query_sep: if spec.path.contains('?') { '&' } else { '?' },
            has_host: named("host"),
            has_traceparent: named("traceparent"),
            has_baggage: named("baggage"),
            headers,
            fields: kept.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            h2_fields: OnceLock::new(),
            length_header,
            body: spec.body.clone(),
            head: spec.method == "HEAD",
            timeout: spec.timeout.unwrap_or(default_timeout),
        })
    }
}

/// The load level a request is sent at, as its tag gives it.
#[derive(Clone, Copy, Debug)]
pub enum TagLevel<'a> {
    /// Closed loop: `users=<users of the step>`.
    Users(u32),
    /// Open loop: `rate=<requests per second, as text>`.
    Rate(&'a str),
}

/// The run's identity carried by a request.
#[derive(Clone, Copy, Debug)]
pub struct Tag<'a> {
    pub run_id: &'a str,
    /// `trace_run_half(run_id)`, worked out once a run rather than once a request.
    pub trace_half: u64,
    pub level: TagLevel<'a>,
    pub req_id: u64,
}

impl<'a> Tag<'a> {
    pub fn new(run_id: &'a str, level: TagLevel<'a>, req_id: u64) -> Self {
        Self { run_id, trace_half: trace_run_half(run_id), level, req_id }
    }
}

fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

pub(crate) fn push_tag_values(out: &mut Vec<u8>, first: &[u8], sep: &[u8], tag: &Tag) {
    out.extend_from_slice(first);
    out.extend_from_slice(tag.run_id.as_bytes());
    out.extend_from_slice(sep);
    push_level(out, b"", tag.level);
    out.extend_from_slice(sep);
    out.extend_from_slice(b"req=");
    push_u64(out, tag.req_id);
}

/// The high half of a tagged request's W3C trace id: FNV-1a of the run id, its top bit
/// set so that no trace id is all zeros. The low half is the request id, so a trace id
/// names its run and request: `<run half:016x><req_id:016x>`.
pub fn trace_run_half(run_id: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in run_id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash | (1 << 63)
}

/// The span id of the request's own (client) span: never zero.
pub fn span_id(req_id: u64) -> u64 {
    (req_id << 1) | 1
}

fn push_hex(out: &mut Vec<u8>, n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.push(HEX[((n >> (shift * 4)) & 0xf) as usize]);
    }
}

/// `00-<trace id>-<span id>-01`: version 0, sampled, so instrumented apps record it.
pub(crate) fn push_traceparent(out: &mut Vec<u8>, tag: &Tag) {
    out.extend_from_slice(b"00-");
    push_hex(out, tag.trace_half);
    push_hex(out, tag.req_id);
    out.push(b'-');
    push_hex(out, span_id(tag.req_id));
    out.extend_from_slice(b"-01");
}

/// `pp.run=<run id>,pp.users=<users>` (or `pp.rate=`): the run beside the trace.
pub(crate) fn push_baggage(out: &mut Vec<u8>, tag: &Tag) {
    out.extend_from_slice(b"pp.run=");
    out.extend_from_slice(tag.run_id.as_bytes());
    push_level(out, b",pp.", tag.level);
}

/// `<prefix>users=<users>` or `<prefix>rate=<rate>`.
fn push_level(out: &mut Vec<u8>, prefix: &[u8], level: TagLevel) {
    out.extend_from_slice(prefix);
    match level {
        TagLevel::Users(users) => {
            out.extend_from_slice(b"users=");
            push_u64(out, u64::from(users));
        }
        TagLevel::Rate(rate) => {
            out.extend_from_slice(b"rate=");
            out.extend_from_slice(rate.as_bytes());
        }
    }
}

/// Writes the whole request (head and body) into `out`, replacing what it held.
/// `host` is the `Host` header's value, used unless the plan sets its own.
pub fn build(prepared: &Prepared, host: &str, tag: Option<&Tag>, out: &mut Vec<u8>) {
    out.clear();
    // At once rather than doubling from nothing, when the bytes were shed (see
    // `Outgoing::shed`); the tag's fields take under 200 bytes.
    out.reserve(
        prepared.method.len() + prepared.path.len() + host.len() + prepared.headers.len()
            + prepared.length_header.len() + prepared.body.len() + 256,
    );
    out.extend_from_slice(prepared.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(prepared.path.as_bytes());
    if let Some(tag) = tag {
        out.push(prepared.query_sep as u8);
        push_tag_values(out, b"pp_run=", b"&pp_", tag);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !prepared.has_host {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&prepared.headers);
    if let Some(tag) = tag {
        push_tag_values(out, b"X-Pinchpoint: run=", b"; ", tag);
        out.extend_from_slice(b"\r\n");
        if !prepared.has_traceparent {
            out.extend_from_slice(b"traceparent: ");
            push_traceparent(out, tag);
            out.extend_from_slice(b"\r\n");
        }
        if !prepared.has_baggage {
            out.extend_from_slice(b"baggage: ");
            push_baggage(out, tag);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(&prepared.length_header);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&prepared.body);
}
