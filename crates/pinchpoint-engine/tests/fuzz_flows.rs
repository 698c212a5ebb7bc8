//! Property-based fuzzing of what flows read from plans and responses: templates, the
//! captures and checks applied to any body, and JSONPath under its node budget. Any
//! input gives a value or a reason, never a panic, and each evaluation ends in bounded
//! time.
//!
//! `make test` runs 26,000 cases (about 10 s in a debug build); `PROPTEST_CASES=100000 cargo
//! test -p pinchpoint-engine --release --test fuzz_flows` runs a long one.

use std::time::{Duration, Instant};

use pinchpoint_engine::client::Kept;
use pinchpoint_engine::flow::extract::{capture, check, json_path, Answer, Capture, Check};
use pinchpoint_engine::flow::jar::Jar;
use pinchpoint_engine::flow::jsonpath::{cut, Shape, MAX_NODES};
use pinchpoint_engine::flow::template::{Into, Template};
use pinchpoint_engine::config::flow::{Cmp, Pick};
use pinchpoint_engine::rng::Rng;
use pinchpoint_engine::{CaptureFrom, CaptureSpec, CheckSpec};
use proptest::prelude::*;
use serde_json::Value;
use serde_json_path::JsonPath;

/// Cases per property: `PROPTEST_CASES` when set, else `short`.
fn cases(short: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(short);
    ProptestConfig { cases: n, failure_persistence: None, ..ProptestConfig::default() }
}

/// The longest one evaluation may take here (a debug build, on a busy machine).
const SLOWEST: Duration = Duration::from_secs(3);

const NAMES: [&str; 4] = ["token", "id", "a b", "x"];

fn names(n: &str) -> Option<usize> {
    NAMES.iter().position(|&k| k == n)
}

/// Template text rich in what its syntax is made of.
fn template_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("${".to_string()),
        Just("$${".to_string()),
        Just("}".to_string()),
        Just("$".to_string()),
        Just("\r\n".to_string()),
        prop::sample::select(NAMES.to_vec()).prop_map(str::to_string),
        Just(" ".to_string()),
        prop::sample::select(vec!["/", "?", "=", "&", "%", "#", "ab"]).prop_map(str::to_string),
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

fn var_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{0,6}",
        Just("a\r\nInjected: 1".to_string()),
        Just("\0".to_string()),
        prop::collection::vec(any::<char>(), 0..8).prop_map(|c| c.into_iter().collect()),
    ]
}

fn bad_in_header(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| matches!(b, b'\r' | b'\n' | 0)).count()
}

proptest! {
    #![proptest_config(cases(10_000))]

    /// A template parses or says why; rendered, a variable's value never puts a CR, LF
    /// or NUL in a header, nor a byte that cannot stand on a request line in a path.
    #[test]
    fn fuzz_templates_parse_or_say_why_and_values_stay_in_their_place(
        text in template_text(),
        vars in prop::collection::vec(var_value(), NAMES.len()),
    ) {
        let Ok(t) = Template::parse(&text, &names) else { return Ok(()) };
        let empty = vec![String::new(); NAMES.len()];
        let mut literal = Vec::new();
        t.render(&empty, Into::Raw, &mut literal).unwrap();
        let mut out = Vec::new();
        match t.render(&vars, Into::Header, &mut out) {
            Ok(()) => prop_assert_eq!(bad_in_header(&out), bad_in_header(&literal)),
            Err(i) => prop_assert!(bad_in_header(vars[i].as_bytes()) > 0),
        }
        out.clear();
        t.render(&vars, Into::Path, &mut out).unwrap();
        let unsafe_bytes = |b: &[u8]| b.iter().filter(|&&c| c <= b' ' || c >= 0x7f || c == b'#').count();
        prop_assert_eq!(unsafe_bytes(&out), unsafe_bytes(&literal));
    }
}

/// A JSON document of a few levels.
fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..1000).prop_map(Value::from),
        prop::sample::select(vec!["a", "b", "x", "", "a.*"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 200, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "id"]), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

/// A JSONPath from the RFC's grammar, heavy on what multiplies the nodes visited.
fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        prop::sample::select(vec![".a", ".b", ".id", ".*", "..*", "..a", "..[0]", " .c"]).prop_map(str::to_string),
        prop::sample::select(vec!["[0]", "[-1]", "[1:3]", "[::2]", "['a','b']", "[*,*]", "[*, 0, 'a']", "[\"a]\"]"])
            .prop_map(str::to_string),
        prop::sample::select(vec![
            "[?@.a]",
            "[?@.a == 1]",
            "[?@..b]",
            "[?length(@.a) > 1 && count(@.*) > 1]",
            "[?match(@, 'a.*')]",
            "[?search(@.a, $.x)]",
            "[?@ == $.a]",
            "..[?@.id > 3 || @.c]",
            "[?count(@..*) > 2]",
            "[?@[?@ == 'x]']]",
        ])
        .prop_map(str::to_string),
    ];
    prop::collection::vec(segment, 0..9).prop_map(|s| format!("${}", s.concat()))
}

proptest! {
    #![proptest_config(cases(6000))]

    /// Every path of the grammar is cut into segments that parse; its first node is the
    /// library's, or the evaluation stops at the node budget with the reason, quickly.
    #[test]
    fn fuzz_jsonpath_gives_the_librarys_first_node_or_stops_at_its_budget(path in path(), doc in document()) {
        let segments = cut(&path).expect("a path of the grammar is cut");
        let joined: String = segments.iter().map(|s| s.text.as_str()).collect();
        prop_assert_eq!(JsonPath::parse(&format!("${joined}")).unwrap(), JsonPath::parse(&path).unwrap());
        let bounded = json_path(&path).unwrap();
        let started = Instant::now();
        match bounded.first(&doc, Shape::of(&doc)) {
            Ok(node) => prop_assert_eq!(node, JsonPath::parse(&path).unwrap().query(&doc).first()),
            Err(why) => prop_assert!(why.contains(&MAX_NODES.to_string()), "{}", why),
        }
        prop_assert!(started.elapsed() < SLOWEST, "{path}: {:?}", started.elapsed());
    }

    /// Any text as a JSONPath: compiled or refused, never a panic.
    #[test]
    fn fuzz_any_text_as_a_jsonpath_is_compiled_or_refused(text in "\\$?[\\[\\]().?@$*,:'\"a-c0-9 =<>!&|-]{0,30}") {
        if let Ok(p) = json_path(&text) {
            let doc = serde_json::json!({"a": [1, {"b": "x"}], "c": {"a": {"a": 2}}});
            let _ = p.first(&doc, Shape::of(&doc));
        }
    }
}

fn kept(body: Vec<u8>, header: &str) -> Kept {
    Kept { head: format!("HTTP/1.1 200 OK\r\nX-H: {header}\r\n\r\n").into_bytes(), body, cut: false, want_body: true }
}

/// A body: JSON of the grammar's documents, or any bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        document().prop_map(|d| d.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..200),
        Just(format!("{}1{}", "[".repeat(120), "]".repeat(120)).into_bytes()),
    ]
}

fn capture_from() -> impl Strategy<Value = CaptureFrom> {
    prop_oneof![
        path().prop_map(CaptureFrom::Json),
        prop::sample::select(vec!["\"id\":(\\d+)", "(a+)+$", "^", "x*"]).prop_map(|r| CaptureFrom::Regex(r.into())),
        prop::sample::select(vec!["X-H", "x-h", "Nope"]).prop_map(|h| CaptureFrom::Header(h.into())),
        Just(CaptureFrom::Cookie("s".into())),
    ]
}

proptest! {
    #![proptest_config(cases(4000))]

    /// A capture or a check on any response takes a value or says why, in bounded time.
    #[test]
    fn fuzz_captures_and_checks_on_any_body_give_a_value_or_a_reason(
        body in body(),
        header in "[ -~]{0,20}",
        from in capture_from(),
        expected in template_text(),
        status in 100u16..600,
    ) {
        let k = kept(body, &header);
        let mut answer = Answer::new(status, &k);
        let jar = Jar::default();
        let started = Instant::now();
        let mut rng = Rng::new(u64::from(status));
        for pick in [Pick::First, Pick::Random] {
            let spec = CaptureSpec { var: "v".into(), from: from.clone(), pick };
            let Ok(c) = Capture::compile(&spec, 0) else {
                prop_assert!(pick == Pick::Random);  // a header or cookie picks the first
                continue;
            };
            if let Err(why) = capture(&c, &mut answer, &jar, &mut rng) {
                prop_assert!(why.starts_with("capture "), "{}", why);
            }
        }
        let vars: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
        let mut scratch = Vec::new();
        let specs = [
            CheckSpec::Contains(expected.clone()),
            CheckSpec::JsonEquals { path: "$..id".into(), expected: expected.clone() },
            CheckSpec::JsonCompare { path: "$..id".into(), op: Cmp::Gt, expected: expected.clone() },
            CheckSpec::JsonCompare { path: "$..id".into(), op: Cmp::In, expected: expected.clone() },
            CheckSpec::JsonCompare { path: "$..id".into(), op: Cmp::Len, expected: expected.clone() },
            CheckSpec::Header { name: "x".into(), expected },
            CheckSpec::Status(vec![200]),
        ];
        for spec in specs {
            if let Ok(c) = Check::compile(&spec, &names) {
                if let Err(why) = check(&c, &mut answer, &vars, &mut scratch) {
                    prop_assert!(why.starts_with("check "), "{}", why);
                }
            }
        }
        prop_assert!(started.elapsed() < SLOWEST, "{from:?}: {:?}", started.elapsed());
    }
}
