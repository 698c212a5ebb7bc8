//! Comparisons of a JSON node a check selects with the value the plan expects: its
//! text, its length, or the number it holds against a number computed from the
//! user's values (`flow::arith`).

use serde_json::Value;

use crate::config::flow::Cmp;
use crate::flow::arith::Expr;

/// Numbers this close, relative to their size, are equal: arithmetic on decimal
/// fractions is inexact in binary (19.99 * 3 gives 59.970000000000006, not 59.97).
pub const RELATIVE_TOLERANCE: f64 = 1e-9;

/// Ok if `got` compares so with `want`, else what it is instead: `ne`, `in` and `len`.
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
        numeric => unreachable!("{numeric:?} compares numbers: compare_number"),
    };
    if ok {
        return Ok(());
    }
    Err(format!("{text} is not {} {want}", sign(op)))
}

/// Ok if the number `got` holds (a JSON number, or a string holding one) compares so
/// with `want`, the value of `expected`; else what it is instead. Numbers within
/// `RELATIVE_TOLERANCE` of each other are equal.
pub fn compare_number(got: &Value, op: Cmp, want: f64, expected: &Expr) -> Result<(), String> {
    let text = node_text(got);
    let number = |v: &str| v.trim().parse::<f64>().ok().filter(|x| x.is_finite());
    let Some(have) = got.as_f64().or_else(|| got.as_str().and_then(number)) else {
        return Err(format!("{text} is not a number"));
    };
    let close = (have - want).abs() <= RELATIVE_TOLERANCE * have.abs().max(want.abs());
    let ok = match op {
        Cmp::Eq => close,
        Cmp::Ge => close || have > want,
        Cmp::Le => close || have < want,
        Cmp::Gt => !close && have > want,
        Cmp::Lt => !close && have < want,
        other => unreachable!("{other:?} compares text: compare"),
    };
    match (ok, expected.is_constant()) {
        (true, _) => Ok(()),
        (false, true) => Err(format!("{text} is not {} {}", sign(op), shown(want))),
        (false, false) => Err(format!("{text} is not {} {}, from {expected}", sign(op), shown(want))),
    }
}

/// A computed number as a reason shows it: to 9 decimals, without the trailing zeros
/// (110, not 110.00000000000001); very large or small ones in scientific notation.
fn shown(x: f64) -> String {
    if x != 0.0 && !(1e-6..1e15).contains(&x.abs()) {
        return format!("{x:e}");
    }
    let fixed = format!("{x:.9}");
    fixed.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn sign(op: Cmp) -> &'static str {
    match op {
        Cmp::Eq => "=",
        Cmp::Gt => ">",
        Cmp::Lt => "<",
        Cmp::Ge => ">=",
        Cmp::Le => "<=",
        Cmp::Ne => "!=",
        Cmp::In => "in",
        Cmp::Len => "of length",
    }
}

/// A JSON node as text: a string as it is, anything else as JSON.
pub fn node_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(got: Value, op: Cmp, expected: &str, values: &[&str]) -> Result<(), String> {
        let names = |n: &str| ["a", "b"].iter().position(|&k| k == n);
        let expr = Expr::parse(expected, &names).unwrap();
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        compare_number(&got, op, expr.eval(&values)?, &expr)
    }

    #[test]
    fn numbers_compare_within_a_relative_tolerance_and_say_where_the_limit_came_from() {
        assert!(check(json!(59.97), Cmp::Eq, "${a} * 3", &["19.99"]).is_ok());
        assert!(check(json!("59.97"), Cmp::Eq, "${a} * 3", &["19.99"]).is_ok());
        assert!(check(json!(0.3), Cmp::Ge, "0.1 * 3", &[]).is_ok()); // 0.30000000000000004
        assert!(check(json!(0.3), Cmp::Le, "0.1 * 3", &[]).is_ok());
        assert!(check(json!(0.3), Cmp::Lt, "0.1 * 3", &[]).is_err());
        assert!(check(json!(0.3), Cmp::Gt, "0.1 * 3", &[]).is_err());
        assert_eq!(check(json!(20), Cmp::Eq, "${a}", &["19.99"]).unwrap_err(), "20 is not = 19.99, from ${a}");
        assert_eq!(check(json!(111), Cmp::Le, "${a} * 1.1", &["100"]).unwrap_err(), "111 is not <= 110, from ${a} * 1.1");
        assert!(check(json!(110), Cmp::Le, "${a} * 1.1", &["100"]).is_ok());
        assert_eq!(check(json!(1), Cmp::Gt, "2", &[]).unwrap_err(), "1 is not > 2");
        assert_eq!(check(json!(0), Cmp::Eq, "0", &[]), Ok(()));
        assert_eq!(check(json!(1), Cmp::Lt, "1e-7", &[]).unwrap_err(), "1 is not < 1e-7");
        assert_eq!(check(json!(1), Cmp::Lt, "-0.5", &[]).unwrap_err(), "1 is not < -0.5");
        assert_eq!(check(json!("lamp"), Cmp::Eq, "2", &[]).unwrap_err(), "lamp is not a number");
        assert_eq!(check(json!(1), Cmp::Eq, "${b} + 1", &["1", "n/a"]).unwrap_err(), "${b} is \"n/a\", not a number");
    }
}
