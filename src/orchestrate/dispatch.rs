//! The outbox's [`Dispatcher`] for an [`Orchestrator`]: each outbox item kind goes to the module
//! that delivers it (`delivery` for agent-to-agent announces, `subagents` for sub-agent ones).

use super::outbox::{Attempt, AttemptFuture, Dispatcher, OutboxRow, A2A_ANNOUNCE, SUBAGENT_ANNOUNCE};
use super::state::Orchestrator;
use super::task::BusyGuard;
use super::{delivery, subagents, tasks, yields};
use crate::host::Event;
use serde_json::Value;

impl Dispatcher for Orchestrator {
    fn attempt(&self, row: OutboxRow) -> AttemptFuture {
        // The worker holds the orchestrator weakly; an attempt holds it for its duration.
        let this = if self.runs().is_closed() { None } else { self.me() };
        Box::pin(async move {
            let Some(this) = this else { return Attempt::Retry("the store is closing".to_owned()) };
            let _busy = BusyGuard::new(this.host().clone());
            match row.kind.as_str() {
                A2A_ANNOUNCE => delivery::attempt_a2a(&this, row).await,
                SUBAGENT_ANNOUNCE => subagents::attempt_announce(&this, row).await,
                other => Attempt::Failed(format!("unknown outbox item kind: {other}")),
            }
        })
    }

    fn settled(&self, row: &OutboxRow, status: &str, attempts: u32, error: Option<&str>) {
        if row.kind == SUBAGENT_ANNOUNCE {
            if let Some(this) = self.me() {
                subagents::announce_settled(&this, row, status, attempts, error);
                // the task ledger keeps the completion's outcome; a yield of the requester
                // may be waiting for it
                let (o, requester, status) = (this.clone(), row.session_key.clone(), status.to_owned());
                let run_id = row.payload.get("runId").and_then(Value::as_str).map(str::to_owned);
                this.spawn_busy(async move {
                    if let Some(run_id) = run_id {
                        tasks::completion_settled(&o, &run_id, &status).await;
                    }
                    if let Some(requester) = requester {
                        yields::check(&o, &requester).await;
                    }
                });
            }
        }
    }

    fn emit(&self, event: Event) {
        self.host().emit(event);
    }

    fn kinds(&self) -> [Option<&'static str>; 2] {
        [self.host().can_deliver().then_some(A2A_ANNOUNCE), self.host().can_run().then_some(SUBAGENT_ANNOUNCE)]
    }
}
