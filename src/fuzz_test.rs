//! Property tests (issue 6): the parsers and matchers that read untrusted text (keys, send
//! policy rules, allow-list globs, config, tool params and contexts, host results) are total:
//! any input gives an answer or a clear error, never a panic, and the answers keep their
//! invariants. `npm run fuzz` runs these with many more cases (`PROPTEST_CASES`).

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::config::{Config, PolicyAction};
use crate::engine::Engine;
use crate::error::ErrorCode;
use crate::keys::KeyModel;
use crate::policy::a2a::matches_allow;
use crate::policy::send::{resolve_send_policy, PolicySubject};
use crate::store::Store;

/// Text with the odd parts models and configs carry: colons, case, NUL, surrogate-adjacent
/// and combining characters, RTL marks, long runs, `__proto__`.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9:_ -]{0,24}",
        "(agent|AGENT|Agent)?:?[a-z]{0,6}:(main|subagent|group|channel|cron|discord|thread|topic)?:?[a-z0-9.:-]{0,12}",
        any::<String>(),
        Just("__proto__".to_owned()),
        Just("\0".to_owned()),
        Just("a\u{0}b:c".to_owned()),
        Just("\u{202e}agent:main:main".to_owned()),
        Just("e\u{301}:\u{1F600}".to_owned()),
        Just("::::".to_owned()),
        "x{300,700}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Objects with the field names the tools and the config read, and arbitrary values.
fn shaped(names: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(names), json_value()), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

const TOOL_FIELDS: &[&str] = &[
    "sessionKey",
    "limit",
    "kinds",
    "activeMinutes",
    "messageLimit",
    "includeTools",
    "maxChars",
    "label",
    "agentId",
    "message",
    "timeoutSeconds",
    "task",
    "model",
    "thinking",
    "cleanup",
    "__proto__",
];
const CTX_FIELDS: &[&str] = &[
    "agentSessionKey",
    "agentChannel",
    "agentAccountId",
    "agentTo",
    "agentThreadId",
    "sandboxed",
    "requesterAgentIdOverride",
    "runId",
    "agentGroupId",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn canonical_keys_are_total_and_idempotent(raw in text(), global in any::<bool>(), main in "[a-z]{0,6}") {
        let km = KeyModel::new(global, &main, "main");
        if let Ok(k) = km.canonical(&raw) {
            prop_assert_eq!(km.canonical(&k).ok(), Some(k.clone()), "canonical(canonical(x)) != canonical(x)");
            let agent = km.agent_id_of(&k);
            let _ = km.display(&k, &agent);
            let kind = km.classify_kind(&k, false);
            let _ = km.derive_channel(&k, kind, None, None);
            let _ = km.store_keys(&raw);
        } else {
            let e = km.canonical(&raw).unwrap_err();
            prop_assert_eq!(e.code(), ErrorCode::InvalidRequest);
        }
        let _ = km.resolve_for(&raw, "main");
        prop_assert_eq!(crate::keys::agent_key_rest(&raw).map(|r| r.into_owned()), crate::keys::parse_agent_key(&raw).map(|p| p.rest));
        let _ = crate::keys::parse_group_key(&raw);
        let _ = crate::orchestrate::announce_target::from_key(&raw);
    }

    #[test]
    fn a_matching_deny_rule_always_denies_unless_the_entry_says_otherwise(
        rules in prop::collection::vec(shaped(&["action", "match"]), 0..5),
        key in text(), channel in proptest::option::of(text()), chat in proptest::option::of(text()),
        entry_policy in proptest::option::of(prop_oneof![Just("allow".to_owned()), Just("deny".to_owned()), text()]),
    ) {
        let mut all = rules.clone();
        all.push(json!({"action": "deny"}));
        for (rules, must_deny) in [(rules, false), (all, true)] {
            let Ok(cfg) = Config::from_json(&json!({"session": {"sendPolicy": {"rules": rules}}})) else { continue };
            let subject = PolicySubject { send_policy: entry_policy.as_deref(), channel: channel.as_deref(), last_channel: None, chat_type: chat.as_deref() };
            let canonical = cfg.key_model().canonical(&key).unwrap_or_default();
            let got = resolve_send_policy(cfg.send_policy.as_ref(), subject, &key, &canonical, channel.as_deref(), chat.as_deref());
            let override_ = entry_policy.as_deref().map(|p| crate::js::js_trim(p).to_lowercase());
            match override_.as_deref() {
                Some("allow") => prop_assert_eq!(got, PolicyAction::Allow),
                Some("deny") => prop_assert_eq!(got, PolicyAction::Deny),
                _ if must_deny => prop_assert_eq!(got, PolicyAction::Deny),
                _ => {}
            }
        }
    }

    #[test]
    fn allow_globs_match_every_expansion_of_their_stars(parts in prop::collection::vec("[a-z*?.()\\[\\]+^$|\\\\]{0,4}", 1..4), fills in prop::collection::vec("[a-z.]{0,5}", 4)) {
        let pattern = parts.join("*");
        let mut id = String::new();
        for (i, p) in parts.iter().enumerate() {
            id.push_str(&p.replace('*', ""));
            if i + 1 < parts.len() { id.push_str(&fills[i % fills.len()]); }
        }
        let pattern_clean: String = parts.iter().map(|p| p.replace('*', "")).collect::<Vec<_>>().join("*");
        if pattern_clean.trim() == pattern_clean && !pattern_clean.is_empty() && pattern_clean.contains('*') {
            prop_assert!(matches_allow(std::slice::from_ref(&pattern_clean), &id), "{pattern_clean} should match {id}");
        }
        let _ = matches_allow(&[pattern], &id);
        prop_assert!(matches_allow(&["*".to_owned()], &id));
    }

    #[test]
    fn any_config_is_accepted_or_refused_with_invalid_config(cfg in shaped(&["session", "tools", "agents", "messages", "models"])) {
        if let Err(e) = Config::from_json(&cfg) {
            prop_assert_eq!(e.code(), ErrorCode::InvalidConfig);
        }
    }

    #[test]
    fn host_results_are_read_or_refused_with_a_reason(v in json_value(), shaped_v in shaped(&["messages", "reply", "usage", "model", "provider"])) {
        for v in [v, shaped_v] {
            if let Err(e) = crate::host::AgentRunResult::from_json(&v, 0) {
                prop_assert!(!e.is_empty());
            }
        }
    }
}

fn tool_engine() -> Engine {
    let e = Engine::new(Store::open(":memory:").unwrap(), Config::default(), None);
    e.upsert_session(&json!("main"), &json!({"label": "home"})).unwrap();
    e.upsert_session(&json!("agent:main:discord:group:dev"), &json!({"spawnedBy": "agent:main:main"})).unwrap();
    e.append_messages(
        &json!("main"),
        &json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]),
    )
    .unwrap();
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// What a model sends never makes a read tool fail: every outcome is a payload; only a bad
    /// ctx (the gateway's side) is an INVALID_REQUEST error.
    #[test]
    fn read_tools_answer_any_params_with_a_payload(params in shaped(TOOL_FIELDS), raw in json_value(), ctx in shaped(CTX_FIELDS)) {
        let e = tool_engine();
        for tool in [crate::tools::Tool::SessionsList, crate::tools::Tool::SessionsHistory, crate::tools::Tool::AgentsList] {
            for p in [&params, &raw] {
                match crate::tools::run(&e, tool, p, &ctx, true) {
                    Ok(v) => prop_assert!(v.get("details").is_some()),
                    Err(err) => prop_assert_eq!(err.code(), ErrorCode::InvalidRequest),
                }
            }
        }
        // and the store is intact afterwards
        prop_assert!(e.store().read(|db| db.integrity_ok()).unwrap());
        prop_assert_eq!(e.list_sessions(&Value::Null).unwrap()["count"].clone(), json!(2));
    }

    /// The store methods refuse bad arguments with INVALID_REQUEST and never corrupt anything.
    #[test]
    fn store_methods_refuse_bad_arguments_cleanly(a in json_value(), b in json_value(), key in text()) {
        let e = tool_engine();
        let k = Value::from(key);
        let results = [
            e.upsert_session(&a, &b).map(|_| ()),
            e.upsert_session(&k, &b).map(|_| ()),
            e.patch_session(&a).map(|_| ()),
            e.resolve_session(&a).map(|_| ()),
            e.list_sessions(&a).map(|_| ()),
            e.append_messages(&k, &b).map(|_| ()),
            e.chat_history(&k, &b).map(|_| ()),
            e.resolve_send_policy(&a).map(|_| ()),
            e.handle_send_command(&a).map(|_| ()),
            e.reset_session(&a).map(|_| ()),
        ];
        for r in results {
            if let Err(err) = r {
                prop_assert_eq!(err.code(), ErrorCode::InvalidRequest, "{}", err.message());
            }
        }
        prop_assert!(e.store().read(|db| db.integrity_ok()).unwrap());
    }
}

/// JSON5 text built from a value, with the quirks the gateway's files carry: comments, trailing
/// commas, single quotes, unquoted keys, extra blank space.
fn json5_text(v: &Value, quirk: u8) -> String {
    match v {
        Value::Object(m) => {
            let mut parts: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    let ident = !k.is_empty()
                        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !k.starts_with(|c: char| c.is_ascii_digit());
                    let key = if ident && quirk & 1 == 1 { k.clone() } else { Value::from(k.clone()).to_string() };
                    format!("{key}: {}", json5_text(v, quirk))
                })
                .collect();
            if quirk & 2 == 2 && !parts.is_empty() {
                parts.push(String::new()); // a trailing comma
            }
            let sep = if quirk & 4 == 4 { ",\n  // a comment\n  " } else { ", " };
            format!("{{{}}}", parts.join(sep).trim_end_matches(' ').to_owned())
        }
        Value::Array(a) => format!("[{}]", a.iter().map(|v| json5_text(v, quirk)).collect::<Vec<_>>().join(", ")),
        Value::String(s) if quirk & 8 == 8 && !s.contains(['\'', '\\']) && !s.chars().any(char::is_control) => {
            format!("'{s}'")
        }
        other => other.to_string(),
    }
}

/// The same JSON value, numbers compared by value (JSON5 may read `5` back as `5.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The JSON5 reader reads what JSON5 writers write (the same value back), and any text at
    /// all is read or refused with a reason, never a panic.
    #[test]
    fn json5_reads_back_what_json5_writes_and_refuses_the_rest(v in json_value(), quirk in 0u8..16, junk in any::<String>()) {
        let text = json5_text(&v, quirk);
        match crate::migrate::json5::parse(&text) {
            Ok(back) => prop_assert!(same(&back, &v), "read back differently:\n{text}\n{back}"),
            Err(e) => prop_assert!(false, "valid JSON5 refused: {e}\n{text}"),
        }
        if let Err(e) = crate::migrate::json5::parse(&junk) {
            prop_assert!(!e.is_empty());
        }
        let _ = crate::migrate::json5::parse(&format!("{{a: {junk}"));
        let _ = crate::migrate::json5::parse(&"[".repeat(2000));
    }

    /// The transcript reader takes any bytes: every line is a message, ignored, or a bad line
    /// with its 1-based number; message lines keep their order.
    #[test]
    fn transcripts_of_any_bytes_are_read_line_by_line(
        lines in prop::collection::vec(prop_oneof![
            json_value().prop_map(|v| json!({"type": "message", "message": v}).to_string()),
            json_value().prop_map(|v| v.to_string()),
            any::<String>(),
            prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        ], 0..30),
        raw in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let text = lines.join("\n");
        let t = crate::migrate::jsonl::read(text.as_bytes());
        let count = text.split('\n').count();
        for (line, reason) in &t.bad_lines {
            prop_assert!(*line >= 1 && *line <= count);
            prop_assert!(!reason.is_empty());
        }
        for (_, json) in &t.messages() {
            prop_assert!(serde_json::from_str::<Value>(json).is_ok());
        }
        let _ = crate::migrate::jsonl::read(&raw);
    }
}
