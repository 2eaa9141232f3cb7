//! The sub-agent registry (REFERENCE.md §6.4–§6.8, DECISIONS.md #3, #5): records persisted in
//! `subagent_runs`, the completion wait, the announce flow (through the outbox), queue and
//! steer modes, cleanup, the archive sweeper and restart recovery.
//!
//! A child's life: `sessions_spawn` registers its record and arms a *completion wait*; when the
//! run ends, the record gets `endedAt`/`outcome` and its announce is recorded in the outbox
//! under the record's idempotency key (so recording it again, e.g. on recovery, adds nothing).
//! The outbox worker calls [`attempt_announce`]: the trigger message (§6.5, §6.7) reaches the
//! requester by steering its active run, through the per-requester announce queue while a run
//! is active (§6.8), or directly as an `announce` run with `deliver: true`. When the announce
//! settles, [`announce_settled`] records it and cleans up (`delete` removes the child, `keep`
//! sets `cleanupCompletedAt` and the archive time, counted from the run's end). The sweeper is
//! one timer, set for the next archive due. Every change to a record is one transaction that
//! reads it fresh, so the completion wait, the outbox and a requester's deletion never undo
//! each other's writes. Nothing here decides whether a spawn is allowed: `spawn` does.

mod announce;
mod announce_run;
mod archive;
pub(crate) mod cascade;
mod cleanup;
mod completion;
mod drain;
mod lifecycle;
pub mod pause;
mod queue;
mod records;
#[cfg(test)]
mod recovery_tests;
pub mod registry;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use crate::config::Config;
pub use crate::store::subagents::{AnnounceState, RunOutcome, SubagentRun};

pub use announce::attempt_announce;
use announce_run::*;
use archive::*;
pub use cleanup::announce_settled;
pub(crate) use cleanup::finalize;
use cleanup::*;
use completion::*;
use drain::*;
pub use lifecycle::{adopt, close, on_session_deleted, recover};
use queue::*;
pub use queue::{overflow_summary, queue_settings, thread_text, DropPolicy, QueueMode, QueueSettings};
use records::*;
pub use records::{list, list_json, register, running_count};
use registry::lock;
pub use registry::Registry;

/// The outcome error of a child whose requester session was deleted while it ran.
pub const REQUESTER_DELETED: &str = "stopped: requester session deleted";
/// The title of a combined announce in `collect` mode (§6.8).
pub const QUEUED_TITLE: &str = "[Queued announce messages while agent was busy]";
/// How long one wait for a run lasts before it is renewed.
const WAIT_SLICE_MS: u64 = 60_000;
/// The longest an announce attempt waits for its run (an outbox attempt's deadline is 15 minutes).
const MAX_ANNOUNCE_WAIT_MS: u64 = 14 * 60 * 1000;

/// `archiveAfterMinutes` in milliseconds (fractions kept); `None`: archiving disabled.
pub fn archive_after_ms(cfg: &Config) -> Option<i64> {
    cfg.subagents
        .archive_after_minutes
        .filter(|m| m.is_finite() && *m > 0.0)
        .map(|m| (m * 60_000.0).round().max(1.0) as i64)
}
