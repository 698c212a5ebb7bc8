//! WebSocket connections: the engine's own upgrade request (laid out and tagged as any
//! HTTP/1.1 request) on a connection of its own, its answer read and checked here, then
//! the frames by tungstenite on the same stream.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as Frame};
use tokio_tungstenite::WebSocketStream;

use crate::client::http1::{self, Prepared, Tag};
use crate::client::h2conn::Io;
use crate::client::{Target, MAX_KEPT_BODY};
use crate::outcome::{classify_io, note, ErrorClass};

pub type Socket = WebSocketStream<Box<dyn Io>>;

/// The longest answer head to an upgrade that is read.
const MAX_HEAD: usize = 64 << 10;

/// `prepared` (a GET) as an upgrade to a WebSocket, laid out with `tag` as every request
/// is: its bytes, and the key its answer must echo.
pub fn upgrade_request(prepared: &Prepared, host: &str, tag: Option<&Tag>) -> (Vec<u8>, String) {
    let key = tokio_tungstenite::tungstenite::handshake::client::generate_key();
    let mut upgrade = prepared.clone();
    upgrade.headers.extend_from_slice(b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n");
    upgrade.headers.extend_from_slice(format!("Sec-WebSocket-Key: {key}\r\n").as_bytes());
    let mut request = Vec::new();
    http1::build(&upgrade, host, tag, &mut request);
    (request, key)
}

/// How an upgrade was answered.
pub enum Upgrade {
    Open(Box<Socket>),
    /// Not switched: the status (0 if none could be read) and why.
    Refused(u16, String),
}

/// Sends `request` (an upgrade with `key`) on a new connection to `target` and reads
/// its answer. The caller bounds the time.
pub async fn open(target: &Target, request: &[u8], key: &str, timeout: Duration) -> Result<Upgrade, ErrorClass> {
    let mut io = target.stream(timeout).await?;
    io.write_all(request).await.map_err(|e| classify_io(&e))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_HEAD {
            return Ok(Upgrade::Refused(0, format!("the upgrade's answer has no end of head in {MAX_HEAD} bytes")));
        }
        let n = io.read(&mut chunk).await.map_err(|e| classify_io(&e))?;
        if n == 0 {
            note(ErrorClass::Closed, || "the connection closed before the upgrade was answered".into());
            return Err(ErrorClass::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut answer = httparse::Response::new(&mut fields);
    if answer.parse(&buf[..head]).is_err() {
        return Ok(Upgrade::Refused(0, "the upgrade's answer is not HTTP/1.1".into()));
    }
    let status = answer.code.unwrap_or(0);
    if status != 101 {
        return Ok(Upgrade::Refused(status, format!("the upgrade was answered {status}, not 101 Switching Protocols")));
    }
    let accept = answer.headers.iter().find(|h| h.name.eq_ignore_ascii_case("sec-websocket-accept")).map(|h| h.value);
    if accept != Some(derive_accept_key(key.as_bytes()).as_bytes()) {
        return Ok(Upgrade::Refused(status, "the upgrade's Sec-WebSocket-Accept does not answer its key".into()));
    }
    let rest = buf[head..].to_vec();
    // A frame is kept as a response body is: a longer one is an error, not held whole.
    let config = WebSocketConfig::default().max_message_size(Some(MAX_KEPT_BODY)).max_frame_size(Some(MAX_KEPT_BODY));
    Ok(Upgrade::Open(Box::new(WebSocketStream::from_partially_read(io, rest, Role::Client, Some(config)).await)))
}

/// Sends one frame: text, or binary.
pub async fn send(socket: &mut Socket, payload: &[u8], binary: bool) -> Result<(), ErrorClass> {
    let frame = if binary {
        Frame::binary(payload.to_vec())
    } else {
        Frame::text(String::from_utf8_lossy(payload).into_owned())
    };
    socket.send(frame).await.map_err(|e| classify(&e))
}

/// The payload of the next text or binary frame (pings are answered, pongs skipped).
pub async fn receive(socket: &mut Socket) -> Result<Vec<u8>, ErrorClass> {
    loop {
        match socket.next().await {
            Some(Ok(Frame::Text(text))) => return Ok(text.as_bytes().to_vec()),
            Some(Ok(Frame::Binary(data))) => return Ok(data.to_vec()),
            Some(Ok(Frame::Close(close))) => {
                // The server's code and reason say why (1011 and its error, 1008 a policy).
                note(ErrorClass::Closed, || match close {
                    Some(c) if c.reason.is_empty() => format!("the server closed the WebSocket before a frame came: code {}", u16::from(c.code)),
                    Some(c) => format!("the server closed the WebSocket before a frame came: code {} ({})", u16::from(c.code), c.reason.as_str()),
                    None => "the server closed the WebSocket before a frame came, with no close code".into(),
                });
                return Err(ErrorClass::Closed);
            }
            None => {
                note(ErrorClass::Closed, || "the connection ended before a frame came, with no close frame".into());
                return Err(ErrorClass::Closed);
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(classify(&e)),
        }
    }
}

/// Closes the connection: the close frame, then what comes until the server's.
pub async fn close(socket: &mut Socket) {
    if socket.close(None).await.is_ok() {
        while let Some(Ok(_)) = socket.next().await {}
    }
}

fn classify(err: &WsError) -> ErrorClass {
    match err {
        WsError::Io(e) => classify_io(e),
        WsError::ConnectionClosed | WsError::AlreadyClosed => {
            note(ErrorClass::Closed, || "the WebSocket was closed".into());
            ErrorClass::Closed
        }
        other => {
            note(ErrorClass::Io, || format!("WebSocket: {other}"));
            ErrorClass::Io
        }
    }
}
