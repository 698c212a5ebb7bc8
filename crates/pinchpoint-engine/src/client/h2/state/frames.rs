//! The frames a connection takes apart: each kind's effect on the connection and its
//! streams, a response's head decoded and its data counted.

use super::{Fatal, State, MAX_HEADER_LIST};
use crate::client::h2::frame::{self, Head};
use crate::client::h2::hpack::Value;
use crate::client::h2::stream::{CONN_WINDOW, STREAM_WINDOW};
use crate::client::h2::Failure;
use crate::outcome::{note, ErrorClass};

impl State {
    pub(super) fn frame(&mut self, head: Head, payload: &[u8]) -> Result<(), Fatal> {
        if self.continuing.is_some_and(|(id, _)| head.kind != frame::CONTINUATION || head.stream != id) {
            return Err(self.protocol(frame::PROTOCOL_ERROR, "a frame inside a header block"));
        }
        if !self.got_settings && head.kind != frame::SETTINGS {
            return Err(self.protocol(frame::PROTOCOL_ERROR, "the server's first frame is not SETTINGS"));
        }
        match head.kind {
            frame::DATA => self.data(head, payload),
            frame::HEADERS => {
                if head.stream == 0 {
                    return Err(self.protocol(frame::PROTOCOL_ERROR, "HEADERS on stream 0"));
                }
                let fragment = frame::content(&head, payload).map_err(|what| self.protocol(frame::PROTOCOL_ERROR, what))?;
                let end_stream = head.flags & frame::END_STREAM != 0;
                if head.flags & frame::END_HEADERS != 0 {
                    return self.headers(head.stream, fragment, end_stream);
                }
                self.block.clear();
                self.block.extend_from_slice(fragment);
                self.continuing = Some((head.stream, end_stream));
                Ok(())
            }
            frame::CONTINUATION => {
                let Some((id, end_stream)) = self.continuing else {
                    return Err(self.protocol(frame::PROTOCOL_ERROR, "CONTINUATION without HEADERS"));
                };
                self.block.extend_from_slice(payload);
                if self.block.len() > 2 * MAX_HEADER_LIST as usize {
                    return Err(self.protocol(frame::PROTOCOL_ERROR, "a header block over twice SETTINGS_MAX_HEADER_LIST_SIZE"));
                }
                if head.flags & frame::END_HEADERS == 0 {
                    return Ok(());
                }
                self.continuing = None;
                let block = std::mem::take(&mut self.block);
                let result = self.headers(id, &block, end_stream);
                self.block = block;
                result
            }
            frame::RST_STREAM => {
                let code = frame::word(payload).ok_or_else(|| self.protocol(frame::FRAME_SIZE_ERROR, "RST_STREAM not of 4 bytes"))?;
                if let Some(i) = self.find(head.stream) {
                    if code == frame::REFUSED_STREAM {
                        self.finish(i, Err(Failure::Refused));
                    } else {
                        note(ErrorClass::Reset, || format!("the server reset the stream: {}", frame::error_name(code)));
                        self.finish(i, Err(Failure::Failed(ErrorClass::Reset)));
                    }
                }
                Ok(())
            }
            frame::SETTINGS => self.settings(head, payload),
            frame::PING => {
                if payload.len() != 8 {
                    return Err(self.protocol(frame::FRAME_SIZE_ERROR, "PING not of 8 bytes"));
                }
                if head.flags & frame::ACK == 0 {
                    frame::push_head(&mut self.wbuf, 8, frame::PING, frame::ACK, 0);
                    self.wbuf.extend_from_slice(payload);
                }
                Ok(())
            }
            frame::GOAWAY => {
                let (last, code) = frame::goaway(payload).ok_or_else(|| self.protocol(frame::FRAME_SIZE_ERROR, "GOAWAY under 8 bytes"))?;
                if code != frame::NO_ERROR {
                    note(ErrorClass::Closed, || format!("the server sent GOAWAY: {}", frame::error_name(code)));
                }
                self.away = Some(self.away.map_or(last, |l| l.min(last)));
                for i in 0..self.streams.len() {
                    if self.streams[i].id > last {
                        self.finish(i, Err(Failure::Refused));
                    }
                }
                self.wake_room();
                Ok(())
            }
            frame::WINDOW_UPDATE => {
                let increment = frame::word(payload).ok_or_else(|| self.protocol(frame::FRAME_SIZE_ERROR, "WINDOW_UPDATE not of 4 bytes"))? & 0x7fff_ffff;
                if head.stream == 0 {
                    if increment == 0 {
                        return Err(self.protocol(frame::PROTOCOL_ERROR, "a WINDOW_UPDATE of 0"));
                    }
                    self.send_window += i64::from(increment);
                } else if let Some(i) = self.find(head.stream) {
                    self.streams[i].send_window += i64::from(increment);
                }
                self.send_bodies();
                Ok(())
            }
            frame::PUSH_PROMISE => Err(self.protocol(frame::PROTOCOL_ERROR, "PUSH_PROMISE though push is off")),
            _ => Ok(()),
        }
    }

    fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), Fatal> {
        if head.flags & frame::ACK != 0 {
            return Ok(());
        }
        if head.stream != 0 || !payload.len().is_multiple_of(6) {
            return Err(self.protocol(frame::FRAME_SIZE_ERROR, "a malformed SETTINGS frame"));
        }
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => self.peer.max_streams = value as usize,
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > 0x7fff_ffff {
                        return Err(self.protocol(frame::FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"));
                    }
                    let delta = i64::from(value) - self.peer.window;
                    self.peer.window = i64::from(value);
                    for s in &mut self.streams {
                        s.send_window += delta;
                    }
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&value) {
                        return Err(self.protocol(frame::PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range"));
                    }
                    self.peer.max_frame = value as usize;
                }
                _ => {}
            }
        }
        self.got_settings = true;
        frame::push_head(&mut self.wbuf, 0, frame::SETTINGS, frame::ACK, 0);
        self.wake_room();
        self.send_bodies();
        Ok(())
    }

    fn data(&mut self, head: Head, payload: &[u8]) -> Result<(), Fatal> {
        if head.stream == 0 {
            return Err(self.protocol(frame::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        let len = payload.len() as u32;
        self.unacked += len;
        if self.unacked > CONN_WINDOW {
            return Err(self.protocol(frame::FLOW_CONTROL_ERROR, "DATA beyond the connection's window"));
        }
        if self.unacked >= CONN_WINDOW / 2 {
            frame::push_window_update(&mut self.wbuf, 0, self.unacked);
            self.unacked = 0;
        }
        let data = frame::content(&head, payload).map_err(|what| self.protocol(frame::PROTOCOL_ERROR, what))?;
        let Some(i) = self.find(head.stream) else { return Ok(()) };
        let s = &mut self.streams[i];
        if s.outcome.is_some() {
            return Ok(());
        }
        if s.status == 0 {
            self.stream_error(i, "DATA before the response's head");
            return Ok(());
        }
        s.bytes += data.len() as u64;
        if let Some(kept) = &mut s.kept {
            kept.keep_body(data);
        }
        s.unacked += len;
        if s.unacked > STREAM_WINDOW {
            self.stream_error(i, "DATA beyond the stream's window");
            return Ok(());
        }
        if head.flags & frame::END_STREAM != 0 {
            let response = s.response();
            self.finish(i, Ok(response));
        } else if s.unacked >= STREAM_WINDOW / 2 {
            frame::push_window_update(&mut self.wbuf, s.id, s.unacked);
            s.unacked = 0;
        }
        Ok(())
    }

    fn headers(&mut self, id: u32, block: &[u8], end_stream: bool) -> Result<(), Fatal> {
        let i = self.find(id).filter(|&i| self.streams[i].outcome.is_none());
        let State { decoder, streams, .. } = self;
        let stream = i.map(|i| &mut streams[i]);
        let first = stream.as_ref().is_some_and(|s| s.status == 0);
        let mut kept = stream.and_then(|s| s.kept.as_mut()).filter(|_| first);
        let kept_from = kept.as_ref().map_or(0, |k| k.head.len());
        let mut status = 0u16;
        let mut bad_status = false;
        let decoded = decoder.decode(block, |name, value| {
            if name == b":status" {
                let mut text = Vec::new();
                let digits = match value {
                    Value::Plain(v) => v,
                    huffman => {
                        bad_status |= huffman.push_to(&mut text).is_err();
                        &text[..]
                    }
                };
                match std::str::from_utf8(digits).ok().and_then(|d| d.parse::<u16>().ok()) {
                    Some(s) if digits.len() == 3 => status = s,
                    _ => bad_status = true,
                }
                if let Some(k) = kept.as_deref_mut() {
                    k.head.extend_from_slice(format!("HTTP/1.1 {status} -\r\n").as_bytes());
                }
            } else if let Some(k) = kept.as_deref_mut().filter(|_| !name.starts_with(b":")) {
                k.head.extend_from_slice(name);
                k.head.extend_from_slice(b": ");
                bad_status |= value.push_to(&mut k.head).is_err();
                k.head.extend_from_slice(b"\r\n");
            }
        });
        let list = match decoded {
            Ok(list) => list,
            Err(e) => return Err(self.protocol(frame::COMPRESSION_ERROR, e.0)),
        };
        let Some(i) = i else { return Ok(()) };
        if list > MAX_HEADER_LIST as usize {
            self.stream_error(i, "a response header list over SETTINGS_MAX_HEADER_LIST_SIZE");
            return Ok(());
        }
        let s = &mut self.streams[i];
        if first {
            if bad_status {
                self.stream_error(i, "a response whose :status is not three digits");
                return Ok(());
            }
            if (100..200).contains(&status) {
                if let Some(k) = &mut s.kept {
                    k.head.truncate(kept_from);
                }
                if end_stream {
                    self.stream_error(i, "an interim response that ends its stream");
                }
                return Ok(());
            }
            if let Some(k) = &mut s.kept {
                k.head.extend_from_slice(b"\r\n");
            }
            s.status = status;
        }
        if end_stream {
            let response = s.response();
            self.finish(i, Ok(response));
        }
        Ok(())
    }
}
