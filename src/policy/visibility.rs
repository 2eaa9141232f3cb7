//! Session visibility (OPENCLAW-2026.9.md §1.9): may this requester see that session, and if
//! not, the exact text that says why. One decision for every session tool: `sessions_list`
//! filters its rows with it, `sessions_history`, `sessions_send` and `sessions_spawn` refuse
//! with its text.
//!
//! The decision, in order: an incognito key is never visible; a row the requester owns
//! (`ownerSessionKey`, `spawnedBy` or `parentSessionKey` equal to the requester's key, or any
//! row of its agent when the requester is that agent's main session under `tree`) is visible
//! under `tree|all` when it is of the same agent or a sub-agent/ACP key; another agent's row is
//! visible only under `all` and then as `tools.agentToAgent` allows; a row of the same agent is
//! visible under `self` only when it is the requester's own session, under `tree` only when
//! owned, under `agent|all` always. A sandboxed requester whose sandbox visibility is `spawned`
//! gets `tree` whatever is configured (2026.9).
//!
//! Under the 2026.1 contract the same function reproduces that gateway: visibility `all`, no
//! sandbox clamp, no incognito keys, so cross-agent access is the a2a policy alone.
//!
//! Pure: the caller reads the rows and passes the fields that matter. Never touches the store.

use crate::config::{AgentToAgentConfig, Config, SessionVisibility, Visibility};
use crate::keys::{js_trim, normalize_agent_id};
use crate::keys9;
use crate::policy::a2a::{self, A2aDecision};
use crate::policy::sandbox;

/// What the requester is doing to the target (it names the setting in the denial texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    List,
    History,
    Send,
    Spawn,
    Status,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::History => "history",
            Action::Send => "send",
            Action::Spawn => "spawn",
            Action::Status => "status",
        }
    }
    /// `Session list` / `Session <action>`.
    fn prefix(self) -> String {
        format!("Session {}", self.as_str())
    }
}

/// Why a session is not visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    Incognito,
    CrossAgentRestricted,
    AgentToAgentDisabled,
    AgentToAgentNotAllowed,
    SelfRestricted,
    TreeRestricted,
}

impl Denial {
    /// The gateway's text for this denial (all are `forbidden`). `target` is the key as shown
    /// to the requester; only the incognito text names it.
    pub fn text(self, action: Action, target: Option<&str>) -> String {
        let prefix = action.prefix();
        match self {
            Denial::Incognito => match target {
                Some(t) if !t.is_empty() => format!("Session not visible from session tools: {t}"),
                _ => "Session not visible from session tools".to_string(),
            },
            Denial::CrossAgentRestricted => format!(
                "{prefix} visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs."
            ),
            Denial::AgentToAgentDisabled => match action {
                Action::Send => "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends.".to_string(),
                Action::List => "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility.".to_string(),
                other => format!(
                    "Agent-to-agent {} is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.",
                    other.as_str()
                ),
            },
            Denial::AgentToAgentNotAllowed => {
                let what = match action {
                    Action::Send => "messaging",
                    Action::List => "listing",
                    other => other.as_str(),
                };
                format!("Agent-to-agent {what} denied by tools.agentToAgent.allow.")
            }
            Denial::SelfRestricted => {
                format!("{prefix} visibility is restricted to the current session (tools.sessions.visibility=self).")
            }
            Denial::TreeRestricted => format!(
                "{prefix} visibility is restricted to the current session tree (tools.sessions.visibility=tree)."
            ),
        }
    }
}

/// `agent:<id>:(dashboard|subagent|internal-session-effects):incognito-<x>` (no further `:`),
/// compared trimmed and lower-cased: a process-only session no tool may see.
pub fn is_incognito_key(key: &str) -> bool {
    let raw = js_trim(key).to_lowercase();
    let Some(rest) = raw.strip_prefix("agent:") else { return false };
    let Some((agent, rest)) = rest.split_once(':') else { return false };
    if agent.is_empty() {
        return false;
    }
    let Some((kind, tail)) = rest.split_once(':') else { return false };
    matches!(kind, "dashboard" | "subagent" | "internal-session-effects")
        && tail.strip_prefix("incognito-").is_some_and(|id| !id.is_empty() && !id.contains(':'))
}

/// Who is looking, decided once per tool call.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// the effective visibility (after the sandbox clamp)
    pub mode: SessionVisibility,
    /// the requester's canonical key (the configured main session when the caller gave none)
    pub key: String,
    /// the requester's agent (normalized)
    pub agent: String,
    /// the requester agent's main session key; None for a requester restricted to what it
    /// spawned
    pub main_session_key: Option<String>,
    /// a sandboxed requester that sees only the sessions it spawned (list and resolution)
    pub restrict_to_spawned: bool,
    /// the mode was forced to `tree` by the sandbox
    pub clamped: bool,
    a2a: AgentToAgentConfig,
    incognito_hidden: bool,
}

/// The fields of a target row the decision reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// the canonical key
    pub key: &'a str,
    /// its agent (normalized)
    pub agent: &'a str,
    pub owner_session_key: Option<&'a str>,
    pub spawned_by: Option<&'a str>,
    pub parent_session_key: Option<&'a str>,
}

/// The effective visibility: the configured one, forced to `tree` for a sandboxed caller whose
/// sandbox visibility (per agent, else the default) is `spawned` when the contract clamps.
pub fn effective_mode(cfg: &Config, sandboxed: bool, requester_agent: &str) -> SessionVisibility {
    let configured = cfg.session_visibility;
    if sandboxed && cfg.rules().sandbox_clamps_to_tree && cfg.visibility_for(requester_agent) == Visibility::Spawned {
        SessionVisibility::Tree
    } else {
        configured
    }
}

impl Viewer {
    /// The viewer for a requester: `requester_key` is its canonical key (None when the caller
    /// gave none: it then counts as the configured main session), `requester_agent` its agent.
    pub fn new(cfg: &Config, sandboxed: bool, requester_key: Option<&str>, requester_agent: &str) -> Viewer {
        let km = cfg.key_model();
        let agent = normalize_agent_id(requester_agent);
        let restrict_to_spawned = sandbox::restrict_to_spawned(cfg, sandboxed, requester_key, &agent);
        let mode = effective_mode(cfg, sandboxed, &agent);
        let key = requester_key.map_or_else(|| km.main_session_key(), str::to_string);
        Viewer {
            mode,
            main_session_key: (!restrict_to_spawned).then(|| km.main_session_key_of(&agent)),
            clamped: mode != cfg.session_visibility,
            key,
            agent,
            restrict_to_spawned,
            a2a: cfg.agent_to_agent.clone(),
            incognito_hidden: cfg.rules().incognito_hidden,
        }
    }

    /// Whether the requester is its agent's main session (what makes `tree` cover the agent).
    pub fn is_main(&self) -> bool {
        self.main_session_key.as_deref() == Some(self.key.as_str())
    }

    /// Whether the row names the requester as its owner, spawner or parent.
    pub fn owns(&self, t: &Target<'_>) -> bool {
        let me = Some(self.key.as_str());
        t.owner_session_key == me || t.spawned_by == me || t.parent_session_key == me
    }

    /// The decision for one target row.
    pub fn check(&self, t: &Target<'_>) -> Result<(), Denial> {
        if self.incognito_hidden && is_incognito_key(t.key) {
            return Err(Denial::Incognito);
        }
        let own_session = t.key == self.key || t.key == "current";
        let tree = self.mode == SessionVisibility::Tree;
        let owned = self.owns(t) || (tree && t.agent == self.agent && self.is_main());
        let cross_agent = t.agent != self.agent;
        let tree_or_all = matches!(self.mode, SessionVisibility::Tree | SessionVisibility::All);
        if !own_session && owned && tree_or_all && (!cross_agent || keys9::is_acp(t.key) || keys9::is_subagent(t.key)) {
            return Ok(());
        }
        if cross_agent {
            if self.mode != SessionVisibility::All {
                return Err(Denial::CrossAgentRestricted);
            }
            return match a2a::check(&self.a2a, &self.agent, t.agent) {
                A2aDecision::Allowed => Ok(()),
                A2aDecision::Disabled => Err(Denial::AgentToAgentDisabled),
                A2aDecision::Denied => Err(Denial::AgentToAgentNotAllowed),
            };
        }
        match self.mode {
            SessionVisibility::SelfOnly if !own_session => Err(Denial::SelfRestricted),
            SessionVisibility::Tree if !own_session && !owned => Err(Denial::TreeRestricted),
            _ => Ok(()),
        }
    }

    /// The `visibility` block of a 2026.9 listing (None under `all`).
    pub fn list_notice(&self) -> Option<serde_json::Value> {
        let scope = match self.mode {
            SessionVisibility::All => return None,
            SessionVisibility::SelfOnly => "current session only",
            SessionVisibility::Tree if self.restrict_to_spawned => {
                "current session + own spawn subtree (sandbox: spawned sessions only)"
            }
            SessionVisibility::Tree => {
                "current session + own spawn subtree; the main session sees all sessions of its agent"
            }
            SessionVisibility::Agent => "all sessions of this agent",
        };
        let mode = self.mode.as_str();
        Some(serde_json::json!({
            "mode": mode,
            "restricted": true,
            "warning": format!(
                "Session visibility is restricted (effective tools.sessions.visibility={mode}: {scope}). Sessions outside that scope are omitted from results and count."
            ),
        }))
    }
}

/// The agent of a key as 2026.9 reads it: its agent from the key, else the configured
/// default agent (a malformed `agent:` key too: callers skip those rows first).
pub fn target_agent(cfg: &Config, key: &str) -> String {
    let default = cfg.key_model().default_agent();
    keys9::agent_of(key, default).unwrap_or_else(|| default.to_string())
}

#[cfg(test)]
#[path = "visibility_tests.rs"]
mod tests;
