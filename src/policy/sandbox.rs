//! Sandbox visibility (REFERENCE.md §9, with DECISIONS.md's per-agent override): a sandboxed
//! session sees only the sessions it spawned, unless visibility is `all`.

use crate::config::{Config, Visibility};
use crate::keys::{is_subagent_key, js_trim};

/// §9 restrictToSpawned: `sandboxed` AND visibility (per-agent value of the requester's agent,
/// else the default) is `spawned` AND a requester key exists AND it is not a sub-agent key.
/// `requester_key` is the requester's canonical key, None when the caller gave none.
pub fn restrict_to_spawned(cfg: &Config, sandboxed: bool, requester_key: Option<&str>, requester_agent: &str) -> bool {
    let has_key = requester_key.map(js_trim).is_some_and(|k| !k.is_empty());
    sandboxed
        && cfg.visibility_for(requester_agent) == Visibility::Spawned
        && has_key
        && !requester_key.is_some_and(is_subagent_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: serde_json::Value) -> Config {
        Config::from_json(&v).expect("valid config")
    }

    #[test]
    fn a_sandboxed_session_sees_only_what_it_spawned_by_default() {
        assert!(restrict_to_spawned(&Config::default(), true, Some("agent:main:main"), "main"));
    }

    #[test]
    fn an_unsandboxed_session_is_not_restricted() {
        assert!(!restrict_to_spawned(&Config::default(), false, Some("agent:main:main"), "main"));
    }

    #[test]
    fn x1_a_sandboxed_subagent_is_not_restricted() {
        assert!(!restrict_to_spawned(&Config::default(), true, Some("agent:main:subagent:x"), "main"));
        assert!(!restrict_to_spawned(&Config::default(), true, Some("subagent:x"), "main"));
    }

    #[test]
    fn x2_visibility_all_lifts_the_restriction() {
        let c = cfg(json!({"agents": {"defaults": {"sandbox": {"sessionToolsVisibility": "all"}}}}));
        assert!(!restrict_to_spawned(&c, true, Some("agent:main:main"), "main"));
    }

    #[test]
    fn a_sandboxed_requester_without_a_key_is_not_restricted() {
        assert!(!restrict_to_spawned(&Config::default(), true, None, "main"));
        assert!(!restrict_to_spawned(&Config::default(), true, Some("   "), "main"));
    }

    #[test]
    fn per_agent_visibility_all_wins_over_default_spawned() {
        let c = cfg(
            json!({"agents": {"list": [{"id": "open", "sandbox": {"sessionToolsVisibility": "all"}}, {"id": "main"}]}}),
        );
        assert!(!restrict_to_spawned(&c, true, Some("agent:open:main"), "open"));
        assert!(restrict_to_spawned(&c, true, Some("agent:main:main"), "main"));
    }

    #[test]
    fn per_agent_visibility_spawned_wins_over_default_all() {
        let c = cfg(json!({"agents": {
            "defaults": {"sandbox": {"sessionToolsVisibility": "all"}},
            "list": [{"id": "locked", "sandbox": {"sessionToolsVisibility": "spawned"}}]
        }}));
        assert!(restrict_to_spawned(&c, true, Some("agent:locked:main"), "Locked"));
        assert!(!restrict_to_spawned(&c, true, Some("agent:other:main"), "other"));
    }
}
