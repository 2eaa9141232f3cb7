//! Waiting for a run (`agent.wait`): its outcome, or `timeout` when it has not ended in time;
//! runs of an earlier process answer from the store.

use std::sync::Arc;

use super::*;

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
        match self.stored(engine, run_id).await? {
            Some(s) if s.status != RunStatus::Running => Ok(s),
            other => {
                tokio::time::sleep(Duration::from_millis(timeout_ms.min(60_000))).await;
                match self.stored(engine, run_id).await? {
                    Some(s) if s.status != RunStatus::Running => Ok(s),
                    _ => Ok(RunSnapshot { started_at: other.and_then(|o| o.started_at), ..pending }),
                }
            }
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
