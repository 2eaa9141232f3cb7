//! How the 2026.9 tools read their parameters: a camelCase name or its snake_case spelling,
//! strings trimmed, integers from numbers or strict numeric strings, and the gateway's texts
//! when a value cannot be read (`<name> required`, `<name> must be a positive integer`, …).
//! Reads only; what a value means is the tool's business.

use serde_json::Value;

/// The raw value under the name, else under its snake_case spelling.
pub fn raw<'a>(args: &'a Value, name: &str) -> Option<&'a Value> {
    args.get(name).or_else(|| args.get(crate::params::snake_case(name)))
}

fn blank(v: &Value) -> bool {
    v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty())
}

/// A string, trimmed; None when absent, not a string or blank. `required`: those are
/// `<name> required` instead.
pub fn string(args: &Value, name: &str, required: bool) -> Result<Option<String>, String> {
    let value = raw(args, name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    match value {
        Some(s) => Ok(Some(s.to_string())),
        None if required => Err(format!("{name} required")),
        None => Ok(None),
    }
}

/// As [`string`], required exactly when the parameter was given at all.
pub fn string_if_given(args: &Value, name: &str) -> Result<Option<String>, String> {
    string(args, name, raw(args, name).is_some())
}

/// A number, or a string that is strictly a decimal number.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
        Value::String(s) => {
            let t = s.trim();
            let ok = !t.is_empty()
                && t.chars().all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
                && t.chars().any(|c| c.is_ascii_digit());
            ok.then(|| t.parse::<f64>().ok()).flatten().filter(|f| f.is_finite())
        }
        _ => None,
    }
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

fn integer_at_least(args: &Value, name: &str, min: f64, what: &str) -> Result<Option<u64>, String> {
    let Some(v) = raw(args, name) else { return Ok(None) };
    match number(v) {
        Some(n) if n.fract() == 0.0 && n >= min && n <= MAX_SAFE => Ok(Some(n as u64)),
        _ if blank(v) => Ok(None),
        _ => Err(format!("{name} must be a {what}")),
    }
}

/// A safe integer ≥ 1 (`<name> must be a positive integer` otherwise; absent/blank → None).
pub fn positive_integer(args: &Value, name: &str) -> Result<Option<u64>, String> {
    integer_at_least(args, name, 1.0, "positive integer")
}

/// A safe integer ≥ 0 (`<name> must be a non-negative integer` otherwise).
pub fn non_negative_integer(args: &Value, name: &str) -> Result<Option<u64>, String> {
    integer_at_least(args, name, 0.0, "non-negative integer")
}

/// A list of strings (one string is a list of one), trimmed, blanks dropped; None when empty.
pub fn string_list(args: &Value, name: &str) -> Option<Vec<String>> {
    let out: Vec<String> = match raw(args, name)? {
        Value::String(s) => vec![s.trim().to_string()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).map(|s| s.trim().to_string()).collect(),
        _ => return None,
    };
    let out: Vec<String> = out.into_iter().filter(|s| !s.is_empty()).collect();
    (!out.is_empty()).then_some(out)
}

/// Exactly `true`.
pub fn is_true(args: &Value, name: &str) -> bool {
    raw(args, name) == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snake_case_spellings_are_read_and_integers_are_strict() {
        let a = json!({"message_limit": "3", "limit": 2.5, "offset": "", "x": -1});
        assert_eq!(positive_integer(&a, "messageLimit"), Ok(Some(3)));
        assert_eq!(positive_integer(&a, "limit"), Err("limit must be a positive integer".to_string()));
        assert_eq!(non_negative_integer(&a, "offset"), Ok(None));
        assert_eq!(non_negative_integer(&a, "x"), Err("x must be a non-negative integer".to_string()));
        assert_eq!(string(&json!({"a": "  "}), "a", true), Err("a required".to_string()));
        assert_eq!(string_if_given(&json!({}), "ownerId"), Ok(None));
    }
}
