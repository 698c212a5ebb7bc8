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
use crate::shapes::{is_clf_time, is_space};
use crate::shapes::{digits, is_iso_base, is_offset, starts_with, CLF_LEN, ISO_BASE_LEN};

/// Ends tried per line before giving up on it.
const STEP_BUDGET: u32 = 1_000_000;
/// Nested list items before giving up (each is a level of recursion).
/// (Kept low enough for a thread's stack in a debug build; lists of retries are short.)
const DEPTH_BUDGET: u32 = 256;


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

#[cfg(test)]
#[path = "matcher_tests.rs"]
mod tests;
