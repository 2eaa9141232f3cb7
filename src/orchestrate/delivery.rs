//! The send-policy check every delivery path makes before it delivers or starts a run (REFERENCE.md
//! §7.2, DECISIONS.md #6), with its two refusals: "send blocked by session policy" and "send
//! policy could not be evaluated: …" (fail closed). Also the delivery of an agent-to-agent
//! announce (an `a2a_announce` outbox item) through the host's `deliver`.

use serde_json::json;

use super::outbox::{self, Attempt, OutboxRow};
use super::state::Orchestrator;
use super::task::blocking;
use crate::config::PolicyAction;
use crate::engine::Engine;
use crate::error::Error;

/// The refusal of a session whose send policy denies.
pub const SEND_BLOCKED: &str = "send blocked by session policy";

/// What the send policy of a session says about one delivery.
pub enum Verdict {
    Allowed,
    /// refused: `reason` is what events and payloads show; `error` is set when the policy could
    /// not be evaluated
    Blocked {
        reason: String,
        error: Option<Error>,
    },
}

/// The send policy of `session_key` (on `channel`, when given) for one delivery: a policy that
/// cannot be evaluated blocks.
pub fn check(engine: &Engine, session_key: &str, channel: Option<&str>) -> Verdict {
    let mut params = json!({ "sessionKey": session_key });
    if let Some(c) = channel {
        params["channel"] = c.into();
    }
    match engine.resolve_send_policy(&params) {
        Ok(PolicyAction::Allow) => Verdict::Allowed,
        Ok(PolicyAction::Deny) => Verdict::Blocked { reason: SEND_BLOCKED.to_owned(), error: None },
        Err(e) => {
            Verdict::Blocked { reason: format!("send policy could not be evaluated: {}", e.message()), error: Some(e) }
        }
    }
}

/// [`check`] on a blocking thread; a failed thread counts as a policy that cannot be evaluated.
pub async fn check_async(orch: &Orchestrator, session_key: &str, channel: Option<&str>) -> Verdict {
    let (e, k, c) = (orch.engine().clone(), session_key.to_owned(), channel.map(str::to_owned));
    match blocking(move || Ok(check(&e, &k, c.as_deref()))).await {
        Ok(v) => v,
        Err(e) => {
            Verdict::Blocked { reason: format!("send policy could not be evaluated: {}", e.message()), error: Some(e) }
        }
    }
}

/// Delivers one agent-to-agent announce (an `a2a_announce` outbox item): the send policy
/// of its session first (a denied one is skipped, fail closed), then the host's `deliver`.
pub async fn attempt_a2a(orch: &Orchestrator, row: OutboxRow) -> Attempt {
    let key = row.session_key.clone().unwrap_or_default();
    if let Verdict::Blocked { reason, .. } = check_async(orch, &key, None).await {
        orch.host().emit(outbox::item_event("delivery.blocked", &row, json!({ "reason": reason })));
        return Attempt::Skipped(reason);
    }
    let host = orch.host();
    if !host.can_deliver() {
        return Attempt::Failed("no deliver callback is configured".to_owned());
    }
    let sent = tokio::time::timeout(std::time::Duration::from_secs(60), host.deliver(row.payload.clone())).await;
    match sent {
        Ok(Ok(())) => {
            host.emit(outbox::item_event("delivery.sent", &row, json!({ "attempt": row.attempts + 1 })));
            Attempt::Delivered
        }
        Ok(Err(e)) => Attempt::Retry(crate::host::failure_text(e, "deliver")),
        Err(_) => Attempt::Retry("deliver did not settle within 60 s".to_owned()),
    }
}
