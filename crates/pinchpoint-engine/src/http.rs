//! One HTTP/1.1 keep-alive connection per user: connect, send, read the whole body.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderName, HeaderValue, CONNECTION, HOST};
use hyper::{Method, Request, Version};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::config::RequestSpec;
use crate::outcome::{classify_connect, classify_exchange, ErrorClass};

pub type Sender = SendRequest<Full<Bytes>>;

/// A request of the plan, parsed once before the run.
pub struct Prepared {
    pub method: Method,
    /// The path with its own query, ready for the tag to be appended.
    pub path: String,
    pub query_sep: char,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

impl Prepared {
    pub fn new(spec: &RequestSpec) -> Result<Self, String> {
        let method = Method::from_bytes(spec.method.as_bytes())
            .map_err(|_| format!("bad HTTP method {:?}", spec.method))?;
        let mut headers = Vec::with_capacity(spec.headers.len());
        for (k, v) in &spec.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("bad header name {k:?}"))?;
            let value = HeaderValue::from_str(v).map_err(|_| format!("bad value of header {k:?}"))?;
            headers.push((name, value));
        }
        let query_sep = if spec.path.contains('?') { '&' } else { '?' };
        Ok(Self {
            method,
            path: spec.path.clone(),
            query_sep,
            headers,
            body: Bytes::from(spec.body.clone()),
        })
    }
}

pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Sender, ErrorClass> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Err(_) => return Err(ErrorClass::ConnectTimeout),
        Ok(Err(e)) => return Err(classify_connect(&e)),
        Ok(Ok(s)) => s,
    };
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| classify_exchange(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

pub struct Response {
    pub status: u16,
    pub bytes: u64,
    /// The server said it closes the connection after this response.
    pub closing: bool,
}

pub fn build(
    prepared: &Prepared,
    uri: &str,
    host: &HeaderValue,
    tag: Option<HeaderValue>,
) -> Result<Request<Full<Bytes>>, ErrorClass> {
    let mut req = Request::builder().method(prepared.method.clone()).uri(uri);
    let headers = req.headers_mut().ok_or(ErrorClass::Io)?;
    headers.insert(HOST, host.clone());
    for (k, v) in &prepared.headers {
        headers.insert(k.clone(), v.clone());
    }
    if let Some(tag) = tag {
        headers.insert(HeaderName::from_static("x-pinchpoint"), tag);
    }
    req.body(Full::new(prepared.body.clone())).map_err(|_| ErrorClass::Io)
}

pub async fn exchange(sender: &mut Sender, req: Request<Full<Bytes>>) -> Result<Response, ErrorClass> {
    sender.ready().await.map_err(|e| classify_exchange(&e))?;
    let resp = sender.send_request(req).await.map_err(|e| classify_exchange(&e))?;
    let status = resp.status().as_u16();
    let closing = resp.version() == Version::HTTP_10
        || resp
            .headers()
            .get(CONNECTION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| classify_exchange(&e))?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
        }
    }
    Ok(Response { status, bytes, closing })
}
