//! session-tools: the engine behind an AI-agent gateway's session tools.
//!
//! Read the modules top to bottom: `keys` (what a session key is), `config` (the typed gateway
//! config), `policy` (who may reach what), `entry` (the session entry and its write rules),
//! `store` (SQLite), `mirror` (the JSONL copy of transcripts), `migrate` (the
//! gateway's state folder, in and out), `engine` (the gateway's session methods), `tools` (what a model calls),
//! and `napi` (the skin that makes it a Node module).

#![deny(clippy::all)]

/// Rust's own allocations (parsed entries and messages, result texts) go through mimalloc: a
/// listing allocates many small values per row, and glibc's allocator spent a quarter of its
/// time on them (perf3's profile). SQLite and Node keep their own allocators.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[macro_use]
extern crate napi_derive;

#[cfg(test)]
mod agreement_test;
pub mod config;
pub mod contract;
pub mod engine;
pub mod entry;
pub mod entry_text;
pub mod error;
#[cfg(test)]
mod faults_test;
#[cfg(test)]
mod fuzz_test;
pub mod host;
pub mod js;
pub mod keys;
pub mod keys9;
pub mod migrate;
pub mod mirror;
pub mod orchestrate;
pub mod owner;
pub mod params;
pub mod policy;
#[cfg(test)]
mod scratch;
pub mod settings;
pub mod store;
pub mod tools;

mod napi;
