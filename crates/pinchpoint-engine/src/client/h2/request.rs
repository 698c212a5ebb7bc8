//! A request's header block: the plan's fields encoded once, before the run, and the
//! pseudo-headers and the tag's fields around them for each request.

use super::hpack::{push_field, push_indexed, push_literal, push_named};
use crate::client::http1::Prepared;
use crate::client::h2::Text;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2); a plan's `Host` becomes `:authority`.
pub fn connection_specific(name: &str) -> bool {
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// The plan's own fields as HPACK literals, their names in lowercase.
fn encode_fields(fields: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        if !connection_specific(name) {
            push_field(&mut out, name.to_ascii_lowercase().as_bytes(), value.as_bytes());
        }
    }
    out
}

/// Writes the whole header block of `prepared` with the text `text` wrote last into
/// `out`, replacing what it held.
pub fn encode(prepared: &Prepared, text: &Text, out: &mut Vec<u8>) {
    out.clear();
    match prepared.method.as_str() {
        "GET" => push_indexed(out, 2),
        "POST" => push_indexed(out, 3),
        method => push_named(out, 2, method.as_bytes()),
    }
    match text.scheme() {
        b"https" => push_indexed(out, 7),
        _ => push_indexed(out, 6),
    }
    push_named(out, 1, text.authority());
    push_named(out, 4, text.path());
    out.extend_from_slice(prepared.h2_fields.get_or_init(|| encode_fields(&prepared.fields)));
    let (pinchpoint, traceparent, baggage) = text.tag_fields();
    if !pinchpoint.is_empty() {
        push_literal(out, b"x-pinchpoint", pinchpoint);
    }
    if !traceparent.is_empty() {
        push_literal(out, b"traceparent", traceparent);
    }
    if !baggage.is_empty() {
        push_literal(out, b"baggage", baggage);
    }
}
