//! The steps of a 2026.9 `sessions_spawn` that need the store or the host (OpenClaw 2026.9
//! §1.4): admission (a private completion needs a stored requester, spawn depth from the stored
//! lineage, active children, the sandbox of requester and child), the binding of a child to a
//! channel thread through the host's optional `bindThread`, and the staging of its attachments
//! through the host's optional `stageAttachments`. The texts are `tools::spawn9`'s;
//! starting and registering the child is `spawn`'s. Never writes anything itself.

use std::sync::Arc;

use serde_json::{json, Value};

use super::state::Orchestrator;
use super::task::blocking;
use crate::entry::{self, DeliveryContext};
use crate::error::Result;
use crate::host::failure_text;
use crate::tools::spawn::SpawnRequest;
use crate::tools::{attach9, bytes9, refusal, spawn9, ToolContext};

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

/// Whether a child of `target_agent` runs sandboxed (told to the host staging attachments).
pub fn child_sandboxed(orch: &Orchestrator, target_agent: &str, admitted: &Admitted) -> bool {
    let cfg = orch.engine().config();
    spawn9::session_sandboxed(cfg.sandbox_mode_for(target_agent), false, admitted.sandbox_required)
}

/// Staged attachments: the spawn's receipt and what the child's system prompt gains.
pub struct Staged {
    pub receipt: Value,
    pub prompt_suffix: String,
}

/// What a staging is asked for.
pub struct StageAsk<'a> {
    pub opts9: &'a spawn9::Options,
    pub child_key: &'a str,
    pub target_agent: &'a str,
    pub sandboxed: bool,
}

/// 2026.9 `attachments`: checked against `tools.sessions_spawn.attachments`, then staged by the
/// host's `stageAttachments`. `Ok(None)` when the spawn carries none; `Err` is the refusal
/// payload (no `childSessionKey`, as 2026.9 answers).
pub async fn stage_attachments(
    orch: &Arc<Orchestrator>,
    ask: StageAsk<'_>,
) -> Result<std::result::Result<Option<Staged>, Value>> {
    let limits = orch.engine().config().spawn_attachments;
    let list = &ask.opts9.attachments;
    match attach9::requested(list, &limits) {
        Ok(None) => return Ok(Ok(None)),
        Ok(Some(())) => {}
        Err((status, text)) => return Ok(Err(refusal(status, text))),
    }
    let files = match attach9::prepare(list, &limits) {
        Ok(files) => files,
        Err(text) => return Ok(Err(refusal("error", text))),
    };
    if !orch.host().can_stage_attachments() {
        return Ok(Err(refusal("error", attach9::NO_STAGING)));
    }
    let id = uuid::Uuid::new_v4().to_string();
    let receipt = attach9::receipt(&files, &id);
    let listed: Vec<Value> = files
        .iter()
        .zip(receipt["files"].as_array().into_iter().flatten())
        .map(|(f, r)| {
            json!({"name": f.name, "mimeType": f.mime_type, "bytes": f.data.len(), "sha256": r["sha256"],
                   "contentBase64": bytes9::base64_encode(&f.data)})
        })
        .collect();
    let ask_host = json!({
        "childSessionKey": ask.child_key,
        "agentId": ask.target_agent,
        "attachmentId": id,
        "sandboxed": ask.sandboxed,
        "retainOnSessionKeep": limits.retain_on_keep,
        "files": listed,
    });
    let dir = match orch.host().stage_attachments(ask_host).await {
        Err(e) => return Ok(Err(refusal("error", failure_text(e, "stageAttachments")))),
        Ok(answer) => match (answer.get("error").and_then(Value::as_str), answer.get("dir").and_then(Value::as_str)) {
            (Some(text), _) => {
                let status = if answer.get("status").and_then(Value::as_str) == Some("forbidden") {
                    "forbidden"
                } else {
                    "error"
                };
                return Ok(Err(refusal(status, text)));
            }
            (None, Some(dir)) if !dir.trim().is_empty() => dir.to_owned(),
            _ => return Ok(Err(refusal("error", attach9::MATERIALIZATION_FAILED))),
        },
    };
    let block = match attach9::path_block(&dir, &files) {
        Ok(block) => block,
        Err(text) => {
            // staged already: the host drops the files again
            let drop = json!({"childSessionKey": ask.child_key, "agentId": ask.target_agent, "attachmentId": id, "discard": true});
            let _ = orch.host().stage_attachments(drop).await;
            return Ok(Err(refusal("error", text)));
        }
    };
    let prompt_suffix = attach9::prompt_suffix(&files, &block, attach9::mount_hint(ask.opts9.mount_path.as_deref()));
    Ok(Ok(Some(Staged { receipt, prompt_suffix })))
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

/// Releases the thread binding of a child whose spawn failed after it was bound (`bound`), as
/// 2026.9 does when it deletes the provisional child session: the host's `unbindThread` with
/// `{targetSessionKey, reason: "session-delete"}`. A failing callback is reported as event
/// `subagent.thread_unbind_failed`; the spawn's own answer stays the refusal.
pub async fn release_thread(orch: &Arc<Orchestrator>, bound: bool, child_key: &str) {
    if !bound {
        return;
    }
    let req = json!({"targetSessionKey": child_key, "reason": "session-delete"});
    if let Err(e) = orch.host().unbind_thread(req).await {
        orch.emit("subagent.thread_unbind_failed", None, Some(child_key), json!({"error": e}));
    }
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
