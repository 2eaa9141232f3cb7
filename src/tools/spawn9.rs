//! `sessions_spawn` under the 2026.9 contract (OpenClaw 2026.9 §1.4): the parameters it refuses
//! outright (channel-delivery parameters, `timeoutSeconds`), `taskName` (pattern and reserved
//! words), the admission refusals (spawn depth from the stored lineage, active children,
//! `requireAgentId`, the `allowAgents` target policy, the sandbox), and the completion note of
//! an accepted spawn. Pure reading and texts; the spawn itself is the orchestration's.

use serde_json::Value;

use crate::error::{Error, Result};

/// Parameters 2026.9 refuses: a spawn never delivers to a channel itself.
pub const CHANNEL_DELIVERY_PARAMS: [&str; 8] =
    ["target", "transport", "channel", "to", "threadId", "thread_id", "replyTo", "reply_to"];
/// Reserved `taskName` values (subagent targets).
pub const RESERVED_TASK_NAMES: [&str; 2] = ["all", "last"];
pub const REQUIRE_AGENT_ID: &str =
    "sessions_spawn requires explicit agentId when requireAgentId is configured. Provide an allowed configured agentId.";
pub const SANDBOXED_TO_UNSANDBOXED: &str =
    "Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.";
pub const REQUIRE_NEEDS_SANDBOX: &str = "sessions_spawn sandbox=\"require\" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox=\"inherit\".";
pub const FORK_SAME_AGENT: &str =
    "context=\"fork\" currently requires the same target agent as the requester; use context=\"isolated\" for cross-agent spawns.";
pub const COMPLETION_TARGET_VALUES: &str = "sessions_spawn completionTarget must be \"parent\" or omitted.";
/// The completion note of an accepted spawn that expects a completion message.
pub const COMPLETION_NOTE: &str = "The final reply returns to the requester as a completion event. Continue any independent work. Wait for completion events for ALL required children before your final answer; never busy-poll. If a completion arrives after your final answer, reply ONLY with NO_REPLY.";

/// The refusals thrown before anything else is read (a `ToolInputError` in 2026.9).
pub fn check_unsupported(params: &Value) -> Result<()> {
    let has = |k: &str| params.as_object().is_some_and(|o| o.contains_key(k));
    if let Some(p) = CHANNEL_DELIVERY_PARAMS.iter().find(|k| has(k)) {
        return Err(Error::invalid_request(format!(
            "sessions_spawn does not support \"{p}\"; remove channel-delivery parameters."
        )));
    }
    if let Some(p) = ["timeoutSeconds", "timeout_seconds"].iter().find(|k| has(k)) {
        return Err(Error::invalid_request(format!(
            "sessions_spawn does not support \"{p}\". Use \"runTimeoutSeconds\" for a per-run timeout."
        )));
    }
    match params.get("completionTarget") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if s == "parent" => Ok(()),
        Some(_) => Err(Error::invalid_request(COMPLETION_TARGET_VALUES)),
    }
}

/// `taskName`: absent when blank; otherwise `[a-z][a-z0-9_-]{0,63}` and not reserved. `Err` is
/// the `error` payload's text.
pub fn task_name(params: &Value) -> std::result::Result<Option<String>, String> {
    let Some(name) = params.get("taskName").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !first_ok || !rest_ok || name.len() > 64 {
        return Err(format!("Invalid taskName \"{name}\". Use 1-64 chars matching [a-z][a-z0-9_-]*."));
    }
    if RESERVED_TASK_NAMES.contains(&name) {
        return Err(format!(
            "Invalid taskName \"{name}\". Reserved subagent targets cannot be used as taskName values."
        ));
    }
    Ok(Some(name.to_owned()))
}

/// `forbidden` when a caller at `depth` may not spawn under `max` (`visible` spawns omit the
/// config-key suffix).
pub fn depth_refusal(depth: u32, max: u32) -> Option<String> {
    (depth >= max).then(|| {
        format!(
            "sessions_spawn is not allowed at this depth (current depth: {depth}, max: {max}; agents.defaults.subagents.maxSpawnDepth)."
        )
    })
}

/// `forbidden` when `active` children already reach `max`.
pub fn children_refusal(active: u64, max: u32) -> Option<String> {
    (active >= u64::from(max)).then(|| {
        format!(
            "sessions_spawn has reached max active children for this session ({active}/{max}; agents.defaults.subagents.maxChildrenPerAgent)."
        )
    })
}

/// The `allowAgents` target policy: `allow` is the requester agent's list, else the defaults';
/// `configured` the agent registry. `None` when `target` may be spawned.
pub fn target_refusal(
    requester: &str,
    target: &str,
    requested: bool,
    allow: Option<&[String]>,
    configured: &[String],
) -> Option<String> {
    if !requested && target == requester {
        return None;
    }
    let any = allow.is_some_and(|a| a.iter().any(|x| x.trim() == "*"));
    let listed: Vec<String> =
        allow.unwrap_or(&[]).iter().map(|x| x.trim().to_lowercase()).filter(|x| x != "*").collect();
    let mut allowed: Vec<String> = if any {
        let mut ids = configured.to_vec();
        ids.push(requester.to_owned());
        ids
    } else if allow.is_none() {
        vec![requester.to_owned()]
    } else {
        listed.iter().filter(|id| configured.contains(id)).cloned().collect()
    };
    allowed.sort();
    allowed.dedup();
    if allowed.iter().any(|a| a == target) {
        return None;
    }
    let text = if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") };
    Some(if any || listed.iter().any(|l| l == target) {
        format!("agentId \"{target}\" is not in the configured agent registry (allowed: {text})")
    } else {
        format!("agentId is not allowed for sessions_spawn (allowed: {text})")
    })
}

/// The sandbox refusal, if any: a sandboxed requester needs a sandboxed child; `require` needs
/// one too.
pub fn sandbox_refusal(requester_sandboxed: bool, child_sandboxed: bool, require: bool) -> Option<&'static str> {
    if child_sandboxed || (!requester_sandboxed && !require) {
        return None;
    }
    Some(if requester_sandboxed { SANDBOXED_TO_UNSANDBOXED } else { REQUIRE_NEEDS_SANDBOX })
}

#[cfg(test)]
#[path = "spawn9_tests.rs"]
mod tests;
