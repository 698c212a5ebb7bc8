//! Matching one line against a compiled format, with the same result as Python's
//! `re.fullmatch` on the regex the Python parser builds from the same format.
//!
//! Python's regex engine backtracks: each variable tries its possible ends in a fixed
//! order (shortest first for lazy patterns, longest first for greedy ones, an alternative
//! list's first branch first) and keeps the first end from which the rest of the line
//! matches. This matcher tries the same ends in the same order, so on any line it
//! captures the same values. Lines are ASCII here (`\s` is Python's ASCII whitespace,
//! which includes `\x1c`-`\x1f`); a line that needs more than a budget of steps is
//! reported as such, for the caller to hand to the Python parser.
//!
//! As in Python's regex (`logformats/template.py`), a text variable (a word, a quoted
//! value, free text, an address list) starts an atomic group: once the variables before
//! it have matched up to it, no failure after it makes them try another end. The search
//! is cut there, so each part of a line is scanned about once and a line costs time
//! linear in its length; free text followed by a word in its group ends only at the first
//! literal of a run of non-space text, as in Python.
//! Numbers have at most MAX_DIGITS digits on either side of the point (`\d{1,20}`).

use memchr::{memchr, memchr3};

use crate::format::{Format, Kind, FIELDS};

/// Ends tried per line before giving up on it.
const STEP_BUDGET: u32 = 1_000_000;
/// Most digits of a number, and of either side of its decimal point.
pub const MAX_DIGITS: usize = 20;
/// Nested list items before giving up (each is a level of recursion).
/// (Kept low enough for a thread's stack in a debug build; lists of retries are short.)
const DEPTH_BUDGET: u32 = 256;

/// Python's `str.isspace()` (and `\s`) on ASCII.
pub fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ')
}

/// Where each captured field's value is in the line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spans(pub [Option<(usize, usize)>; FIELDS]);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Matched,
    NoMatch,
    /// The budget ran out: the line's result is not known.
    TooHard,
}

/// Matches `line` (ASCII, without its line ending) against `format`.
pub fn match_line(format: &Format, line: &[u8], spans: &mut Spans) -> Outcome {
    *spans = Spans::default();
    if !line.starts_with(&format.head) {
        return Outcome::NoMatch;
    }
    let mut m = Matcher {
        f: format,
        s: line,
        spans,
        steps: 0,
        depth: 0,
        too_hard: false,
        cut: false,
    };
    let ok = m.field(0, format.head.len());
    if m.too_hard {
        Outcome::TooHard
    } else if ok {
        Outcome::Matched
    } else {
        Outcome::NoMatch
    }
}

/// What follows a number in a per-upstream list.
#[derive(Clone, Copy)]
enum Then {
    End,
    MoreItems,
}

struct Matcher<'a> {
    f: &'a Format,
    s: &'a [u8],
    spans: &'a mut Spans,
    steps: u32,
    depth: u32,
    too_hard: bool,
    /// What followed a text variable failed: no other end may be tried before it.
    cut: bool,
}

impl Kind {
    /// Whether a variable of this kind is text, which can end at many places.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            Kind::Any | Kind::Word | Kind::Quoted | Kind::AddressList
        )
    }

    /// Whether text of this kind, after text of kind `earlier` and `literal` between them,
    /// starts a new group (`splits` in `template.py`): when the earlier one can end at one
    /// place only, or when this one can hold all that the earlier one and the literal can.
    fn splits(self, earlier: Kind, literal: &[u8]) -> bool {
        let single_end = match (earlier, literal.first()) {
            (Kind::Word, Some(&c)) => is_space(c),
            (Kind::Quoted, Some(&c)) => c == b'"',
            _ => false,
        };
        single_end
            || self == Kind::Any
            || (self == earlier && self == Kind::Word && !literal.iter().any(|b| is_space(*b)))
            || (self == earlier
                && self == Kind::Quoted
                && !literal.contains(&b'"')
                && !literal.contains(&b'\\'))
    }
}

impl Matcher<'_> {
    /// Variable `i` starts at `p`: tries its ends in Python's order.
    fn field(&mut self, i: usize, p: usize) -> bool {
        let s = self.s;
        let n = s.len();
        match self.f.vars[i].kind {
            Kind::NumberOrDash => self.number(i, p, p, Then::End),
            Kind::List => self.number(i, p, p, Then::MoreItems),
            Kind::Status => {
                if p + 3 <= n && s[p..p + 3].iter().all(u8::is_ascii_digit) {
                    self.end(i, p, p + 3)
                } else {
                    s.get(p) == Some(&b'-') && self.end(i, p, p + 1)
                }
            }
            Kind::IntOrDash => {
                let k = digits(s, p);
                if k > 0 && self.ends_at_non_digit(i) {
                    self.end(i, p, p + k)
                } else if k > 0 {
                    (p + 1..=p + k).rev().any(|e| self.end(i, p, e))
                } else {
                    s.get(p) == Some(&b'-') && self.end(i, p, p + 1)
                }
            }
            Kind::ClfTime => is_clf_time(&s[p..]) && self.end(i, p, p + CLF_LEN),
            Kind::IsoTime => {
                if !is_iso_base(&s[p..]) {
                    return false;
                }
                let q = p + ISO_BASE_LEN;
                let zone = match s.get(q) {
                    Some(b'+' | b'-') if is_offset(&s[q..]) => Some(q + 6),
                    Some(b'Z') => Some(q + 1),
                    _ => None,
                };
                zone.is_some_and(|e| self.end(i, p, e)) || self.end(i, p, q)
            }
            Kind::AddressList => {
                let mut e = p;
                while e < n && !is_space(s[e]) && !self.stopped() {
                    e += 1;
                    if self.addresses(i, p, e) {
                        return true;
                    }
                }
                false
            }
            Kind::Quoted => self.quoted(i, p),
            Kind::Any => match self.f.vars[i].literal_after.first() {
                None => (p..=n).any(|e| self.end(i, p, e) || self.stopped()) && !self.stopped(),
                Some(&c) => {
                    // Before a word in its group, with no space in the literal between: only
                    // the first occurrence of the literal in a run of non-space text is
                    // tried, as `template.py` writes it; a later one in the same run leaves
                    // the word ending at the same place, so it cannot match where the first
                    // did not.
                    let first_in_run = self.first_in_run(i);
                    let literal = &self.f.vars[i].literal_after;
                    let mut e = p;
                    while let Some(off) = memchr(c, &s[e..]) {
                        let at = e + off;
                        if self.end(i, p, at) {
                            return true;
                        }
                        if self.stopped() {
                            return false;
                        }
                        e = at + 1;
                        if first_in_run && starts_with(&s[at..], literal) {
                            match s[at..].iter().position(|b| is_space(*b)) {
                                Some(w) => e = at + w + 1,
                                None => return false,
                            }
                        }
                    }
                    false
                }
            },
            Kind::Word => {
                let first = self.f.vars[i].literal_after.first().copied();
                let mut e = p;
                loop {
                    if first.is_none_or(|c| s.get(e) == Some(&c)) && self.end(i, p, e) {
                        return true;
                    }
                    if e >= n || is_space(s[e]) || self.stopped() {
                        return false;
                    }
                    e += 1;
                }
            }
        }
    }

    /// Variable `i`, started at `p`, ends at `e`: the literal after it must follow, then
    /// the next variable (or the end of the line). Records the capture on success.
    fn end(&mut self, i: usize, p: usize, e: usize) -> bool {
        if self.stopped() {
            return false;
        }
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            self.too_hard = true;
            return false;
        }
        let var = &self.f.vars[i];
        if !starts_with(&self.s[e..], &var.literal_after) {
            return false;
        }
        let next = e + var.literal_after.len();
        let ok = if i + 1 == self.f.vars.len() {
            next == self.s.len()
        } else if self.starts_group(i + 1) {
            let ok = self.field(i + 1, next);
            self.cut |= !ok;
            ok
        } else {
            self.field(i + 1, next)
        };
        if ok {
            if let Some(field) = var.capture {
                self.spans.0[field as usize] = Some((p, e));
            }
        }
        ok
    }

    /// `\d{1,20}(?:\.\d{1,20})?|-` at `at`, longest first, then `then`.
    fn number(&mut self, i: usize, p: usize, at: usize, then: Then) -> bool {
        let s = self.s;
        if s.get(at) == Some(&b'-') {
            return self.after_number(i, p, at + 1, then);
        }
        let k = digits(s, at);
        if k == 0 {
            return false;
        }
        let int_end = at + k;
        let only_longest = matches!(then, Then::End) && self.ends_at_non_digit(i);
        if s.get(int_end) == Some(&b'.') {
            let m = digits(s, int_end + 1);
            for e in (int_end + 2..=int_end + 1 + m).rev() {
                if self.after_number(i, p, e, then) {
                    return true;
                }
                if only_longest {
                    return false;
                }
            }
        }
        if only_longest {
            return self.after_number(i, p, int_end, then);
        }
        (at + 1..=int_end)
            .rev()
            .any(|e| self.after_number(i, p, e, then))
    }

    /// Whether what follows variable `i` cannot start with a digit or a point (the end of
    /// the line, or a literal that does not): then only a number's longest end can be
    /// followed by it, and shorter ends need not be tried.
    fn ends_at_non_digit(&self, i: usize) -> bool {
        match self.f.vars[i].literal_after.first() {
            Some(c) => !c.is_ascii_digit() && *c != b'.',
            None => i + 1 == self.f.vars.len(),
        }
    }

    fn after_number(&mut self, i: usize, p: usize, e: usize, then: Then) -> bool {
        match then {
            Then::End => self.end(i, p, e),
            Then::MoreItems => self.more_items(i, p, e),
        }
    }

    /// `(?:\s*[,:]\s*N)*` after an item ending at `q`: one more item first, then none.
    fn more_items(&mut self, i: usize, p: usize, q: usize) -> bool {
        let s = self.s;
        let mut r = q;
        while r < s.len() && is_space(s[r]) {
            r += 1;
        }
        if matches!(s.get(r), Some(b',' | b':')) {
            let mut t = r + 1;
            while t < s.len() && is_space(s[t]) {
                t += 1;
            }
            if !self.deeper() {
                return false;
            }
            let found = self.number(i, p, t, Then::MoreItems);
            self.depth -= 1;
            if found {
                return true;
            }
        }
        self.end(i, p, q)
    }

    /// `(?:(?:, | : )\S+?)*` after an address ending at `q`: one more first, then none.
    fn addresses(&mut self, i: usize, p: usize, q: usize) -> bool {
        let s = self.s;
        let sep = if s[q..].starts_with(b", ") {
            2
        } else if s[q..].starts_with(b" : ") {
            3
        } else {
            0
        };
        if sep > 0 {
            if !self.deeper() {
                return false;
            }
            let mut e = q + sep;
            let mut found = false;
            while e < s.len() && !is_space(s[e]) && !self.stopped() {
                e += 1;
                if self.addresses(i, p, e) {
                    found = true;
                    break;
                }
            }
            self.depth -= 1;
            if found {
                return true;
            }
        }
        self.end(i, p, q)
    }

    /// Whether variable `j` (after the first) starts an atomic group, as `Template.field`
    /// decides: a text variable does, unless the text variable right before it may need
    /// to end past it (free text, then a space and a word).
    fn starts_group(&self, j: usize) -> bool {
        let (before, var) = (&self.f.vars[j - 1], &self.f.vars[j]);
        var.kind.is_text()
            && (!before.kind.is_text() || var.kind.splits(before.kind, &before.literal_after))
    }

    /// Whether free text `i` is followed, in its group, by a word with a literal holding no
    /// space between them (`$http_a:$uri`).
    fn first_in_run(&self, i: usize) -> bool {
        let literal = &self.f.vars[i].literal_after;
        i + 1 < self.f.vars.len()
            && self.f.vars[i + 1].kind == Kind::Word
            && !literal.is_empty()
            && !literal.iter().any(|b| is_space(*b))
            && !self.starts_group(i + 1)
    }

    /// Whether the search is over without a match: cut, or out of budget.
    fn stopped(&self) -> bool {
        self.cut || self.too_hard
    }

    fn deeper(&mut self) -> bool {
        self.depth += 1;
        if self.depth > DEPTH_BUDGET {
            self.too_hard = true;
        }
        !self.too_hard
    }

    /// `(?:[^"\\]|\\.)*?`: ends at unit boundaries, shortest first, up to an unescaped `"`
    /// (or a backslash that ends the line).
    fn quoted(&mut self, i: usize, p: usize) -> bool {
        let s = self.s;
        let n = s.len();
        let Some(&c) = self.f.vars[i].literal_after.first() else {
            let mut e = p;
            loop {
                if self.end(i, p, e) {
                    return true;
                }
                if self.stopped() {
                    return false;
                }
                match s.get(e) {
                    None | Some(b'"') => return false,
                    Some(b'\\') if e + 1 >= n => return false,
                    Some(b'\\') => e += 2,
                    Some(_) => e += 1,
                }
            }
        };
        // Only ends where the literal's first byte is can be followed by the literal.
        let mut e = p;
        while let Some(off) = memchr3(c, b'"', b'\\', &s[e..]) {
            let r = e + off;
            if s[r] == c && self.end(i, p, r) {
                return true;
            }
            if self.stopped() {
                return false;
            }
            match s[r] {
                b'"' => return false,
                b'\\' if r + 1 >= n => return false,
                b'\\' => e = r + 2,
                _ => e = r + 1,
            }
        }
        false
    }
}

/// `s.starts_with(prefix)` for the short literals of a format, without a call to memcmp.
#[inline]
fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s.iter().zip(prefix).all(|(a, b)| a == b)
}

/// Digits at `at`, at most MAX_DIGITS (`\d{1,20}` takes no more).
fn digits(s: &[u8], at: usize) -> usize {
    s.get(at..).map_or(0, |t| {
        t.iter()
            .take(MAX_DIGITS)
            .take_while(|b| b.is_ascii_digit())
            .count()
    })
}

const CLF_LEN: usize = 26;
const ISO_BASE_LEN: usize = 19;

/// Whether `s` starts with a shape: `d` a digit, `a` an ASCII letter, `s` a sign,
/// anything else itself.
fn shaped(s: &[u8], shape: &[u8]) -> bool {
    s.len() >= shape.len()
        && s.iter().zip(shape).all(|(b, k)| match k {
            b'd' => b.is_ascii_digit(),
            b'a' => b.is_ascii_alphabetic(),
            b's' => *b == b'+' || *b == b'-',
            _ => b == k,
        })
}

pub fn is_clf_time(s: &[u8]) -> bool {
    shaped(s, b"dd/aaa/dddd:dd:dd:dd sdddd")
}

fn is_iso_base(s: &[u8]) -> bool {
    shaped(s, b"dddd-dd-ddTdd:dd:dd")
}

fn is_offset(s: &[u8]) -> bool {
    shaped(s, b"sdd:dd")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Field;

    fn capture(format: &str, line: &str, field: Field) -> Option<String> {
        let f = Format::compile(format).unwrap();
        let mut spans = Spans::default();
        assert_eq!(
            match_line(&f, line.as_bytes(), &mut spans),
            Outcome::Matched,
            "{line}"
        );
        spans.0[field as usize].map(|(a, b)| line[a..b].to_string())
    }

    fn matches(format: &str, line: &str) -> Outcome {
        let f = Format::compile(format).unwrap();
        match_line(&f, line.as_bytes(), &mut Spans::default())
    }

    #[test]
    fn lazy_fields_take_the_shortest_end_that_lets_the_rest_match() {
        assert_eq!(
            matches("$request_uri $request_time", "/a b 0.5"),
            Outcome::NoMatch
        );
        assert_eq!(
            capture("$request $request_time", "GET /a b 0.5", Field::Request).unwrap(),
            "GET /a b"
        );
        assert_eq!(
            capture("$args|$request_time", "a|b|1", Field::Args).unwrap(),
            "a|b"
        );
    }

    #[test]
    fn quoted_fields_skip_escapes() {
        let got = capture(
            r#""$request" $status"#,
            r#""GET /\"x\" y" 200"#,
            Field::Request,
        );
        assert_eq!(got.unwrap(), r#"GET /\"x\" y"#);
        // An unescaped quote ends the field: the line does not match.
        assert_eq!(
            matches(r#""$request" $status"#, r#""GET "x" 200"#),
            Outcome::NoMatch
        );
        // A backslash cannot end the line inside a quoted field.
        assert_eq!(
            matches(r#"$status "$request"#, "200 \"a\\"),
            Outcome::NoMatch
        );
    }

    #[test]
    fn greedy_numbers_back_off_for_the_literal_after() {
        // `\d+(\.\d+)?` then `5`: the number gives back its last digit.
        assert_eq!(
            capture("${request_time}5", "0.125", Field::RequestTime).unwrap(),
            "0.12"
        );
        assert_eq!(
            capture("${request_time}.5", "10.5", Field::RequestTime).unwrap(),
            "10"
        );
    }

    #[test]
    fn upstream_lists_hold_retries_and_groups() {
        let f = "$request_time $upstream_response_time x";
        let got = capture(f, "1 0.010, 0.020 : -, 0.3 x", Field::UpstreamResponseTime);
        assert_eq!(got.unwrap(), "0.010, 0.020 : -, 0.3");
        assert_eq!(
            capture(f, "1 - x", Field::UpstreamResponseTime).unwrap(),
            "-"
        );
        assert_eq!(matches(f, "1 0.010,, x"), Outcome::NoMatch);
    }

    #[test]
    fn address_lists_try_more_addresses_first() {
        let f = "$upstream_addr|$request_time";
        assert_eq!(
            matches(f, "127.0.0.1:1, 127.0.0.1:2 : unix:/x|0.1"),
            Outcome::Matched
        );
        let f = "${upstream_addr}${request_time}";
        // Python's order for `a, b`: ends after `b`, after `a`, after `a,`.
        assert_eq!(capture(f, "a, b7", Field::RequestTime).unwrap(), "7");
    }

    #[test]
    fn times_have_their_shapes() {
        let f = "[$time_local] $time_iso8601 $request_time";
        let line = "[22/Nov/2026:10:15:00 +0100] 2026-11-22T10:15:00+01:00 0.1";
        assert_eq!(
            capture(f, line, Field::TimeIso8601).unwrap(),
            "2026-11-22T10:15:00+01:00"
        );
        assert_eq!(
            matches(f, "[22/Nov/2026:10:15:00] 2026-11-22T10:15:00Z 0.1"),
            Outcome::NoMatch
        );
        assert_eq!(
            capture("$time_iso8601$args", "2026-11-22T10:15:00Z", Field::Args).unwrap(),
            ""
        );
    }

    #[test]
    fn the_whole_line_must_match() {
        let f = "$status $request_time";
        assert_eq!(matches(f, "200 0.1"), Outcome::Matched);
        assert_eq!(matches(f, "200 0.1 "), Outcome::NoMatch);
        assert_eq!(matches(f, "20 0.1"), Outcome::NoMatch);
        assert_eq!(matches(f, ""), Outcome::NoMatch);
    }

    #[test]
    fn a_text_variable_keeps_its_end_once_what_follows_it_matched() {
        // `$http_a` ends before the first ` 200 `; `$uri` then cannot take `b 200 /x`.
        let f = "$http_a $status $uri $request_time";
        assert_eq!(matches(f, "a b 200 /x 0.5"), Outcome::Matched);
        assert_eq!(matches(f, "a 200 b 200 /x 0.5"), Outcome::NoMatch);
        // Free text followed by a word shares its group: it ends at the last space.
        assert_eq!(
            capture(
                "$http_a $uri $request_time",
                "x y z 0.5",
                Field::RequestTime
            )
            .unwrap(),
            "0.5"
        );
        // Typed variables after a text variable still make it try further ends.
        assert_eq!(
            capture("$http_a $status $uri", "a b 200 /x", Field::Status).unwrap(),
            "200"
        );
    }

    #[test]
    fn many_text_variables_on_a_line_that_does_not_match_are_not_too_hard() {
        let f = "$http_a $http_b $http_c $http_d $http_e $http_f $request_time";
        let line = "x ".repeat(30_000);
        assert_eq!(matches(f, &line), Outcome::NoMatch);
        let f = "$uri$args$request_uri$request_time";
        assert_eq!(matches(f, &"1".repeat(60_000)), Outcome::Matched);
        assert_eq!(
            matches(f, &format!("{}x", "1".repeat(60_000))),
            Outcome::NoMatch
        );
    }

    #[test]
    fn numbers_take_at_most_twenty_digits_a_side() {
        let f = "$request_time|";
        let twenty = "9".repeat(20);
        assert_eq!(matches(f, &format!("{twenty}.{twenty}|")), Outcome::Matched);
        assert_eq!(matches(f, &format!("9{twenty}|")), Outcome::NoMatch);
        assert_eq!(matches(f, &format!("1.{twenty}9|")), Outcome::NoMatch);
        assert_eq!(
            matches("$body_bytes_sent|", &format!("9{twenty}|")),
            Outcome::NoMatch
        );
    }

    #[test]
    fn a_list_too_long_to_follow_is_too_hard() {
        let line = format!("{}1 x", "1, ".repeat(1_000));
        assert_eq!(
            matches("$upstream_response_time x", &line),
            Outcome::TooHard
        );
    }
}
