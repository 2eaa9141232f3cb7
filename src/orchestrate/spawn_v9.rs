//! The steps of a 2026.9 `sessions_spawn` that need the store or the host (OpenClaw 2026.9
//! §1.4): admission (a private completion needs a stored requester, spawn depth from the stored
//! lineage, active children, the sandbox of requester and child), and the binding of a child to
//! a channel thread through the host's optional `bindThread`. The texts are `tools::spawn9`'s;
//! starting and registering the child is `spawn`'s. Never writes anything itself.

use std::sync::Arc;

use serde_json::{json, Value};

use super::state::Orchestrator;
use super::task::blocking;
use crate::entry::{self, DeliveryContext};
use crate::error::Result;
use crate::host::failure_text;
use crate::tools::spawn::SpawnRequest;
use crate::tools::{refusal, spawn9, ToolContext};

/// What admission found out about the requester.
pub struct Admitted {
    /// the requester's depth in the stored lineage
    pub depth: u32,
    /// the requester's entry says `sandbox: "required"`: the child inherits it
    pub sandbox_required: bool,
}

/// 2026.9's admission, in its order: a private completion needs a stored requester session,
/// then spawn depth, active children, and the sandbox. `Err` is the refusal payload.
pub async fn admit(
    orch: &Arc<Orchestrator>,
    req: &SpawnRequest,
    ctx: &ToolContext,
    active: u64,
    max_children: u32,
) -> Result<std::result::Result<Admitted, Value>> {
    let cfg = orch.engine().config();
    let (e, k) = (orch.engine().clone(), req.requester_key.clone());
    let (depth, entry) = blocking(move || e.store().read(|db| Ok((db.spawn_depth(&k)?, db.session(&k)?)))).await?;
    if req.opts9.completion_parent && entry.as_ref().is_none_or(|e| entry::str_field(e, "sessionId").is_none()) {
        return Ok(Err(refusal("error", spawn9::COMPLETION_PARENT_NEEDS_SESSION)));
    }
    if let Some(text) = spawn9::depth_refusal(depth, cfg.subagents.max_spawn_depth) {
        return Ok(Err(refusal("forbidden", text)));
    }
    if let Some(text) = spawn9::children_refusal(active, max_children) {
        return Ok(Err(refusal("forbidden", text)));
    }
    let sandbox_required = entry.as_ref().and_then(|e| e.get("sandbox")).and_then(Value::as_str) == Some("required");
    let km = cfg.key_model();
    let requester_main = req.requester_key == km.main_session_key_of(&req.requester_agent);
    let requester_sandboxed = ctx.sandboxed
        || spawn9::session_sandboxed(cfg.sandbox_mode_for(&req.requester_agent), requester_main, sandbox_required);
    // a sub-agent session is never its agent's main session
    let child_sandboxed = spawn9::session_sandboxed(cfg.sandbox_mode_for(&req.target_agent), false, sandbox_required);
    if let Some(text) = spawn9::sandbox_refusal(requester_sandboxed, child_sandboxed, req.opts9.sandbox_require) {
        return Ok(Err(refusal("forbidden", text)));
    }
    Ok(Ok(Admitted { depth, sandbox_required }))
}

/// Whether the child will run sandboxed (for attachment staging).
pub fn child_sandboxed(orch: &Orchestrator, req: &SpawnRequest, admitted: &Admitted) -> bool {
    let cfg = orch.engine().config();
    spawn9::session_sandboxed(cfg.sandbox_mode_for(&req.target_agent), false, admitted.sandbox_required)
}

/// What a thread binding is asked for.
pub struct ThreadAsk<'a> {
    pub opts9: &'a spawn9::Options,
    /// the requester's route
    pub origin: &'a DeliveryContext,
    pub requester_key: &'a str,
    pub target_agent: &'a str,
    pub label: Option<&'a String>,
    pub child_key: &'a str,
}

/// Binds the child to a thread of the requester's channel through the host's `bindThread`:
/// the bound conversation, or the refusal text (2026.9's when there is no channel or no
/// callback, the host's own `{error}`, `Thread bind failed: …` when the callback fails).
pub async fn bind_thread(
    orch: &Arc<Orchestrator>,
    req: ThreadAsk<'_>,
) -> Result<std::result::Result<DeliveryContext, String>> {
    let origin = req.origin;
    let Some(channel) = origin.channel.clone().filter(|_| orch.host().can_bind_thread()) else {
        return Ok(Err(spawn9::thread_unavailable(req.opts9.session_mode).to_owned()));
    };
    let mut requester = origin.to_json();
    if let Some(o) = requester.as_object_mut() {
        o.insert("channel".into(), channel.clone().into());
    }
    let mut ask = json!({
        "childSessionKey": req.child_key,
        "agentId": req.target_agent,
        "mode": req.opts9.mode(),
        "requesterSessionKey": req.requester_key,
        "requester": requester,
    });
    if let Some(label) = req.label {
        ask["label"] = label.clone().into();
    }
    match orch.host().bind_thread(ask).await {
        Err(e) => Ok(Err(format!("Thread bind failed: {}", failure_text(e, "bindThread")))),
        Ok(Value::Object(o)) => {
            if let Some(text) = o.get("error").and_then(Value::as_str).filter(|t| !t.trim().is_empty()) {
                return Ok(Err(text.to_owned()));
            }
            let mut bound = DeliveryContext::of_object(Some(&Value::Object(o)));
            if bound.to.is_none() {
                return Ok(Err(spawn9::THREAD_BIND_EMPTY.to_owned()));
            }
            bound.channel.get_or_insert(channel);
            Ok(Ok(bound))
        }
        Ok(_) => Ok(Err(spawn9::THREAD_BIND_EMPTY.to_owned())),
    }
}
