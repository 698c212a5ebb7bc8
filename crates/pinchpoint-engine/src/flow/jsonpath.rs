//! JSONPath (RFC 9535) under a budget: a capture or check evaluates its path on a body
//! the target sent, and a few `..*` or `[*,*,*]` multiply the nodes visited with each
//! segment (`$..*..*..*` on a 241-byte body visits millions). Before a segment runs,
//! the nodes it may visit are counted from the nodes it starts from (their subtrees,
//! their children, the subqueries of its filters); a path that would pass
//! [`MAX_NODES`] stops there with the reason.

use serde_json::Value;
use serde_json_path::JsonPath;

/// The most nodes one evaluation may visit: a few tens of milliseconds, and at most
/// this many references (8 bytes each) held at once.
pub const MAX_NODES: u64 = 2_000_000;
/// What a `match` or `search` call counts for, besides the length of its pattern.
const REGEX_CALL: u64 = 100;

/// A compiled path with its segments, to evaluate one at a time when needed.
#[derive(Debug)]
pub struct Bounded {
    whole: JsonPath,
    /// Each segment as a path of its own (`$` then the segment), and its shape; None:
    /// the path could not be cut into segments (then never evaluated: refused).
    segments: Option<Vec<(JsonPath, Segment)>>,
    /// Characters of the path: a `match` or `search` pattern written in it is shorter.
    chars: u64,
    /// Names and indexes only: a few nodes whatever the document.
    singular: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub text: String,
    pub descendant: bool,
    pub selectors: Vec<Selector>,
    /// Its filters refer to the root (`$`): it cannot run on a node as its own root.
    pub rooted: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    /// A name or an index: at most one node of each node.
    One,
    /// A wildcard, a slice, or a filter: each child, with the filter's subqueries and
    /// `match`/`search` calls on each.
    Many { subqueries: Vec<Vec<Segment>>, regex_calls: u64 },
}

/// What the cost of a path depends on in a document.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shape {
    pub nodes: u64,
    pub fanout: u64,
    pub longest_string: u64,
}

impl Shape {
    pub fn of(doc: &Value) -> Self {
        let mut s = Shape::default();
        walk(doc, &mut s);
        s
    }
}

fn walk(v: &Value, s: &mut Shape) {
    s.nodes += 1;
    match v {
        Value::Array(a) => {
            s.fanout = s.fanout.max(a.len() as u64);
            a.iter().for_each(|c| walk(c, s));
        }
        Value::Object(o) => {
            s.fanout = s.fanout.max(o.len() as u64);
            o.values().for_each(|c| walk(c, s));
        }
        Value::String(t) => s.longest_string = s.longest_string.max(t.len() as u64),
        _ => {}
    }
}

/// The costs of one evaluation in one document.
#[derive(Clone, Copy)]
struct Costs {
    doc: Shape,
    /// Nodes a `match` or `search` call counts for: it compiles its pattern on each
    /// call, at most as long as the longest string of the body or the path.
    regex: u64,
}

impl Bounded {
    pub fn parse(text: &str) -> Result<Self, String> {
        let whole = JsonPath::parse(text).map_err(|e| format!("JSONPath {text:?}: {e}"))?;
        let segments = cut(text).and_then(|segs| {
            segs.into_iter()
                .map(|s| JsonPath::parse(&format!("${}", s.text)).ok().map(|p| (p, s)))
                .collect::<Option<Vec<_>>>()
        });
        let singular = segments.as_ref().is_some_and(|segs| {
            segs.iter().all(|(_, s)| !s.descendant && s.selectors.iter().all(|x| *x == Selector::One))
        });
        Ok(Self { whole, segments, chars: text.chars().count() as u64, singular })
    }

    /// Its cost depends on the document's [`Shape`].
    pub fn needs_shape(&self) -> bool {
        !self.singular
    }

    pub fn as_str(&self) -> String {
        self.whole.to_string()
    }

    /// The first node the path selects in `doc` (None: none), or why it was not
    /// evaluated to its end.
    pub fn first<'a>(&self, doc: &'a Value, shape: Shape) -> Result<Option<&'a Value>, String> {
        Ok(self.nodes(doc, shape)?.into_iter().next())
    }

    /// Every node the path selects in `doc`, in document order, or why it was not
    /// evaluated to its end (the same bound on the nodes visited as `first`).
    pub fn nodes<'a>(&self, doc: &'a Value, shape: Shape) -> Result<Vec<&'a Value>, String> {
        let Some(segments) = &self.segments else {
            return Err(over());
        };
        if self.singular && segments.len() as u64 <= MAX_NODES {
            return Ok(self.whole.query(doc).all());
        }
        let costs = Costs { doc: shape, regex: REGEX_CALL.saturating_add(shape.longest_string.max(self.chars)) };
        let parts: Vec<Segment> = segments.iter().map(|(_, s)| s.clone()).collect();
        if cost_of(&parts, costs) <= MAX_NODES {
            return Ok(self.whole.query(doc).all());
        }
        let mut list: Vec<&Value> = vec![doc];
        let mut spent = 0u64;
        for (k, (path, seg)) in segments.iter().enumerate() {
            let cost = list.iter().fold(0u64, |sum, n| {
                if sum > MAX_NODES {
                    return sum;
                }
                let on = if seg.descendant {
                    count_nodes(n, MAX_NODES + 1).saturating_mul(seg.weight(costs))
                } else {
                    seg.child_cost(fanout(n), costs)
                };
                sum.saturating_add(on)
            });
            spent = spent.saturating_add(cost).saturating_add(list.len() as u64);
            if seg.rooted {
                // `$` in a filter is the document: the path so far runs again on all of it.
                spent = spent.saturating_mul(2);
            }
            if spent > MAX_NODES {
                return Err(over());
            }
            list = if seg.rooted {
                let prefix: String = segments[..=k].iter().map(|(_, s)| s.text.as_str()).collect();
                match JsonPath::parse(&format!("${prefix}")) {
                    Ok(p) => p.query(doc).all(),
                    Err(_) => return Err(over()),
                }
            } else {
                list.iter().flat_map(|n| path.query(n).all()).collect()
            };
            if list.is_empty() {
                return Ok(list);
            }
        }
        Ok(list)
    }
}

fn over() -> String {
    format!("would visit more than {MAX_NODES} JSON nodes of this body: stopped")
}

/// Nodes in `v`'s subtree, counted up to about `limit`.
fn count_nodes(v: &Value, limit: u64) -> u64 {
    let mut n = 1u64;
    let mut each = |c: &Value| {
        if n < limit {
            n = n.saturating_add(count_nodes(c, limit - n));
        }
    };
    match v {
        Value::Array(a) => a.iter().for_each(&mut each),
        Value::Object(o) => o.values().for_each(&mut each),
        _ => {}
    }
    n
}

fn fanout(v: &Value) -> u64 {
    match v {
        Value::Array(a) => a.len() as u64,
        Value::Object(o) => o.len() as u64,
        _ => 0,
    }
}

impl Segment {
    /// Nodes visited for each node a descendant segment reaches.
    fn weight(&self, costs: Costs) -> u64 {
        self.selectors.iter().fold(0u64, |sum, s| sum.saturating_add(s.per_child(costs)))
    }

    /// Nodes visited applying the selectors to a node with `fanout` children.
    fn child_cost(&self, fanout: u64, costs: Costs) -> u64 {
        self.selectors.iter().fold(0u64, |sum, s| {
            sum.saturating_add(match s {
                Selector::One => 1,
                Selector::Many { .. } => fanout.saturating_mul(s.per_child(costs)),
            })
        })
    }
}

impl Selector {
    fn many() -> Self {
        Selector::Many { subqueries: vec![], regex_calls: 0 }
    }

    /// Nodes visited for each child it is applied to (a filter's subqueries are counted
    /// as if on the whole document).
    fn per_child(&self, costs: Costs) -> u64 {
        match self {
            Selector::One => 1,
            Selector::Many { subqueries, regex_calls } => subqueries
                .iter()
                .fold(1u64, |sum, q| sum.saturating_add(cost_of(q, costs)))
                .saturating_add(regex_calls.saturating_mul(costs.regex)),
        }
    }
}

/// An upper bound of the nodes a path of these segments visits in a document of this
/// shape (each segment's list at most the previous one times its fan-out).
fn cost_of(segments: &[Segment], costs: Costs) -> u64 {
    let mut list = 1u64;
    let mut total = 0u64;
    for s in segments {
        let per = if s.descendant {
            costs.doc.nodes.saturating_mul(s.weight(costs))
        } else {
            s.child_cost(costs.doc.fanout, costs)
        };
        list = list.saturating_mul(per.max(1));
        total = total.saturating_add(list);
    }
    total
}

/// The segments of a path (`$` then segments), as written; None if it cannot be cut.
pub fn cut(text: &str) -> Option<Vec<Segment>> {
    let chars: Vec<char> = text.chars().collect();
    if chars.first() != Some(&'$') {
        return None;
    }
    let (segments, end) = segments_at(&chars, 1, 0)?;
    (end == chars.len()).then_some(segments)
}

const DEPTH: usize = 64;

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()
}

/// The segments from `at` on, and where they end (at the first character that starts
/// no segment).
fn segments_at(chars: &[char], mut at: usize, depth: usize) -> Option<(Vec<Segment>, usize)> {
    if depth > DEPTH {
        return None;
    }
    let mut out = Vec::new();
    loop {
        let start = at;
        let mut i = at;
        while i < chars.len() && is_blank(chars[i]) {
            i += 1;
        }
        let descendant = chars.get(i) == Some(&'.') && chars.get(i + 1) == Some(&'.');
        let (selectors, rooted, end) = match chars.get(i) {
            Some('.') => {
                let j = if descendant { i + 2 } else { i + 1 };
                match chars.get(j) {
                    Some('*') => (vec![Selector::many()], false, j + 1),
                    Some('[') if descendant => bracket(chars, j, depth)?,
                    Some(&c) if is_name_char(c) && !c.is_ascii_digit() => {
                        let mut k = j;
                        while k < chars.len() && is_name_char(chars[k]) {
                            k += 1;
                        }
                        (vec![Selector::One], false, k)
                    }
                    _ => return None,
                }
            }
            Some('[') => bracket(chars, i, depth)?,
            _ => return Some((out, start)),
        };
        out.push(Segment { text: chars[i..end].iter().collect(), descendant, selectors, rooted });
        at = end;
    }
}

/// A bracketed selection from `[` at `open`: its selectors, whether a filter refers to
/// the root, and the index after its `]`.
fn bracket(chars: &[char], open: usize, depth: usize) -> Option<(Vec<Selector>, bool, usize)> {
    let mut selectors = Vec::new();
    let mut rooted = false;
    let mut i = open + 1;
    loop {
        while i < chars.len() && is_blank(chars[i]) {
            i += 1;
        }
        let (selector, root, end) = selector_at(chars, i, depth)?;
        selectors.push(selector);
        rooted |= root;
        i = end;
        while i < chars.len() && is_blank(chars[i]) {
            i += 1;
        }
        match chars.get(i) {
            Some(',') => i += 1,
            Some(']') => return Some((selectors, rooted, i + 1)),
            _ => return None,
        }
    }
}

/// One selector from `at`: what it is, whether it refers to the root, where it ends
/// (at the `,` or `]` after it).
fn selector_at(chars: &[char], at: usize, depth: usize) -> Option<(Selector, bool, usize)> {
    match chars.get(at)? {
        '\'' | '"' => Some((Selector::One, false, skip_string(chars, at)?)),
        '?' => filter(chars, at + 1, depth),
        _ => {
            let mut i = at;
            let mut many = false;
            while i < chars.len() && !matches!(chars[i], ',' | ']') {
                many |= matches!(chars[i], '*' | ':');
                i += 1;
            }
            Some((if many { Selector::many() } else { Selector::One }, false, i))
        }
    }
}

/// The index after the string literal opening at `at`.
fn skip_string(chars: &[char], at: usize) -> Option<usize> {
    let quote = chars[at];
    let mut i = at + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// A filter's expression from `at`: its subqueries (each `@` or `$` and the segments
/// after it), up to the `,` or `]` that ends it at its own level.
fn filter(chars: &[char], at: usize, depth: usize) -> Option<(Selector, bool, usize)> {
    let mut subqueries = Vec::new();
    let mut regex_calls = 0u64;
    let mut rooted = false;
    let mut nesting = 0usize;
    let mut i = at;
    while i < chars.len() {
        match chars[i] {
            '\'' | '"' => {
                i = skip_string(chars, i)?;
                continue;
            }
            '(' | '[' => nesting += 1,
            ')' => nesting = nesting.checked_sub(1)?,
            ',' | ']' if nesting == 0 => return Some((Selector::Many { subqueries, regex_calls }, rooted, i)),
            ']' => nesting = nesting.checked_sub(1)?,
            c @ ('@' | '$') => {
                rooted |= c == '$';
                let (segments, end) = segments_at(chars, i + 1, depth + 1)?;
                rooted |= segments.iter().any(|s| s.rooted);
                subqueries.push(segments);
                i = end;
                continue;
            }
            'm' | 's' if i == 0 || !is_name_char(chars[i - 1]) => {
                let word: String = chars[i..chars.len().min(i + 7)].iter().collect();
                if word.starts_with("match(") || word.starts_with("search(") {
                    regex_calls += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn first(path: &str, doc: &Value) -> Result<Option<Value>, String> {
        Bounded::parse(path).unwrap().first(doc, Shape::of(doc)).map(|n| n.cloned())
    }

    fn library(path: &str, doc: &Value) -> Option<Value> {
        JsonPath::parse(path).unwrap().query(doc).first().cloned()
    }

    /// Nested objects and arrays of short values.
    fn small_body() -> Value {
        let text = r#"{"a":{"b":{"c":[1,2,3,{"d":[4,5,{"e":[6,7,8,{"f":[9,10,11,12]}]}]}]}},"g":[[1,2],[3,4],[5,6],[7,8]],"h":{"i":{"j":{"k":{"l":{"m":{"n":1}}}}}},"o":[{"p":1},{"q":2},{"r":3},{"s":[1,2,3,4,5,6,7,8,9]}]}"#;
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn repeated_descendants_stop_at_the_node_budget_at_once() {
        // 241 bytes: 120 arrays, one in the other. `..*` k times selects each chain of k
        // nested arrays: C(120, k) nodes, 10^14 at k = 10 (the library alone never ends).
        let body = format!("{}1{}", "[".repeat(120), "]".repeat(120));
        assert_eq!(body.len(), 241);
        let nested: Value = serde_json::from_str(&body).unwrap();
        let started = Instant::now();
        for k in [4, 10, 50] {
            let path = format!("${}", "..*".repeat(k));
            let e = first(&path, &nested).unwrap_err();
            assert_eq!(e, "would visit more than 2000000 JSON nodes of this body: stopped");
        }
        assert_eq!(first("$..*..*", &nested).unwrap(), library("$..*..*", &nested));
        let doc = small_body();
        let e = first("$[*,*,*,*,*,*,*,*][*,*,*,*,*,*,*,*][*,*,*,*,*,*,*,*][*,*,*,*,*,*,*,*][*,*,*,*,*,*,*,*]", &doc);
        assert!(e.is_ok(), "an object of 4 members: 32^5 is above the budget, but its lists stay small");
        // Here a debug build: the release engine takes a tenth of it.
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        // What the budget allows is evaluated as the library does.
        for path in ["$..*..*", "$..*..*..*..*", "$..f[3]", "$.o[?@.q]", "$..[?@ > 10]", "$.g[1:3][0]"] {
            assert_eq!(first(path, &doc).unwrap(), library(path, &doc), "{path}");
        }
    }

    #[test]
    fn a_path_costly_in_the_worst_case_is_walked_segment_by_segment() {
        // 3,001 nodes: `$..a..v` bounded by the document's shape alone is 9 million
        // nodes; walked, it visits the subtrees of the few `a` only.
        let items: Vec<Value> = (0..1000).map(|i| serde_json::json!({"x": i, "y": [i]})).collect();
        let doc = serde_json::json!({"items": items, "a": {"deep": {"v": 42}}});
        assert!(cost_of(&cut("$..a..v").unwrap(), Costs { doc: Shape::of(&doc), regex: 0 }) > MAX_NODES);
        assert_eq!(first("$..a..v", &doc).unwrap(), Some(serde_json::json!(42)));
        assert_eq!(first("$..a..nothing", &doc).unwrap(), None);
        // A filter on the root (`$`) inside a segment runs against the document.
        let doc = serde_json::json!({"max": 2, "xs": [1, 2, 3], "pad": items});
        for path in ["$..xs[?@ >= $.max]", "$..*[?@ == $.max]"] {
            assert_eq!(first(path, &doc).unwrap(), library(path, &doc), "{path}");
        }
    }

    #[test]
    fn paths_are_cut_into_their_segments() {
        let texts = |p: &str| cut(p).unwrap().into_iter().map(|s| s.text).collect::<Vec<_>>();
        assert_eq!(texts("$"), Vec::<String>::new());
        assert_eq!(texts("$.a..b[0]['c', \"d]\"]..*.*"), [".a", "..b", "[0]", "['c', \"d]\"]", "..*", ".*"]);
        assert_eq!(texts("$[?@.a[0] == 'x]' && length(@..b) > 1]"), ["[?@.a[0] == 'x]' && length(@..b) > 1]"]);
        assert_eq!(texts("$ .a\n[1]"), [".a", "[1]"]);
        let filter = &cut("$[?match(@.a, 'x') || search($.b, 'y')]").unwrap()[0];
        assert!(filter.rooted);
        assert!(matches!(&filter.selectors[0], Selector::Many { subqueries, regex_calls: 2 } if subqueries.len() == 2));
        assert!(cut("nope").is_none());
    }
}
