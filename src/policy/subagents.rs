//! The sub-agent allow list (REFERENCE.md §6.1 step 7, §10.1): which agents a requester may
//! spawn children under, and the `agents_list` answer built from it.

use std::collections::BTreeSet;

use crate::config::Config;
use crate::keys::{js_trim, normalize_agent_id};

/// The requester agent's `subagents.allowAgents`, digested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnAllowlist {
    /// some entry trims to `*`
    pub any: bool,
    /// normalized (normalize_agent_id), non-empty, non-`*` entries, de-duplicated, config order
    pub ids: Vec<String>,
}

impl SpawnAllowlist {
    pub fn for_agent(cfg: &Config, requester_agent: &str) -> SpawnAllowlist {
        let entries = cfg.agent(requester_agent).map_or(&[][..], |a| a.allow_agents.as_slice());
        let mut any = false;
        let mut ids: Vec<String> = Vec::new();
        for entry in entries.iter().map(|e| js_trim(e)) {
            if entry == "*" {
                any = true;
            } else if !entry.is_empty() {
                let id = normalize_agent_id(entry);
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        SpawnAllowlist { any, ids }
    }
    /// The target is the requester itself, or allowed by the list (ids are normalized first).
    pub fn allows(&self, requester_agent: &str, target_agent: &str) -> bool {
        let target = normalize_agent_id(target_agent);
        self.any || target == normalize_agent_id(requester_agent) || self.ids.contains(&target)
    }
    /// `agentId is not allowed for sessions_spawn (allowed: <ids joined by ', ' or none>)`
    pub fn refusal(&self) -> String {
        let allowed = if self.ids.is_empty() { "none".to_string() } else { self.ids.join(", ") };
        format!("agentId is not allowed for sessions_spawn (allowed: {allowed})")
    }
}

/// One row of `agents_list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedAgent {
    pub id: String,
    pub name: Option<String>,
    pub configured: bool,
}

/// §10.1 steps 3–6: {requester} ∪ (any ? configured ids : allow ids); requester first, the rest
/// sorted (plain string order of the ids is fine).
/// Returns `(allowAny, agents)`.
pub fn agents_for(cfg: &Config, requester_agent: &str) -> (bool, Vec<ListedAgent>) {
    let requester = normalize_agent_id(requester_agent);
    let allowlist = SpawnAllowlist::for_agent(cfg, &requester);
    let others: BTreeSet<&str> = if allowlist.any {
        cfg.agents.iter().map(|a| a.id.as_str()).collect()
    } else {
        allowlist.ids.iter().map(String::as_str).collect()
    };
    let listed = std::iter::once(requester.as_str())
        .chain(others.into_iter().filter(|id| *id != requester))
        .map(|id| {
            let agent = cfg.agent(id);
            ListedAgent { id: id.to_string(), name: agent.and_then(|a| a.name.clone()), configured: agent.is_some() }
        })
        .collect();
    (allowlist.any, listed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: serde_json::Value) -> Config {
        Config::from_json(&v).expect("valid config")
    }
    fn main_allows(allow: serde_json::Value) -> Config {
        cfg(json!({"agents": {"list": [{"id": "main", "subagents": {"allowAgents": allow}}]}}))
    }
    fn ids(list: &[ListedAgent]) -> Vec<&str> {
        list.iter().map(|a| a.id.as_str()).collect()
    }

    #[test]
    fn p1_a_listed_agent_may_be_spawned() {
        let list = SpawnAllowlist::for_agent(&main_allows(json!(["beta"])), "main");
        assert!(list.allows("main", "beta"));
    }

    #[test]
    fn p2_a_star_allows_any_agent() {
        let list = SpawnAllowlist::for_agent(&main_allows(json!([" * "])), "main");
        assert!(list.any);
        assert!(list.allows("main", "whoever"));
    }

    #[test]
    fn p3_without_allow_agents_only_the_requester_itself_is_allowed() {
        let list = SpawnAllowlist::for_agent(&Config::default(), "main");
        assert_eq!(list, SpawnAllowlist { any: false, ids: vec![] });
        assert!(!list.allows("main", "beta"));
        assert!(list.allows("main", "main"));
        assert!(list.allows("Main", " main "));
    }

    #[test]
    fn p4_allow_entries_and_targets_are_normalized() {
        let list = SpawnAllowlist::for_agent(&main_allows(json!(["Research"])), "MAIN");
        assert_eq!(list.ids, vec!["research"]);
        assert!(list.allows("main", "research"));
        assert!(list.allows("main", "Research"));
    }

    #[test]
    fn p5_refusal_names_the_allowed_ids() {
        let list = SpawnAllowlist::for_agent(&main_allows(json!(["alpha"])), "main");
        assert!(!list.allows("main", "beta"));
        assert_eq!(list.refusal(), "agentId is not allowed for sessions_spawn (allowed: alpha)");
    }

    #[test]
    fn refusal_says_none_when_nothing_is_allowed() {
        let list = SpawnAllowlist::for_agent(&Config::default(), "main");
        assert_eq!(list.refusal(), "agentId is not allowed for sessions_spawn (allowed: none)");
    }

    #[test]
    fn allow_entries_are_deduplicated_in_config_order_and_blanks_skipped() {
        let list = SpawnAllowlist::for_agent(&main_allows(json!(["b", " ", "A", "B", "a", ""])), "main");
        assert_eq!(list.ids, vec!["b", "a"]);
        assert_eq!(list.refusal(), "agentId is not allowed for sessions_spawn (allowed: b, a)");
    }

    #[test]
    fn the_allow_list_is_read_from_the_requesters_entry() {
        let c = cfg(json!({"agents": {"list": [
            {"id": "main"}, {"id": "research", "subagents": {"allowAgents": ["coder"]}}
        ]}}));
        assert!(SpawnAllowlist::for_agent(&c, "research").allows("research", "coder"));
        assert!(!SpawnAllowlist::for_agent(&c, "main").allows("main", "coder"));
    }

    #[test]
    fn g1_without_config_only_the_requester_is_listed_unconfigured() {
        let (any, agents) = agents_for(&Config::default(), "main");
        assert!(!any);
        assert_eq!(agents, vec![ListedAgent { id: "main".into(), name: None, configured: false }]);
    }

    #[test]
    fn g2_the_allowed_configured_agent_is_listed_after_the_requester() {
        let c = cfg(json!({"agents": {"list": [
            {"id": "main", "subagents": {"allowAgents": ["research"]}},
            {"id": "research", "name": " Research "}
        ]}}));
        let (any, agents) = agents_for(&c, "main");
        assert!(!any);
        assert_eq!(
            agents,
            vec![
                ListedAgent { id: "main".into(), name: None, configured: true },
                ListedAgent { id: "research".into(), name: Some("Research".into()), configured: true },
            ]
        );
    }

    #[test]
    fn g3_a_star_lists_every_configured_agent_sorted_after_the_requester() {
        let c = cfg(json!({"agents": {"list": [
            {"id": "main", "subagents": {"allowAgents": ["*"]}}, {"id": "research"}, {"id": "coder"}
        ]}}));
        let (any, agents) = agents_for(&c, "main");
        assert!(any);
        assert_eq!(ids(&agents), ["main", "coder", "research"]);
    }

    #[test]
    fn g4_an_allowlisted_but_unconfigured_agent_is_listed_as_unconfigured() {
        let (_, agents) = agents_for(&main_allows(json!(["research"])), "main");
        assert_eq!(agents[1], ListedAgent { id: "research".into(), name: None, configured: false });
    }

    #[test]
    fn the_requester_is_listed_once_and_first_even_if_allowlisted() {
        let c = cfg(json!({"agents": {"list": [
            {"id": "zed", "subagents": {"allowAgents": ["zed", "alpha", "Zed"]}}
        ]}}));
        let (_, agents) = agents_for(&c, " Zed ");
        assert_eq!(ids(&agents), ["zed", "alpha"]);
    }
}
