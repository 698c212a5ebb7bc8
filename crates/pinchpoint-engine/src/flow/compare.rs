//! Comparisons of a JSON node a check selects with the value the plan expects.

use serde_json::Value;

use crate::config::flow::Cmp;

/// Ok if `got` compares so with `want`, else what it is instead.
pub fn compare(got: &Value, op: Cmp, want: &str) -> Result<(), String> {
    let text = node_text(got);
    let ok = match op {
        Cmp::Ne => text != want,
        Cmp::In => match serde_json::from_str::<Value>(want) {
            Ok(Value::Array(items)) => items.iter().any(|i| node_text(i) == text),
            _ => return Err(format!("{want:?} is not a JSON array to look in")),
        },
        Cmp::Len => {
            let len = match got {
                Value::Array(a) => a.len(),
                Value::Object(o) => o.len(),
                Value::String(s) => s.chars().count(),
                _ => return Err(format!("{text} has no length")),
            };
            let Ok(n) = want.trim().parse::<usize>() else {
                return Err(format!("len {want:?} is not a count"));
            };
            if len == n {
                return Ok(());
            }
            return Err(format!("length {len}, expected {n}"));
        }
        Cmp::Gt | Cmp::Lt | Cmp::Ge | Cmp::Le => {
            let number = |v: &str| v.trim().parse::<f64>().ok().filter(|x| x.is_finite());
            let Some(have) = got.as_f64().or_else(|| got.as_str().and_then(number)) else {
                return Err(format!("{text} is not a number"));
            };
            let Some(limit) = number(want) else {
                return Err(format!("{want:?} is not a number to compare with"));
            };
            match op {
                Cmp::Gt => have > limit,
                Cmp::Lt => have < limit,
                Cmp::Ge => have >= limit,
                _ => have <= limit,
            }
        }
    };
    if ok {
        return Ok(());
    }
    let sign = match op {
        Cmp::Gt => ">",
        Cmp::Lt => "<",
        Cmp::Ge => ">=",
        Cmp::Le => "<=",
        Cmp::Ne => "!=",
        _ => "in",
    };
    Err(format!("{text} is not {sign} {want}"))
}

/// A JSON node as text: a string as it is, anything else as JSON.
pub fn node_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
