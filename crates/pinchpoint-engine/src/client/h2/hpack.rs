//! HPACK (RFC 7541): a full decoder for responses (dynamic table, Huffman), and the
//! few encodings requests need. Requests never index anything: each is literal fields
//! (or static-table entries), so the server's table of our fields stays empty and the
//! constant part of a request is encoded once.

use std::collections::VecDeque;

use super::huffman;
use super::static_table::STATIC;

/// The dynamic table's size: HTTP/2's default, which our SETTINGS leave as it is.
pub const TABLE_SIZE: usize = 4096;

/// A field's value as the block holds it: decoded only if someone asks.
#[derive(Clone, Copy)]
pub enum Value<'a> {
    Plain(&'a [u8]),
    Huffman(&'a [u8]),
}

impl Value<'_> {
    /// Appends the value's text to `out`.
    pub fn push_to(self, out: &mut Vec<u8>) -> Result<(), ()> {
        match self {
            Value::Plain(v) => {
                out.extend_from_slice(v);
                Ok(())
            }
            Value::Huffman(v) => huffman::decode(v, out),
        }
    }

    /// The length its text counts toward a header list (RFC 9113 §6.5.2): a Huffman
    /// string is at most 8/5 of its length decoded.
    fn len_bound(self) -> usize {
        match self {
            Value::Plain(v) => v.len(),
            Value::Huffman(v) => v.len() * 8 / 5,
        }
    }
}

/// What a header block's decoding found wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// How many of the newest entries are looked through for a value indexed again.
const REPEAT_WINDOW: usize = 8;

/// An entry of the dynamic table in one buffer: its name, its value, and (for a value
/// that came Huffman-coded) the code as the block held it, so that a server indexing
/// the same value again (nginx indexes `date` in each response) has it copied, not
/// decoded again.
#[derive(Default)]
struct Entry {
    bytes: Vec<u8>,
    name: usize,
    value: usize,
    huffman: bool,
    /// Of the value as the block held it, to find it again without reading each entry.
    hash: u64,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name..self.name + self.value]
    }

    fn raw(&self) -> &[u8] {
        if self.huffman {
            &self.bytes[self.name + self.value..]
        } else {
            self.value()
        }
    }

    fn size(&self) -> usize {
        self.name + self.value + 32
    }
}

/// FNV-1a.
fn hash(bytes: &[u8], huffman: bool) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(huffman);
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[derive(Default)]
pub struct Decoder {
    /// Newest first.
    table: VecDeque<Entry>,
    /// Evicted entries, their buffers kept for the next ones.
    spare: Vec<Entry>,
    size: usize,
    max: usize,
    /// A literal name decoded from Huffman, for the field's callback.
    name: Vec<u8>,
}

/// A prefixed integer (§5.1) at the start of `data`, its top bits beyond `prefix`
/// masked off: the value and the bytes it took.
fn integer(data: &[u8], prefix: u8) -> Result<(usize, usize), Malformed> {
    let mask = (1u16 << prefix) as usize - 1;
    let first = *data.first().ok_or(Malformed("a header block cut inside an integer"))? as usize & mask;
    if first < mask {
        return Ok((first, 1));
    }
    let mut value = mask;
    for (i, &b) in data[1..].iter().enumerate() {
        if i >= 4 {
            break;
        }
        value += ((b & 0x7f) as usize) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 2));
        }
    }
    Err(Malformed("a header block integer too long or cut"))
}

/// A string literal (§5.2) at the start of `data`: its value and the bytes it took.
fn string(data: &[u8]) -> Result<(Value<'_>, usize), Malformed> {
    let huffman = data.first().is_some_and(|b| b & 0x80 != 0);
    let (len, n) = integer(data, 7)?;
    let bytes = data.get(n..n + len).ok_or(Malformed("a header block cut inside a string"))?;
    Ok((if huffman { Value::Huffman(bytes) } else { Value::Plain(bytes) }, n + len))
}

impl Decoder {
    pub fn new() -> Self {
        Decoder { max: TABLE_SIZE, ..Decoder::default() }
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), Malformed> {
        match index {
            0 => Err(Malformed("a header block refers to index 0")),
            1..=61 => {
                let (name, value) = STATIC[index - 1];
                Ok((name.as_bytes(), value.as_bytes()))
            }
            _ => self
                .table
                .get(index - 62)
                .map(|e| (e.name(), e.value()))
                .ok_or(Malformed("a header block refers to an index past its table")),
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(e) = self.table.pop_back() else { break };
            self.size -= e.size();
            self.spare.push(e);
        }
    }

    /// Adds the field named by `index` (or `literal`, when 0) with `value` to the
    /// table, its value decoded (or copied from an entry that had the same).
    fn insert(&mut self, index: usize, literal: &[u8], value: Value) -> Result<Entry, Malformed> {
        let mut e = self.spare.pop().unwrap_or_default();
        e.bytes.clear();
        if index == 0 {
            e.bytes.extend_from_slice(literal);
        } else {
            e.bytes.extend_from_slice(self.entry(index)?.0);
        }
        e.name = e.bytes.len();
        let (raw, huffman) = match value {
            Value::Plain(v) => (v, false),
            Value::Huffman(v) => (v, true),
        };
        e.huffman = huffman;
        e.hash = hash(raw, huffman);
        // A server that repeats a field repeats it among the newest few entries.
        let same = self
            .table
            .iter()
            .take(REPEAT_WINDOW)
            .find(|t| t.hash == e.hash && t.huffman == huffman && t.raw() == raw);
        match same {
            Some(same) => e.bytes.extend_from_slice(same.value()),
            None => value.push_to(&mut e.bytes).map_err(|_| Malformed("a header value's Huffman code is invalid"))?,
        }
        e.value = e.bytes.len() - e.name;
        if huffman {
            e.bytes.extend_from_slice(raw);
        }
        Ok(e)
    }

    fn push(&mut self, e: Entry) {
        let size = e.size();
        self.evict_to(self.max.saturating_sub(size));
        if size <= self.max {
            self.size += size;
            self.table.push_front(e);
        } else {
            self.spare.push(e);
        }
    }

    /// Decodes a whole header block, calling `field` with each field's name and value
    /// in order; the header list's size (at most) is returned.
    pub fn decode(&mut self, mut block: &[u8], mut field: impl FnMut(&[u8], Value)) -> Result<usize, Malformed> {
        let mut list = 0usize;
        let mut fields = 0usize;
        while let Some(&first) = block.first() {
            if first & 0x80 != 0 {
                let (index, n) = integer(block, 7)?;
                let (name, value) = self.entry(index)?;
                list += name.len() + value.len() + 32;
                field(name, Value::Plain(value));
                block = &block[n..];
            } else if first & 0xe0 == 0x20 {
                if fields > 0 {
                    return Err(Malformed("a table size update after a field"));
                }
                let (max, n) = integer(block, 5)?;
                if max > TABLE_SIZE {
                    return Err(Malformed("a table size update above SETTINGS_HEADER_TABLE_SIZE"));
                }
                self.max = max;
                self.evict_to(max);
                block = &block[n..];
                continue;
            } else {
                // Literal: with incremental indexing (01), without (0000) or never (0001).
                let indexing = first & 0x40 != 0;
                let (index, mut n) = integer(block, if indexing { 6 } else { 4 })?;
                let mut name_owned = std::mem::take(&mut self.name);
                name_owned.clear();
                let literal_name = index == 0;
                if literal_name {
                    let (name, m) = string(&block[n..])?;
                    name.push_to(&mut name_owned).map_err(|_| Malformed("a header name's Huffman code is invalid"))?;
                    n += m;
                }
                let (value, m) = string(&block[n..])?;
                n += m;
                let result = if indexing {
                    self.insert(index, &name_owned, value).map(|e| {
                        list += e.size();
                        field(e.name(), Value::Plain(e.value()));
                        self.push(e);
                    })
                } else {
                    let name = if literal_name { &name_owned[..] } else { self.entry(index)?.0 };
                    list += name.len() + value.len_bound() + 32;
                    field(name, value);
                    Ok(())
                };
                self.name = name_owned;
                result?;
                block = &block[n..];
            }
            fields += 1;
        }
        Ok(list)
    }
}

/// Appends a prefixed integer whose first byte carries `flags` above `prefix` bits.
pub fn push_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, value: usize) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends the static table's entry `index` (name and value) whole.
pub fn push_indexed(out: &mut Vec<u8>, index: usize) {
    push_integer(out, 0x80, 7, index);
}

/// Appends a field without indexing whose name is the static table's entry `index`.
pub fn push_named(out: &mut Vec<u8>, index: usize, value: &[u8]) {
    push_integer(out, 0x00, 4, index);
    push_integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// Appends a field without indexing, its name (lowercase) given literally.
pub fn push_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    push_integer(out, 0x00, 7, name.len());
    out.extend_from_slice(name);
    push_integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// Appends `name: value` (lowercase `name`), by its static table name if it has one.
pub fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match STATIC.iter().position(|(n, _)| n.as_bytes() == name) {
        Some(i) => push_named(out, i + 1, value),
        None => push_literal(out, name, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn decode(d: &mut Decoder, block: &str) -> Vec<(String, String)> {
        let mut fields = Vec::new();
        d.decode(&hex(block), |n, v| {
            let mut text = Vec::new();
            v.push_to(&mut text).expect("valid Huffman");
            fields.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(text).unwrap()));
        })
        .expect("decodes");
        fields
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    fn table(d: &Decoder) -> (Vec<(String, String)>, usize) {
        let entries = d
            .table
            .iter()
            .map(|e| (String::from_utf8(e.name().to_vec()).unwrap(), String::from_utf8(e.value().to_vec()).unwrap()))
            .collect();
        (entries, d.size)
    }

    #[test]
    fn integers_of_the_rfc_examples() {
        // C.1.1-C.1.3.
        assert_eq!(integer(&[0b0000_1010], 5), Ok((10, 1)));
        assert_eq!(integer(&[0b0001_1111, 0b1001_1010, 0b0000_1010], 5), Ok((1337, 3)));
        assert_eq!(integer(&[42], 8), Ok((42, 1)));
        let mut out = Vec::new();
        push_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert!(integer(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], 5).is_err());
    }

    #[test]
    fn the_rfc_literal_and_indexed_examples() {
        // C.2.1: literal with indexing.
        let mut d = Decoder::new();
        let f = decode(&mut d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
        assert_eq!(f, pairs(&[("custom-key", "custom-header")]));
        assert_eq!(table(&d), (pairs(&[("custom-key", "custom-header")]), 55));
        // C.2.2: without indexing; C.2.3: never indexed; C.2.4: indexed.
        let mut d = Decoder::new();
        assert_eq!(decode(&mut d, "040c 2f73 616d 706c 652f 7061 7468"), pairs(&[(":path", "/sample/path")]));
        assert_eq!(decode(&mut d, "1008 7061 7373 776f 7264 0673 6563 7265 74"), pairs(&[("password", "secret")]));
        assert_eq!(decode(&mut d, "82"), pairs(&[(":method", "GET")]));
        assert_eq!(table(&d).1, 0);
    }

    #[test]
    fn the_rfc_requests_with_huffman() {
        // C.4.1-C.4.3.
        let mut d = Decoder::new();
        let first = decode(&mut d, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        assert_eq!(first, pairs(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]));
        let second = decode(&mut d, "8286 84be 5886 a8eb 1064 9cbf");
        assert_eq!(second[4], ("cache-control".to_string(), "no-cache".to_string()));
        assert_eq!(second[3], (":authority".to_string(), "www.example.com".to_string()));
        let third = decode(&mut d, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        assert_eq!(third[4], ("custom-key".to_string(), "custom-value".to_string()));
        assert_eq!(
            table(&d),
            (pairs(&[("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")]), 164)
        );
    }

    #[test]
    fn the_rfc_responses_evict_from_a_small_table() {
        // C.6.1-C.6.3, with the table at 256 bytes.
        let mut d = Decoder::new();
        d.max = 256;
        let first = decode(
            &mut d,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        assert_eq!(
            first,
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        assert_eq!(table(&d).1, 222);
        let second = decode(&mut d, "4883 640e ffc1 c0bf");
        assert_eq!(second[0], (":status".to_string(), "307".to_string()));
        assert_eq!(table(&d).1, 222);
        let third = decode(
            &mut d,
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        assert_eq!(third[0], (":status".to_string(), "200".to_string()));
        assert_eq!(third[5], ("set-cookie".to_string(), "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1".to_string()));
        let (entries, size) = table(&d);
        assert_eq!(size, 215);
        assert_eq!(entries[0].0, "set-cookie");
        assert_eq!(entries.len(), 3);
    }

    #[test]
    fn a_value_indexed_again_is_the_same_and_the_table_keeps_its_size() {
        // `date` (33) with a Huffman value, indexed in each of many responses.
        let block = "6196 d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff";
        let mut d = Decoder::new();
        for _ in 0..200 {
            assert_eq!(decode(&mut d, block), pairs(&[("date", "Mon, 21 Oct 2013 20:13:21 GMT")]));
        }
        let (entries, size) = table(&d);
        assert_eq!(entries.len(), TABLE_SIZE / (4 + 29 + 32));
        assert_eq!(size, entries.len() * 65);
        assert!(entries.iter().all(|e| e.1 == "Mon, 21 Oct 2013 20:13:21 GMT"));
    }

    #[test]
    fn malformed_blocks_are_named() {
        let mut d = Decoder::new();
        assert_eq!(d.decode(&[0x80], |_, _| {}), Err(Malformed("a header block refers to index 0")));
        assert_eq!(d.decode(&[0xbe], |_, _| {}), Err(Malformed("a header block refers to an index past its table")));
        assert_eq!(d.decode(&[0x04, 0x05, b'/'], |_, _| {}), Err(Malformed("a header block cut inside a string")));
        assert!(d.decode(&[0x3f, 0xe2, 0x1f], |_, _| {}).is_err());
        assert_eq!(d.decode(&[0x82, 0x20], |_, _| {}), Err(Malformed("a table size update after a field")));
    }

    #[test]
    fn what_we_encode_decodes_back() {
        let mut block = Vec::new();
        push_indexed(&mut block, 2);
        push_named(&mut block, 4, b"/a?pp_run=r");
        push_field(&mut block, b"accept", b"*/*");
        push_field(&mut block, b"x-pinchpoint", b"run=r");
        push_literal(&mut block, b"x-long", &[b'v'; 300]);
        let mut d = Decoder::new();
        let mut got = Vec::new();
        d.decode(&block, |n, v| {
            let mut text = Vec::new();
            v.push_to(&mut text).unwrap();
            got.push((n.to_vec(), text));
        })
        .expect("decodes");
        assert_eq!(got[0], (b":method".to_vec(), b"GET".to_vec()));
        assert_eq!(got[1], (b":path".to_vec(), b"/a?pp_run=r".to_vec()));
        assert_eq!(got[2], (b"accept".to_vec(), b"*/*".to_vec()));
        assert_eq!(got[3], (b"x-pinchpoint".to_vec(), b"run=r".to_vec()));
        assert_eq!(got[4].1.len(), 300);
        assert_eq!(table(&d).1, 0);
    }
}
