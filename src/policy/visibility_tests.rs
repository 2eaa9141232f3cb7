//! Tests of `policy::visibility`: one per rule, then properties over generated requesters and
//! rows (the 2026.9 rule never shows what it hides, sandboxed callers included).
use super::*;
use crate::contract::Contract;
use proptest::prelude::*;
use serde_json::{json, Value};

fn cfg9(v: Value) -> Config {
    Config::from_json_for(&v, Contract::V2026_9).expect("valid config")
}
fn row<'a>(key: &'a str, agent: &'a str) -> Target<'a> {
    Target { key, agent, ..Target::default() }
}
fn viewer(cfg: &Config, key: &str, sandboxed: bool) -> Viewer {
    let agent = target_agent(cfg, key);
    Viewer::new(cfg, sandboxed, Some(key), &agent)
}

#[test]
fn the_default_2026_9_visibility_is_all_with_agent_to_agent_on() {
    let c = cfg9(Value::Null);
    assert_eq!(c.session_visibility, SessionVisibility::All);
    let v = viewer(&c, "agent:main:main", false);
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Ok(()));
    assert_eq!(v.list_notice(), None);
}

#[test]
fn incognito_sessions_are_never_visible_even_to_themselves() {
    let c = cfg9(Value::Null);
    let key = "agent:main:dashboard:incognito-abc";
    let v = viewer(&c, key, false);
    assert_eq!(v.check(&row(key, "main")), Err(Denial::Incognito));
    assert_eq!(
        Denial::Incognito.text(Action::History, Some(key)),
        format!("Session not visible from session tools: {key}")
    );
    assert!(is_incognito_key(" AGENT:x:SubAgent:Incognito-1 "));
    assert!(!is_incognito_key("agent:x:subagent:incognito-1:more"));
    assert!(!is_incognito_key("agent:x:main:incognito-1"));
}

#[test]
fn self_admits_only_the_requesters_own_session() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "self"}}}));
    let v = viewer(&c, "agent:main:main", false);
    assert_eq!(v.check(&row("agent:main:main", "main")), Ok(()));
    assert_eq!(v.check(&row("current", "main")), Ok(()));
    let child = Target { spawned_by: Some("agent:main:main"), ..row("agent:main:subagent:1", "main") };
    assert_eq!(v.check(&child), Err(Denial::SelfRestricted));
    assert_eq!(
        Denial::SelfRestricted.text(Action::History, None),
        "Session history visibility is restricted to the current session (tools.sessions.visibility=self)."
    );
}

#[test]
fn tree_from_a_non_main_session_admits_only_owned_rows() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "tree"}}}));
    let v = viewer(&c, "agent:main:telegram:direct:42", false);
    let child =
        Target { parent_session_key: Some("agent:main:telegram:direct:42"), ..row("agent:main:subagent:1", "main") };
    assert_eq!(v.check(&child), Ok(()));
    assert_eq!(v.check(&row("agent:main:main", "main")), Err(Denial::TreeRestricted));
    assert_eq!(
        Denial::TreeRestricted.text(Action::List, None),
        "Session list visibility is restricted to the current session tree (tools.sessions.visibility=tree)."
    );
}

#[test]
fn tree_from_the_main_session_covers_every_session_of_its_agent() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "tree"}}}));
    let v = viewer(&c, "agent:main:main", false);
    assert!(v.is_main());
    assert_eq!(v.check(&row("agent:main:telegram:group:9", "main")), Ok(()));
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Err(Denial::CrossAgentRestricted));
}

#[test]
fn an_owned_cross_agent_subagent_is_visible_under_tree_before_any_a2a_check() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "tree"}, "agentToAgent": {"enabled": false}}}));
    let v = viewer(&c, "agent:main:main", false);
    let child = Target { spawned_by: Some("agent:main:main"), ..row("agent:ops:subagent:7", "ops") };
    assert_eq!(v.check(&child), Ok(()));
    let owned_plain = Target { spawned_by: Some("agent:main:main"), ..row("agent:ops:main", "ops") };
    assert_eq!(v.check(&owned_plain), Err(Denial::CrossAgentRestricted));
}

#[test]
fn agent_admits_its_agent_and_denies_other_agents_naming_the_setting() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "agent"}}}));
    let v = viewer(&c, "agent:main:discord:direct:1", false);
    assert_eq!(v.check(&row("agent:main:main", "main")), Ok(()));
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Err(Denial::CrossAgentRestricted));
    assert_eq!(
        Denial::CrossAgentRestricted.text(Action::History, None),
        "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs."
    );
}

#[test]
fn all_defers_cross_agent_access_to_the_a2a_policy_with_its_texts() {
    let off = cfg9(json!({"tools": {"agentToAgent": {"enabled": false}}}));
    let v = viewer(&off, "agent:main:main", false);
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Err(Denial::AgentToAgentDisabled));
    let narrow = cfg9(json!({"tools": {"agentToAgent": {"allow": ["main", "res*"]}}}));
    let v = viewer(&narrow, "agent:main:main", false);
    assert_eq!(v.check(&row("agent:research:main", "research")), Ok(()));
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Err(Denial::AgentToAgentNotAllowed));
    assert_eq!(
        Denial::AgentToAgentDisabled.text(Action::Send, None),
        "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."
    );
    assert_eq!(
        Denial::AgentToAgentDisabled.text(Action::List, None),
        "Agent-to-agent listing is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent visibility."
    );
    assert_eq!(
        Denial::AgentToAgentDisabled.text(Action::History, None),
        "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."
    );
    assert_eq!(
        Denial::AgentToAgentNotAllowed.text(Action::Send, None),
        "Agent-to-agent messaging denied by tools.agentToAgent.allow."
    );
    assert_eq!(
        Denial::AgentToAgentNotAllowed.text(Action::History, None),
        "Agent-to-agent history denied by tools.agentToAgent.allow."
    );
}

#[test]
fn a_sandboxed_requester_is_clamped_to_tree_even_from_all_self_or_agent() {
    for configured in ["all", "self", "agent", "tree"] {
        let c = cfg9(json!({"tools": {"sessions": {"visibility": configured}}}));
        let v = viewer(&c, "agent:main:main", true);
        assert_eq!(v.mode, SessionVisibility::Tree, "{configured}");
        assert!(v.restrict_to_spawned);
        assert!(!v.is_main(), "a spawned-only requester has no main-session reach");
    }
    let open = cfg9(json!({"agents": {"defaults": {"sandbox": {"sessionToolsVisibility": "all"}}}}));
    assert_eq!(viewer(&open, "agent:main:main", true).mode, SessionVisibility::All);
}

#[test]
fn the_list_notice_names_the_effective_setting_and_its_scope() {
    let c = cfg9(json!({"tools": {"sessions": {"visibility": "agent"}}}));
    let notice = viewer(&c, "agent:main:main", false).list_notice().unwrap();
    assert_eq!(notice["mode"], "agent");
    assert_eq!(notice["restricted"], true);
    assert_eq!(
        notice["warning"],
        "Session visibility is restricted (effective tools.sessions.visibility=agent: all sessions of this agent). Sessions outside that scope are omitted from results and count."
    );
    let sandboxed = viewer(&cfg9(Value::Null), "agent:main:main", true).list_notice().unwrap();
    assert_eq!(
        sandboxed["warning"],
        "Session visibility is restricted (effective tools.sessions.visibility=tree: current session + own spawn subtree (sandbox: spawned sessions only)). Sessions outside that scope are omitted from results and count."
    );
}

#[test]
fn under_2026_1_cross_agent_access_is_the_a2a_policy_alone() {
    let c = Config::from_json(&Value::Null).unwrap();
    let v = viewer(&c, "agent:main:main", true);
    assert_eq!(v.mode, SessionVisibility::All, "2026.1 has no sandbox clamp");
    assert_eq!(v.check(&row("agent:ops:main", "ops")), Err(Denial::AgentToAgentDisabled));
    assert_eq!(v.check(&row("agent:main:dashboard:incognito-1", "main")), Ok(()));
}

// ---- properties -------------------------------------------------------------------------

fn arb_agent() -> impl Strategy<Value = String> {
    prop_oneof![Just("main".to_string()), Just("ops".to_string()), Just("research".to_string())]
}

fn arb_key() -> impl Strategy<Value = String> {
    (
        arb_agent(),
        prop_oneof![
            Just("main".to_string()),
            Just("subagent:a".to_string()),
            Just("subagent:b".to_string()),
            Just("acp:c".to_string()),
            Just("telegram:direct:1".to_string()),
            Just("dashboard:incognito-z".to_string()),
            Just("cron:job".to_string()),
        ],
    )
        .prop_map(|(a, rest)| format!("agent:{a}:{rest}"))
}

fn arb_config() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("self"), Just("tree"), Just("agent"), Just("all")],
        prop_oneof![Just(json!(true)), Just(json!(false)), Just(Value::Null)],
        prop_oneof![Just(json!(["*"])), Just(json!(["main", "ops"])), Just(json!([])), Just(json!(["re*"]))],
        prop_oneof![Just("spawned"), Just("all")],
    )
        .prop_map(|(vis, enabled, allow, sandbox)| {
            json!({
                "tools": {"sessions": {"visibility": vis}, "agentToAgent": {"enabled": enabled, "allow": allow}},
                "agents": {"defaults": {"sandbox": {"sessionToolsVisibility": sandbox}}}
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn visibility_never_shows_what_the_2026_9_rule_hides(
        config in arb_config(),
        requester in arb_key(),
        sandboxed in any::<bool>(),
        target in arb_key(),
        link in 0u8..4,
    ) {
        let c = cfg9(config);
        let v = viewer(&c, &requester, sandboxed);
        let agent = target_agent(&c, &target);
        let linked = Some(requester.as_str());
        let t = Target {
            key: &target,
            agent: &agent,
            spawned_by: if link == 1 { linked } else { None },
            parent_session_key: if link == 2 { linked } else { None },
            owner_session_key: if link == 3 { linked } else { None },
        };
        let shown = v.check(&t).is_ok();
        let owned = link > 0;
        let same_agent = agent == v.agent;
        let child_key = crate::keys::is_subagent_key(&target) || crate::keys::is_acp_key(&target);
        if is_incognito_key(&target) {
            prop_assert!(!shown, "an incognito session was shown");
        }
        if sandboxed && c.visibility_for(&v.agent) == Visibility::Spawned {
            prop_assert_eq!(v.mode, SessionVisibility::Tree);
        }
        if shown {
            match v.mode {
                SessionVisibility::SelfOnly => prop_assert!(target == v.key, "self showed another session"),
                SessionVisibility::Agent => prop_assert!(same_agent, "agent showed another agent"),
                SessionVisibility::Tree => prop_assert!(
                    target == v.key || (owned && (same_agent || child_key)) || (same_agent && v.is_main()),
                    "tree showed a session outside the tree"
                ),
                SessionVisibility::All => prop_assert!(
                    same_agent
                        || (owned && child_key)
                        || a2a::check(&c.agent_to_agent, &v.agent, &agent) == A2aDecision::Allowed,
                    "all showed a cross-agent session a2a forbids"
                ),
            }
        }
    }
}
