//! The policies that decide who may reach what: the send policy (REFERENCE.md §7), the
//! agent-to-agent policy (§8), sandbox visibility (§9), 2026.9 session visibility and the
//! sub-agent allow list (§6.1, §10.1).
//!
//! Pure functions over the typed config and plain values handed in by the caller. This module
//! never touches the store: whoever asks reads the entry first and passes what matters.

pub mod a2a;
pub mod sandbox;
pub mod send;
pub mod subagents;
pub mod visibility;
