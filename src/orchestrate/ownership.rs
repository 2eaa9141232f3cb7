//! An open store's lease at work (API.md §1.7): taken on open, renewed by a heartbeat every
//! third of the setting `ownership.leaseMs`, released by a clean close, and the *takeover pass* that
//! each open and each heartbeat makes: renew this lease (a transaction of its own, which on
//! PostgreSQL never waits for the write lock), then in one write reap the owners that
//! [`Lease::holds`] says are gone and end their runs as interrupted; then let the sub-agent
//! registry announce what they left, resume the yields whose resume they cut short, and wake
//! the outbox worker for their pending announces.
//!
//! The rule itself is `crate::owner`'s; the SQL is `src/store/`'s. This module decides when the
//! pass runs, never whether an owner is gone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::runs::{RunStatus, INTERRUPTED};
use super::state::Orchestrator;
use super::task::blocking;
use super::{subagents, yields};
use crate::error::Result;

/// What one takeover pass found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Takeover {
    /// whether this lease was still on record (`false`: it had lapsed and been reaped, or it
    /// was taken just now)
    pub renewed: bool,
    /// the owners found gone
    pub reaped: Vec<String>,
    /// the runs ended as interrupted
    pub ended: Vec<String>,
}

impl Takeover {
    fn took_something(&self) -> bool {
        !self.reaped.is_empty() || !self.ended.is_empty()
    }
}

impl Orchestrator {
    /// Records this store's lease, then takes over what gone owners left (before the sub-agent
    /// recovery and the outbox worker start, so both see it). The start of an open.
    pub(super) async fn take_lease(self: &Arc<Self>) -> Result<Takeover> {
        self.pass(true).await
    }

    /// One takeover pass: renews the lease, ends the runs of gone owners, then announces their
    /// sub-agents and wakes the outbox for their claims (awaited here; the heartbeat does the
    /// same without waiting for the announcing part).
    pub async fn take_over(self: &Arc<Self>) -> Result<Takeover> {
        let found = self.renew_and_reap().await?;
        if found.took_something() {
            self.adopt_left().await?;
        }
        Ok(found)
    }

    /// The lease's part of a pass: one write.
    async fn renew_and_reap(&self) -> Result<Takeover> {
        let found = self.pass(false).await?;
        if !found.renewed {
            self.emit(
                "store.error",
                None,
                None,
                json!({"error": "this store's lease had lapsed (it renewed too late); work it held may have been taken over by another owner"}),
            );
        }
        Ok(found)
    }

    /// What gone owners left: their sub-agents announced, the yields whose resume they cut short
    /// resumed again, their outbox claims free.
    async fn adopt_left(self: &Arc<Self>) -> Result<()> {
        subagents::adopt(self).await?;
        yields::adopt(self).await?;
        self.outbox().wake();
        Ok(())
    }

    async fn pass(&self, first: bool) -> Result<Takeover> {
        let (e, lease) = (self.engine().clone(), self.lease().clone());
        let length = crate::owner::lease_ms(&e.config());
        blocking(move || {
            // the renewal first, on its own: it never waits behind other writes on PostgreSQL
            let renewed = if first { None } else { Some(lease.renew(e.store(), length)?) };
            e.store().write(|db| {
                match renewed {
                    None => lease.acquire(db, length)?,
                    Some(false) => lease.restore(db, length)?,
                    Some(true) => {}
                }
                let now = lease.now(db)?;
                let reaped = lease.reap(db, now)?;
                let ended = db.end_unheld_runs(now, RunStatus::Error.as_str(), INTERRUPTED)?;
                Ok(Takeover { renewed: renewed.unwrap_or(true), reaped, ended })
            })
        })
        .await
    }

    /// Starts the heartbeat: a takeover pass every third of the lease length (read again each
    /// time, so `setConfig` applies), until [`Orchestrator::release_lease`]. Started as soon as
    /// the lease is taken, so that a slow open (its recovery) never outlasts the lease, and the
    /// renewal never waits for the announcing part of a pass.
    pub(super) fn start_heartbeat(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(me) = weak.upgrade() else { return };
                let every = Duration::from_millis((crate::owner::lease_ms(&me.engine().config()) / 3).max(1));
                let stop = me.heartbeat.clone();
                drop(me);
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.notified() => return,
                }
                let Some(me) = weak.upgrade() else { return };
                if me.runs().is_closed() {
                    return;
                }
                // the renewal is one write of its own; announcing what gone owners left (a read
                // and writes per record, slow under load) goes on beside the next renewals
                match me.renew_and_reap().await {
                    Ok(found) if found.took_something() => {
                        let adopter = me.clone();
                        tokio::spawn(async move {
                            if let Err(err) = adopter.adopt_left().await {
                                adopter.report(&err);
                            }
                        });
                    }
                    Ok(_) => {}
                    Err(err) => me.report(&err),
                }
            }
        });
    }

    fn report(&self, err: &crate::error::Error) {
        if !self.runs().is_closed() {
            self.emit("store.error", None, None, json!({"error": err.message()}));
        }
    }

    /// Stops the heartbeat and ends the lease at once (the clean close): this store's claims are
    /// free for others now. Blocks on one write; call after the runs are closed.
    pub(super) fn release_lease(&self) {
        self.heartbeat.notify_one();
        let lease = self.lease().clone();
        let _ = self.engine().store().write(|db| lease.release(db));
    }
}

#[cfg(test)]
#[path = "ownership_tests.rs"]
mod tests;
