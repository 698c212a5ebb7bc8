//! One HTTP/1.1 keep-alive connection per user: connect, send, read the whole body,
//! over plain TCP or TLS (any [`Stream`]; `tls.rs` makes the TLS one).
//!
//! A small client of its own rather than hyper's: a closed-loop user has exactly one
//! request in flight on its own connection, so it writes the request bytes and reads
//! the response straight from the socket in its own task. hyper's client runs each
//! connection as a separate task fed through channels, and builds and parses a header
//! map per request; on one core that cost the engine about a third of its requests per
//! CPU-second against wrk (see the README's performance section).
//!
//! Responses are framed as RFC 9112 §6.3 says: none for HEAD, 1xx, 204 and 304; chunked
//! when `Transfer-Encoding` ends in `chunked`; else `Content-Length`; else up to the
//! close. Interim 1xx responses (other than 101) are skipped. Bodies are counted, and
//! kept only for a flow that captures from or checks them.

mod conn;
mod request;
mod response;
#[cfg(test)]
mod tests;

pub use conn::{connect, connect_tcp, exchange, exchange_keeping, Conn, Stream, MAX_HEAD};
pub(crate) use request::{push_baggage, push_tag_values, push_traceparent};
pub use request::{span_id, trace_run_half};
pub use request::{build, TagLevel, Prepared, Tag};
pub use response::Response;
