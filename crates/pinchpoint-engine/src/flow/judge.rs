//! What a response (or a WebSocket frame) is judged by: the checks, then the captures,
//! of the step (or message) that received it.

use crate::flow::extract::{self, Answer, Capture, Check};
use crate::flow::jar::Jar;
use crate::flow::Flow;
use crate::outcome::{note, ErrorClass};
use crate::rng::Rng;

/// A user's values in one flow, which captures set and templates read.
pub struct Values<'a> {
    pub vars: &'a mut [String],
    pub lists: &'a mut [Vec<String>],
    pub jar: &'a Jar,
    pub rng: &'a mut Rng,
    pub scratch: &'a mut Vec<u8>,
}

/// The class of the first check or capture of `flow`'s `name` that failed on `answer`
/// (None: all passed), each reason noted as `name: why` (a capture's followed by the
/// response's `status`, if it has one). After a failed capture the later ones run only
/// with `keep_going`.
#[allow(clippy::too_many_arguments)]
pub fn judge(
    flow: &Flow,
    name: &str,
    checks: &[Check],
    captures: &[Capture],
    keep_going: bool,
    answer: &mut Answer,
    v: Values,
    status: Option<u16>,
) -> Option<ErrorClass> {
    let mut class = check_all(name, checks, answer, v.vars, v.scratch);
    for capture in captures {
        let taken = match capture.list {
            Some(l) => flow.take_list(l, capture, answer, v.vars, &mut v.lists[l]),
            None => extract::capture(capture, answer, v.jar, v.rng).map(|value| v.vars[capture.var] = value),
        };
        if let Err(why) = taken {
            note(ErrorClass::Capture, || match status {
                Some(status) => format!("{name}: {why} (status {status})"),
                None => format!("{name}: {why}"),
            });
            class = class.or(Some(ErrorClass::Capture));
            if !keep_going {
                break;
            }
        }
    }
    class
}

/// `Check` if one of `checks` of `name` fails on `answer` (the first's reason noted).
pub fn check_all(name: &str, checks: &[Check], answer: &mut Answer, vars: &[String], scratch: &mut Vec<u8>) -> Option<ErrorClass> {
    for check in checks {
        if let Err(why) = extract::check(check, answer, vars, scratch) {
            note(ErrorClass::Check, || format!("{name}: {why}"));
            return Some(ErrorClass::Check);
        }
    }
    None
}
