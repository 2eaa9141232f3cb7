//! Reading untrusted parameter objects the way the gateway's schemas do (REFERENCE.md
//! preamble): unknown properties and wrong types are refused with
//! `invalid <method> params: <fragments joined by '; '>`.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// A parameter object being read for `method`; errors collect and are reported together.
pub struct Params<'a> {
    method: &'static str,
    obj: &'a Map<String, Value>,
    errors: Vec<String>,
}

static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();

impl<'a> Params<'a> {
    /// `v` must be an object (or absent/null, read as `{}`) with no properties outside `allowed`.
    pub fn new(method: &'static str, v: &'a Value, allowed: &[&str]) -> Result<Params<'a>> {
        let obj = match v {
            Value::Object(o) => o,
            Value::Null => EMPTY.get_or_init(Map::new),
            _ => return Err(Error::invalid_request(format!("invalid {method} params: at root: must be object"))),
        };
        let mut p = Params { method, obj, errors: Vec::new() };
        for k in obj.keys() {
            if !allowed.contains(&k.as_str()) {
                p.errors.push(format!("at root: unexpected property '{k}'"));
            }
        }
        Ok(p)
    }

    fn fail(&mut self, name: &str, what: &str) {
        self.errors.push(format!("at /{name}: {what}"));
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name).filter(|v| !v.is_null())
    }

    pub fn has(&self, name: &str) -> bool {
        self.obj.contains_key(name)
    }

    /// An optional integer within `min..=max`.
    pub fn int(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let v = self.get(name)?;
        let Some(f) = v.as_f64() else {
            self.fail(name, "must be integer");
            return None;
        };
        if f.fract() != 0.0 || !f.is_finite() {
            self.fail(name, "must be integer");
            return None;
        }
        if f < min as f64 {
            self.fail(name, &format!("must be >= {min}"));
            return None;
        }
        if f > max as f64 {
            self.fail(name, &format!("must be <= {max}"));
            return None;
        }
        Some(f as i64)
    }

    pub fn bool(&mut self, name: &str) -> Option<bool> {
        let v = self.get(name)?;
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.fail(name, "must be boolean");
                None
            }
        }
    }

    /// An optional string of `min..=max` characters (not trimmed).
    pub fn string(&mut self, name: &str, min: usize, max: usize) -> Option<&'a str> {
        let v = self.get(name)?;
        let Some(s) = v.as_str() else {
            self.fail(name, "must be string");
            return None;
        };
        let n = s.chars().count();
        if n < min {
            self.fail(name, &format!("must NOT have fewer than {min} characters"));
            return None;
        }
        if n > max {
            self.fail(name, &format!("must NOT have more than {max} characters"));
            return None;
        }
        Some(s)
    }

    /// The raw value of an optional property (null counts as present here).
    pub fn raw(&self, name: &str) -> Option<&'a Value> {
        self.obj.get(name)
    }

    /// Ends the reading: the collected errors, if any, as one `INVALID_REQUEST`.
    pub fn finish(self) -> Result<()> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid_request(format!("invalid {} params: {}", self.method, self.errors.join("; "))))
        }
    }
}

/// `camelCase` → `snake_case` (`messageLimit` → `message_limit`): the other spelling under which
/// the gateway accepts a parameter, and the column names of its SQLite tables.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_properties_and_bad_types_are_reported_together() {
        let v = json!({"foo": 1, "limit": 5000});
        let mut p = Params::new("chat.history", &v, &["limit"]).unwrap();
        assert_eq!(p.int("limit", 1, 1000), None);
        let err = p.finish().unwrap_err();
        assert_eq!(
            err.message(),
            "invalid chat.history params: at root: unexpected property 'foo'; at /limit: must be <= 1000"
        );
    }

    #[test]
    fn a_non_object_is_refused_and_null_is_empty() {
        assert!(Params::new("x", &json!([1]), &[]).is_err());
        assert!(Params::new("x", &Value::Null, &[]).unwrap().finish().is_ok());
    }

    #[test]
    fn strings_are_measured_in_characters() {
        let v = json!({"label": "é".repeat(64)});
        let mut p = Params::new("x", &v, &["label"]).unwrap();
        assert!(p.string("label", 1, 64).is_some());
        assert!(p.finish().is_ok());
    }
}
