//! The napi skin: the `SessionTools` class (`session_tools`), how its calls are scheduled
//! (`jobs`, `lanes`), how results come back to the JS thread (`port`, woken through a libuv
//! handle of its own: `wake`), JSON in and out of JS (`js`; large answers over several turns:
//! `chunked`; writes gathered in JS: `gather`), JS errors with a `code` (`error`), the host
//! callbacks (`host`) and the library kept loaded while worker threads come and go (`pin`). The
//! only place napi types appear; it decides nothing: all logic lives below it.

mod cache;
mod chunked;
mod error;
mod gather;
mod host;
mod jobs;
mod js;
mod lanes;
mod pin;
mod port;
mod rows;
mod session_tools;
mod wake;

use napi::bindgen_prelude::Object;
use napi::Env;

/// Runs when an environment (the main thread or a worker) loads the module: keeps the library
/// loaded (`pin`) and installs the gathered writes (`gather`). napi-rs keeps one such hook per
/// library (a second `#[napi(module_exports)]` silently replaces the first, whichever the linker
/// registers last), so this is the only one: anything else to do at load goes here.
#[napi(module_exports)]
#[cfg_attr(test, allow(dead_code))] // the hook is registered outside tests only
pub fn on_load(exports: Object, env: Env) -> napi::Result<()> {
    pin::pin_library();
    gather::install(&exports, &env)
}
