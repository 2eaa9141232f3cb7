//! Orchestration: model runs through the host, `sessions_send` with its reply-back loop and
//! announce step, `sessions_spawn` with durable sub-agents, and the outbox that delivers every
//! announce. The [`Orchestrator`] is one open store's conductor: it owns the run registry, the
//! outbox worker and the sub-agent registry, and is what the napi skin calls for the async
//! tools, `waitRun`, `listSubagentRuns` and `close`.
//!
//! Read bottom up: `task` (blocking jobs, busy guard, chain ids), the pure helpers (`prompts`,
//! `reply`, `stats`, `thinking`, `announce_target`), the registries (`runs`, `outbox`), the
//! state (`state`), the one send-policy check (`delivery`), the flows (`send`, `spawn`,
//! `subagents`), the lease at work (`ownership`) and the entry points (`lifecycle`, `api`,
//! `dispatch`). This file only lists
//! them: no lower module imports it.

pub mod announce_target;
pub mod api;
pub mod completion9;
pub mod delivery;
pub mod dispatch;
pub mod lifecycle;
pub mod outbox;
pub mod ownership;
pub mod prompts;
pub mod prompts9;
pub mod reply;
pub mod retry9;
pub mod runs;
pub mod send;
pub mod spawn;
pub mod spawn_v9;
pub mod state;
pub mod stats;
pub mod subagents;
pub mod task;
pub mod task_exec;
pub mod task_list;
pub mod tasks;
pub mod thinking;
pub mod watch;
pub mod yields;

#[cfg(test)]
mod tests;

pub use outbox::{A2A_ANNOUNCE, SUBAGENT_ANNOUNCE};
pub use state::Orchestrator;
pub use task::{blocking, new_chain_id, BusyGuard};
