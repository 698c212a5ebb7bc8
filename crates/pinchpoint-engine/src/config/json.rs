//! Where JSON data read as the configuration is wrong: an error that names the key,
//! `steps[1].users: invalid type: string "ten", expected u32`.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why `value` is not a `T`, after the path of the key it is wrong at; None if it is
/// one. (serde's errors from data in memory say what but not where.)
pub fn error_at<T: DeserializeOwned>(value: &Value) -> Option<String> {
    // Read as text, with one value a line, an error says on which line, and the lines
    // before give its path (a record's own check fails at its closing line: the path
    // of the record).
    let text = serde_json::to_string_pretty(value).ok()?;
    let e = serde_json::from_str::<T>(&text).err()?;
    let at = format!(" at line {} column {}", e.line(), e.column());
    let message = e.to_string();
    let message = message.strip_suffix(&at).unwrap_or(&message);
    Some(format!("{}: {message}", path_at(&text, e.line())))
}

enum Frame {
    Object(Option<String>),
    Array(Option<usize>),
}

/// The path of the value on `line` (1-based) of pretty-printed JSON: the value closed
/// there for a line that closes an object or array; "config" for the whole.
fn path_at(text: &str, line: usize) -> String {
    let mut stack: Vec<Frame> = Vec::new();
    let mut path = String::new();
    for row in text.lines().take(line) {
        let row = row.trim();
        let row = row.strip_suffix(',').unwrap_or(row);
        if row.starts_with(['}', ']']) {
            stack.pop();
            path = joined(&stack);
            continue;
        }
        let value = match stack.last_mut() {
            Some(Frame::Object(key)) => {
                let (name, rest) = split_key(row);
                *key = Some(name);
                rest
            }
            Some(Frame::Array(index)) => {
                *index = Some(index.map_or(0, |i| i + 1));
                row
            }
            None => row,
        };
        path = joined(&stack);
        match value {
            "{" => stack.push(Frame::Object(None)),
            "[" => stack.push(Frame::Array(None)),
            _ => {}
        }
    }
    if path.is_empty() {
        "config".into()
    } else {
        path
    }
}

/// `"key": value` as the key and the value's text.
fn split_key(row: &str) -> (String, &str) {
    let mut escaped = false;
    for (i, c) in row.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => {
                let name = serde_json::from_str(&row[..=i]).unwrap_or_default();
                let rest = row[i + 1..].trim_start_matches(':').trim();
                return (name, rest);
            }
            _ => {}
        }
    }
    (String::new(), row)
}

fn joined(stack: &[Frame]) -> String {
    let mut path = String::new();
    for frame in stack {
        match frame {
            Frame::Object(Some(key)) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Frame::Array(Some(i)) => path.push_str(&format!("[{i}]")),
            Frame::Object(None) | Frame::Array(None) => {}
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::error_at;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Step {
        users: u32,
        name: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Run {
        port: u16,
        #[serde(default, deserialize_with = "crate::config::wire::seconds")]
        wait_s: std::time::Duration,
        rows: Vec<Vec<String>>,
        steps: Vec<Step>,
    }

    fn error(value: serde_json::Value) -> String {
        let located = error_at::<Run>(&value).unwrap();
        let plain = serde_json::from_value::<Run>(value).unwrap_err().to_string();
        assert!(located.ends_with(&plain), "{located} / {plain}");
        located
    }

    #[test]
    fn an_error_names_the_key_it_is_under() {
        let steps = json!([{"users": 1, "name": "a\": ["}, {"users": "ten", "name": "b"}]);
        let e = error(json!({"port": 80, "rows": [["x", "{"], []], "steps": steps}));
        assert_eq!(e, r#"steps[1].users: invalid type: string "ten", expected u32"#);
        let e = error(json!({"port": 80, "rows": [], "steps": [{"users": 1}]}));
        assert_eq!(e, "steps[0]: missing field `name`");
        let e = error(json!({"port": 80, "rows": [["x", 1]], "steps": []}));
        assert_eq!(e, "rows[0][1]: invalid type: integer `1`, expected a string");
        let e = error(json!({"port": 80, "rows": [], "steps": [], "extra": true}));
        assert!(e.starts_with("extra: unknown field `extra`, expected one of `port`"), "{e}");
        let e = error(json!({"port": 80, "rows": []}));
        assert_eq!(e, "config: missing field `steps`");
        let e = error(json!({"port": 80, "rows": [], "steps": [], "wait_s": -1.0}));
        assert_eq!(e, "wait_s: -1 is not a duration in seconds");
    }

    #[test]
    fn good_data_has_no_error() {
        assert_eq!(error_at::<Run>(&json!({"port": 80, "rows": [["a"]], "steps": []})), None);
    }
}
