//! Waiting for a run (`agent.wait`): its outcome, or `timeout` when it has not ended in time;
//! runs of an earlier process or another store answer from the store, read again at most a
//! second apart while they go on.

use std::sync::Arc;

use super::*;

/// The longest pause between two reads of a run another store executes.
const FOREIGN_POLL_MAX: Duration = Duration::from_secs(1);

impl Runs {
    /// `agent.wait`: the run's outcome, or `timeout` when it has not ended within `timeout_ms`
    /// (the run goes on). Runs of an earlier process answer from the store.
    pub async fn wait(&self, engine: &Arc<Engine>, run_id: &str, timeout_ms: u64) -> Result<RunSnapshot> {
        let rx = lock(&self.live).get(run_id).map(|tx| tx.subscribe());
        let pending = RunSnapshot {
            run_id: run_id.to_owned(),
            status: RunStatus::Timeout,
            started_at: None,
            ended_at: None,
            error: None,
        };
        if let Some(mut rx) = rx {
            let started_at = rx.borrow().started_at;
            let done = tokio::time::timeout(
                Duration::from_millis(timeout_ms),
                rx.wait_for(|s| s.status != RunStatus::Running),
            )
            .await
            .map(|r| r.map(|s| s.clone()));
            return Ok(match done {
                Ok(Ok(s)) => s,
                // settled between the lookup and the subscription: the store has it
                Ok(Err(_)) => self.stored(engine, run_id).await?.unwrap_or(pending),
                Err(_) => RunSnapshot { started_at, ..pending },
            });
        }
        // a run of another store (another process, or one whose owner is gone and is about to
        // be taken over): its end is only in the store, so it is read again and again, soon at
        // first, then every second, until the wait's time is up
        let end = tokio::time::Instant::now() + Duration::from_millis(timeout_ms.min(60_000));
        let mut step = Duration::from_millis(50);
        let mut started_at = None;
        loop {
            match self.stored(engine, run_id).await? {
                Some(s) if s.status != RunStatus::Running => return Ok(s),
                other => started_at = other.and_then(|o| o.started_at).or(started_at),
            }
            let now = tokio::time::Instant::now();
            if now >= end {
                return Ok(RunSnapshot { started_at, ..pending });
            }
            tokio::time::sleep(step.min(end - now)).await;
            step = (step * 2).min(FOREIGN_POLL_MAX);
        }
    }

    pub(super) async fn stored(&self, engine: &Arc<Engine>, run_id: &str) -> Result<Option<RunSnapshot>> {
        let e = engine.clone();
        let id = run_id.to_owned();
        let rec = blocking(move || e.store().read(|db| db.run(&id))).await?;
        Ok(rec.map(|r| RunSnapshot {
            run_id: r.run_id,
            status: RunStatus::parse(&r.status),
            started_at: r.started_at,
            ended_at: r.ended_at,
            error: r.error,
        }))
    }
}
