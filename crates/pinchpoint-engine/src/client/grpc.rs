//! gRPC over the engine's HTTP/2 connections: the request message framed (a byte saying
//! it is not compressed, then its length in four bytes), sent as a POST to
//! `/package.Service/Method` with `content-type: application/grpc` and `te: trailers`,
//! the run's tag in its metadata (`x-pinchpoint`, `traceparent`, `baggage`: a gRPC path
//! takes no query). The answer's messages are read as they come; its status is the
//! trailers' `grpc-status` and `grpc-message`, or the headers' for an answer without a
//! body, or else follows from the HTTP status as gRPC's clients derive it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::RecvStream;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE, TE};

use crate::client::h2conn::{self, Outbound};
use crate::client::http1::{Prepared, Tag};
use crate::client::http2::{self, Failure};
use crate::client::{Conn, Target, MAX_KEPT_BODY};
use crate::outcome::{note, ErrorClass};

/// The longest message of an answer that is read (gRPC's own default limit).
pub const MAX_MESSAGE: usize = 4 << 20;

/// `message` with gRPC's five-byte prefix: not compressed, its length.
pub fn frame(message: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    Bytes::from(out)
}

/// Makes a call's request once more (the first was never sent).
pub type Again<'a> = &'a (dyn Fn() -> Result<Outbound, ErrorClass> + Sync);

/// What a call's answer said.
#[derive(Debug, Default)]
pub struct Reply {
    /// The HTTP status: 200 for every call a gRPC server handled, whatever its status.
    pub http_status: u16,
    /// The gRPC status (0: OK) and its message.
    pub code: u32,
    pub message: String,
    /// Why the answer breaks gRPC's protocol, if it does.
    pub broken: Option<String>,
    /// When each message of the answer had come whole, and its length.
    pub arrived: Vec<(Instant, usize)>,
    /// The messages' bytes, when kept (at most [`MAX_KEPT_BODY`] in all).
    pub payloads: Vec<Bytes>,
    /// Messages came that were not kept.
    pub cut: bool,
    /// Bytes of the answer's body, framing included.
    pub bytes: u64,
    /// The answer's headers, then its trailers, laid out as an HTTP/1.1 head.
    pub head: Vec<u8>,
}

impl Reply {
    /// The error class of the call: its protocol broken, or its status not OK.
    pub fn class(&self) -> Option<ErrorClass> {
        if self.broken.is_some() {
            Some(ErrorClass::GrpcProtocol)
        } else if self.code != 0 {
            Some(ErrorClass::grpc(self.code))
        } else {
            None
        }
    }

    /// Why the call failed, for its reasons.
    pub fn why(&self) -> String {
        match &self.broken {
            Some(why) => why.clone(),
            None => format!("grpc-status {} {}: {}", self.code, code_name(self.code), self.message),
        }
    }
}

/// A status code's name as gRPC spells it.
pub fn code_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(code as usize).copied().unwrap_or("UNKNOWN")
}

/// The status gRPC's clients give an answer whose HTTP status is not 200 and that has
/// no `grpc-status`.
fn from_http(status: u16) -> u32 {
    match status {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502..=504 => 14,
        _ => 2,
    }
}

impl Target {
    /// The call `prepared` names (its path the method's, its headers the metadata) with
    /// `message` framed as its body, tagged in its metadata.
    pub fn grpc_request(&self, prepared: &Prepared, tag: Option<&Tag>, message: Bytes) -> Result<Outbound, ErrorClass> {
        let mut request = http2::build_with(prepared, self.scheme(), &self.host, (tag, false), message)?;
        let headers = request.head.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(TE, HeaderValue::from_static("trailers"));
        Ok(request)
    }

    /// Sends the call on `conn` (an HTTP/2 connection) and reads its whole answer,
    /// keeping its messages with `keep`. A call its closing connection never sent goes
    /// once more on a new connection, made again by `again` (not copied ahead of each
    /// call: a copy of its headers costs as much as a tenth of the call).
    pub async fn call(
        &self,
        conn: &mut Conn,
        request: Outbound,
        again: Again<'_>,
        keep: bool,
        timeout: Duration,
    ) -> Result<Reply, ErrorClass> {
        let (Conn::H2(c), Some(pool)) = (conn, self.h2.as_ref()) else {
            note(ErrorClass::Io, || "gRPC needs HTTP/2".into());
            return Err(ErrorClass::Io);
        };
        let response = match http2::open(c, request).await {
            Err(Failure::Refused) => {
                pool.reconnect(c, self.stream(timeout)).await?;
                http2::open(c, again()?).await.map_err(Failure::class)?
            }
            other => other.map_err(Failure::class)?,
        };
        read(c, response, keep).await
    }
}

/// Reads an answer: its messages as they come, then its status.
async fn read(c: &http2::Conn, response: http::Response<RecvStream>, keep: bool) -> Result<Reply, ErrorClass> {
    let mut reply = Reply { http_status: response.status().as_u16(), ..Reply::default() };
    // The head is read by checks and captures only: laid out when the answer is kept.
    if keep {
        reply.head = format!("HTTP/1.1 {} -\r\n", reply.http_status).into_bytes();
        push_fields(&mut reply.head, response.headers());
    }
    let is_grpc = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    let mut status = status_of(response.headers());
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut kept = 0usize;
    while let Some(data) = h2conn::next(&mut body).await {
        let data = match data {
            Ok(data) => data,
            Err(e) => return Err(http2::body_error(c, &e).await),
        };
        reply.bytes += data.len() as u64;
        // Whole messages are read from the frame itself; a part waits in `pending`.
        let taken = if pending.is_empty() {
            split(&data, &mut reply, keep, &mut kept).map(|at| pending.extend_from_slice(&data[at..]))
        } else {
            pending.extend_from_slice(&data);
            split(&pending, &mut reply, keep, &mut kept).map(|at| drop(pending.drain(..at)))
        };
        if let Err(why) = taken {
            reply.broken = Some(why);
            return Ok(reply);
        }
    }
    match body.trailers().await {
        Ok(Some(trailers)) => {
            if keep {
                push_fields(&mut reply.head, &trailers);
            }
            status = status_of(&trailers).or(status);
        }
        Ok(None) => {}
        Err(e) => return Err(http2::body_error(c, &e).await),
    }
    if keep {
        reply.head.extend_from_slice(b"\r\n");
    }
    if !pending.is_empty() {
        let announced = if pending.len() >= 5 { u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]).to_string() } else { "?".into() };
        reply.broken = Some(format!("the answer ended inside a message: {} bytes of its prefix and {announced} announced", pending.len()));
        return Ok(reply);
    }
    match status {
        Some((code, message)) => (reply.code, reply.message) = (code, message),
        None if reply.http_status != 200 => {
            reply.code = from_http(reply.http_status);
            reply.message = format!("HTTP status {} without grpc-status", reply.http_status);
        }
        None => reply.broken = Some("the answer has no grpc-status".into()),
    }
    if reply.http_status == 200 && !is_grpc && reply.broken.is_none() && reply.code == 0 {
        reply.broken = Some("the answer's content-type is not application/grpc".into());
    }
    Ok(reply)
}

/// Reads each whole message at the front of `pending`: Ok(the bytes they took), or
/// Err(why the framing is broken).
fn split(pending: &[u8], reply: &mut Reply, keep: bool, kept: &mut usize) -> Result<usize, String> {
    let mut at = 0;
    while pending.len() - at >= 5 {
        let flag = pending[at];
        let length = u32::from_be_bytes([pending[at + 1], pending[at + 2], pending[at + 3], pending[at + 4]]) as usize;
        if flag > 1 {
            return Err(format!("a message prefix's first byte is {flag}, not 0 or 1"));
        }
        if flag == 1 {
            return Err("a compressed message, though the call asked for none".into());
        }
        if length > MAX_MESSAGE {
            return Err(format!("a message of {length} bytes announced, above gRPC's {MAX_MESSAGE}"));
        }
        if pending.len() - at - 5 < length {
            break;
        }
        reply.arrived.push((Instant::now(), length));
        if keep {
            if *kept + length <= MAX_KEPT_BODY {
                reply.payloads.push(Bytes::copy_from_slice(&pending[at + 5..at + 5 + length]));
                *kept += length;
            } else {
                reply.cut = true;
            }
        }
        at += 5 + length;
    }
    Ok(at)
}

/// `grpc-status` and its `grpc-message` (percent-decoded), if the fields hold one.
fn status_of(fields: &HeaderMap) -> Option<(u32, String)> {
    let code = fields.get("grpc-status")?.to_str().ok()?.trim().parse::<u32>().unwrap_or(2);
    let message = fields.get("grpc-message").map(|v| percent_decode(v.as_bytes())).unwrap_or_default();
    Some((code, message))
}

fn percent_decode(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = raw.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (raw[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn push_fields(head: &mut Vec<u8>, fields: &HeaderMap) {
    for (k, v) in fields {
        head.extend_from_slice(k.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_split_off_their_prefixes_and_a_bad_prefix_is_named() {
        let pending = [frame(b"ab").to_vec(), frame(b"").to_vec(), frame(b"xyz")[..4].to_vec()].concat();
        let (mut reply, mut kept) = (Reply::default(), 0);
        assert_eq!(split(&pending, &mut reply, true, &mut kept).unwrap(), pending.len() - 4);
        assert_eq!(reply.payloads, [Bytes::from_static(b"ab"), Bytes::new()]);
        let bad = [7, 0, 0, 0, 1, 0];
        assert!(split(&bad, &mut reply, true, &mut kept).unwrap_err().contains("first byte is 7"));
        let huge = [0, 0xff, 0, 0, 0];
        assert!(split(&huge, &mut reply, true, &mut kept).unwrap_err().contains("above gRPC's"));
    }

    #[test]
    fn a_status_message_is_percent_decoded() {
        assert_eq!(percent_decode(b"no%20such%20item: 5%"), "no such item: 5%");
        assert_eq!((from_http(503), from_http(404), from_http(500)), (14, 12, 2));
        assert_eq!(code_name(4), "DEADLINE_EXCEEDED");
    }
}
