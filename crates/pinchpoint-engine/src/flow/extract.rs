//! Captures and checks, compiled once before the run and applied to each response a
//! flow keeps. The body is parsed as JSON at most once per response, and only when a
//! JSONPath needs it.

use regex::bytes::Regex;
use serde_json::Value;

use crate::client::Kept;
use crate::flow::jar::Jar;
use crate::client::MAX_KEPT_BODY;
use crate::config::flow::{CaptureFrom, CaptureSpec, CheckSpec, Cmp, Pick};
use crate::flow::arith::Expr;
use crate::flow::compare::{compare, compare_number, node_text};
use crate::flow::jsonpath::{Bounded, Shape};
use crate::flow::template::{Into, Template};
use crate::rng::Rng;

pub enum Source {
    Json(Bounded),
    Regex(Regex),
    Header(String),
    Cookie(String),
}

pub struct Capture {
    pub var: usize,
    pub source: Source,
    pub pick: Pick,
    /// As the plan wrote it, for the reason a capture failed.
    pub text: String,
    /// With `pick = "all"`: the flow's list (an index into `Flow::lists`) it sets.
    pub list: Option<usize>,
}

pub enum Check {
    Status(Vec<u16>),
    Contains(Template),
    Matches(Regex),
    JsonEquals { path: Bounded, text: String, expected: Template },
    /// `ne`, `in`, `len`: the node's text or length.
    JsonCompare { path: Bounded, text: String, op: Cmp, expected: Template },
    /// `equals`, `gt`, `lt`, `ge`, `le`: the number the node holds.
    JsonNumber { path: Bounded, text: String, op: Cmp, expected: Expr },
    Header { name: String, expected: Template },
    MaxMs(f64),
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
        if spec.pick != Pick::First && matches!(source, Source::Header(_) | Source::Cookie(_)) {
            let pick = if spec.pick == Pick::All { "all" } else { "random" };
            return Err(format!("capture {text}: pick = \"{pick}\" needs json or regex"));
        }
        Ok(Self { var, source, pick: spec.pick, text, list: None })
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
            CheckSpec::JsonCompare { path, op, expected } if op.is_numeric() => Check::JsonNumber {
                path: json_path(path)?,
                text: path.clone(),
                op: *op,
                expected: Expr::parse(expected, index_of).map_err(|e| format!("check json {path}: {expected:?}: {e}"))?,
            },
            CheckSpec::JsonCompare { path, op, expected } => Check::JsonCompare {
                path: json_path(path)?,
                text: path.clone(),
                op: *op,
                expected: Template::parse(expected, index_of)?,
            },
            CheckSpec::Header { name, expected } => {
                Check::Header { name: name.clone(), expected: Template::parse(expected, index_of)? }
            }
            CheckSpec::MaxMs(ms) => Check::MaxMs(*ms),
        })
    }

    pub fn needs_json(&self) -> bool {
        matches!(self, Check::JsonEquals { .. } | Check::JsonCompare { .. } | Check::JsonNumber { .. })
    }

    /// Whether it reads the body (not only the status, the headers or the time).
    pub fn reads_body(&self) -> bool {
        !matches!(self, Check::Status(_) | Check::Header { .. } | Check::MaxMs(_))
    }
}

/// A response as captures and checks read it; the body parsed as JSON on first need.
pub struct Answer<'a> {
    pub status: u16,
    pub kept: &'a Kept,
    /// How long the response took, in microseconds.
    pub latency_us: i64,
    json: Option<Option<Value>>,
    shape: Option<Shape>,
}

impl<'a> Answer<'a> {
    pub fn new(status: u16, kept: &'a Kept) -> Self {
        Self { status, kept, latency_us: 0, json: None, shape: None }
    }

    pub fn with_latency(mut self, latency_us: i64) -> Self {
        self.latency_us = latency_us;
        self
    }

    fn json(&mut self) -> Option<&Value> {
        let body = &self.kept.body;
        self.json.get_or_insert_with(|| serde_json::from_slice(body).ok()).as_ref()
    }

    fn first_node(&mut self, path: &Bounded) -> Result<String, String> {
        self.node(path, None).map(node_text)
    }

    /// The parsed body and its shape (when `path` needs it), or why it cannot be read.
    fn doc(&mut self, path: &Bounded) -> Result<(&Value, Shape), String> {
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
        Ok((doc, shape))
    }

    /// Every node `path` selects, in order.
    fn nodes(&mut self, path: &Bounded) -> Result<Vec<&Value>, String> {
        let (doc, shape) = self.doc(path)?;
        path.nodes(doc, shape)
    }

    /// The node `path` selects: the first, or with `rng` one of them at random.
    fn node(&mut self, path: &Bounded, rng: Option<&mut Rng>) -> Result<&Value, String> {
        let (doc, shape) = self.doc(path)?;
        let found = match rng {
            None => path.first(doc, shape)?,
            Some(rng) => {
                let nodes = path.nodes(doc, shape)?;
                let n = nodes.len() as u64;
                (n > 0).then(|| nodes[(rng.next_u64() % n) as usize])
            }
        };
        found.ok_or_else(|| "selects nothing".to_string())
    }
}


/// The value `capture` takes from `answer` (with `pick = "random"`, drawn from `rng`),
/// or why it found none.
pub fn capture(capture: &Capture, answer: &mut Answer, jar: &Jar, rng: &mut Rng) -> Result<String, String> {
    let random = capture.pick == Pick::Random;
    let found = match &capture.source {
        Source::Json(path) => answer.node(path, random.then_some(rng)).map(node_text),
        Source::Regex(re) => {
            let group = |c: regex::bytes::Captures| {
                let m = c.get(1).or_else(|| c.get(0)).expect("a match has group 0");
                String::from_utf8_lossy(m.as_bytes()).into_owned()
            };
            let body = &answer.kept.body;
            let chosen = if random {
                let all: Vec<_> = re.captures_iter(body).take(MAX_MATCHES).collect();
                let n = all.len() as u64;
                (n > 0).then(|| all.into_iter().nth((rng.next_u64() % n) as usize)).flatten()
            } else {
                re.captures(body)
            };
            chosen.map(group).ok_or_else(|| "no match in the body".to_string())
        }
        Source::Header(name) => answer.kept.header(name).ok_or_else(|| "no such header".into()),
        Source::Cookie(name) => jar.get(name).map(str::to_string).ok_or_else(|| "no such cookie".into()),
    };
    found.map_err(|why| format!("capture {}: {why}", capture.text))
}

/// Every value `capture` (json or regex) finds in `answer`, in order: none is a list of
/// none, not a failure. Err: why the body could not be read.
pub fn capture_all(capture: &Capture, answer: &mut Answer) -> Result<Vec<String>, String> {
    let found = match &capture.source {
        Source::Json(path) => answer.nodes(path).map(|nodes| nodes.into_iter().take(MAX_MATCHES).map(node_text).collect()),
        Source::Regex(re) => Ok(re
            .captures_iter(&answer.kept.body)
            .take(MAX_MATCHES)
            .map(|c| {
                let m = c.get(1).or_else(|| c.get(0)).expect("a match has group 0");
                String::from_utf8_lossy(m.as_bytes()).into_owned()
            })
            .collect()),
        Source::Header(_) | Source::Cookie(_) => Err("pick = \"all\" needs json or regex".to_string()),
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
        Check::JsonCompare { path, text, op, expected } => {
            scratch.clear();
            let _ = expected.render(vars, Into::Raw, scratch);
            let want = String::from_utf8_lossy(scratch).into_owned();
            match answer.node(path, None) {
                Ok(got) => compare(got, *op, &want).map_err(|why| format!("check json {text}: {why}")),
                Err(why) => Err(format!("check json {text}: {why}")),
            }
        }
        Check::JsonNumber { path, text, op, expected } => {
            let want = expected.eval(vars).map_err(|why| format!("check json {text}: {why}"))?;
            match answer.node(path, None) {
                Ok(got) => compare_number(got, *op, want, expected).map_err(|why| format!("check json {text}: {why}")),
                Err(why) => Err(format!("check json {text}: {why}")),
            }
        }
        Check::Header { name, expected } => {
            scratch.clear();
            let _ = expected.render(vars, Into::Raw, scratch);
            let want = String::from_utf8_lossy(scratch);
            match answer.kept.header(name) {
                Some(got) if got == want => Ok(()),
                Some(got) => Err(format!("check header {name}: {got:?}, expected {want:?}")),
                None => Err(format!("check header {name}: no such header")),
            }
        }
        Check::MaxMs(ms) => {
            let took = answer.latency_us as f64 / 1000.0;
            if took <= *ms {
                return Ok(());
            }
            Err(format!("check max_ms: the response took {took:.1} ms, above {ms} ms"))
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

/// Matches a random capture picks from, at most (the body is at most MAX_KEPT_BODY).
const MAX_MATCHES: usize = 100_000;

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
        Capture::compile(&CaptureSpec { var: "x".into(), from, pick: Pick::First }, 0).unwrap()
    }

    fn random(from: CaptureFrom) -> Capture {
        Capture::compile(&CaptureSpec { var: "x".into(), from, pick: Pick::Random }, 0).unwrap()
    }

    #[test]
    fn captures_take_the_first_node_group_header_or_cookie() {
        let k = kept(r#"{"token":"t1","orders":[{"id":17},{"id":18}],"ok":true}"#, &[("Location", "/o/17")]);
        let mut a = Answer::new(200, &k);
        let mut jar = Jar::default();
        jar.set_from_header("session=s9; Path=/; HttpOnly");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "t1");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.orders[*].id".into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "17");
        assert_eq!(capture(&cap(CaptureFrom::Json("$.ok".into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "true");
        assert_eq!(capture(&cap(CaptureFrom::Regex(r#""id":(\d+)"#.into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "17");
        assert_eq!(capture(&cap(CaptureFrom::Header("location".into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "/o/17");
        assert_eq!(capture(&cap(CaptureFrom::Cookie("session".into())), &mut a, &jar, &mut Rng::new(1)).unwrap(), "s9");
    }

    #[test]
    fn a_capture_that_finds_nothing_says_what_and_why() {
        let k = kept("<html>no json</html>", &[]);
        let mut a = Answer::new(200, &k);
        let jar = Jar::default();
        let e = capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar, &mut Rng::new(1)).unwrap_err();
        assert_eq!(e, "capture json $.token: the body is not JSON");
        let k = kept(r#"{"a":1}"#, &[]);
        let mut a = Answer::new(200, &k);
        let e = capture(&cap(CaptureFrom::Json("$.token".into())), &mut a, &jar, &mut Rng::new(1)).unwrap_err();
        assert_eq!(e, "capture json $.token: selects nothing");
        assert!(capture(&cap(CaptureFrom::Cookie("s".into())), &mut a, &jar, &mut Rng::new(1)).unwrap_err().contains("no such cookie"));
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
    fn a_random_pick_draws_every_node_or_match_from_the_user_s_stream() {
        let k = kept(r#"{"items":[{"id":1},{"id":2},{"id":3},{"id":4}]}"#, &[]);
        let jar = Jar::default();
        let mut rng = Rng::new(7);
        for c in [random(CaptureFrom::Json("$.items[*].id".into())), random(CaptureFrom::Regex(r#""id":(\d)"#.into()))] {
            let mut seen = std::collections::BTreeMap::<String, u32>::new();
            for _ in 0..4000 {
                let mut a = Answer::new(200, &k);
                *seen.entry(capture(&c, &mut a, &jar, &mut rng).unwrap()).or_default() += 1;
            }
            assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), ["1", "2", "3", "4"]);
            assert!(seen.values().all(|&n| (850..1150).contains(&n)), "{seen:?}");
        }
        let same = |seed| {
            let mut rng = Rng::new(seed);
            let c = random(CaptureFrom::Json("$.items[*].id".into()));
            (0..20).map(|_| capture(&c, &mut Answer::new(200, &k), &jar, &mut rng).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(same(3), same(3));
        let e = capture(&random(CaptureFrom::Json("$.none[*]".into())), &mut Answer::new(200, &k), &jar, &mut rng);
        assert_eq!(e.unwrap_err(), "capture json $.none[*]: selects nothing");
        let header = CaptureSpec { var: "x".into(), from: CaptureFrom::Header("h".into()), pick: Pick::Random };
        let refused = Capture::compile(&header, 0).err().expect("a random header capture is refused");
        assert!(refused.contains("needs json or regex"), "{refused}");
    }

    #[test]
    fn pick_all_takes_every_node_or_match_in_order_and_none_is_an_empty_list() {
        let k = kept(r#"{"items":[{"id":3,"n":"a b"},{"id":1},{"id":2}]}"#, &[]);
        let all = |from| Capture::compile(&CaptureSpec { var: "x".into(), from, pick: Pick::All }, 0).unwrap();
        let got = |c: &Capture| capture_all(c, &mut Answer::new(200, &k));
        assert_eq!(got(&all(CaptureFrom::Json("$.items[*].id".into()))).unwrap(), ["3", "1", "2"]);
        assert_eq!(got(&all(CaptureFrom::Regex(r#""id":(\d)"#.into()))).unwrap(), ["3", "1", "2"]);
        assert_eq!(got(&all(CaptureFrom::Json("$.items[*].n".into()))).unwrap(), ["a b"]);
        assert_eq!(got(&all(CaptureFrom::Json("$.none[*]".into()))).unwrap(), Vec::<String>::new());
        let text = kept("not json", &[]);
        let e = capture_all(&all(CaptureFrom::Json("$.items[*]".into())), &mut Answer::new(200, &text));
        assert_eq!(e.unwrap_err(), "capture json $.items[*]: the body is not JSON");
        let cookie = CaptureSpec { var: "x".into(), from: CaptureFrom::Cookie("c".into()), pick: Pick::All };
        let refused = Capture::compile(&cookie, 0).err().expect("pick all of a cookie is refused");
        assert_eq!(refused, "capture cookie c: pick = \"all\" needs json or regex");
    }

    #[test]
    fn comparisons_headers_and_time_pass_and_fail_saying_what_they_found() {
        let names = |n: &str| (n == "min").then_some(0);
        let vars = vec!["10".to_string()];
        let k = kept(r#"{"price":12.5,"name":"lamp","tags":["a","b"],"qty":"3"}"#, &[("Content-Type", "application/json")]);
        let mut scratch = Vec::new();
        let mut run = |spec: CheckSpec, latency_us: i64| {
            let c = Check::compile(&spec, &names).unwrap();
            check(&c, &mut Answer::new(200, &k).with_latency(latency_us), &vars, &mut scratch)
        };
        let cmp = |path: &str, op: Cmp, want: &str| CheckSpec::JsonCompare { path: path.into(), op, expected: want.into() };
        assert!(run(cmp("$.price", Cmp::Gt, "0"), 0).is_ok());
        assert!(run(cmp("$.price", Cmp::Gt, "${min}"), 0).is_ok());
        assert_eq!(run(cmp("$.price", Cmp::Lt, "${min}"), 0).unwrap_err(), "check json $.price: 12.5 is not < 10, from ${min}");
        assert!(run(cmp("$.price", Cmp::Eq, "${min} + 2.5"), 0).is_ok());
        assert_eq!(run(cmp("$.price", Cmp::Le, "${min} * 1.1"), 0).unwrap_err(), "check json $.price: 12.5 is not <= 11, from ${min} * 1.1");
        let refused = Check::compile(&cmp("$.price", Cmp::Le, "${min} *"), &names).err().expect("bad arithmetic is refused");
        assert_eq!(refused, r#"check json $.price: "${min} *": a number or ${variable} is missing after `*`"#);
        assert!(run(cmp("$.price", Cmp::Ge, "12.5"), 0).is_ok());
        assert!(run(cmp("$.price", Cmp::Le, "12.4"), 0).is_err());
        assert!(run(cmp("$.qty", Cmp::Ge, "3"), 0).is_ok()); // a number in a string
        assert_eq!(run(cmp("$.name", Cmp::Gt, "0"), 0).unwrap_err(), "check json $.name: lamp is not a number");
        assert!(run(cmp("$.name", Cmp::Ne, "chair"), 0).is_ok());
        assert!(run(cmp("$.name", Cmp::In, r#"["lamp","desk"]"#), 0).is_ok());
        assert_eq!(run(cmp("$.name", Cmp::In, r#"["desk"]"#), 0).unwrap_err(), r#"check json $.name: lamp is not in ["desk"]"#);
        assert!(run(cmp("$.tags", Cmp::Len, "2"), 0).is_ok());
        assert_eq!(run(cmp("$.tags", Cmp::Len, "3"), 0).unwrap_err(), "check json $.tags: length 2, expected 3");
        let header = |want: &str| CheckSpec::Header { name: "content-type".into(), expected: want.into() };
        assert!(run(header("application/json"), 0).is_ok());
        assert!(run(header("text/html"), 0).unwrap_err().contains(r#""application/json", expected "text/html""#));
        assert!(run(CheckSpec::MaxMs(250.0), 249_000).is_ok());
        assert_eq!(run(CheckSpec::MaxMs(250.0), 312_400).unwrap_err(), "check max_ms: the response took 312.4 ms, above 250 ms");
    }

    #[test]
    fn bad_expressions_are_refused_before_the_run() {
        assert!(json_path("$.[").unwrap_err().starts_with("JSONPath"));
        assert!(regex("(").unwrap_err().starts_with("regular expression"));
    }
}
