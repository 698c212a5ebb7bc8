//! The response: its head parsed for status and framing, a chunked body counted.

use std::mem::MaybeUninit;

use crate::client::Kept;
use crate::outcome::ErrorClass;

/// The most response headers accepted, as hyper's default.
const MAX_HEADERS: usize = 100;

pub struct Response {
    pub status: u16,
    pub bytes: u64,
    /// The connection cannot carry another request: the server said it closes it,
    /// the body ran to the close, or more bytes came than the response holds.
    pub closing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    Empty,
    Length(u64),
    Chunked,
    ToClose,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) framing: Framing,
    pub(super) closing: bool,
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses a response head at the start of `buf`: None if it is not complete yet,
/// else its length and what it says. An interim 1xx head is returned as such.
pub(super) fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<(usize, Head)>, ErrorClass> {
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ErrorClass::Io),
    };
    let status = resp.code.unwrap_or(0);
    let mut closing = resp.version == Some(0);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value.trim_ascii())
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(ErrorClass::Io)?;
            if length.is_some_and(|l| l != v) {
                return Err(ErrorClass::Io);
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") && has_token(h.value, "close") {
            closing = true;
        }
    }
    let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if transfer_encoding {
        if chunked {
            Framing::Chunked
        } else {
            Framing::ToClose
        }
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        Framing::ToClose
    };
    if status == 101 || framing == Framing::ToClose {
        closing = true;
    }
    Ok(Some((
        n,
        Head {
            status,
            framing,
            closing,
        },
    )))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Counts the data of a chunked body fed to it in pieces.
#[derive(Debug)]
pub(super) struct Chunked {
    pub(super) state: ChunkState,
    pub(super) bytes: u64,
}

impl Chunked {
    pub(super) fn new() -> Self {
        Self {
            state: ChunkState::Size,
            bytes: 0,
        }
    }

    /// Consumes what it can of `data`; the rest (an incomplete size or trailer line)
    /// must be fed again with what follows.
    #[cfg(test)]
    pub(super) fn feed(&mut self, data: &[u8]) -> Result<usize, ErrorClass> {
        self.feed_into(data, None)
    }

    /// As [`Chunked::feed`], keeping the data in `keep` if given.
    pub(super) fn feed_into(&mut self, data: &[u8], mut keep: Option<&mut Kept>) -> Result<usize, ErrorClass> {
        let mut pos = 0;
        loop {
            let rest = &data[pos..];
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        pos += n;
                        self.state = ChunkState::Trailer;
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        pos += n;
                        self.state = ChunkState::Data(size);
                    }
                    Ok(httparse::Status::Partial) => return Ok(pos),
                    Err(_) => return Err(ErrorClass::Io),
                },
                ChunkState::Data(left) => {
                    let take = left.min(rest.len() as u64);
                    if let Some(kept) = keep.as_deref_mut() {
                        kept.keep_body(&rest[..take as usize]);
                    }
                    pos += take as usize;
                    self.bytes += take;
                    if take < left {
                        self.state = ChunkState::Data(left - take);
                        return Ok(pos);
                    }
                    self.state = ChunkState::DataEnd;
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ErrorClass::Io);
                    }
                    pos += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => match rest.windows(2).position(|w| w == b"\r\n") {
                    None => return Ok(pos),
                    Some(0) => {
                        pos += 2;
                        self.state = ChunkState::Done;
                    }
                    Some(i) => pos += i + 2,
                },
                ChunkState::Done => return Ok(pos),
            }
        }
    }
}

