//! The announce run: a run on the requester with `deliver: true` that carries one announce (or
//! a queued batch), and the wait for it that settles the outbox attempt.

use super::*;

use crate::entry::DeliveryContext;
use crate::error::Result;
use crate::host::{Lane, RunOptions};
use crate::orchestrate::outbox::Attempt;
use crate::orchestrate::runs::{Provenance, RunSpec, RunStatus};
use crate::orchestrate::state::Orchestrator;

/// Starts an `announce` run on the requester, delivered to `route`; the host sees `key` (the
/// announce's own idempotency key, when the run carries exactly one announce). The announce is
/// owed, so it is not held to the chain budget.
pub(super) fn start_announce_run(
    orch: &Orchestrator,
    requester: &str,
    message: String,
    route: &DeliveryContext,
    child_key: &str,
    chain: String,
    key: Option<String>,
) -> Result<String> {
    let cfg = orch.engine().config();
    let options = RunOptions {
        deliver: true,
        channel: route.channel.clone(),
        to: route.to.clone(),
        account_id: route.account_id.clone(),
        thread_id: thread_text(&route.thread_id),
        ..RunOptions::new(Lane::Announce, cfg.default_timeout_seconds.saturating_mul(1000), chain)
    };
    start_on_requester(orch, requester, message, options, child_key, key)
}

/// 2026.9 `completionTarget: "parent"`: the handoff is a private requester turn, delivered to
/// no channel.
pub(super) fn start_private_run(
    orch: &Orchestrator,
    requester: &str,
    message: String,
    child_key: &str,
    chain: String,
    key: Option<String>,
) -> Result<String> {
    let cfg = orch.engine().config();
    let options = RunOptions::new(Lane::Announce, cfg.default_timeout_seconds.saturating_mul(1000), chain);
    start_on_requester(orch, requester, message, options, child_key, key)
}

fn start_on_requester(
    orch: &Orchestrator,
    requester: &str,
    message: String,
    options: RunOptions,
    child_key: &str,
    key: Option<String>,
) -> Result<String> {
    let spec = RunSpec {
        session_key: requester.to_owned(),
        message,
        provenance: Provenance { kind: "announce", source_session_key: Some(child_key.to_owned()) },
        options,
        chain_limit: None,
    };
    orch.runs()
        .start_keyed(orch.engine().clone(), orch.host().clone(), spec, key)
        .and_then(|r| r.ok_or_else(|| crate::error::Error::store("the announce run was not admitted")))
}

/// Waits for an announce run: `ok` → delivered; an error → retried (a fresh run next time); a
/// run still going → retried later, waiting for the same run.
pub(super) async fn await_announce_run(orch: &Orchestrator, keys: &[String], run: &str) -> Attempt {
    let timeout = orch.engine().config().default_timeout_seconds.saturating_mul(1000);
    let cap = timeout.saturating_add(WAIT_SLICE_MS).min(MAX_ANNOUNCE_WAIT_MS);
    let snap = orch.runs().wait(orch.engine(), run, cap).await;
    let forget = || {
        let mut map = lock(&orch.subagents().announce_runs);
        for k in keys {
            map.remove(k);
        }
    };
    match snap {
        Ok(s) if s.status == RunStatus::Ok => {
            forget();
            Attempt::Delivered
        }
        Ok(s) if s.status == RunStatus::Timeout && s.ended_at.is_none() => {
            Attempt::Retry("the announce run is still going".to_owned())
        }
        Ok(s) => {
            forget();
            Attempt::Retry(s.error.unwrap_or_else(|| format!("the announce run ended with {}", s.status.as_str())))
        }
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}
