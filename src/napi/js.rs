//! Crossing the JS boundary. Free-form values (params, patches, messages, results) cross as
//! JSON text through the engine's own `JSON.stringify`/`JSON.parse`: cycles, BigInts and
//! too-deep values become clear errors instead of crashes, and keys such as `__proto__` stay
//! plain own properties on the way out.

use napi::bindgen_prelude::*;
use napi::{Env, ValueType};
use serde_json::Value;

use crate::error::Error as CoreError;

/// Deepest nesting accepted from JS (serde_json's own limit is 128).
const MAX_DEPTH_NOTE: &str = "nested too deeply (max 128 levels)";

fn json_fn<'env>(env: &'env Env, name: &str) -> napi::Result<Function<'env, Unknown<'env>, Unknown<'env>>> {
    let global = env.get_global()?;
    let json: Object = global.get_named_property("JSON")?;
    json.get_named_property(name)
}

/// A JS value as JSON. `undefined` (and functions, symbols) → `null`; anything JSON cannot
/// carry is `INVALID_REQUEST` naming `what`.
pub fn to_json(env: &Env, v: Option<Unknown<'_>>, what: &str) -> crate::error::Result<Value> {
    let Some(v) = v else { return Ok(Value::Null) };
    let bad = |detail: String| CoreError::invalid_request(format!("invalid {what}: {detail}"));
    match v.get_type().map_err(|e| bad(e.reason.clone()))? {
        ValueType::Undefined | ValueType::Null | ValueType::Function | ValueType::Symbol => return Ok(Value::Null),
        _ => {}
    }
    let stringify = json_fn(env, "stringify").map_err(|e| bad(e.reason.clone()))?;
    let text = stringify.call(v).map_err(|e| bad(format!("not representable as JSON ({})", e.reason)))?;
    if text.get_type().map_err(|e| bad(e.reason.clone()))? != ValueType::String {
        return Ok(Value::Null);
    }
    let text: String = unsafe { String::from_napi_value(env.raw(), text.raw()) }.map_err(|e| bad(e.reason.clone()))?;
    serde_json::from_str(&text).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            bad(MAX_DEPTH_NOTE.to_owned())
        } else {
            bad(e.to_string())
        }
    })
}

/// JSON text (made off the JS thread) as a JS value.
pub fn from_json_text<'env>(env: &'env Env, text: &str) -> napi::Result<Unknown<'env>> {
    let parse = json_fn(env, "parse")?;
    let s = env.create_string(text)?;
    parse.call(s.to_unknown())
}

/// A core error as a JS `Error` with `code`.
pub fn js_error(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, e.message()))?;
        obj.set_named_property("code", e.code().as_str())?;
        Ok(napi::Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|err| err)
}
