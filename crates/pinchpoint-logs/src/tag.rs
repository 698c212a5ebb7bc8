//! The run tag of a record, as `pinchpoint.collect.tag` finds it: `pp_run=`, `pp_users=`,
//! `pp_rate=`, `pp_req=` query fields in the URI, request line or query string, or the
//! logged `X-Pinchpoint` header value. ASCII text only.

use std::sync::LazyLock;

use memchr::memmem;

use crate::shapes::is_space;

/// A valid tag: the run id, the users of the step (0 for a rate tag), the request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag<'a> {
    pub run: &'a [u8],
    pub users: u32,
    pub req: Option<u64>,
}

/// The raw fields of a tag, first occurrence of each.
#[derive(Default)]
pub struct Fields<'a> {
    run: Option<&'a [u8]>,
    users: Option<&'a [u8]>,
    rate: Option<&'a [u8]>,
    req: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    fn set(&mut self, key: &[u8], value: &'a [u8]) {
        let slot = match key {
            b"run" => &mut self.run,
            b"users" => &mut self.users,
            b"rate" => &mut self.rate,
            b"req" => &mut self.req,
            _ => return,
        };
        slot.get_or_insert(value);
    }

    /// Adds the query fields of one text, as `find_tag`'s regex finds them: a field
    /// starts the text or follows `?`, `&`, `;`, whitespace or a quote. Texts that
    /// Python joins with a space are added one after the other.
    pub fn add_query(&mut self, text: &'a [u8]) {
        static FINDER: LazyLock<memmem::Finder<'static>> =
            LazyLock::new(|| memmem::Finder::new(b"pp_"));
        let mut i = 0;
        while let Some(off) = FINDER.find(&text[i..]) {
            let at = i + off;
            let starts = at == 0
                || matches!(text[at - 1], b'?' | b'&' | b';' | b'"' | b'\'')
                || is_space(text[at - 1]);
            let key = [&b"run"[..], b"users", b"rate", b"req"]
                .into_iter()
                .find(|k| {
                    text[at + 3..].starts_with(k) && text.get(at + 3 + k.len()) == Some(&b'=')
                });
            match key {
                Some(key) if starts => {
                    let from = at + 4 + key.len();
                    let len = text[from..]
                        .iter()
                        .take_while(|b| {
                            !matches!(b, b'&' | b';' | b'"' | b'\'' | b'#') && !is_space(**b)
                        })
                        .count();
                    self.set(key, &text[from..from + len]);
                    i = from + len;
                }
                _ => i = at + 1,
            }
        }
    }

    /// `parse_header`: `run=<id>; users=<n>; req=<n>`, keys any case, spaces around.
    pub fn add_header(&mut self, value: &'a [u8]) {
        for part in value.split(|b| *b == b';') {
            let Some(eq) = part.iter().position(|b| *b == b'=') else {
                continue;
            };
            let key = strip(&part[..eq]);
            if key.len() <= 5 {
                let mut lower = [0u8; 5];
                lower[..key.len()].copy_from_slice(key);
                lower.make_ascii_lowercase();
                self.set(&lower[..key.len()], strip(&part[eq + 1..]));
            }
        }
    }

    /// The tag, if the fields make a valid one.
    pub fn tag(&self) -> Option<Tag<'a>> {
        let run = self.run.filter(|r| {
            !r.is_empty()
                && r.iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b))
        })?;
        let users = match (self.users, self.rate) {
            (Some(users), _) => u32::try_from(integer(users)?).ok()?,
            (None, Some(rate)) if is_rate(rate) => 0,
            _ => return None,
        };
        let req = match self.req {
            Some(req) => Some(integer(req)?),
            None => None,
        };
        Some(Tag { run, users, req })
    }
}

/// `[0-9]+` up to 2^64 - 1 (leading zeros allowed).
fn integer(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.iter().try_fold(0u64, |v, b| {
        v.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// `[0-9]{1,9}(?:\.[0-9]{1,6})?`
fn is_rate(text: &[u8]) -> bool {
    let (int, frac) = match text.iter().position(|b| *b == b'.') {
        Some(d) => (&text[..d], Some(&text[d + 1..])),
        None => (text, None),
    };
    let digits =
        |t: &[u8], max: usize| (1..=max).contains(&t.len()) && t.iter().all(u8::is_ascii_digit);
    digits(int, 9) && frac.is_none_or(|f| digits(f, 6))
}

fn strip(mut t: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = t {
        if !is_space(*first) {
            break;
        }
        t = rest;
    }
    while let [rest @ .., last] = t {
        if !is_space(*last) {
            break;
        }
        t = rest;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> Option<Tag<'_>> {
        let mut f = Fields::default();
        f.add_query(text.as_bytes());
        f.tag()
    }

    fn header(text: &str) -> Option<Tag<'_>> {
        let mut f = Fields::default();
        f.add_header(text.as_bytes());
        f.tag()
    }

    fn tag(run: &'static str, users: u32, req: Option<u64>) -> Option<Tag<'static>> {
        Some(Tag {
            run: run.as_bytes(),
            users,
            req,
        })
    }

    #[test]
    fn query_tags() {
        assert_eq!(
            query("GET /a?x=1&pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1"),
            tag("r1", 4, Some(17))
        );
        assert_eq!(query("/a?pp_run=r1&pp_users=8"), tag("r1", 8, None));
        assert_eq!(
            query("/a?pp_run=r1&pp_rate=7.5&pp_req=3"),
            tag("r1", 0, Some(3))
        );
        assert_eq!(query("pp_run=r1&pp_users=2&pp_run=r2"), tag("r1", 2, None));
        assert_eq!(query("/a?pp_run=r1&pp_users=bad&pp_req=3"), None);
        assert_eq!(query("/a?pp_run=r1&pp_users=4294967296"), None);
        assert_eq!(
            query("/a?pp_run=r1&pp_users=0004294967295&pp_req=18446744073709551615"),
            tag("r1", 4294967295, Some(u64::MAX))
        );
        assert_eq!(
            query("/a?pp_run=r1&pp_users=1&pp_req=18446744073709551616"),
            None
        );
        assert_eq!(query("/a?pp_run=r1&pp_rate=1234567890"), None);
        assert_eq!(query("/a?xpp_run=r1&pp_users=1"), None);
        assert_eq!(query("/a?pp_run=r 1&pp_users=1"), tag("r", 1, None));
        assert_eq!(query("/a?pp_run=&pp_users=1"), None);
        assert_eq!(query("/x?pp_run=r1#pp_users=2"), None);
    }

    #[test]
    fn a_field_inside_another_fields_value_is_not_a_field() {
        // `?` does not end a value: `pp_users=3` is part of the run id, which is invalid.
        assert_eq!(query("/a?pp_run=r1?pp_users=3"), None);
        // `pp_users`'s value runs to the `&`, so the first run id found is `r2`.
        assert_eq!(query("/a?pp_users=3?pp_run=r1&pp_run=r2"), None);
        assert_eq!(
            query("/a?pp_run=r2&pp_x=1?pp_run=r1&pp_users=3"),
            tag("r2", 3, None)
        );
    }

    #[test]
    fn header_tags() {
        assert_eq!(header("run=r1; users=3; req=7"), tag("r1", 3, Some(7)));
        assert_eq!(header(" RUN = r1 ;Users=3"), tag("r1", 3, None));
        assert_eq!(header("run=r1; rate=0.833; req=7"), tag("r1", 0, Some(7)));
        assert_eq!(header("-"), None);
        assert_eq!(header("run=r1; users=x"), None);
    }
}
