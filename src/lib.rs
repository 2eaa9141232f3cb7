//! session-tools: the engine behind an AI-agent gateway's session tools.
//!
//! Read the modules top to bottom: `keys` (what a session key is), `config` (the typed gateway
//! config), `policy` (who may reach what), `entry` (the session entry and its write rules),
//! `store` (SQLite), `mirror` (the JSONL copy of transcripts), `migrate` (the
//! gateway's state folder, in and out), `engine` (the gateway's session methods), `tools` (what a model calls),
//! and `napi` (the skin that makes it a Node module).

#![deny(clippy::all)]

#[macro_use]
extern crate napi_derive;

/// The addon allocates many small, short-lived values (parsed entries, rows, JSON text);
/// mimalloc serves them markedly faster than the system allocator (see the README's
/// performance notes). It only manages the addon's own allocations, not Node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc returns freed memory to the OS after 10 ms by default; a list result of a few
/// hundred KB, built on a worker and freed after it crossed to JS, then costs fresh zeroed pages
/// on every call (perf: 60% of the time in the kernel's `clear_page`). Holding freed memory a
/// second keeps it for the next call. `mi_option_purge_delay` is option 15 of mimalloc 2; the
/// default (10) is checked first, so another mimalloc build is left alone.
pub fn tune_allocator() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        const MI_OPTION_PURGE_DELAY: libmimalloc_sys_ext::mi_option_t = 15;
        // SAFETY: plain option reads and writes of the allocator this crate links.
        unsafe {
            if libmimalloc_sys_ext::mi_option_get(MI_OPTION_PURGE_DELAY) == 10 {
                libmimalloc_sys_ext::mi_option_set(MI_OPTION_PURGE_DELAY, 1000);
            }
        }
    });
}

use libmimalloc_sys as libmimalloc_sys_ext;

pub mod config;
pub mod engine;
pub mod entry;
pub mod error;
#[cfg(test)]
mod faults_test;
#[cfg(test)]
mod fuzz_test;
pub mod host;
pub mod js;
pub mod keys;
pub mod migrate;
pub mod mirror;
pub mod orchestrate;
pub mod owner;
pub mod params;
pub mod policy;
pub mod store;
pub mod tools;

mod napi;
