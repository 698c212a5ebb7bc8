//! The target as the users and the open-loop senders see it: where it is, which HTTP
//! version it speaks and whether over TLS. A [`Conn`] is HTTP/1.1 over TCP (the fast
//! path: the engine's own client in `http1/`), HTTP/1.1 over TLS (`tls.rs`, the same
//! client), or a share of an HTTP/2 connection (`http2.rs`).

pub mod grpc;
pub mod h2;
pub mod h2conn;
pub mod http1;
pub mod http2;
pub mod tls;
pub mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::config::{HttpVersion, Protocol, OPEN_LOOP_STREAMS};

/// The longest body kept to capture from or check: longer ones are cut, and a capture
/// or check past the cut fails and says so.
pub const MAX_KEPT_BODY: usize = 4 << 20;
use self::http1::{Prepared, Response, Tag};
use self::h2conn::Outbound;
use self::http2::Failure;
use crate::outcome::ErrorClass;
use self::tls::Connector;

pub struct Target {
    pub addr: SocketAddr,
    /// `Host` (HTTP/1.1) or `:authority` (HTTP/2), unless the plan sets its own.
    pub host: String,
    tls: Option<Connector>,
    /// Some for HTTP/2.
    h2: Option<http2::Pool>,
}

pub enum Conn {
    Plain(http1::Conn<TcpStream>),
    /// Boxed: a TLS session is over a kilobyte, and a user holds its connection inline.
    Tls(Box<http1::Conn<TlsStream<TcpStream>>>),
    H2(http2::Conn),
}

impl Conn {
    /// Frees what the connection holds only while a request is under way (an HTTP/1.1
    /// connection's read buffer), before a long wait.
    pub fn shed_buffer(&mut self) {
        match self {
            Conn::Plain(c) => c.shed_buffer(),
            Conn::Tls(c) => c.shed_buffer(),
            Conn::H2(_) => {}
        }
    }
}

/// What a flow keeps of a response to capture from and check: its headers and body
/// (the first [`MAX_KEPT_BODY`] bytes of it).
#[derive(Debug, Default)]
pub struct Kept {
    /// The response head as HTTP/1.1 bytes (an HTTP/2 response's fields laid out so).
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// The body was longer than what is kept.
    pub cut: bool,
    /// Keep the body (else only the headers).
    pub want_body: bool,
}

impl Kept {
    pub fn clear(&mut self) {
        self.head.clear();
        self.body.clear();
        self.cut = false;
    }

    /// Keeps an HTTP/1.1 response head (status line and fields).
    pub fn keep_head(&mut self, head: &[u8]) {
        self.head.extend_from_slice(head);
    }

    /// Calls `f` with each header's name and value, in order.
    pub fn each_header(&self, mut f: impl FnMut(&str, &[u8])) {
        let mut fields = [httparse::EMPTY_HEADER; 100];
        let mut resp = httparse::Response::new(&mut fields);
        if resp.parse(&self.head).is_ok() {
            for h in resp.headers.iter() {
                f(h.name, h.value);
            }
        }
    }

    pub fn keep_body(&mut self, data: &[u8]) {
        if !self.want_body {
            return;
        }
        let room = MAX_KEPT_BODY.saturating_sub(self.body.len());
        if data.len() > room {
            self.cut = true;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// The first value of the header `name`.
    pub fn header(&self, name: &str) -> Option<String> {
        let mut found = None;
        self.each_header(|k, v| {
            if found.is_none() && k.eq_ignore_ascii_case(name) {
                found = Some(String::from_utf8_lossy(v).into_owned());
            }
        });
        found
    }
}

/// A request laid out for the target's HTTP version, ready to send.
#[derive(Default)]
pub struct Outgoing {
    /// HTTP/1.1: the request's bytes.
    bytes: Vec<u8>,
    /// HTTP/2: the request, or why it could not be made. Boxed: an `http::Request` is
    /// ~250 bytes that every HTTP/1.1 user would otherwise hold inline.
    h2: Option<Box<Result<Outbound, ErrorClass>>>,
    /// HTTP/2: the request's own text, to make it again. Boxed, and made by the first
    /// HTTP/2 request, for the same reason.
    text: Option<Box<http2::Text>>,
    /// HTTP/2 on the engine's own client: the request's header block.
    block: Vec<u8>,
}

impl Outgoing {
    /// Frees the HTTP/1.1 request bytes until the next [`Target::build`], before a long
    /// wait: a user thinking for seconds need not hold them.
    pub fn shed(&mut self) {
        self.bytes = Vec::new();
    }
}

impl Target {
    /// `server_name` is the URL's host: the TLS server name. `open_loop` sets how many
    /// streams an HTTP/2 connection carries unless the protocol says. A plan with gRPC
    /// calls has its HTTP/2 connections on the h2 crate, which streams their bodies.
    pub fn new(
        addr: SocketAddr,
        host: String,
        server_name: &str,
        protocol: &Protocol,
        (open_loop, grpc): (bool, bool),
    ) -> Result<Self, String> {
        let alpn = match protocol.http {
            HttpVersion::Http1 => tls::ALPN_HTTP1,
            HttpVersion::Http2 => tls::ALPN_H2,
        };
        let tls = protocol
            .tls
            .as_ref()
            .map(|options| Connector::new(options, server_name, alpn))
            .transpose()?;
        let h2 = (protocol.http == HttpVersion::Http2).then(|| {
            let streams = match protocol.streams_per_connection {
                0 if open_loop => OPEN_LOOP_STREAMS,
                0 => 1,
                n => n,
            };
            http2::Pool::new(streams, !grpc)
        });
        Ok(Self { addr, host, tls, h2 })
    }

    /// Requests go over HTTP/2 (they need their fields as names and values).
    pub fn is_h2(&self) -> bool {
        self.h2.is_some()
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Lays out `prepared` with `tag` into `out`, replacing what it held.
    pub fn build(&self, prepared: &Prepared, tag: Option<&Tag>, out: &mut Outgoing) {
        if let Some(pool) = &self.h2 {
            let text = out.text.get_or_insert_with(Box::default);
            text.write(prepared, self.scheme(), &self.host, (tag, true));
            if pool.own {
                h2::request::encode(prepared, text, &mut out.block);
            } else {
                out.h2 = Some(Box::new(text.request(prepared, Bytes::copy_from_slice(&prepared.body))));
            }
        } else {
            http1::build(prepared, &self.host, tag, &mut out.bytes);
        }
    }

    /// A connection: TCP within `timeout`, then the TLS handshake within `timeout`;
    /// for HTTP/2 a share of a live connection, or a new one.
    pub async fn connect(&self, timeout: Duration) -> Result<Conn, ErrorClass> {
        match (&self.h2, &self.tls) {
            (None, None) => Ok(Conn::Plain(http1::connect(self.addr, timeout).await?)),
            (None, Some(tls)) => {
                Box::pin(async {
                    let tcp = http1::connect_tcp(self.addr, timeout).await?;
                    Ok(Conn::Tls(Box::new(http1::Conn::new(tls.handshake(tcp, timeout).await?))))
                })
                .await
            }
            (Some(pool), _) => Box::pin(pool.connect(self.stream(timeout))).await.map(Conn::H2),
        }
    }

    /// A new connection's byte stream, over TLS if the target is: under an HTTP/2
    /// connection, or a WebSocket.
    pub async fn stream(&self, timeout: Duration) -> Result<Box<dyn h2conn::Io>, ErrorClass> {
        let tcp = http1::connect_tcp(self.addr, timeout).await?;
        Ok(match &self.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(tls.handshake(tcp, timeout).await?),
        })
    }

    /// Sends on `conn` what [`Target::build`] laid out for `prepared` and reads the
    /// whole response. An HTTP/2 request that its closing connection never sent goes
    /// once more on a new connection.
    pub fn exchange<'a>(
        &'a self,
        conn: &'a mut Conn,
        out: &'a mut Outgoing,
        prepared: &'a Prepared,
    ) -> impl Future<Output = Result<Response, ErrorClass>> + 'a {
        // Not an `async fn`: that would hold its arguments beside the future it awaits.
        self.exchange_keeping(conn, out, prepared, None)
    }

    /// As [`Target::exchange`], keeping the response's headers and body in `keep`.
    pub async fn exchange_keeping(
        &self,
        conn: &mut Conn,
        out: &mut Outgoing,
        prepared: &Prepared,
        mut keep: Option<&mut Kept>,
    ) -> Result<Response, ErrorClass> {
        match conn {
            Conn::Plain(c) => http1::exchange_keeping(c, &out.bytes, prepared.head, keep).await,
            Conn::Tls(c) => http1::exchange_keeping(c, &out.bytes, prepared.head, keep).await,
            Conn::H2(c) if self.h2.as_ref().is_some_and(|p| p.own) => {
                let pool = self.h2.as_ref().ok_or(ErrorClass::Io)?;
                Box::pin(async move {
                    match http2::exchange_own(c, &out.block, &prepared.body, keep.as_deref_mut()).await {
                        Err(Failure::Refused) => {
                            pool.reconnect(c, self.stream(prepared.timeout)).await?;
                            if let Some(kept) = keep.as_deref_mut() {
                                kept.clear();
                            }
                            http2::exchange_own(c, &out.block, &prepared.body, keep).await.map_err(Failure::class)
                        }
                        done => done.map_err(Failure::class),
                    }
                })
                .await
            }
            Conn::H2(c) => {
                let pool = self.h2.as_ref().ok_or(ErrorClass::Io)?;
                let request = (*out.h2.take().ok_or(ErrorClass::Io)?)?;
                let text = out.text.as_deref().ok_or(ErrorClass::Io)?;
                Box::pin(async move {
                    match http2::exchange(c, request, keep.as_deref_mut()).await {
                        Err(Failure::Refused) => {
                            pool.reconnect(c, self.stream(prepared.timeout)).await?;
                            if let Some(kept) = keep.as_deref_mut() {
                                kept.clear();
                            }
                            let again = text.request(prepared, Bytes::copy_from_slice(&prepared.body))?;
                            http2::exchange(c, again, keep).await.map_err(Failure::class)
                        }
                        done => done.map_err(Failure::class),
                    }
                })
                .await
            }
        }
    }
}

impl Conn {
    /// False when the connection cannot carry another request (the server closed it
    /// while it was idle): the next request then goes on a new one.
    pub fn is_reusable(&mut self) -> bool {
        match self {
            Conn::Plain(c) => c.is_reusable(),
            Conn::Tls(c) => c.is_reusable(),
            Conn::H2(c) => c.is_reusable(),
        }
    }
}
