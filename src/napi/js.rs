//! Crossing the JS boundary. Free-form values (params, patches, messages, results) cross as
//! JSON text through the engine's own `JSON.stringify`/`JSON.parse`: cycles, BigInts and
//! too-deep values become clear errors instead of crashes, and keys such as `__proto__` stay
//! plain own properties on the way out.

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};
use serde_json::Value;

use super::cache::Cached;
use crate::error::Error as CoreError;

/// Deepest nesting accepted from JS (serde_json's own limit is 128).
const MAX_DEPTH_NOTE: &str = "nested too deeply (max 128 levels)";

fn json_fn<'env>(env: &'env Env, name: &str) -> napi::Result<Function<'env, Unknown<'env>, Unknown<'env>>> {
    let which = if name == "parse" { Cached::JsonParse } else { Cached::JsonStringify };
    super::cache::global_function(env, which)
}

/// Drops a JS exception left pending by a failed napi call (a throwing getter, a Proxy trap), so
/// that the failure reaches the caller as a rejection, not as a synchronous throw.
pub fn clear_pending(env: &Env) {
    let mut exception = std::ptr::null_mut();
    // SAFETY: called on the JS thread with a live env; the out-pointer is a local.
    unsafe {
        napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception);
    }
}

/// JSON.stringify writes a lone UTF-16 surrogate as a `\udXXX` escape, which is not Unicode
/// text; it becomes U+FFFD, as when the text is encoded as UTF-8.
fn replace_lone_surrogates(text: &str) -> String {
    let b = text.as_bytes();
    let hex = |i: usize| -> Option<u32> {
        let h = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
        u32::from_str_radix(h, 16).ok()
    };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(u) = hex(i + 2) else {
            i += 2;
            continue;
        };
        let is_high = (0xD800..0xDC00).contains(&u);
        let is_low = (0xDC00..0xE000).contains(&u);
        let paired = is_high
            && b.get(i + 6) == Some(&b'\\')
            && b.get(i + 7) == Some(&b'u')
            && hex(i + 8).map(|l| (0xDC00..0xE000).contains(&l)).unwrap_or(false);
        if paired {
            i += 12;
        } else if is_high || is_low {
            out.push_str(&text[last..i]);
            out.push_str("\\ufffd");
            i += 6;
            last = i;
        } else {
            i += 6;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// A JS value as JSON. `undefined` (and functions, symbols) → `null`; anything JSON cannot
/// carry is `INVALID_REQUEST` naming `what`.
pub fn to_json(env: &Env, v: Option<Unknown<'_>>, what: &str) -> crate::error::Result<Value> {
    convert(env, v, what, true)
}

/// As [`to_json`], but text that is not valid Unicode (a lone surrogate) is refused instead of
/// repaired: for values such as file paths, where a repaired value would name something else.
pub fn to_json_exact(env: &Env, v: Option<Unknown<'_>>, what: &str) -> crate::error::Result<Value> {
    convert(env, v, what, false)
}

/// A JS value as JSON, read now and parsed when the job runs ([`Later::value`]): on the JS
/// thread only `JSON.stringify` runs, and a job that runs on the writer thread parses there
/// (perf, issue 17: the calls of a burst hold the loop less). Errors as [`to_json`].
pub fn to_json_later(env: &Env, v: Option<Unknown<'_>>, what: &'static str) -> crate::error::Result<Later> {
    match text_or_value(env, v, what, true)? {
        Converted::Value(v) => Ok(Later::Value(v)),
        Converted::Text(t) => Ok(Later::Text(t, what)),
    }
}

/// A JS value converted: JSON text to parse, or already a value.
pub enum Later {
    Value(Value),
    Text(String, &'static str),
}

impl Later {
    /// The length of the JSON text read; 0 for a value read directly (null, or a string, which
    /// no job taking JSON text accepts).
    pub fn text_len(&self) -> usize {
        match self {
            Later::Value(_) => 0,
            Later::Text(t, _) => t.len(),
        }
    }

    pub fn value(&self) -> crate::error::Result<Value> {
        match self {
            Later::Value(v) => Ok(v.clone()),
            Later::Text(t, what) => parse_text(t, what, true),
        }
    }
}

enum Converted {
    Value(Value),
    Text(String),
}

fn convert(env: &Env, v: Option<Unknown<'_>>, what: &str, repair: bool) -> crate::error::Result<Value> {
    match text_or_value(env, v, what, repair)? {
        Converted::Value(v) => Ok(v),
        Converted::Text(t) => parse_text(&t, what, repair).inspect_err(|_| clear_pending(env)),
    }
}

pub fn parse_text(text: &str, what: &str, repair: bool) -> crate::error::Result<Value> {
    let bad = |detail: String| CoreError::invalid_request(format!("invalid {what}: {detail}"));
    let parsed = match serde_json::from_str(text) {
        Err(e) if repair && (e.to_string().contains("escape") || e.to_string().contains("surrogate")) => {
            serde_json::from_str(&replace_lone_surrogates(text))
        }
        other => other,
    };
    parsed.map_err(|e| {
        if e.to_string().contains("recursion limit") {
            bad(MAX_DEPTH_NOTE.to_owned())
        } else {
            bad(e.to_string())
        }
    })
}

fn text_or_value(env: &Env, v: Option<Unknown<'_>>, what: &str, repair: bool) -> crate::error::Result<Converted> {
    let Some(v) = v else { return Ok(Converted::Value(Value::Null)) };
    let bad = |detail: String| {
        clear_pending(env);
        CoreError::invalid_request(format!("invalid {what}: {detail}"))
    };
    match v.get_type().map_err(|e| bad(e.reason.clone()))? {
        ValueType::Undefined | ValueType::Null | ValueType::Function | ValueType::Symbol => {
            return Ok(Converted::Value(Value::Null))
        }
        // A string (a key, a session id) is read as it is, without the JSON round trip: napi
        // turns a lone surrogate into U+FFFD as the repair in `parse_text` does.
        ValueType::String if repair => {
            // SAFETY: a string value of this env, on the JS thread.
            let s = unsafe { String::from_napi_value(env.raw(), v.raw()) }.map_err(|e| bad(e.reason.clone()))?;
            return Ok(Converted::Value(Value::String(s)));
        }
        _ => {}
    }
    let stringify = json_fn(env, "stringify").map_err(|e| bad(e.reason.clone()))?;
    let text = stringify.call(v).map_err(|e| bad(format!("not representable as JSON ({})", e.reason)))?;
    if text.get_type().map_err(|e| bad(e.reason.clone()))? != ValueType::String {
        return Ok(Converted::Value(Value::Null));
    }
    let text: String = unsafe { String::from_napi_value(env.raw(), text.raw()) }.map_err(|e| bad(e.reason.clone()))?;
    Ok(Converted::Text(text))
}

/// JSON text (made off the JS thread) as a JS value.
pub fn from_json_text<'env>(env: &'env Env, text: &str) -> napi::Result<Unknown<'env>> {
    let parse = json_fn(env, "parse")?;
    parse.call(string_of(env, text)?.to_unknown())
}

/// `text` as a JS string: ASCII text (most answers) is copied as is into a one-byte string,
/// without the UTF-8 decoder; other text is decoded as UTF-8.
pub fn string_of<'env>(env: &'env Env, text: &str) -> napi::Result<napi::JsString<'env>> {
    if text.is_ascii() {
        env.create_string_latin1(text)
    } else {
        env.create_string(text)
    }
}

/// The reason of an `AbortSignal` that is already aborted, or `None` (no signal, a signal not
/// aborted, or something that is not a signal: `execute` never fails over its third argument;
/// a throwing getter is cleared).
pub fn aborted_reason<'env>(env: &'env Env, v: Option<Unknown<'env>>) -> Option<Unknown<'env>> {
    let v = v?;
    if v.get_type().ok()? != ValueType::Object {
        return None;
    }
    // SAFETY: the value was just checked to be an object, and is used on this thread only.
    let obj = unsafe { Object::from_napi_value(env.raw(), v.raw()) }.ok()?;
    let reason = match obj.get_named_property::<Unknown>("aborted") {
        Ok(aborted) if aborted.get_type().ok() == Some(ValueType::Boolean) => match aborted.coerce_to_bool() {
            Ok(true) => obj.get_named_property::<Unknown>("reason").ok(),
            _ => None,
        },
        _ => None,
    };
    clear_pending(env);
    reason
}

#[cfg(test)]
mod tests {
    use super::replace_lone_surrogates;

    #[test]
    fn lone_surrogates_become_replacement_characters_and_pairs_stay() {
        assert_eq!(replace_lone_surrogates(r#""a\ud83d""#), r#""a\ufffd""#);
        assert_eq!(replace_lone_surrogates(r#""\udc00x""#), r#""\ufffdx""#);
        assert_eq!(replace_lone_surrogates(r#""\ud83d\ude00""#), r#""\ud83d\ude00""#);
        assert_eq!(replace_lone_surrogates(r#""\\ud83d""#), r#""\\ud83d""#);
        assert_eq!(replace_lone_surrogates(r#""\u00e9""#), r#""\u00e9""#);
        let s: String = serde_json::from_str(&replace_lone_surrogates(r#""cut \ud83d""#)).unwrap();
        assert_eq!(s, "cut \u{fffd}");
    }
}
