//! The one place a Rust error becomes a JS error: an `Error` whose `message` is the core
//! error's and whose `code` is its [`ErrorCode`](crate::error::ErrorCode) string.

use napi::bindgen_prelude::*;
use napi::Env;

use crate::error::Error as CoreError;

/// A core error as a JS `Error` value with `code`.
pub fn error_value<'env>(env: &'env Env, e: &CoreError) -> napi::Result<Unknown<'env>> {
    let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, e.message()))?;
    obj.set_named_property("code", e.code().as_str())?;
    Ok(obj.to_unknown())
}

/// A core error as a JS `Error` with `code`, to throw or reject with.
pub fn js_error(env: &Env, e: &CoreError) -> napi::Error {
    error_value(env, e).map(napi::Error::from).unwrap_or_else(|err| err)
}
