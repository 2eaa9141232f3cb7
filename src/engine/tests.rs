//! Tests of `engine`, kept beside it so the module itself reads top to bottom.
use super::*;
use crate::config::PolicyAction;
use crate::error::ErrorCode;

fn engine(cfg: Value) -> Engine {
    Engine::new(Store::open(":memory:").unwrap(), Config::from_json(&cfg).unwrap(), None)
}

fn msg(e: Result<Value>) -> String {
    e.unwrap_err().message().to_owned()
}

#[test]
fn s20_a_label_is_unique_within_an_agent() {
    let e = engine(Value::Null);
    e.patch_session(&json!({"key": "agent:main:subagent:one", "label": "Briefing"})).unwrap();
    assert_eq!(
        msg(e.patch_session(&json!({"key": "agent:main:discord:group:dev", "label": "Briefing"}))),
        "label already in use: Briefing"
    );
    // another agent may use it
    e.patch_session(&json!({"key": "agent:ops:x", "label": "Briefing"})).unwrap();
    // re-labelling the holder itself is fine
    e.patch_session(&json!({"key": "agent:main:subagent:one", "label": "Briefing"})).unwrap();
}

#[test]
fn s21_spawned_by_only_for_subagents_and_never_changed() {
    let e = engine(Value::Null);
    assert_eq!(
        msg(e.patch_session(&json!({"key": "agent:main:main", "spawnedBy": "agent:main:main"}))),
        "spawnedBy is only supported for subagent:* sessions"
    );
    let r = e.patch_session(&json!({"key": "agent:main:subagent:two", "spawnedBy": "agent:main:main"})).unwrap();
    assert_eq!(r["entry"]["spawnedBy"], "agent:main:main");
    assert_eq!(
        msg(e.patch_session(&json!({"key": "agent:main:subagent:two", "spawnedBy": "agent:main:other"}))),
        "spawnedBy cannot be changed once set"
    );
    assert_eq!(
        msg(e.patch_session(&json!({"key": "agent:main:subagent:two", "spawnedBy": null}))),
        "spawnedBy cannot be cleared once set"
    );
}

#[test]
fn s22_elevated_level_off_is_stored_null_clears_and_bad_values_fail() {
    let e = engine(Value::Null);
    let r = e.patch_session(&json!({"key": "main", "elevatedLevel": "off"})).unwrap();
    assert_eq!(r["entry"]["elevatedLevel"], "off");
    let r = e.patch_session(&json!({"key": "main", "elevatedLevel": null})).unwrap();
    assert!(r["entry"].get("elevatedLevel").is_none());
    assert!(msg(e.patch_session(&json!({"key": "main", "elevatedLevel": "maybe"}))).contains("invalid elevatedLevel"));
}

#[test]
fn s23_a_catalog_model_sets_overrides_and_clears_auth_profile() {
    let cfg = json!({"models": {"providers": {"openai": {"models": [{"id": "gpt-5.2"}]}}}});
    let e = engine(cfg);
    e.upsert_session(&json!("main"), &json!({"authProfileOverride": "p", "authProfileOverrideSource": "user"}))
        .unwrap();
    let r = e.patch_session(&json!({"key": "main", "model": "openai/gpt-5.2"})).unwrap();
    assert_eq!(r["entry"]["providerOverride"], "openai");
    assert_eq!(r["entry"]["modelOverride"], "gpt-5.2");
    assert!(r["entry"].get("authProfileOverride").is_none());
    assert_eq!(msg(e.patch_session(&json!({"key": "main", "model": "bad-model"}))), "invalid model: bad-model");
}

#[test]
fn unknown_patch_properties_are_refused_with_the_gateway_text() {
    let e = engine(Value::Null);
    assert_eq!(
        msg(e.patch_session(&json!({"key": "main", "foo": 1}))),
        "invalid sessions.patch params: at root: unexpected property 'foo'"
    );
}

#[test]
fn s24_resolve_by_key_session_id_and_label() {
    let e = engine(Value::Null);
    e.upsert_session(&json!("main"), &json!({})).unwrap();
    e.upsert_session(&json!("discord:group:dev"), &json!({"sessionId": "sess-group"})).unwrap();
    e.patch_session(&json!({"key": "agent:main:subagent:s", "label": "L"})).unwrap();
    assert_eq!(e.resolve_session(&json!({"key": "main"})).unwrap()["key"], "agent:main:main");
    assert_eq!(e.resolve_session(&json!({"sessionId": "sess-group"})).unwrap()["key"], "agent:main:discord:group:dev");
    assert_eq!(e.resolve_session(&json!({"label": "L"})).unwrap()["key"], "agent:main:subagent:s");
    assert_eq!(msg(e.resolve_session(&json!({"key": "nope"}))), "No session found: nope");
    assert_eq!(msg(e.resolve_session(&json!({"label": "zz"}))), "No session found with label: zz");
    assert_eq!(
        msg(e.resolve_session(&json!({"key": "main", "label": "L"}))),
        "Provide either key, sessionId, or label (not multiple)"
    );
    assert_eq!(msg(e.resolve_session(&json!({}))), "Either key, sessionId, or label is required");
}

#[test]
fn a_shared_session_id_is_ambiguous() {
    let e = engine(Value::Null);
    e.upsert_session(&json!("a"), &json!({"sessionId": "dup"})).unwrap();
    e.upsert_session(&json!("b"), &json!({"sessionId": "dup"})).unwrap();
    assert!(msg(e.resolve_session(&json!({"sessionId": "dup"})))
        .starts_with("Multiple sessions found for sessionId: dup ("));
}

#[test]
fn a_bare_spawned_by_is_stored_canonical_for_the_childs_agent() {
    let e = engine(Value::Null);
    let r = e.upsert_session(&json!("agent:ops:subagent:c"), &json!({"spawnedBy": "discord:group:req"})).unwrap();
    assert_eq!(r["spawnedBy"], "agent:ops:discord:group:req");
    let r = e.upsert_session(&json!("agent:main:subagent:d"), &json!({"spawnedBy": "main"})).unwrap();
    assert_eq!(r["spawnedBy"], "agent:main:main");
    assert_eq!(
        e.upsert_session(&json!("x"), &json!({"spawnedBy": "a\u{0}b"})).unwrap_err().code(),
        ErrorCode::InvalidRequest
    );
}

#[test]
fn appended_messages_are_mirrored_to_jsonl_and_the_list_points_at_the_file() {
    let dir = crate::scratch::path("engine-mirror");
    let e = Engine::new(Store::open(":memory:").unwrap(), Config::default(), Some(dir.clone()));
    e.append_messages(
        &json!("main"),
        &json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]),
    )
    .unwrap();
    let entry = e.get_session(&json!("main")).unwrap().unwrap();
    let path = e.transcript_path(&entry).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().nth(2).unwrap().contains(r#""content":"b""#));
    e.upsert_session(&json!("odd"), &json!({"sessionId": "../../escape"})).unwrap();
    e.append_messages(&json!("odd"), &json!([{"role": "user", "content": "x"}])).unwrap();
    let odd = e.get_session(&json!("odd")).unwrap().unwrap();
    assert_eq!(e.transcript_path(&odd), None);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    e.upsert_session(&json!("discord:group:x"), &json!({})).unwrap();
    e.append_messages(&json!("discord:group:x"), &json!([{"role": "user", "content": "x"}])).unwrap();
    e.delete_session(&json!("discord:group:x"), &Value::Null).unwrap();
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|d| d.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.iter().filter(|n| n.contains(".jsonl.deleted.")).count(), 1, "{names:?}");
}

#[test]
fn s28_the_main_session_cannot_be_deleted_and_delete_removes_the_transcript() {
    let e = engine(Value::Null);
    assert_eq!(
        msg(e.delete_session(&json!("main"), &Value::Null)),
        "Cannot delete the main session (agent:main:main)."
    );
    e.append_messages(&json!("discord:group:dev"), &json!([{"role": "user", "content": "x"}])).unwrap();
    let sid = e.get_session(&json!("discord:group:dev")).unwrap().unwrap()["sessionId"].as_str().unwrap().to_owned();
    let r = e.delete_session(&json!("discord:group:dev"), &Value::Null).unwrap();
    assert_eq!(r, json!({"ok": true, "key": "agent:main:discord:group:dev", "deleted": true}));
    assert_eq!(e.store().read(|db| db.message_count(&sid)).unwrap(), 0);
    assert_eq!(e.delete_session(&json!("discord:group:dev"), &Value::Null).unwrap()["deleted"], false);
}

#[test]
fn delete_removes_a_legacy_twin_too() {
    let e = engine(Value::Null);
    let bare: Entry = json!({"sessionId": "legacy", "updatedAt": 1}).as_object().cloned().unwrap();
    e.store().write(|db| db.put_session("discord:group:dev", &bare)).unwrap();
    e.upsert_session(&json!("discord:group:dev"), &json!({})).unwrap();
    e.delete_session(&json!("discord:group:dev"), &Value::Null).unwrap();
    assert_eq!(e.store().read(|db| db.session_count()).unwrap(), 0);
}

#[test]
fn s30_reset_gives_a_new_session_id_and_zero_counters_under_the_same_key() {
    let e = engine(Value::Null);
    e.upsert_session(&json!("main"), &json!({"inputTokens": 5, "label": "keep", "spawnedBy": "x"})).unwrap();
    let before = e.get_session(&json!("main")).unwrap().unwrap();
    let r = e.reset_session(&json!("main")).unwrap();
    assert_eq!(r["key"], "agent:main:main");
    assert_ne!(r["entry"]["sessionId"], before["sessionId"]);
    assert_eq!(r["entry"]["inputTokens"], 0);
    assert_eq!(r["entry"]["label"], "keep");
    assert!(r["entry"].get("spawnedBy").is_none());
}

#[test]
fn patching_a_legacy_key_moves_it_to_the_canonical_key() {
    let e = engine(Value::Null);
    let bare: Entry = json!({"sessionId": "legacy", "updatedAt": 1, "x": 1}).as_object().cloned().unwrap();
    e.store().write(|db| db.put_session("discord:group:dev", &bare)).unwrap();
    let r = e.patch_session(&json!({"key": "discord:group:dev", "sendPolicy": "deny"})).unwrap();
    assert_eq!(r["key"], "agent:main:discord:group:dev");
    assert_eq!(r["entry"]["sessionId"], "legacy");
    assert_eq!(r["entry"]["x"], 1);
    assert!(e.store().read(|db| db.session("discord:group:dev")).unwrap().is_none());
}

#[test]
fn y7_send_command_sets_and_clears_the_override() {
    let e = engine(Value::Null);
    let off = e.handle_send_command(&json!({"sessionKey": "main", "text": "/send off", "isOwner": true})).unwrap();
    assert_eq!(off["reply"], "⚙️ Send policy set to off.");
    assert_eq!(e.resolve_send_policy(&json!({"sessionKey": "main"})).unwrap(), PolicyAction::Deny);
    let inh = e.handle_send_command(&json!({"sessionKey": "main", "text": "/send inherit", "isOwner": true})).unwrap();
    assert_eq!(inh["reply"], "⚙️ Send policy set to inherit.");
    assert!(e.get_session(&json!("main")).unwrap().unwrap().get("sendPolicy").is_none());
    let usage = e.handle_send_command(&json!({"sessionKey": "main", "text": "/send maybe", "isOwner": true})).unwrap();
    assert_eq!(usage["reply"], "⚙️ Usage: /send on|off|inherit");
    let stranger =
        e.handle_send_command(&json!({"sessionKey": "main", "text": "/send off", "isOwner": false})).unwrap();
    assert_eq!(stranger, json!({"handled": true}));
    assert_eq!(e.resolve_send_policy(&json!({"sessionKey": "main"})).unwrap(), PolicyAction::Allow);
    assert_eq!(
        e.handle_send_command(&json!({"sessionKey": "main", "text": "hello"})).unwrap(),
        json!({"handled": false})
    );
}

#[test]
fn a_closed_store_denies_nothing_silently() {
    let e = engine(Value::Null);
    e.store().close();
    assert_eq!(e.resolve_send_policy(&json!({"sessionKey": "main"})).unwrap_err().code(), ErrorCode::Closed);
}

#[test]
fn list_rows_carry_derived_titles_and_previews() {
    let e = engine(Value::Null);
    e.append_messages(
        &json!("main"),
        &json!([{"role": "user", "content": "plan the offsite"}, {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]),
    )
    .unwrap();
    let r = e.list_sessions(&json!({"includeDerivedTitles": true, "includeLastMessage": true})).unwrap();
    let row = &r["sessions"][0];
    assert_eq!(row["derivedTitle"], "plan the offsite");
    assert_eq!(row["lastMessagePreview"], "done");
    assert_eq!(row["totalTokens"], 0);
    assert_eq!(r["count"], 1);
}

#[test]
fn dates_are_utc_calendar_days() {
    assert_eq!(ymd(0), "1970-01-01");
    assert_eq!(ymd(1_710_460_800_000), "2024-03-15");
}

#[test]
fn long_titles_are_cut_at_a_word_boundary() {
    let t = "word ".repeat(20);
    let c = clip_title(t.trim());
    assert!(c.ends_with('…'));
    assert!(c.chars().count() <= 60);
    assert_eq!(clip_title("short"), "short");
}

#[test]
fn message_text_reads_strings_and_text_blocks() {
    // trimmed only: the preview keeps inner white space as the gateway's does
    assert_eq!(
        message_text("{\"role\":\"user\",\"content\":\"  hi \\n\\n  there \"}").as_deref(),
        Some("hi \n\n  there")
    );
    assert_eq!(
        message_text(r#"{"role":"user","content":[{"type":"image"},{"type":"text","text":"x"}]}"#).as_deref(),
        Some("x")
    );
    assert_eq!(message_text(r#"{"role":"user","content":[]}"#), None);
}

/// An upsert merged on the stored text (`upsert_session_text`) leaves the row, every column, and
/// answers the text, exactly as the parsing path (`upsert_session`) does, over entries another
/// writer spelled and patches that touch the columns, the route and the legacy fields.
#[test]
fn an_upsert_merged_on_the_text_stores_and_answers_what_the_parsing_path_does() {
    let on_text = engine(Value::Null);
    let parsed = engine(Value::Null);
    let keys = [
        "agent:main:telegram:dm:u1",
        "agent:main:discord:group:dev",
        "agent:main:subagent:kid",
        "agent:main:cron:job-1",
    ];
    let stored = [
        None,
        Some(
            r#"{"sessionId":"s-1","updatedAt":5,"chatType":"direct","lastChannel":"whatsapp","lastTo":"+1","deliveryContext":{"channel":"whatsapp","to":"+1"},"origin":{"label":"Ann"}}"#,
        ),
        Some(r#"{ "sessionId": "s-2", "updatedAt": 5.5, "subject": "Dev \/ ops", "channel": "discord" }"#),
        Some(r#"{"sessionId":"s-3","updatedAt":7,"room":"r1","provider":"slack","displayName":"\u00c9quipe"}"#),
    ];
    let patches = [
        json!({"lastChannel": "telegram", "lastTo": "+1555", "inputTokens": 101, "outputTokens": 50}),
        json!({"label": "Team", "subject": "Renamed", "displayName": "Dév"}),
        json!({"chatType": "group", "lastThreadId": 12.7, "deliveryContext": {"channel": "IMSG", "to": " x "}}),
        json!({"lastAccountId": " acc ", "groupChannel": "#dev", "space": "eng", "origin": {"label": "Zoë"}}),
        json!({"spawnedBy": "agent:main:main", "projectId": "p1", "archivedAt": 12}),
        json!({"lastProvider": "signal", "lastChannel": null, "é\"\u{1}": [1.5, {"a": null}]}),
        json!({"deliveryContext": null, "lastTo": null, "lastThreadId": "  "}),
    ];
    for (i, key) in keys.iter().enumerate() {
        for (e, text) in [(&on_text, stored[i]), (&parsed, stored[i])] {
            e.upsert_session(&json!(key), &json!({"updatedAt": 1, "sessionId": format!("s-{i}")})).unwrap();
            if let Some(text) = text {
                e.store().write(|db| db.set_entry_text(key, text)).unwrap();
            }
        }
        for (n, p) in patches.iter().enumerate() {
            // an updatedAt past now, so the two stores' entries do not depend on the clock
            let mut p = p.clone();
            p["updatedAt"] = json!(4_000_000_000_000i64 + n as i64);
            let text = on_text.upsert_session_text(&json!(key), &p);
            let entry = parsed.upsert_session(&json!(key), &p);
            match (text, entry) {
                (Ok(text), Ok(entry)) => assert_eq!(text, serde_json::to_string(&entry).unwrap(), "{key} {p}"),
                (Err(a), Err(b)) => assert_eq!(a.message(), b.message()),
                (a, b) => panic!("{key} {p}: {a:?} against {b:?}"),
            }
            let row = |e: &Engine| e.store().read(|db| db.row_columns(key)).unwrap();
            assert_eq!(row(&on_text), row(&parsed), "{key} {p}");
        }
    }
}
