//! Shared by the tests of `spawn` and of the sub-agent registry: an orchestrator over a fake
//! host, and bounded waits.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::config::Config;
use crate::engine::Engine;
pub use crate::host::testing::FakeHost;
use crate::host::AgentRunRequest;
use crate::host::Lane;
use crate::orchestrate::state::Orchestrator;
use crate::store::Store;

pub fn tmp_db() -> String {
    let dir = crate::scratch::path("sub");
    dir.join("s.db").to_string_lossy().into_owned()
}

pub async fn open_at(path: &str, config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
    let engine = Engine::new(Store::open(path).unwrap(), Config::from_json(&config).unwrap(), None);
    let o = Orchestrator::new(Arc::new(engine), host);
    o.start().await.unwrap();
    o
}

pub async fn open(config: Value, host: Arc<FakeHost>) -> Arc<Orchestrator> {
    open_at(":memory:", config, host).await
}

pub async fn spawn(o: &Arc<Orchestrator>, params: Value, ctx: Value) -> Value {
    o.tool(crate::tools::Tool::SessionsSpawn, params, ctx, false).await.unwrap()
}

/// Polls `check` every 10 ms for at most 20 s (generous: a loaded machine is slow, and a
/// state that is reached ends the wait at once).
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(check(), "still waiting after 20 s: {what}");
}

pub fn record(o: &Orchestrator, run_id: &str) -> Option<SubagentRun> {
    o.engine().store().read(|db| db.subagent_run(run_id)).unwrap()
}

pub fn requests_in(host: &FakeHost, lane: Lane) -> Vec<AgentRunRequest> {
    host.requests().into_iter().filter(|r| r.options.lane == lane).collect()
}

/// A host: child runs answer `child says hi`, every other run `ok`.
pub fn replying_host() -> Arc<FakeHost> {
    Arc::new(FakeHost::new(|req| {
        Box::pin(async move {
            let text = if req.options.lane == Lane::Subagent { "child says hi" } else { "ok" };
            Ok(json!({"reply": text}))
        })
    }))
}

pub fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Whether the announce of `run_id` was delivered.
pub fn announced(o: &Orchestrator, run_id: &str) -> bool {
    record(o, run_id).is_some_and(|r| r.announce.status == "delivered")
}

/// A host whose `nested` runs on the requester hold until the gate opens.
pub fn gated_host(gate: tokio::sync::watch::Receiver<bool>) -> Arc<FakeHost> {
    Arc::new(FakeHost::new(move |req: AgentRunRequest| {
        let mut gate = gate.clone();
        Box::pin(async move {
            match req.options.lane {
                Lane::Nested => {
                    let _ = gate.wait_for(|open| *open).await;
                    Ok(json!({"reply": "busy done"}))
                }
                Lane::Subagent => Ok(json!({"reply": format!("result of {}", req.message)})),
                Lane::Announce => Ok(json!({"reply": "ok"})),
            }
        })
    }))
}

/// Starts a run on `key` that holds it (a `nested` run of `gated_host`); its id.
pub fn busy_run(o: &Arc<Orchestrator>, key: &str) -> String {
    let spec = crate::orchestrate::runs::RunSpec {
        session_key: key.into(),
        message: "busy".into(),
        provenance: crate::orchestrate::runs::Provenance { kind: "inter_session", source_session_key: None },
        options: crate::host::RunOptions::new(Lane::Nested, 30_000, "c"),
        chain_limit: None,
    };
    o.runs().start(o.engine().clone(), o.host().clone(), spec).unwrap().unwrap()
}
