//! Orchestration: the sessions_send reply-back/announce flow and sub-agents. This release holds
//! the pure building blocks (texts, parsing, formatting); the flows that use them come next.

pub mod announce_target;
pub mod prompts;
pub mod reply;
pub mod runs;
pub mod stats;
pub mod thinking;
