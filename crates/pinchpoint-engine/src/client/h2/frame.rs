//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header read and written, and the
//! payloads this client sends or takes apart.

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;
/// The largest frame payload we take (SETTINGS_MAX_FRAME_SIZE's default, which ours keep).
pub const MAX_FRAME: usize = 16_384;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY: u8 = 0x20;

pub const SETTINGS_ENABLE_PUSH: u16 = 2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 6;

pub const NO_ERROR: u32 = 0;
pub const PROTOCOL_ERROR: u32 = 1;
pub const FLOW_CONTROL_ERROR: u32 = 3;
pub const FRAME_SIZE_ERROR: u32 = 6;
pub const REFUSED_STREAM: u32 = 7;
pub const CANCEL: u32 = 8;
pub const COMPRESSION_ERROR: u32 = 9;

/// An error code's name (§7).
pub fn error_name(code: u32) -> &'static str {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES.get(code as usize).copied().unwrap_or("an unknown error code")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl Head {
    pub fn parse(b: &[u8]) -> Head {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32_at(&b[5..9]) & 0x7fff_ffff,
        }
    }
}

pub fn push_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
}

pub fn push_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    push_head(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn push_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    push_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn push_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    push_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn push_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    push_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// A header block in HEADERS and as many CONTINUATION frames as `max_frame` needs.
pub fn push_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame: usize) {
    let mut chunks = block.chunks(max_frame.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let last = first.len() == block.len();
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    push_head(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut sent = first.len();
    for chunk in chunks {
        sent += chunk.len();
        push_head(out, chunk.len(), CONTINUATION, if sent == block.len() { END_HEADERS } else { 0 }, stream);
        out.extend_from_slice(chunk);
    }
}

/// The part of a DATA or HEADERS payload that is data or header block: without its
/// padding and, for HEADERS, its priority fields. Err if the padding is too long.
pub fn content<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], &'static str> {
    let mut body = payload;
    let mut pad = 0usize;
    if head.flags & PADDED != 0 {
        pad = usize::from(*body.first().ok_or("a padded frame without its pad length")?);
        body = &body[1..];
    }
    if head.kind == HEADERS && head.flags & PRIORITY != 0 {
        body = body.get(5..).ok_or("a HEADERS frame too short for its priority")?;
    }
    if pad > body.len() {
        return Err("a frame's padding is longer than the frame");
    }
    Ok(&body[..body.len() - pad])
}

/// Each SETTINGS parameter of a SETTINGS payload.
pub fn settings(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload.chunks_exact(6).map(|s| (u16::from_be_bytes([s[0], s[1]]), u32_at(&s[2..])))
}

/// A GOAWAY payload's last stream and error code.
pub fn goaway(payload: &[u8]) -> Option<(u32, u32)> {
    (payload.len() >= 8).then(|| (u32_at(payload) & 0x7fff_ffff, u32_at(&payload[4..])))
}

/// A four-byte payload (RST_STREAM's code, WINDOW_UPDATE's increment).
pub fn word(payload: &[u8]) -> Option<u32> {
    (payload.len() == 4).then(|| u32_at(payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_goes_out_and_back() {
        let mut out = Vec::new();
        push_head(&mut out, 0x01_02_03, HEADERS, END_HEADERS | END_STREAM, 0x8000_0005);
        assert_eq!(out, [1, 2, 3, 1, 5, 0x80, 0, 0, 5]);
        let head = Head::parse(&out);
        assert_eq!(head, Head { len: 0x01_02_03, kind: HEADERS, flags: 5, stream: 5 });
    }

    #[test]
    fn a_long_block_is_continued() {
        let block: Vec<u8> = (0..25u8).collect();
        let mut out = Vec::new();
        push_headers(&mut out, 3, &block, true, 10);
        let heads: Vec<Head> = [0, 19, 38].iter().map(|&at| Head::parse(&out[at..])).collect();
        assert_eq!(heads[0], Head { len: 10, kind: HEADERS, flags: END_STREAM, stream: 3 });
        assert_eq!(heads[1], Head { len: 10, kind: CONTINUATION, flags: 0, stream: 3 });
        assert_eq!(heads[2], Head { len: 5, kind: CONTINUATION, flags: END_HEADERS, stream: 3 });
        assert_eq!(out.len(), 3 * HEADER_LEN + 25);
        let mut short = Vec::new();
        push_headers(&mut short, 1, &block, false, 100);
        assert_eq!(Head::parse(&short), Head { len: 25, kind: HEADERS, flags: END_HEADERS, stream: 1 });
    }

    #[test]
    fn padding_and_priority_are_taken_off() {
        let data = Head { len: 6, kind: DATA, flags: PADDED, stream: 1 };
        assert_eq!(content(&data, &[2, b'o', b'k', b'!', 0, 0]), Ok(&b"ok!"[..]));
        assert!(content(&data, &[9, b'o']).is_err());
        let headers = Head { len: 8, kind: HEADERS, flags: PADDED | PRIORITY, stream: 1 };
        assert_eq!(content(&headers, &[1, 0, 0, 0, 0, 16, 0x88, 0]), Ok(&[0x88][..]));
        let plain = Head { len: 2, kind: DATA, flags: 0, stream: 1 };
        assert_eq!(content(&plain, b"ok"), Ok(&b"ok"[..]));
    }

    #[test]
    fn settings_and_goaway_are_read() {
        let mut out = Vec::new();
        push_settings(&mut out, &[(SETTINGS_MAX_CONCURRENT_STREAMS, 7), (SETTINGS_MAX_FRAME_SIZE, 1 << 14)]);
        assert_eq!(Head::parse(&out).len, 12);
        let got: Vec<_> = settings(&out[HEADER_LEN..]).collect();
        assert_eq!(got, [(3, 7), (5, 16384)]);
        let mut away = Vec::new();
        push_goaway(&mut away, 9, REFUSED_STREAM);
        assert_eq!(goaway(&away[HEADER_LEN..]), Some((9, 7)));
        assert_eq!(error_name(7), "REFUSED_STREAM");
        assert_eq!(word(&[0, 0, 1, 0]), Some(256));
        assert_eq!(word(&[0, 1]), None);
    }
}
