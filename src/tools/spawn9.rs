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

/// `completionTarget: "parent"` with a mode that cannot hand a result back privately.
pub const COMPLETION_PARENT_NEEDS_RUN: &str = "sessions_spawn completionTarget=\"parent\" requires mode=\"run\", thread=false, collect=false, and completion notifications enabled.";
/// `completionTarget: "parent"` from a caller without a stored session.
pub const COMPLETION_PARENT_NEEDS_SESSION: &str =
    "Private completion requires an existing requester session. Retry from an active session.";
/// `mode: "session"` without `thread: true`.
pub const SESSION_MODE_NEEDS_THREAD: &str = "sessions_spawn(mode=\"session\") requires thread=true so the subagent can stay bound to a channel thread. Retry with { mode: \"session\", thread: true } on a channel that supports threads, or use mode=\"run\" for one-shot work.";
/// The completion note of a `completionTarget: "parent"` spawn.
pub const COMPLETION_NOTE_PARENT: &str = "The result returns privately to the requester. No result is automatically sent to a channel; the requester may review, continue work, or remain silent. Continue independent work; completion will trigger a private requester turn. Never busy-poll.";
/// The completion note of a spawn without a completion message.
pub const COMPLETION_NOTE_QUIET: &str =
    "Quiet run: no completion notification is sent. Do not wait for an announcement.";
/// The completion note of a session bound to a thread that delivers there itself.
pub const COMPLETION_NOTE_THREAD: &str =
    "The final reply is delivered directly to the bound thread, without a separate parent completion notification.";
/// Added to the note (and the child's first message) of a `mode: "session"` spawn.
pub const PERSISTENT_SESSION_NOTE: &str =
    "This subagent session is persistent and remains available for thread follow-up messages.";

/// `thread: true` bound nothing.
pub const THREAD_BIND_EMPTY: &str =
    "Unable to create or bind a thread for this subagent session. Session mode is unavailable for this target.";
/// `completionTarget: "parent"` for a run that is not a hidden native sub-agent (thrown).
pub const COMPLETION_PARENT_HIDDEN: &str =
    "sessions_spawn completionTarget=\"parent\" requires a hidden native subagent run.";

/// The refusal of `thread: true` (or `mode: "session"`) where no thread can be bound: the
/// requester has no channel, or the host binds no threads.
pub fn thread_unavailable(session_mode: bool) -> &'static str {
    if session_mode {
        "sessions_spawn(mode=\"session\") is only available on channels that expose thread bindings (e.g. Discord threads, Slack threads, Telegram forum topics). This request is not running on a channel that can bind a subagent thread. Use mode=\"run\" for one-shot subagent work."
    } else {
        "thread=true is only available on channels that expose thread bindings (e.g. Discord threads, Slack threads, Telegram forum topics). This request is not running on a channel that can bind a subagent thread. Retry without thread=true, or re-run sessions_spawn from a channel that supports threads."
    }
}

/// What 2026.9 adds to a spawn beyond 2026.1's parameters, read and checked against each other.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// `sandbox: "require"`: the child must run sandboxed
    pub sandbox_require: bool,
    /// `lightContext: true`: the child starts with a light bootstrap
    pub light_context: bool,
    /// `thread: true`: bind the child to a channel thread
    pub thread: bool,
    /// the spawn mode is `session` (given, or implied by `thread: true`)
    pub session_mode: bool,
    /// `completionTarget: "parent"`: the result goes to a private requester turn
    pub completion_parent: bool,
    /// `context` as given (`fork` / `isolated`), None when omitted
    pub context: Option<&'static str>,
    /// `attachments` as given (empty when absent or not an array)
    pub attachments: Vec<Value>,
    /// `attachAs.mountPath`, trimmed
    pub mount_path: Option<String>,
}

impl Options {
    /// The spawn mode as the result names it.
    pub fn mode(&self) -> &'static str {
        if self.session_mode {
            "session"
        } else {
            "run"
        }
    }
}

/// Reads the 2026.9 options; `Err` is the `error` payload's text (the checks 2026.9 makes
/// before admission: completion target against mode, session mode without a thread).
pub fn options(params: &Value, expects_completion: bool) -> std::result::Result<Options, String> {
    let thread = params.get("thread") == Some(&Value::Bool(true));
    let session_mode = match params.get("mode").and_then(Value::as_str) {
        Some("session") => true,
        Some("run") => false,
        _ => thread,
    };
    let completion_parent = params.get("completionTarget").and_then(Value::as_str) == Some("parent");
    if completion_parent && (thread || session_mode || !expects_completion) {
        return Err(COMPLETION_PARENT_NEEDS_RUN.to_owned());
    }
    if session_mode && !thread {
        return Err(SESSION_MODE_NEEDS_THREAD.to_owned());
    }
    let context = match params.get("context").and_then(Value::as_str) {
        Some("fork") => Some("fork"),
        Some("isolated") => Some("isolated"),
        _ => None,
    };
    let mount_path = params
        .get("attachAs")
        .and_then(|a| a.get("mountPath"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    Ok(Options {
        sandbox_require: params.get("sandbox").and_then(Value::as_str) == Some("require"),
        light_context: params.get("lightContext") == Some(&Value::Bool(true)),
        thread,
        session_mode,
        completion_parent,
        context,
        attachments: params.get("attachments").and_then(Value::as_array).cloned().unwrap_or_default(),
        mount_path,
    })
}

/// How a child's result reaches its requester (2026.9's completion modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionMode {
    /// a completion handoff to the requester
    Announce,
    /// nothing is handed over
    Quiet,
    /// the child delivers to the thread it is bound to
    ThreadDirect,
}

/// The `note` of an accepted spawn: the completion mode's text, the persistent-session line of
/// a `session` spawn; none for a cron requester's announcing `run` spawn.
pub fn accepted_note(opts: &Options, mode: CompletionMode, cron_requester: bool) -> Option<String> {
    if mode == CompletionMode::Announce && !opts.session_mode && cron_requester {
        return None;
    }
    let completion = match mode {
        _ if opts.completion_parent => COMPLETION_NOTE_PARENT,
        CompletionMode::Announce => COMPLETION_NOTE,
        CompletionMode::Quiet => COMPLETION_NOTE_QUIET,
        CompletionMode::ThreadDirect => COMPLETION_NOTE_THREAD,
    };
    let mut note = completion.to_owned();
    if opts.session_mode {
        note.push(' ');
        note.push_str(PERSISTENT_SESSION_NOTE);
    }
    Some(note)
}

/// Whether a session runs sandboxed under its agent's `sandbox.mode` (`is_main`: the agent's
/// main session, which `non-main` leaves out) or because its entry says `sandbox: "required"`.
pub fn session_sandboxed(mode: crate::config::SandboxMode, is_main: bool, required: bool) -> bool {
    use crate::config::SandboxMode;
    required
        || match mode {
            SandboxMode::Off => false,
            SandboxMode::All => true,
            SandboxMode::NonMain => !is_main,
        }
}

/// A refused spawn (`error` / `forbidden`) with the requested `agentId` as `role`.
pub fn with_role(mut payload: Value, params: &Value) -> Value {
    let role = params.get("agentId").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let refused = matches!(payload.get("status").and_then(Value::as_str), Some("error" | "forbidden"));
    if let (Some(role), true, Some(o)) = (role, refused, payload.as_object_mut()) {
        o.insert("role".into(), role.into());
    }
    payload
}

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
        Some(Value::String(s)) if s == "parent" => {
            let acp = params.get("runtime").and_then(Value::as_str) == Some("acp");
            if acp || params.get("visible") == Some(&Value::Bool(true)) {
                return Err(Error::invalid_request(COMPLETION_PARENT_HIDDEN));
            }
            Ok(())
        }
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
