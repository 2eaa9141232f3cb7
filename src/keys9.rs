//! Session key shapes as OpenClaw 2026.9 reads them (`packages/session-url-contract`,
//! `src/sessions/session-key-utils.ts`): a key is folded to lower case before it is parsed,
//! `agent:<id>:<rest>` needs a non-blank id and a rest that does not start with `:` (so
//! `agent::x` is malformed, where 2026.1 dropped the empty segment), and sub-agent/ACP keys are
//! recognised by the start of the key or of its rest. Used by the 2026.9 visibility rule and
//! the 2026.9 tools; the 2026.1 key model stays in [`crate::keys`]. Pure string functions.

use crate::keys::normalize_agent_id;

/// `agent:<id>:<rest>` of a 2026.9 key, folded to lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKey9 {
    /// normalized agent id
    pub agent_id: String,
    pub rest: String,
}

/// How 2026.9 classifies the shape of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    Missing,
    Agent,
    MalformedAgent,
    LegacyOrAlias,
}

/// `parseAgentSessionKey`: trimmed, lower-cased, `agent:` + non-blank id + `:` + a rest that
/// is non-empty and does not start with `:`.
pub fn parse(key: &str) -> Option<AgentKey9> {
    let folded = key.trim().to_lowercase();
    let body = folded.strip_prefix("agent:")?;
    let (id, rest) = body.split_once(':')?;
    let id = id.trim();
    if id.is_empty() || rest.is_empty() || rest.starts_with(':') {
        return None;
    }
    Some(AgentKey9 { agent_id: normalize_agent_id(id), rest: rest.to_string() })
}

/// `classifySessionKeyShape`.
pub fn shape(key: &str) -> KeyShape {
    let raw = key.trim();
    if raw.is_empty() {
        KeyShape::Missing
    } else if parse(raw).is_some() {
        KeyShape::Agent
    } else if raw.to_lowercase().starts_with("agent:") {
        KeyShape::MalformedAgent
    } else {
        KeyShape::LegacyOrAlias
    }
}

fn has_kind(key: &str, prefix: &str) -> bool {
    let raw = key.trim();
    !raw.is_empty()
        && (raw.to_lowercase().starts_with(prefix) || parse(raw).is_some_and(|p| p.rest.starts_with(prefix)))
}

/// `isSubagentSessionKey`.
pub fn is_subagent(key: &str) -> bool {
    has_kind(key, "subagent:")
}

/// `isAcpSessionKey`.
pub fn is_acp(key: &str) -> bool {
    has_kind(key, "acp:")
}

/// `resolveAgentIdFromSessionKey`: the key's agent, else `default_agent`; None for a malformed
/// agent key (the gateway refuses to guess).
pub fn agent_of(key: &str, default_agent: &str) -> Option<String> {
    match parse(key) {
        Some(p) => Some(p.agent_id),
        None if shape(key) == KeyShape::MalformedAgent => None,
        None => Some(normalize_agent_id(default_agent)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fold_case_and_an_empty_id_segment_is_malformed() {
        assert_eq!(parse("AGENT:Main:Subagent:1").map(|p| p.agent_id), Some("main".to_string()));
        assert!(is_subagent("AGENT:Main:Subagent:1"));
        assert_eq!(shape("agent::x"), KeyShape::MalformedAgent);
        assert_eq!(shape("agent:a::b"), KeyShape::MalformedAgent);
        assert_eq!(shape(" main "), KeyShape::LegacyOrAlias);
        assert_eq!(agent_of("agent:x", "main"), None);
        assert_eq!(agent_of("global", "Ops"), Some("ops".to_string()));
        assert!(is_acp(" acp:free"));
    }
}
