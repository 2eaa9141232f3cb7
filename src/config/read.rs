//! The config readers: a section of the gateway's JSON config and its typed accessors, each of
//! which names the full key path when it refuses a value (`invalid config: <path> <what>`).
//! Knows no key names of its own.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::keys::js_trim;

// ---------------------------------------------------------------------------------------------
// Reading: every reader takes the full key path so that a refusal can name it.

pub(super) type Map = serde_json::Map<String, Value>;

pub(super) fn invalid(path: &str, what: &str) -> Error {
    Error::invalid_config(format!("invalid config: {path} {what}"))
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `null` counts as absent.
pub(super) fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// An object of the config (possibly absent) and where it sits.
pub(super) struct Section<'a> {
    pub(super) map: Option<&'a Map>,
    pub(super) path: String,
}

impl<'a> Section<'a> {
    pub(super) fn at(v: Option<&'a Value>, path: String) -> Result<Section<'a>> {
        match present(v) {
            None => Ok(Section { map: None, path }),
            Some(Value::Object(map)) => Ok(Section { map: Some(map), path }),
            Some(_) => Err(invalid(&path, "must be an object")),
        }
    }
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        present(self.map.and_then(|m| m.get(key)))
    }
    pub(super) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }
    pub(super) fn bad(&self, key: &str, what: &str) -> Error {
        invalid(&self.path_of(key), what)
    }
    pub(super) fn section(&self, key: &str) -> Result<Section<'a>> {
        Section::at(self.get(key), self.path_of(key))
    }
    pub(super) fn string(&self, key: &str) -> Result<Option<&'a str>> {
        string_at(self.get(key), &self.path_of(key))
    }
    /// A string, trimmed and lower-cased.
    pub(super) fn lowered(&self, key: &str) -> Result<Option<String>> {
        Ok(self.string(key)?.map(|s| js_trim(s).to_lowercase()))
    }
    /// A string, trimmed; None when blank.
    pub(super) fn trimmed(&self, key: &str) -> Result<Option<String>> {
        Ok(self.string(key)?.map(js_trim).filter(|s| !s.is_empty()).map(str::to_string))
    }
    pub(super) fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.bad(key, "must be a boolean")),
        }
    }
    pub(super) fn number(&self, key: &str) -> Result<Option<f64>> {
        number_at(self.get(key), &self.path_of(key))
    }
    pub(super) fn strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.bad(key, "must be an array of strings")),
            Some(_) => Err(self.bad(key, "must be an array of strings")),
        }
    }
    pub(super) fn array(&self, key: &str) -> Result<&'a [Value]> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.bad(key, "must be an array")),
        }
    }
    /// A model ref: a string, or `{primary: string}`; trimmed, None when blank.
    pub(super) fn model(&self, key: &str) -> Result<Option<String>> {
        let path = self.path_of(key);
        let primary = match self.get(key) {
            None => return Ok(None),
            Some(Value::String(s)) => s.as_str(),
            Some(Value::Object(map)) => match string_at(present(map.get("primary")), &join(&path, "primary"))? {
                Some(s) => s,
                None => return Ok(None),
            },
            Some(_) => return Err(invalid(&path, r#"must be a string or an object with a string "primary""#)),
        };
        let primary = js_trim(primary);
        Ok((!primary.is_empty()).then(|| primary.to_string()))
    }
    /// The entries of an object-valued key, in config order (`null` values skipped).
    pub(super) fn entries(&self, key: &str) -> Result<Vec<(&'a String, &'a Value, String)>> {
        Ok(self.section(key)?.entries_here())
    }
    /// The entries of this object, in config order (`null` values skipped).
    pub(super) fn entries_here(&self) -> Vec<(&'a String, &'a Value, String)> {
        self.map.into_iter().flatten().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, v, self.path_of(k))).collect()
    }
}

pub(super) fn string_at<'a>(v: Option<&'a Value>, path: &str) -> Result<Option<&'a str>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(path, "must be a string")),
    }
}

/// A finite, non-negative number.
pub(crate) fn number_at(v: Option<&Value>, path: &str) -> Result<Option<f64>> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
            _ => Err(invalid(path, "must be a non-negative number")),
        },
        Some(_) => Err(invalid(path, "must be a non-negative number")),
    }
}

/// Floors a finite non-negative number; `as` saturates, so huge values become the maximum.
pub(crate) fn floor_u64(n: f64) -> u64 {
    n.floor() as u64
}

pub(crate) fn floor_u32(n: f64) -> u32 {
    n.floor() as u32
}
