//! Tests of `keys`, kept beside it so the module itself reads top to bottom.
use super::*;
use crate::error::ErrorCode;

fn default_model() -> KeyModel {
    KeyModel::new(false, "main", "main")
}
fn ops_work() -> KeyModel {
    KeyModel::new(false, "work", "ops")
}
fn global() -> KeyModel {
    KeyModel::new(true, "main", "ops")
}
#[test]
fn empty_segments_collapse_so_a_canonical_key_is_its_own_canonical_form() {
    // found by the property test: `a::b` used to be stored as `agent:main:a::b`, whose own
    // canonical form is `agent:main:a:b`, so the session could not be found again by its key
    let km = KeyModel::new(false, "main", "main");
    assert_eq!(km.canonical("a::b").unwrap(), "agent:main:a:b");
    assert_eq!(km.canonical("agent:main:a::b").unwrap(), "agent:main:a:b");
    assert_eq!(km.canonical(":main").unwrap(), "agent:main:main");
    let home = KeyModel::new(false, "home", "main");
    assert_eq!(home.canonical(":main").unwrap(), "agent:main:home");
    assert_eq!(home.canonical(&home.canonical(":main").unwrap()).unwrap(), "agent:main:home");
    for only_colons in ["::::", ":", " : "] {
        let (code, msg) = refusal(km.canonical(only_colons));
        assert_eq!(code, ErrorCode::InvalidRequest, "{only_colons}");
        assert!(msg.contains("no name"), "{msg}");
    }
}

fn refusal(r: Result<impl std::fmt::Debug>) -> (ErrorCode, String) {
    let e = r.expect_err("expected a refusal");
    (e.code(), e.message().to_string())
}

// ---- normalize_agent_id (K4) -----------------------------------------------------------

#[test]
fn k4_agent_ids_normalize_to_research_main_and_my_agent() {
    // given the ids of K4 / when normalized / then as the reference says
    assert_eq!(normalize_agent_id("Research"), "research");
    assert_eq!(normalize_agent_id("   "), "main");
    assert_eq!(normalize_agent_id("My Agent!"), "my-agent");
}

#[test]
fn normalize_keeps_a_valid_id_and_only_lowercases_it() {
    assert_eq!(normalize_agent_id("  Ops_Team-2 "), "ops_team-2");
}

#[test]
fn normalize_of_empty_is_main() {
    assert_eq!(normalize_agent_id(""), "main");
}

#[test]
fn normalize_of_only_invalid_chars_is_main() {
    assert_eq!(normalize_agent_id("!!!"), "main");
    assert_eq!(normalize_agent_id("---"), "main");
    assert_eq!(normalize_agent_id("🤖🤖"), "main");
}

#[test]
fn normalize_collapses_runs_and_strips_dashes_at_both_ends() {
    assert_eq!(normalize_agent_id("--a  b!!c--"), "a-b-c");
    assert_eq!(normalize_agent_id("_lead"), "_lead");
}

#[test]
fn normalize_accepts_a_64_char_id_unchanged() {
    let id = "a".repeat(64);
    assert_eq!(normalize_agent_id(&id), id);
}

#[test]
fn normalize_cuts_a_65_char_id_to_64() {
    assert_eq!(normalize_agent_id(&"b".repeat(65)), "b".repeat(64));
}

#[test]
fn normalize_replaces_non_ascii_letters_and_never_splits_a_char() {
    // given multi-byte letters around the 64-char cut / then an ASCII id cut after the
    // strip, as the reference does (so it may end in `-`), and no panic
    let raw = format!("{}é{}yz", "x".repeat(63), "ü".repeat(100));
    let id = normalize_agent_id(&raw);
    assert_eq!(id, format!("{}-", "x".repeat(63)));
    assert_eq!(normalize_agent_id(&format!("{}é{}", "x".repeat(63), "ü".repeat(9))), "x".repeat(63));
    assert!(id.is_ascii());
    assert_eq!(normalize_agent_id("Ägent Ölf"), "gent-lf");
}

#[test]
fn normalize_lowercases_before_replacing_like_javascript() {
    // the Kelvin sign lower-cases to an ASCII `k`
    assert_eq!(normalize_agent_id("\u{212A}ilo!"), "kilo");
}

#[test]
fn normalize_output_is_always_in_the_id_alphabet() {
    for raw in ["a:b", "a\0b", "\u{202E}rtl", "tab\there", "Ω", "x".repeat(300).as_str()] {
        let id = normalize_agent_id(raw);
        assert!(!id.is_empty() && id.chars().count() <= 64, "{raw:?} → {id:?}");
        assert!(id.chars().all(is_id_char), "{raw:?} → {id:?}");
    }
}

// ---- parse_agent_key (K5, §1.8) --------------------------------------------------------

#[test]
fn k5_agent_key_parses_and_a_two_part_key_does_not() {
    let parsed = parse_agent_key("agent:ops:discord:group:dev");
    assert_eq!(parsed, Some(AgentKey { agent_id: "ops".into(), rest: "discord:group:dev".into() }));
    assert_eq!(parse_agent_key("agent:ops"), None);
}

#[test]
fn agent_key_with_empty_segments_parses_to_main_and_x() {
    let parsed = parse_agent_key("agent::main:x").expect("parses");
    assert_eq!((parsed.agent_id.as_str(), parsed.rest.as_str()), ("main", "x"));
}

#[test]
fn agent_key_prefix_is_case_sensitive() {
    assert_eq!(parse_agent_key("AGENT:main:x"), None);
}

#[test]
fn agent_key_id_is_normalized_and_rest_keeps_its_case() {
    let parsed = parse_agent_key("  agent:My Agent:Discord:Group:X ").expect("parses");
    assert_eq!(parsed.agent_id, "my-agent");
    assert_eq!(parsed.rest, "Discord:Group:X");
}

#[test]
fn agent_key_with_blank_id_does_not_parse() {
    assert_eq!(parse_agent_key("agent: :x"), None);
    assert_eq!(parse_agent_key(""), None);
    assert_eq!(parse_agent_key("cron:job:1"), None);
}

// ---- sub-agent / acp / session id (K7, K8) ---------------------------------------------

#[test]
fn k7_subagent_keys_are_recognised() {
    assert!(is_subagent_key("agent:main:subagent:abc"));
    assert!(is_subagent_key("subagent:x"));
    assert!(!is_subagent_key("agent:main:main"));
}

#[test]
fn subagent_detection_ignores_case_and_needs_the_colon() {
    assert!(is_subagent_key(" SubAgent:x "));
    assert!(is_subagent_key("agent:ops:SUBAGENT:1"));
    assert!(!is_subagent_key("agent:ops:subagent"));
    assert!(!is_subagent_key(""));
}

#[test]
fn acp_keys_are_recognised_bare_and_canonical() {
    assert!(is_acp_key("acp:thread-1"));
    assert!(is_acp_key("agent:ops:acp:1"));
    assert!(!is_acp_key("agent:ops:acpx:1"));
}

#[test]
fn k8_uuid_and_plain_words_are_session_id_candidates_keys_are_not() {
    assert!(should_resolve_as_session_id("aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa"));
    assert!(should_resolve_as_session_id("sess-group"));
    for key in ["agent:main:main", "cron:job", "node-1", "x:group:y"] {
        assert!(!should_resolve_as_session_id(key), "{key}");
    }
}

#[test]
fn session_id_shape_is_8_4_4_4_12_hex_in_any_case() {
    assert!(looks_like_session_id(" ABCDEF01-2345-6789-abcd-ef0123456789 "));
    assert!(!looks_like_session_id("abcdef01-2345-6789-abcd-ef012345678"));
    assert!(!looks_like_session_id("abcdef01-2345-6789-abcd-ef012345678g"));
    assert!(!looks_like_session_id("abcdef0123456789abcdef0123456789"));
    assert!(!looks_like_session_id("ａbcdef01-2345-6789-abcd-ef0123456789"));
}

#[test]
fn reserved_words_and_markers_look_like_keys() {
    for key in ["main", "global", "unknown", "acp:1", "hook:x", "node:1", "a:channel:b"] {
        assert!(looks_like_session_key(key), "{key}");
    }
    for v in ["", "   ", "Main", "work", "discord:dm:1"] {
        assert!(!looks_like_session_key(v), "{v}");
    }
}

// ---- group keys, kinds -----------------------------------------------------------------

#[test]
fn group_key_parses_bare_and_canonical_forms() {
    let want = GroupKey { channel: "discord".into(), kind: GroupKind::Group, id: "dev".into() };
    assert_eq!(parse_group_key("discord:group:dev"), Some(want.clone()));
    assert_eq!(parse_group_key("agent:ops:discord:group:dev"), Some(want));
}

#[test]
fn group_key_id_keeps_the_rest_including_topics() {
    let g = parse_group_key("agent:main:telegram:channel:-100123:topic:42").expect("parses");
    assert_eq!(g.channel, "telegram");
    assert_eq!(g.kind, GroupKind::Channel);
    assert_eq!(g.id, "-100123:topic:42");
}

#[test]
fn non_group_keys_do_not_parse_as_groups() {
    assert_eq!(parse_group_key("discord:group"), None);
    assert_eq!(parse_group_key("discord:dm:1"), None);
    assert_eq!(parse_group_key("agent:main:main"), None);
    assert_eq!(parse_group_key("discord:GROUP:1"), None);
}

#[test]
fn session_kind_parses_trimmed_case_insensitive_names() {
    assert_eq!(SessionKind::parse(" CRON "), Some(SessionKind::Cron));
    for kind in SessionKind::ALL {
        assert_eq!(SessionKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(SessionKind::parse("bogus"), None);
}

#[test]
fn gateway_kind_follows_classify_session_key() {
    assert_eq!(gateway_kind("global", None), GatewayKind::Global);
    assert_eq!(gateway_kind("unknown", Some("group")), GatewayKind::Unknown);
    assert_eq!(gateway_kind("agent:main:x", Some("channel")), GatewayKind::Group);
    assert_eq!(gateway_kind("agent:main:discord:group:1", None), GatewayKind::Group);
    assert_eq!(gateway_kind("agent:main:main", Some("direct")), GatewayKind::Direct);
    assert_eq!(GatewayKind::Direct.as_str(), "direct");
}

#[test]
fn key_kind_recognises_bare_and_canonical_internal_keys() {
    assert_eq!(key_kind("cron:job-1"), SessionKind::Cron);
    assert_eq!(key_kind("agent:main:cron:job-1"), SessionKind::Cron);
    assert_eq!(key_kind("hook:gmail:1"), SessionKind::Hook);
    assert_eq!(key_kind("agent:ops:hook:1"), SessionKind::Hook);
    assert_eq!(key_kind("node-abc"), SessionKind::Node);
    assert_eq!(key_kind("agent:ops:node:1"), SessionKind::Node);
    assert_eq!(key_kind("agent:ops:discord:group:1"), SessionKind::Group);
    assert_eq!(key_kind("agent:ops:subagent:1"), SessionKind::Other);
    assert_eq!(key_kind("agent:ops:main"), SessionKind::Other);
}

// ---- KeyModel: construction, internal/display (K1–K3) ----------------------------------

#[test]
fn key_model_trims_and_lowercases_the_main_key_and_normalizes_the_agent() {
    let m = KeyModel::new(false, " Work ", "Ops Team");
    assert_eq!(m.main_key(), "work");
    assert_eq!(m.default_agent(), "ops-team");
    assert_eq!(KeyModel::new(false, "  ", "").main_key(), "main");
}

#[test]
fn k1_default_config_main_resolves_and_displays_as_main() {
    let m = default_model();
    let internal = m.resolve_for("main", "main").expect("valid");
    assert_eq!(internal, "agent:main:main");
    assert_eq!(m.display(&internal, "main"), "main");
    assert_eq!(m.display("main", "main"), "main");
}

#[test]
fn k2_main_key_work_maps_main_to_work_and_displays_work_as_main() {
    let m = KeyModel::new(false, " Work ", "main");
    assert_eq!(m.main_key(), "work");
    assert_eq!(m.resolve_for("main", "main").expect("valid"), "agent:main:work");
    assert_eq!(m.display("work", "main"), "main");
    assert_eq!(m.display("agent:main:work", "main"), "main");
}

#[test]
fn k3_global_scope_maps_main_to_global_and_displays_global_as_main() {
    let m = global();
    assert_eq!(m.alias(), "global");
    assert_eq!(m.resolve_for("main", "research").expect("valid"), "global");
    assert_eq!(m.display("global", "research"), "main");
}

#[test]
fn main_resolves_to_the_requesters_own_main_session() {
    let m = ops_work();
    assert_eq!(m.resolve_for("main", "research").expect("valid"), "agent:research:work");
    assert_eq!(m.resolve_for(" work ", "Research").expect("valid"), "agent:research:work");
    assert_eq!(m.resolve_for("cron:x", "research").expect("valid"), "agent:ops:cron:x");
}

#[test]
fn another_agents_main_session_keeps_its_canonical_key_on_display() {
    let m = default_model();
    assert_eq!(m.display("agent:other:main", "main"), "agent:other:main");
    assert_eq!(m.display("agent:main:main", "other"), "agent:main:main");
    assert_eq!(m.display("agent:main:discord:group:1", "main"), "agent:main:discord:group:1");
}

// ---- canonical (K11–K13) ---------------------------------------------------------------

#[test]
fn k11_aliases_of_ops_with_main_key_work_canonicalize() {
    let m = ops_work();
    assert_eq!(m.canonical("main").expect("valid"), "agent:ops:work");
    assert_eq!(m.canonical("work").expect("valid"), "agent:ops:work");
    assert_eq!(m.canonical("agent:ops:main").expect("valid"), "agent:ops:work");
    assert_eq!(m.canonical("agent:alpha:main").expect("valid"), "agent:alpha:work");
}

#[test]
fn k11_with_main_key_main_bare_group_keys_go_to_the_default_agent() {
    let m = KeyModel::new(false, "main", "ops");
    assert_eq!(m.canonical("discord:group:123").expect("valid"), "agent:ops:discord:group:123");
    assert_eq!(m.canonical("agent:alpha:main").expect("valid"), "agent:alpha:main");
}

#[test]
fn k12_global_scope_main_is_global_and_belongs_to_the_default_agent() {
    let m = global();
    let key = m.canonical("main").expect("valid");
    assert_eq!(key, "global");
    assert_eq!(m.agent_id_of(&key), "ops");
    assert_eq!(m.canonical("agent:alpha:main").expect("valid"), "global");
}

#[test]
fn k13_store_keys_list_the_canonical_key_then_the_raw_one() {
    let m = KeyModel::new(false, "main", "ops");
    assert_eq!(m.store_keys(" main ").expect("valid"), vec!["agent:ops:main", "main"]);
    assert_eq!(m.store_keys("agent:ops:x").expect("valid"), vec!["agent:ops:x"]);
}

#[test]
fn global_and_unknown_stay_as_they_are() {
    let m = ops_work();
    assert_eq!(m.canonical("global").expect("valid"), "global");
    assert_eq!(m.canonical("unknown").expect("valid"), "unknown");
}

#[test]
fn bare_keys_keep_their_case() {
    let m = ops_work();
    assert_eq!(m.canonical("WhatsApp:Group:ABC").expect("valid"), "agent:ops:WhatsApp:Group:ABC");
    assert_eq!(m.canonical("AGENT:main:x").expect("valid"), "agent:ops:AGENT:main:x");
}

#[test]
fn agent_keys_get_their_id_normalized_and_empty_segments_dropped() {
    let m = ops_work();
    assert_eq!(m.canonical("agent:Research::discord::group:1").expect("valid"), "agent:research:discord:group:1");
    assert_eq!(m.canonical("agent:My Bot:main").expect("valid"), "agent:my-bot:work");
}

#[test]
fn canonical_is_idempotent() {
    let m = ops_work();
    for raw in ["main", "work", "x", "agent:A:b", "cron:1", "global", "subagent:z", "日本語"] {
        let once = m.canonical(raw).expect("valid");
        assert_eq!(m.canonical(&once).expect("valid"), once, "{raw}");
    }
}

#[test]
fn canonical_keeps_odd_unicode_intact() {
    let m = default_model();
    let raw = "discord:group:\u{200B}zero\u{202E}rtl👨‍👩‍👧";
    assert_eq!(m.canonical(raw).expect("valid"), format!("agent:main:{raw}"));
}

// ---- check_raw -------------------------------------------------------------------------

#[test]
fn check_raw_returns_the_trimmed_key() {
    assert_eq!(default_model().check_raw("  agent:main:x \n", "key").expect("valid"), "agent:main:x");
}

#[test]
fn empty_or_blank_keys_are_required_errors() {
    for raw in ["", "   ", "\n\t", "\u{FEFF}"] {
        let (code, msg) = refusal(default_model().check_raw(raw, "sessionKey"));
        assert_eq!(code, ErrorCode::InvalidRequest);
        assert_eq!(msg, "sessionKey required");
    }
}

#[test]
fn keys_with_nul_or_control_characters_are_refused() {
    for raw in ["a\0b", "a\nb", "a\tb", "a\u{7f}b", "a\u{85}b", "a\u{9b}b"] {
        let (code, msg) = refusal(default_model().check_raw(raw, "key"));
        assert_eq!(code, ErrorCode::InvalidRequest);
        assert_eq!(msg, "invalid key: contains a control character", "{raw:?}");
    }
}

#[test]
fn a_key_of_512_bytes_is_accepted_and_513_refused() {
    let m = default_model();
    assert!(m.check_raw(&"k".repeat(512), "key").is_ok());
    let (code, msg) = refusal(m.check_raw(&"k".repeat(513), "key"));
    assert_eq!(code, ErrorCode::InvalidRequest);
    assert_eq!(msg, "invalid key: too long (max 512)");
}

#[test]
fn key_length_counts_bytes_not_chars() {
    // 171 × 3 bytes = 513 bytes in 171 chars
    let (_, msg) = refusal(default_model().check_raw(&"€".repeat(171), "key"));
    assert_eq!(msg, "invalid key: too long (max 512)");
    assert!(default_model().check_raw(&"€".repeat(170), "key").is_ok());
}

#[test]
fn huge_keys_are_refused_without_trouble() {
    let huge = "x".repeat(10_000_000);
    let (_, msg) = refusal(default_model().canonical(&huge));
    assert_eq!(msg, "invalid key: too long (max 512)");
}

#[test]
fn canonical_refuses_bad_keys_with_what_key() {
    let m = default_model();
    assert_eq!(refusal(m.canonical("  ")).1, "key required");
    assert_eq!(refusal(m.canonical("a\0")).1, "invalid key: contains a control character");
    assert_eq!(refusal(m.resolve_for("", "main")).1, "key required");
    assert_eq!(refusal(m.store_keys("\0")).1, "invalid key: contains a control character");
}

#[test]
fn a_bare_key_that_would_grow_past_the_limit_is_refused() {
    let m = default_model();
    let raw = "x".repeat(510);
    assert!(m.check_raw(&raw, "key").is_ok());
    assert_eq!(refusal(m.canonical(&raw)).1, "invalid key: too long (max 512)");
}

// ---- agent_id_of (K6 as amended) -------------------------------------------------------

#[test]
fn k6_bare_keys_and_global_belong_to_the_default_agent() {
    let m = KeyModel::new(false, "main", "ops");
    assert_eq!(m.agent_id_of("discord:group:x"), "ops");
    assert_eq!(m.agent_id_of("global"), "ops");
    assert_eq!(m.agent_id_of("unknown"), "ops");
    assert_eq!(m.agent_id_of("AGENT:main:x"), "ops");
}

#[test]
fn agent_keys_belong_to_their_normalized_agent() {
    let m = KeyModel::new(false, "main", "ops");
    assert_eq!(m.agent_id_of("agent:Research:main"), "research");
    assert_eq!(default_model().agent_id_of("cron:x"), "main");
}

// ---- is_main_session, classify_kind (K9 as amended, L3, L5) ----------------------------

#[test]
fn main_sessions_are_recognised_in_every_form() {
    let m = ops_work();
    for key in ["work", "main", "agent:ops:work", "agent:other:work", "agent:other:main"] {
        assert!(m.is_main_session(key), "{key}");
    }
    for key in ["global", "agent:ops:main:thread:1", "agent:ops:x", "cron:main"] {
        assert!(!m.is_main_session(key), "{key}");
    }
    assert!(global().is_main_session("global"));
}

#[test]
fn k9_kinds_with_gateway_kind_group_as_amended() {
    let m = default_model();
    assert_eq!(m.classify_kind("discord:group:dev", true), SessionKind::Group);
    assert_eq!(m.classify_kind("cron:job-1", true), SessionKind::Cron);
    assert_eq!(m.classify_kind("agent:main:cron:job-1", true), SessionKind::Cron);
    assert_eq!(m.classify_kind("node-abc", true), SessionKind::Node);
    assert_eq!(m.classify_kind("x", true), SessionKind::Group);
}

#[test]
fn k9_without_a_group_hint_plain_keys_are_other() {
    let m = default_model();
    assert_eq!(m.classify_kind("x", false), SessionKind::Other);
    assert_eq!(m.classify_kind("agent:main:subagent:1", false), SessionKind::Other);
    assert_eq!(m.classify_kind("agent:main:slack:channel:c1", false), SessionKind::Group);
}

#[test]
fn l3_canonical_main_sessions_are_kind_main_for_any_agent() {
    let m = default_model();
    assert_eq!(m.classify_kind("agent:main:main", false), SessionKind::Main);
    assert_eq!(m.classify_kind("agent:other:main", false), SessionKind::Main);
    assert_eq!(m.display("agent:main:main", "main"), "main");
}

#[test]
fn l5_global_scope_lists_global_as_main_of_kind_main() {
    let m = global();
    assert_eq!(m.classify_kind("global", false), SessionKind::Main);
    assert_eq!(m.display("global", "main"), "main");
}

// ---- derive_channel (K10 as amended) ---------------------------------------------------

#[test]
fn k10_channel_derivation_order() {
    let m = default_model();
    assert_eq!(m.derive_channel("cron:1", SessionKind::Cron, Some("discord"), None), "internal");
    assert_eq!(m.derive_channel("x", SessionKind::Other, Some(" discord "), Some("wa")), "discord");
    assert_eq!(m.derive_channel("x", SessionKind::Other, Some("  "), Some("whatsapp")), "whatsapp");
    assert_eq!(m.derive_channel("slack:channel:c1", SessionKind::Group, None, None), "slack");
    assert_eq!(m.derive_channel("x", SessionKind::Other, None, None), "unknown");
}

#[test]
fn canonical_internal_keys_get_channel_internal_and_canonical_groups_their_channel() {
    let m = default_model();
    let kind = m.classify_kind("agent:main:hook:1", false);
    assert_eq!(m.derive_channel("agent:main:hook:1", kind, None, None), "internal");
    assert_eq!(m.derive_channel("agent:main:slack:channel:c1", SessionKind::Group, None, None), "slack");
}

// ---- thread_parent ---------------------------------------------------------------------

#[test]
fn thread_parent_is_the_part_before_the_last_marker() {
    assert_eq!(thread_parent("agent:main:slack:channel:c1:thread:171"), Some("agent:main:slack:channel:c1"));
    assert_eq!(thread_parent("agent:main:telegram:group:-1:topic:42"), Some("agent:main:telegram:group:-1"));
    assert_eq!(thread_parent("a:thread:1:topic:2"), Some("a:thread:1"));
}

#[test]
fn thread_parent_markers_are_case_insensitive() {
    assert_eq!(thread_parent("Parent:THREAD:x"), Some("Parent"));
}

#[test]
fn no_marker_or_marker_at_the_start_has_no_parent() {
    assert_eq!(thread_parent("agent:main:main"), None);
    assert_eq!(thread_parent(":thread:1"), None);
    assert_eq!(thread_parent("  :topic:1"), None);
    assert_eq!(thread_parent(""), None);
}

#[test]
fn thread_parent_is_safe_with_multibyte_text_before_the_marker() {
    // `İ` lower-cases to two chars in Unicode; offsets must not shift
    assert_eq!(thread_parent("İİ:thread:x"), Some("İİ"));
    assert_eq!(thread_parent("日本:topic:1"), Some("日本"));
}

// ---- import_canonical (§2.8) -------------------------------------------------------------

#[test]
fn legacy_keys_are_canonicalised_on_import_by_the_runtime_case_rule() {
    let km = KeyModel::new(false, "main", "main");
    let cases = [
        ("global", "main", "global"),
        ("unknown", "ops", "unknown"),
        ("main", "main", "agent:main:main"),
        ("main", "ops", "agent:ops:main"),
        // one case rule: the agent id lower-case, the rest as it was
        ("agent:Ops:Discord:Channel:ABC", "main", "agent:ops:Discord:Channel:ABC"),
        ("agent:ops:main", "main", "agent:ops:main"),
        ("Main", "ops", "agent:ops:Main"),
        ("subagent:Task-1", "ops", "agent:ops:subagent:Task-1"),
        ("SubAgent:x", "ops", "agent:ops:subagent:x"),
        ("group:123@g.us", "main", "agent:main:whatsapp:group:123@g.us"),
        ("group:Team", "main", "agent:main:unknown:group:Team"),
        ("120363@G.US", "main", "agent:main:whatsapp:group:120363@G.US"),
        ("whatsapp:group:99@g.us", "main", "agent:main:whatsapp:group:99@g.us"),
        ("whatsapp:77@g.us", "main", "agent:main:whatsapp:group:77@g.us"),
        ("telegram:group:-100:topic:5", "main", "agent:main:telegram:group:-100:topic:5"),
        ("+15551234567", "work", "agent:work:+15551234567"),
    ];
    for (raw, agent, want) in cases {
        assert_eq!(km.import_canonical(raw, agent).unwrap(), want, "{raw} of {agent}");
        // and the runtime finds it under the key as the gateway has it
        if raw.starts_with("agent:") {
            assert_eq!(km.canonical(raw).unwrap(), want);
        }
    }
    let global = KeyModel::new(true, "home", "main");
    assert_eq!(global.import_canonical("home", "ops").unwrap(), "global");
    assert!(km.import_canonical("", "main").is_err());
    assert!(km.import_canonical("a\u{0}b", "main").is_err());
    assert!(km.import_canonical(&"x".repeat(510), "main").is_err());
}

#[test]
fn the_rest_of_an_agent_key_is_the_parse_s_rest() {
    let mut keys: Vec<String> = [
        "agent:main:main",
        " agent:ops:work ",
        "agent:main",
        "agent::main",
        "agent: :main",
        "agent:\u{a0}:x",
        "agent:main:",
        ":agent:main:x",
        "agent:main:x::y:",
        "agent:main:discord:group:g1",
        "agent:Main:cron:job",
        "agent:main: ",
        "AGENT:main:x",
        "agent:main:a:b:c",
        "agentx:main:y",
        "discord:group:dev",
        "global",
        "",
        ":",
        "::::",
        "agent:é:ü:ß",
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    // every cut of a few keys, so each position of a colon and a space is tried
    for k in ["agent:main:x:y", " agent : ops :: w ", "agent:m:\u{2028}:z"] {
        for (i, _) in k.char_indices() {
            keys.push(k[..i].to_owned());
            keys.push(k[i..].to_owned());
        }
    }
    for k in keys {
        assert_eq!(agent_key_rest(&k).map(|r| r.into_owned()), parse_agent_key(&k).map(|p| p.rest), "{k:?}");
    }
}
