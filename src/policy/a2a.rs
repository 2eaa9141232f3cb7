//! The agent-to-agent policy (REFERENCE.md §8): may a session of one agent see or message a
//! session of another?

use crate::config::AgentToAgentConfig;
use crate::keys::{js_trim, normalize_agent_id};

/// The outcome of a cross-agent check; tools pick their own forbidden texts from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum A2aDecision {
    /// same agent, or enabled and both ids match the allow list
    Allowed,
    /// different agents and `tools.agentToAgent.enabled` is not `true`
    Disabled,
    /// enabled, but the allow list does not admit both sides
    Denied,
}

/// §8 matchesAllow: empty list → true; a pattern is trimmed; empty → no match; `*` → match;
/// without `*` case-sensitive equality; with `*` an anchored glob (`*` = any sequence),
/// case-insensitive.
pub fn matches_allow(allow: &[String], agent_id: &str) -> bool {
    allow.is_empty() || allow.iter().any(|p| pattern_matches(js_trim(p), agent_id))
}

fn pattern_matches(pattern: &str, agent_id: &str) -> bool {
    if pattern.is_empty() {
        false
    } else if pattern == "*" {
        true
    } else if !pattern.contains('*') {
        pattern == agent_id
    } else {
        let pattern: Vec<char> = pattern.to_lowercase().chars().collect();
        let id: Vec<char> = agent_id.to_lowercase().chars().collect();
        glob_matches(&pattern, &id)
    }
}

/// Anchored glob where `*` stands for any sequence (possibly empty) and every other char for
/// itself. Greedy with a single backtrack point: O(pattern × text), no recursion.
fn glob_matches(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if Some(c) == text.get(t) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern.get(p..).is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

/// §8 isAllowed, as a decision.
/// Both ids are normalized first, so `Research` and `research` are the same agent.
pub fn check(cfg: &AgentToAgentConfig, requester_agent: &str, target_agent: &str) -> A2aDecision {
    let (requester, target) = (normalize_agent_id(requester_agent), normalize_agent_id(target_agent));
    if requester == target {
        A2aDecision::Allowed
    } else if !cfg.enabled {
        A2aDecision::Disabled
    } else if matches_allow(&cfg.allow, &requester) && matches_allow(&cfg.allow, &target) {
        A2aDecision::Allowed
    } else {
        A2aDecision::Denied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }
    fn enabled(allow: &[&str]) -> AgentToAgentConfig {
        AgentToAgentConfig { enabled: true, allow: list(allow) }
    }

    #[test]
    fn a1_same_agent_is_allowed_even_when_disabled() {
        let cfg = AgentToAgentConfig::default();
        assert_eq!(check(&cfg, "main", "main"), A2aDecision::Allowed);
        assert_eq!(check(&cfg, "Research", "research"), A2aDecision::Allowed);
    }

    #[test]
    fn a1_different_agents_are_refused_when_disabled() {
        assert_eq!(check(&AgentToAgentConfig::default(), "main", "other"), A2aDecision::Disabled);
        let disabled = AgentToAgentConfig { enabled: false, allow: list(&["*"]) };
        assert_eq!(check(&disabled, "main", "other"), A2aDecision::Disabled);
    }

    #[test]
    fn a2_enabled_without_allow_list_allows_any_pair() {
        assert_eq!(check(&enabled(&[]), "main", "other"), A2aDecision::Allowed);
    }

    #[test]
    fn a3_glob_patterns_match_case_insensitively() {
        assert!(matches_allow(&list(&["ma*"]), "main"));
        assert!(matches_allow(&list(&["MA*"]), "main"));
        assert!(!matches_allow(&list(&["ma*"]), "other"));
    }

    #[test]
    fn a3_plain_patterns_match_case_sensitively() {
        assert!(!matches_allow(&list(&["Main"]), "main"));
        assert!(matches_allow(&list(&["main"]), "main"));
    }

    #[test]
    fn a4_both_sides_must_match_the_allow_list() {
        assert_eq!(check(&enabled(&["main"]), "main", "other"), A2aDecision::Denied);
        assert_eq!(check(&enabled(&["main", "other"]), "main", "other"), A2aDecision::Allowed);
        assert_eq!(check(&enabled(&["other"]), "main", "other"), A2aDecision::Denied);
    }

    #[test]
    fn star_alone_equals_an_empty_list() {
        assert!(matches_allow(&list(&["*"]), "anything"));
        assert!(matches_allow(&list(&[" * "]), "anything"));
        assert!(matches_allow(&[], "anything"));
    }

    #[test]
    fn an_empty_pattern_matches_nothing() {
        assert!(!matches_allow(&list(&[""]), "main"));
        assert!(!matches_allow(&list(&["   "]), ""));
        assert_eq!(check(&enabled(&[""]), "main", "other"), A2aDecision::Denied);
    }

    #[test]
    fn patterns_are_trimmed() {
        assert!(matches_allow(&list(&["  main "]), "main"));
    }

    #[test]
    fn stars_match_any_sequence_anywhere() {
        let allow = list(&["*-bot", "a*b*c"]);
        assert!(matches_allow(&allow, "sales-bot"));
        assert!(matches_allow(&allow, "-bot"));
        assert!(matches_allow(&allow, "abc"));
        assert!(matches_allow(&allow, "axxbyyc"));
        assert!(!matches_allow(&allow, "sales-bots"));
        assert!(!matches_allow(&allow, "axxbyy"));
        assert!(matches_allow(&list(&["**"]), ""));
    }

    #[test]
    fn regex_metacharacters_in_patterns_are_literal() {
        let allow = list(&["a.b*", "(x)*", "q+*"]);
        assert!(matches_allow(&allow, "a.bz"));
        assert!(!matches_allow(&allow, "axbz"));
        assert!(matches_allow(&allow, "(x)1"));
        assert!(!matches_allow(&allow, "x1"));
        assert!(!matches_allow(&allow, "qq"));
    }

    #[test]
    fn globs_handle_unicode_and_long_inputs() {
        assert!(matches_allow(&list(&["ÄR*"]), "ärger"));
        let long_id = "a".repeat(5000);
        assert!(!matches_allow(&list(&["*a*a*a*b"]), &long_id));
    }
}
