//! HTTP/2 connections with prior knowledge (h2c) or over TLS, on the engine's own
//! client (`h2/`) or, for a plan with gRPC calls, on the h2 crate (`h2conn.rs`), each shared by up to `streams` holders (closed-loop users or open-loop
//! senders), each holder with one stream at a time.
//!
//! A [`Pool`] keeps slots, each with at most one live connection. A holder takes the
//! slot with the fewest holders (a new slot when all are full), and the first holder
//! to find the slot without a live connection opens one while the others wait for it.
//! With one stream per connection every closed-loop user has its own connection, as
//! over HTTP/1.1.
//!
//! Errors: a stream reset by the server (RST_STREAM) is `reset`, a connection ended by
//! GOAWAY is `closed`, I/O errors as on HTTP/1.1, other protocol errors `io`. A request
//! that was never sent because its connection was closing (a graceful GOAWAY, as nginx
//! sends after `keepalive_requests`), or that the server did not process (above the
//! GOAWAY's last stream, or refused), goes once more on a new connection: over HTTP/1.1
//! the same server says `Connection: close` on its last response, and no request fails.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ::h2::RecvStream;
use http::header::CONTENT_LENGTH;

use crate::client::h2;
pub use crate::client::h2::{Failure, Text};
use crate::client::h2conn::{self, Io, Outbound, Sender};
use crate::client::http1::{Prepared, Response, Tag};
use crate::client::Kept;
use crate::outcome::ErrorClass;

pub struct Pool {
    streams: usize,
    /// Connections on the engine's own client (else the h2 crate's, for gRPC).
    pub own: bool,
    slots: Mutex<Vec<Arc<Slot>>>,
}

#[derive(Default)]
struct Slot {
    holders: AtomicUsize,
    live: tokio::sync::Mutex<Live>,
}

/// A slot's connection, numbered so that a holder retires only the one it used.
#[derive(Default)]
struct Live {
    generation: u64,
    sender: Option<Link>,
}

/// A connection on either client.
#[derive(Clone)]
enum Link {
    Crate(Sender),
    Own(h2::Client),
}

impl Link {
    fn is_closed(&self) -> bool {
        match self {
            Link::Crate(s) => s.is_closed(),
            Link::Own(c) => c.is_closed(),
        }
    }
}

/// A place in a slot; left when dropped.
struct Holder(Arc<Slot>);

impl Drop for Holder {
    fn drop(&mut self) {
        self.0.holders.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A holder's share of a connection.
pub struct Conn {
    holder: Holder,
    generation: u64,
    sender: Link,
}

impl Conn {
    /// False once the connection has ended (an error, the server's close).
    pub fn is_reusable(&self) -> bool {
        !self.sender.is_closed()
    }

    /// A connection that said GOAWAY takes no new stream: the next holder to connect
    /// in this slot opens a new one.
    async fn retire(&self) {
        let mut live = self.holder.0.live.lock().await;
        if live.generation == self.generation {
            live.sender = None;
        }
    }
}

impl Pool {
    pub fn new(streams: u32, own: bool) -> Self {
        Self {
            streams: streams.max(1) as usize,
            own,
            slots: Mutex::new(Vec::new()),
        }
    }

    fn take_slot(&self) -> Holder {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let least = slots
            .iter()
            .filter(|s| s.holders.load(Ordering::Acquire) < self.streams)
            .min_by_key(|s| s.holders.load(Ordering::Acquire))
            .cloned();
        let slot = least.unwrap_or_else(|| {
            slots.push(Arc::default());
            slots.last().expect("pushed").clone()
        });
        slot.holders.fetch_add(1, Ordering::AcqRel);
        Holder(slot)
    }

    /// A share of a live connection; `open` gives the byte stream (TCP or TLS) when a
    /// new connection is needed (it is not awaited otherwise).
    pub async fn connect(
        &self,
        open: impl Future<Output = Result<Box<dyn Io>, ErrorClass>>,
    ) -> Result<Conn, ErrorClass> {
        let holder = self.take_slot();
        let (generation, sender) = share(&holder.0, self.own, open).await?;
        Ok(Conn {
            holder,
            generation,
            sender,
        })
    }

    /// Moves `conn` to a new connection in its slot, after its own said GOAWAY.
    pub async fn reconnect(
        &self,
        conn: &mut Conn,
        open: impl Future<Output = Result<Box<dyn Io>, ErrorClass>>,
    ) -> Result<(), ErrorClass> {
        conn.retire().await;
        (conn.generation, conn.sender) = share(&conn.holder.0, self.own, open).await?;
        Ok(())
    }
}

/// The slot's live connection, opened first if it has none.
async fn share(
    slot: &Slot,
    own: bool,
    open: impl Future<Output = Result<Box<dyn Io>, ErrorClass>>,
) -> Result<(u64, Link), ErrorClass> {
    let mut live = slot.live.lock().await;
    match &live.sender {
        Some(sender) if !sender.is_closed() => Ok((live.generation, sender.clone())),
        _ => {
            live.sender = None;
            let io = open.await?;
            let sender = if own {
                Link::Own(h2::Client::handshake(io).await?)
            } else {
                Link::Crate(Sender::handshake(io).await?)
            };
            live.generation += 1;
            live.sender = Some(sender.clone());
            Ok((live.generation, sender))
        }
    }
}

/// The request as HTTP/2 sends it, with `body`: `scheme` and `authority` (the plan's
/// `Host`, if it sets one) give the pseudo-headers, the tag goes in `X-Pinchpoint`, with
/// the trace context in `traceparent` and `baggage`, and in the query too unless
/// `in_query` is false (a gRPC path names the method, and nothing may follow it).
pub fn build_with(
    prepared: &Prepared,
    scheme: &str,
    authority: &str,
    tag: (Option<&Tag>, bool),
    body: Bytes,
) -> Result<Outbound, ErrorClass> {
    let mut text = Text::default();
    text.write(prepared, scheme, authority, tag);
    text.request(prepared, body)
}

/// Sends one request on its own stream and reads the whole response body.
pub async fn exchange(conn: &mut Conn, request: Outbound, mut keep: Option<&mut Kept>) -> Result<Response, Failure> {
    let response = open(conn, request).await?;
    let status = response.status().as_u16();
    let length = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(kept) = keep.as_deref_mut() {
        kept.head.extend_from_slice(format!("HTTP/1.1 {status} -\r\n").as_bytes());
        for (k, v) in response.headers() {
            kept.head.extend_from_slice(k.as_str().as_bytes());
            kept.head.extend_from_slice(b": ");
            kept.head.extend_from_slice(v.as_bytes());
            kept.head.extend_from_slice(b"\r\n");
        }
        kept.head.extend_from_slice(b"\r\n");
    }
    let mut body = response.into_body();
    let mut bytes = 0u64;
    while let Some(data) = h2conn::next(&mut body).await {
        let data = match data {
            Ok(data) => data,
            Err(e) => {
                let seen = h2conn::inspect(&e);
                if seen.go_away {
                    conn.retire().await;
                }
                // A graceful GOAWAY may be reported on a stream whose body has all
                // come (before its end flag was read): that response is complete.
                if seen.graceful && length == Some(bytes) {
                    break;
                }
                return Err(Failure::Failed(seen.class));
            }
        };
        bytes += data.len() as u64;
        if let Some(kept) = keep.as_deref_mut() {
            kept.keep_body(&data);
        }
    }
    Ok(Response {
        status,
        bytes,
        closing: false,
    })
}

/// Sends a request (its header block and body) on the engine's own client and reads
/// the whole response.
pub async fn exchange_own(conn: &mut Conn, block: &[u8], body: &[u8], keep: Option<&mut Kept>) -> Result<Response, Failure> {
    let Link::Own(client) = &conn.sender else {
        return Err(Failure::Failed(ErrorClass::Io));
    };
    client.exchange(block, body, keep).await
}

/// Sends `request` on a stream of its own: the response's head, its body to be read.
pub async fn open(conn: &mut Conn, request: Outbound) -> Result<http::Response<RecvStream>, Failure> {
    let Link::Crate(sender) = &mut conn.sender else {
        return Err(Failure::Failed(ErrorClass::Io));
    };
    match sender.send(request).await {
        Ok(response) => Ok(response),
        Err(seen) => {
            if seen.go_away {
                conn.retire().await;
            }
            Err(if seen.refused {
                Failure::Refused
            } else {
                Failure::Failed(seen.class)
            })
        }
    }
}

/// The class of an error while a response's body is read; a connection that said
/// GOAWAY takes no new stream.
pub async fn body_error(conn: &Conn, e: &::h2::Error) -> ErrorClass {
    let seen = h2conn::inspect(e);
    if seen.go_away {
        conn.retire().await;
    }
    seen.class
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::http1::{trace_run_half, TagLevel};
    use crate::config::RequestSpec;

    fn prepared(headers: &[(&str, &str)]) -> Prepared {
        let spec = RequestSpec {
            method: "GET".into(),
            path: "/a".into(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: Vec::new(),
            weight: 1,
            timeout: None,
            ws: false,
            messages: vec![],
            grpc: None,
        };
        Prepared::new(&spec, Duration::from_secs(1)).expect("a valid request")
    }

    fn build(prepared: &Prepared, tag: Option<&Tag>) -> Result<Outbound, ErrorClass> {
        build_with(prepared, "http", "h:1", (tag, true), Bytes::new())
    }

    #[test]
    fn a_tagged_request_carries_the_tag_and_the_trace_context() {
        let tag = Tag::new("r", TagLevel::Rate("2.5"), 4);
        let request = build(&prepared(&[]), Some(&tag)).expect("built").head;
        assert_eq!(request.uri(), "http://h:1/a?pp_run=r&pp_rate=2.5&pp_req=4");
        let headers = request.headers();
        assert_eq!(headers["x-pinchpoint"], "run=r; rate=2.5; req=4");
        let parent = format!("00-{:016x}0000000000000004-0000000000000009-01", trace_run_half("r"));
        assert_eq!(headers["traceparent"], parent.as_str());
        assert_eq!(headers["baggage"], "pp.run=r,pp.rate=2.5");
        let own = build(&prepared(&[("traceparent", "00-a-b-00")]), Some(&tag)).expect("built").head;
        assert_eq!(own.headers()["traceparent"], "00-a-b-00");
        let untagged = build(&prepared(&[]), None).expect("built").head;
        assert!(untagged.headers().get("traceparent").is_none());
    }

    #[test]
    fn a_kept_text_makes_the_same_request_again_and_holds_only_the_last_one() {
        let (plain, tag) = (prepared(&[("accept", "*/*")]), Tag::new("r", TagLevel::Users(3), 7));
        let mut text = Text::default();
        text.write(&plain, "http", "h:1", (Some(&tag), true));
        let (first, again) = (text.request(&plain, Bytes::new()).expect("made"), text.request(&plain, Bytes::new()).expect("made"));
        assert_eq!(again.head.uri(), first.head.uri());
        assert_eq!(again.head.headers(), first.head.headers());
        assert_eq!(again.head.headers()["x-pinchpoint"], "run=r; users=3; req=7");
        text.write(&plain, "http", "h:1", (None, true));
        let untagged = text.request(&plain, Bytes::new()).expect("made").head;
        assert_eq!(untagged.uri(), "http://h:1/a");
        assert_eq!(untagged.headers().keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"]);
    }
}
