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
mod session_tools;
mod wake;
