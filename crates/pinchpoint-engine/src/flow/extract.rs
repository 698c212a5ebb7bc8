//! Captures and checks, compiled once before the run and applied to each response a
//! flow keeps. The body is parsed as JSON at most once per response, and only when a
//! JSONPath needs it.

use regex::bytes::Regex;
use serde_json::Value;

use crate::client::Kept;
use crate::flow::jar::Jar;
use crate::client::MAX_KEPT_BODY;
use crate::config::flow::{CaptureFrom, CaptureSpec, CheckSpec};
use crate::flow::jsonpath::{Bounded, Shape};
use crate::flow::template::{Into, Template};

pub enum Source {
    Json(Bounded),
    Regex(Regex),
    Header(String),
    Cookie(String),
}

pub struct Capture {
    pub var: usize,
    pub source: Source,
    /// As the plan wrote it, for the reason a capture failed.
    pub text: String,
}

pub enum Check {
    Status(Vec<u16>),
    Contains(Template),
    Matches(Regex),
    JsonEquals { path: Bounded, text: String, expected: Template },
}

pub fn json_path(text: &str) -> Result<Bounded, String> {
    Bounded::parse(text)
}

pub fn regex(text: &str) -> Result<Regex, String> {
    // Bounded: a plan's expression cannot make the compiled program huge.
    regex::bytes::RegexBuilder::new(text)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("regular expression {text:?}: {e}"))
}

impl Capture {
    pub fn compile(spec: &CaptureSpec, var: usize) -> Result<Self, String> {
        let (source, text) = match &spec.from {
            CaptureFrom::Json(p) => (Source::Json(json_path(p)?), format!("json {p}")),
            CaptureFrom::Regex(r) => (Source::Regex(regex(r)?), format!("regex {r}")),
            CaptureFrom::Header(h) => (Source::Header(h.clone()), format!("header {h}")),
            CaptureFrom::Cookie(c) => (Source::Cookie(c.clone()), format!("cookie {c}")),
        };
        Ok(Self { var, source, text })
    }

    pub fn needs_json(&self) -> bool {
        matches!(self.source, Source::Json(_))
    }
}

impl Check {
    pub fn compile(spec: &CheckSpec, index_of: &dyn Fn(&str) -> Option<usize>) -> Result<Self, String> {
        Ok(match spec {
            CheckSpec::Status(codes) => Check::Status(codes.clone()),
            CheckSpec::Contains(t) => Check::Contains(Template::parse(t, index_of)?),
            CheckSpec::Matches(r) => Check::Matches(regex(r)?),
            CheckSpec::JsonEquals { path, expected } => Check::JsonEquals {
                path: json_path(path)?,
                text: path.clone(),
                expected: Template::parse(expected, index_of)?,
            },
        })
    }

    pub fn needs_json(&self) -> bool {
        matches!(self, Check::JsonEquals { .. })
    }
}

/// A response as captures and checks read it; the body parsed as JSON on first need.
pub struct Answer<'a> {
    pub status: u16,
    pub kept: &'a Kept,
    json: Option<Option<Value>>,
    shape: Option<Shape>,
}

impl<'a> Answer<'a> {
    pub fn new(status: u16, kept: &'a Kept) -> Self {
        Self { status, kept, json: None, shape: None }
    }

    fn json(&mut self) -> Option<&Value> {
        let body = &self.kept.body;
        self.json.get_or_insert_with(|| serde_json::from_slice(body).ok()).as_ref()
    }

    fn first_node(&mut self, path: &Bounded) -> Result<String, String> {
        let cut = self.kept.cut;
        if self.json().is_none() {
            return Err(if cut {
                format!("the body is longer than the {MAX_KEPT_BODY} bytes kept")
            } else {
                "the body is not JSON".to_string()
            });
        }
        let doc = self.json.as_ref().and_then(Option::as_ref).expect("parsed above");
        let shape = if path.needs_shape() { *self.shape.get_or_insert_with(|| Shape::of(doc)) } else { Shape::default() };
        match path.first(doc, shape)? {
            Some(node) => Ok(node_text(node)),
            None => Err("selects nothing".to_string()),
        }
    }
}

/// A JSON node as text: a string as it is, anything else as JSON.
fn node_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The value `capture` takes from `answer`, or why it found none.
pub fn capture(capture: &Capture, answer: &mut Answer, jar: &Jar) -> Result<String, String> {
    let found = match &capture.source {
        Source::Json(path) => answer.first_node(path),
        Source::Regex(re) => match re.captures(&answer.kept.body) {
            Some(c) => {
                let m = c.get(1).or_else(|| c.get(0)).expect("a match has group 0");
                Ok(String::from_utf8_lossy(m.as_bytes()).into_owned())
            }
            None => Err("no match in the body".to_string()),
        },
        Source::Header(name) => answer.kept.header(name).ok_or_else(|| "no such header".into()),
        Source::Cookie(name) => jar.get(name).map(str::to_string).ok_or_else(|| "no such cookie".into()),
    };
    found.map_err(|why| format!("capture {}: {why}", capture.text))
}

/// Ok if `answer` passes `check`, else what it found instead.
pub fn check(check: &Check, answer: &mut Answer, vars: &[String], scratch: &mut Vec<u8>) -> Result<(), String> {
    match check {
        Check::Status(codes) => {
            if codes.contains(&answer.status) {
                return Ok(());
            }
            Err(format!("check status: {} is not one of {codes:?}", answer.status))
        }
        Check::Contains(t) => {
            scratch.clear();
            let _ = t.render(vars, Into::Raw, scratch);
            if memfind(&answer.kept.body, scratch) {
                return Ok(());
            }
            Err(format!("check contains: {:?} is not in the body", String::from_utf8_lossy(scratch)))
        }
        Check::Matches(re) => {
            if re.is_match(&answer.kept.body) {
                return Ok(());
            }
            Err(format!("check matches: {:?} does not match the body", re.as_str()))
        }
        Check::JsonEquals { path, text, expected } => {
            scratch.clear();
            let _ = expected.render(vars, Into::Raw, scratch);
            let want = String::from_utf8_lossy(scratch);
            match answer.first_node(path) {
                Ok(got) if got == want => Ok(()),
                Ok(got) => Err(format!("check json {text}: {got:?}, expected {want:?}")),
                Err(why) => Err(format!("check json {text}: {why}")),
            }
        }
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(body: &str, headers: &[(&str, &str)]) -> Kept {
        let fields: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        Kept {
            head: format!("HTTP/1.1 200 OK\r\n{fields}\r\n").into_bytes(),
            body: body.as_bytes().to_vec(),
            cut: false,
            want_body: true,
        }
    }

    fn cap(from: CaptureFrom) -> Capture {
        Capture::compile(&CaptureSpec { var: "x".into(), from }, 0).unwrap()
    }

    #[test]
    fn captures_take_the_first_node_group_header_or_cookie() {
        let k = kept(r#"{"token":"t1","orders":[{"id":17},{"id":18}],"ok":true}"#, &[("Location", "/o/17")]);
        let mut a = Answer::new(200, &k);
        let mut jar = Jar::default();
        jar.set_from_header("session=s9; Path=/; HttpOnly");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar).unwrap(), "t1");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.orders[*].id".into())), &mut a, &jar).unwrap(), "17");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.ok".into())), &mut a, &jar).unwrap(), "true");
        assert_eq!(capture(&cap(CaptureFrom::Regex(r#""id":(\d+)"#.into())), &mut a, &jar).unwrap(), "17");
        assert_eq!(capture(&cap(CaptureFrom::Header("location".into())), &mut a, &jar).unwrap(), "/o/17");
        assert_eq!(capture(&cap(CaptureFrom::Cookie("session".into())), &mut a, &jar).unwrap(), "s9");
    }

    #[test]
    fn a_capture_that_finds_nothing_says_what_and_why() {
        let k = kept("<html>no json</html>", &[]);
        let mut a = Answer::new(200, &k);
        let jar = Jar::default();
        let e = capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar).unwrap_err();
        assert_eq!(e, "capture json $.token: the body is not JSON");
        let k = kept(r#"{"a":1}"#, &[]);
        let mut a = Answer::new(200, &k);
        let e = capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar).unwrap_err();
        assert_eq!(e, "capture json $.token: selects nothing");
        assert!(capture(&cap(CaptureFrom::Cookie("s".into())), &mut a, &jar).unwrap_err().contains("no such cookie"));
    }

    #[test]
    fn checks_pass_and_fail_on_what_they_read() {
        let names = |n: &str| (n == "id").then_some(0);
        let vars = vec!["17".to_string()];
        let k = kept(r#"{"id":17,"name":"lamp"}"#, &[]);
        let mut scratch = Vec::new();
        let mut run = |spec: CheckSpec, status: u16| {
            let c = Check::compile(&spec, &names).unwrap();
            check(&c, &mut Answer::new(status, &k), &vars, &mut scratch)
        };
        assert!(run(CheckSpec::Status(vec![200, 201]), 201).is_ok());
        assert!(run(CheckSpec::Status(vec![200]), 500).unwrap_err().contains("500"));
        assert!(run(CheckSpec::Contains("lamp".into()), 200).is_ok());
        assert!(run(CheckSpec::Contains("chair".into()), 200).is_err());
        assert!(run(CheckSpec::Matches(r#""id":\d+"#.into()), 200).is_ok());
        let eq = |want: &str| CheckSpec::JsonEquals { path: "$.id".into(), expected: want.into() };
        assert!(run(eq("${id}"), 200).is_ok());
        assert_eq!(run(eq("18"), 200).unwrap_err(), r#"check json $.id: "17", expected "18""#);
    }

    #[test]
    fn bad_expressions_are_refused_before_the_run() {
        assert!(json_path("$.[").unwrap_err().starts_with("JSONPath"));
        assert!(regex("(").unwrap_err().starts_with("regular expression"));
    }
}
