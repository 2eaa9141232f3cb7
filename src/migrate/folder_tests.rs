//! Import and export against state folders built here, as REFERENCE.md §11 "Store & formats"
//! reads: given a folder, when it is imported (again, or exported and imported back), then …

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{export_state_dir, import_state_dir, snapshot};
use crate::keys::KeyModel;
use crate::store::pg::testdb;
use crate::store::Store;

fn tmp(tag: &str) -> PathBuf {
    let d = crate::scratch::path(&format!("migrate-{tag}"));
    fs::create_dir_all(&d).unwrap();
    d
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn line(v: Value) -> String {
    format!("{v}\n")
}

fn msg(role: &str, text: &str) -> Value {
    json!({"type": "message", "message": {"role": role, "content": text}})
}

/// A folder with two agents, a legacy single store, JSON5 quirks, transcripts of versions 1–3
/// with a corrupt line, a path-escape attempt and a version-1 registry.
fn gateway_folder() -> PathBuf {
    let root = tmp("src");
    write(
        &root,
        "agents/main/sessions/sessions.json",
        r#"{
  // the main agent
  "agent:main:main": { sessionId: 'sid-main', updatedAt: 1000, provider: 'telegram', },
  'subagent:child-1': { "sessionId": "sid-child", "updatedAt": 1500, "spawnedBy": "main" },
  "agent:main:escape": { "sessionId": "sid-escape", "updatedAt": 10, "sessionFile": "../../etc/passwd" },
  "agent:main:telegram:group:-100:topic:7": { "sessionId": "sid-topic", "updatedAt": 20 },
  "agent:main:nosid": { "updatedAt": 5 },
}"#,
    );
    write(
        &root,
        "agents/main/sessions/sid-main.jsonl",
        &[
            line(json!({"type": "session", "version": 3, "id": "sid-main", "timestamp": "2024-01-01T00:00:00.000Z"})),
            line(json!({"type": "message", "id": "a1", "parentId": null, "message": {"role": "user", "content": "one"}})),
            "{this line is corrupt\n".to_string(),
            line(json!({"type": "compaction", "id": "a2", "parentId": "a1", "summary": "s"})),
            line(json!({"type": "message", "id": "a3", "parentId": "a2", "message": {"role": "assistant", "content": [{"type": "text", "text": "two"}]}})),
        ]
        .concat(),
    );
    write(
        &root,
        "agents/main/sessions/sid-child.jsonl",
        &[line(json!({"type": "session", "version": 2, "id": "sid-child"})), line(msg("hookMessage", "hook"))].concat(),
    );
    write(&root, "agents/main/sessions/sid-escape.jsonl", &line(msg("user", "beside the store")));
    write(&root, "agents/main/sessions/sid-topic-topic-7.jsonl", &line(msg("user", "wrong name")));
    write(&root, "agents/main/sessions/sid-topic-topic-7.jsonl", &line(msg("user", "in topic")));
    write(
        &root,
        "agents/Ops/sessions/sessions.json",
        r##"{"Main": {"sessionId": "sid-ops", "updatedAt": 3000}, "discord:group:Dev": {"sessionId": "sid-dev", "updatedAt": 2000, "room": "#dev"}}"##,
    );
    write(
        &root,
        "agents/Ops/sessions/sid-ops.jsonl",
        &[line(msg("user", "v1 a")), line(msg("assistant", "v1 b"))].concat(),
    );
    // the legacy single store: bare keys belong to the default agent
    write(
        &root,
        "sessions/sessions.json",
        r#"{"+15550001": {"sessionId": "sid-old", "updatedAt": 500}, "group:123@g.us": {"sessionId": "sid-wa", "updatedAt": 600}, "agent:main:main": {"sessionId": "sid-stale", "updatedAt": 1}}"#,
    );
    write(&root, "sessions/sid-old.jsonl", &line(msg("user", "legacy")));
    write(
        &root,
        "subagents/runs.json",
        &json!({"version": 1, "runs": {
            "r1": {"runId": "r1", "childSessionKey": "agent:main:subagent:child-1", "requesterSessionKey": "agent:main:main",
                   "requesterDisplayKey": "main", "task": "t", "cleanup": "keep", "createdAt": 1, "startedAt": 1, "endedAt": 2,
                   "outcome": {"status": "ok"}, "announceCompletedAt": 3, "requesterChannel": "Telegram", "extra": 42},
            "r2": {"runId": "r2", "childSessionKey": "agent:main:subagent:x", "requesterSessionKey": "agent:main:main", "task": "t2", "createdAt": 5},
            "bad": {"childSessionKey": "x"}
        }})
        .to_string(),
    );
    root
}

/// Two stores of one backend, then two of the other: `for [a, b] in store_pairs()`.
fn store_pairs() -> [[Store; 2]; 2] {
    let [lite_a, pg_a] = testdb::stores();
    let [lite_b, pg_b] = testdb::stores();
    [[lite_a, lite_b], [pg_a, pg_b]]
}

fn km() -> KeyModel {
    KeyModel::new(false, "main", "main")
}

/// Sessions by key, transcript entries by session id, run records.
type Dump = (BTreeMap<String, Value>, BTreeMap<String, Vec<String>>, Vec<String>);

fn dump(store: &Store) -> Dump {
    store
        .read(|db| {
            let mut sessions = BTreeMap::new();
            let mut sids = Vec::new();
            db.all_sessions(|k, j| {
                let e: Value = serde_json::from_str(&j).unwrap();
                sids.push(e["sessionId"].as_str().unwrap().to_owned());
                sessions.insert(k, e);
                Ok(())
            })?;
            let mut msgs = BTreeMap::new();
            for sid in sids {
                // Every entry, messages and the others, as an export writes it: ids, parent
                // links and content.
                let mut v = Vec::new();
                db.each_entry(&sid, |e| {
                    v.push(crate::mirror::entry_line(&e, 0));
                    Ok(())
                })?;
                msgs.insert(sid, v);
            }
            let runs = db.all_subagent_runs()?.into_iter().map(|r| r.record).collect();
            Ok((sessions, msgs, runs))
        })
        .unwrap()
}

#[test]
fn a_gateway_folder_imports_with_canonical_keys_messages_in_order_and_a_skip_report() {
    for store in testdb::stores() {
        let root = gateway_folder();
        let before = snapshot(&root);
        let r = import_state_dir(&store, &km(), None, &root, 99).unwrap();
        let (sessions, msgs, runs) = dump(&store);
        let keys: Vec<&str> = sessions.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "agent:main:+15550001",
                "agent:main:escape",
                "agent:main:main",
                "agent:main:subagent:child-1",
                "agent:main:telegram:group:-100:topic:7",
                "agent:main:whatsapp:group:123@g.us",
                // one case rule (the runtime's): the agent id lower-case, the rest as written
                "agent:ops:Main",
                "agent:ops:discord:group:Dev",
            ]
        );
        assert_eq!(r.sessions, 8);
        // the newer agent store entry wins over the legacy one; field migration applied
        assert_eq!(sessions["agent:main:main"]["sessionId"], "sid-main");
        assert_eq!(sessions["agent:main:main"]["channel"], "telegram");
        assert_eq!(sessions["agent:main:subagent:child-1"]["spawnedBy"], "agent:main:main");
        assert_eq!(sessions["agent:ops:discord:group:Dev"]["groupChannel"], "#dev");
        assert!(sessions["agent:main:escape"].get("sessionFile").is_none());
        let texts = |sid: &str| {
            msgs[sid]
                .iter()
                .filter_map(|t| serde_json::from_str::<Value>(t).unwrap().get("message").cloned())
                .collect::<Vec<_>>()
        };
        let main = texts("sid-main");
        assert_eq!(main.len(), 2);
        assert_eq!(main[0]["content"], "one");
        assert_eq!(main[1]["content"][0]["text"], "two");
        assert_eq!(texts("sid-child")[0]["role"], "custom");
        assert_eq!(texts("sid-ops").len(), 2);
        assert_eq!(texts("sid-topic")[0]["content"], "in topic");
        assert_eq!(texts("sid-escape")[0]["content"], "beside the store");
        assert_eq!(texts("sid-old")[0]["content"], "legacy");
        assert_eq!(r.messages, 8);
        // the report: the corrupt line, the escape, the entry without sessionId, the bad run
        let sk =
            |f: &str| r.skipped.iter().filter(|s| s.file == f).map(|s| (s.line, s.reason.clone())).collect::<Vec<_>>();
        assert_eq!(sk("agents/main/sessions/sid-main.jsonl").iter().map(|s| s.0).collect::<Vec<_>>(), [Some(3)]);
        let store_skips = sk("agents/main/sessions/sessions.json");
        assert!(store_skips.iter().any(|s| s.1.contains("outside the state folder")), "{store_skips:?}");
        assert!(store_skips.iter().any(|s| s.1.contains("nosid") && s.1.contains("sessionId")), "{store_skips:?}");
        assert_eq!(sk("subagents/runs.json").len(), 1);
        assert_eq!(r.skipped.len(), 4, "{:?}", r.skipped);
        // runs: v1 migrated, announce derived
        assert_eq!(r.runs, 2);
        let r1: Value = serde_json::from_str(&runs[0]).unwrap();
        assert_eq!(r1["cleanupCompletedAt"], 3);
        assert_eq!(r1["requesterOrigin"], json!({"channel": "telegram"}));
        assert_eq!(r1["announce"], json!({"status": "delivered", "attempts": 0, "idempotencyKey": "import:r1"}));
        assert_eq!(r1["extra"], 42);
        assert!(r1.get("announceCompletedAt").is_none() && r1.get("cleanupHandled").is_none());
        let r2: Value = serde_json::from_str(&runs[1]).unwrap();
        assert_eq!(r2["announce"]["status"], "pending");
        assert_eq!(r2["cleanup"], "keep");
        assert_eq!(r2["requesterDisplayKey"], "agent:main:main");
        // the source is untouched
        assert_eq!(snapshot(&root), before);
    }
}

#[test]
fn a_second_import_adds_nothing() {
    for store in testdb::stores() {
        let root = gateway_folder();
        import_state_dir(&store, &km(), None, &root, 99).unwrap();
        let first = dump(&store);
        let again = import_state_dir(&store, &km(), None, &root, 100).unwrap();
        assert_eq!((again.sessions, again.messages, again.runs), (0, 0, 0));
        assert_eq!(dump(&store), first);
    }
}

#[test]
fn import_export_import_yields_the_same_store() {
    for [a, b] in store_pairs() {
        let root = gateway_folder();
        import_state_dir(&a, &km(), None, &root, 99).unwrap();
        let out = tmp("out");
        let ex = export_state_dir(&a, &km(), &out, None).unwrap();
        assert_eq!((ex.sessions, ex.messages, ex.runs), (8, 8, 2));
        let r = import_state_dir(&b, &km(), None, &out, 99).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        assert_eq!(dump(&b), dump(&a));
        // the gateway's own formats
        let text = fs::read_to_string(out.join("agents/main/sessions/sessions.json")).unwrap();
        assert!(text.starts_with("{\n  \"") && !text.ends_with('\n'));
        let header: Value = serde_json::from_str(
            fs::read_to_string(out.join("agents/main/sessions/sid-main.jsonl")).unwrap().lines().next().unwrap(),
        )
        .unwrap();
        assert_eq!((header["type"].as_str(), header["version"].as_i64()), (Some("session"), Some(3)));
        let runs = fs::read_to_string(out.join("subagents/runs.json")).unwrap();
        assert!(runs.ends_with("}\n"));
        assert_eq!(serde_json::from_str::<Value>(&runs).unwrap()["runs"]["r1"]["cleanupHandled"], true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &str| fs::metadata(out.join(p)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode("agents/main/sessions/sessions.json"), 0o600);
            assert_eq!(mode("agents/main/sessions"), 0o700);
            assert_eq!(mode("subagents/runs.json"), 0o600);
        }
    }
}

#[test]
fn an_entry_already_in_the_store_is_replaced_only_by_a_newer_one() {
    for store in testdb::stores() {
        let root = tmp("newer");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:a": {"sessionId": "s1", "updatedAt": 10, "label": "old"}}"#,
        );
        let e = json!({"sessionId": "s0", "updatedAt": 20, "label": "mine"}).as_object().cloned().unwrap();
        store.write(|db| db.put_session("agent:main:a", &e)).unwrap();
        assert_eq!(import_state_dir(&store, &km(), None, &root, 1).unwrap().sessions, 0);
        assert_eq!(dump(&store).0["agent:main:a"]["label"], "mine");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:a": {"sessionId": "s1", "updatedAt": 30, "label": "new"}}"#,
        );
        assert_eq!(import_state_dir(&store, &km(), None, &root, 1).unwrap().sessions, 1);
        assert_eq!(dump(&store).0["agent:main:a"]["label"], "new");
    }
}

#[test]
fn a_legacy_direct_entry_becomes_the_main_entry_when_there_is_none() {
    for store in testdb::stores() {
        let root = tmp("legacy");
        write(
            &root,
            "sessions/sessions.json",
            r#"{"+1": {"sessionId": "a", "updatedAt": 1}, "+2": {"sessionId": "b", "updatedAt": 2}}"#,
        );
        import_state_dir(&store, &km(), None, &root, 1).unwrap();
        let s = dump(&store).0;
        assert_eq!(s["agent:main:main"]["sessionId"], "b");
        assert!(s.contains_key("agent:main:+1") && s.contains_key("agent:main:+2"));
    }
}

#[test]
fn bad_files_are_reported_never_fatal_and_a_missing_folder_is_an_error() {
    for store in testdb::stores() {
        let root = tmp("bad");
        write(&root, "agents/main/sessions/sessions.json", "{ nope");
        write(&root, "agents/x/sessions/sessions.json", "[]");
        write(&root, "subagents/runs.json", r#"{"version": 7, "runs": {}}"#);
        let r = import_state_dir(&store, &km(), None, &root, 1).unwrap();
        assert_eq!(r.skipped.len(), 3, "{:?}", r.skipped);
        assert!(r.skipped[0].reason.contains("line 1"));
        let err = import_state_dir(&store, &km(), None, &root.join("missing"), 1).unwrap_err();
        assert_eq!(err.code(), crate::error::ErrorCode::StoreError);
    }
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_out_of_the_folder_is_not_followed() {
    for store in testdb::stores() {
        let outside = tmp("outside");
        write(&outside, "secret.jsonl", &line(msg("user", "secret")));
        let root = tmp("links");
        write(&root, "agents/main/sessions/sessions.json", r#"{"agent:main:a": {"sessionId": "s1", "updatedAt": 1}}"#);
        std::os::unix::fs::symlink(outside.join("secret.jsonl"), root.join("agents/main/sessions/s1.jsonl")).unwrap();
        let r = import_state_dir(&store, &km(), None, &root, 1).unwrap();
        assert_eq!(r.messages, 0);
        assert!(r.skipped.iter().any(|s| s.file == "agents/main/sessions/s1.jsonl"), "{:?}", r.skipped);
    }
}

#[test]
fn export_writes_no_transcript_for_a_session_id_that_is_not_a_file_name() {
    for store in testdb::stores() {
        let e = json!({"sessionId": "../../evil", "updatedAt": 1}).as_object().cloned().unwrap();
        store
            .write(|db| {
                db.put_session("agent:main:e", &e)?;
                db.append_messages("../../evil", &[(Some("user".into()), r#"{"role":"user","content":"x"}"#.into())])?;
                Ok(())
            })
            .unwrap();
        let out = tmp("evil");
        let r = export_state_dir(&store, &km(), &out.join("export"), None).unwrap();
        assert_eq!((r.sessions, r.messages, r.files), (1, 0, 1));
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(snapshot(&out).len(), 1);
    }
}

#[test]
fn an_entry_without_updated_at_is_imported_once() {
    for store in testdb::stores() {
        let root = tmp("noupdated");
        write(&root, "agents/main/sessions/sessions.json", r#"{"agent:main:a": {"sessionId": "s1"}}"#);
        assert_eq!(import_state_dir(&store, &km(), None, &root, 100).unwrap().sessions, 1);
        assert_eq!(dump(&store).0["agent:main:a"]["updatedAt"], 100);
        assert_eq!(import_state_dir(&store, &km(), None, &root, 200).unwrap().sessions, 0);
        assert_eq!(dump(&store).0["agent:main:a"]["updatedAt"], 100);
    }
}

#[test]
fn imported_messages_are_mirrored_as_appended_ones_are() {
    for store in testdb::stores() {
        let root = gateway_folder();
        let mirror = tmp("mirror");
        import_state_dir(&store, &km(), Some(&mirror), &root, 99).unwrap();
        let text = fs::read_to_string(mirror.join("sid-main.jsonl")).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        // The header, then the entries as the file had them, the compaction entry too.
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0]["type"], "session");
        assert_eq!(lines[1]["id"], "a1");
        assert_eq!(lines[2]["type"], "compaction");
        assert_eq!(lines[3]["message"]["content"][0]["text"], "two");
        assert_eq!(lines[3]["parentId"], "a2");
        import_state_dir(&store, &km(), Some(&mirror), &root, 99).unwrap();
        assert_eq!(fs::read_to_string(mirror.join("sid-main.jsonl")).unwrap(), text);
    }
}

#[test]
fn a_session_file_inside_the_folder_is_honoured_absolute_or_relative() {
    for store in testdb::stores() {
        let root = tmp("sessionfile");
        let abs = root.join("elsewhere/named.jsonl");
        let store_text = json!({
            "agent:main:a": {"sessionId": "s-a", "updatedAt": 1, "sessionFile": abs.to_string_lossy()},
            "agent:main:b": {"sessionId": "s-b", "updatedAt": 1, "sessionFile": "sub/b-file.jsonl"},
        })
        .to_string();
        write(&root, "agents/main/sessions/sessions.json", &store_text);
        write(&root, "elsewhere/named.jsonl", &line(msg("user", "from the absolute path")));
        write(&root, "agents/main/sessions/sub/b-file.jsonl", &line(msg("user", "from the relative path")));
        write(&root, "agents/main/sessions/s-a.jsonl", &line(msg("user", "not this one")));
        let r = import_state_dir(&store, &km(), None, &root, 1).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let (_, msgs, _) = dump(&store);
        assert!(msgs["s-a"][0].contains("from the absolute path"));
        assert!(msgs["s-b"][0].contains("from the relative path"));
    }
}

#[cfg(unix)]
#[test]
fn export_makes_no_folder_through_a_link_that_leads_outside() {
    for store in testdb::stores() {
        let outside = tmp("export-outside");
        let e = json!({"sessionId": "s1", "updatedAt": 1}).as_object().cloned().unwrap();
        store.write(|db| db.put_session("agent:ops:main", &e)).unwrap();
        let out = tmp("export-links");
        fs::create_dir_all(out.join("agents")).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("agents/ops")).unwrap();
        let err = export_state_dir(&store, &km(), &out, None).unwrap_err();
        assert_eq!(err.code(), crate::error::ErrorCode::StoreError);
        assert!(err.message().contains("outside the export folder"), "{}", err.message());
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0, "something was made outside");
        // a link that stays inside the folder is still fine
        fs::remove_file(out.join("agents/ops")).unwrap();
        fs::create_dir_all(out.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(out.join("elsewhere"), out.join("agents/ops")).unwrap();
        export_state_dir(&store, &km(), &out, None).unwrap();
        assert!(out.join("elsewhere/sessions/sessions.json").is_file());
    }
}

/// A version-3 transcript as the gateway writes it: a header, then entries chained by parent.
fn v3(sid: &str, entries: &[Value]) -> String {
    let mut out = line(json!({"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z"}));
    for e in entries {
        out.push_str(&line(e.clone()));
    }
    out
}

fn m(id: &str, parent: Option<&str>, text: &str) -> Value {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
           "message": {"role": "user", "content": text}})
}

fn texts(store: &Store, sid: &str) -> Vec<String> {
    store.read(|db| Ok(db.history_page(sid, 1000, None)?.messages.into_iter().map(|m| m.json).collect())).unwrap()
}

#[test]
fn a_reimport_after_the_gateway_rewrote_the_transcript_yields_what_the_file_now_holds() {
    for store in testdb::stores() {
        let root = tmp("rewrite");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:main": {"sessionId": "s", "updatedAt": 1}}"#,
        );
        let path = "agents/main/sessions/s.jsonl";
        let old: Vec<Value> = (1..=5)
            .map(|i| m(&format!("e{i}"), (i > 1).then(|| format!("e{}", i - 1)).as_deref(), &format!("old {i}")))
            .collect();
        write(&root, path, &v3("s", &old));
        assert_eq!(import_state_dir(&store, &km(), None, &root, 9).unwrap().messages, 5);

        // The gateway appends two turns: only those are added.
        let mut grown = old.clone();
        grown.push(m("e6", Some("e5"), "new 6"));
        grown.push(m("e7", Some("e6"), "new 7"));
        write(&root, path, &v3("s", &grown));
        assert_eq!(import_state_dir(&store, &km(), None, &root, 9).unwrap().messages, 2);
        assert_eq!(texts(&store, "s").len(), 7);

        // It compacts (the file keeps a compaction entry and the last turns) and runs on.
        let mut rewritten = vec![
            json!({"type": "compaction", "id": "c1", "parentId": null, "summary": "before", "firstKeptEntryId": "e6"}),
        ];
        rewritten.push(m("e6", Some("c1"), "new 6"));
        rewritten.push(m("e7", Some("e6"), "new 7"));
        rewritten.push(m("e8", Some("e7"), "after 8"));
        write(&root, path, &v3("s", &rewritten));
        let r = import_state_dir(&store, &km(), None, &root, 9).unwrap();
        assert_eq!(r.messages, 3);
        let got = texts(&store, "s");
        assert_eq!(got.len(), 3);
        assert!(got[0].contains("new 6") && got[2].contains("after 8"));
        let (_, entries, _) = dump(&store);
        assert!(entries["s"][0].contains("\"compaction\""));
        // Idempotent: once more adds nothing and changes nothing.
        assert_eq!(import_state_dir(&store, &km(), None, &root, 9).unwrap().messages, 0);
        assert_eq!(dump(&store).1, entries);
    }
}

#[test]
fn a_reimport_keeps_messages_appended_here_after_the_file_ends() {
    for store in testdb::stores() {
        let root = tmp("ahead");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:main": {"sessionId": "s", "updatedAt": 1}}"#,
        );
        write(&root, "agents/main/sessions/s.jsonl", &v3("s", &[m("a", None, "one")]));
        import_state_dir(&store, &km(), None, &root, 9).unwrap();
        store
            .write(|db| db.append_messages("s", &[(Some("user".into()), r#"{"role":"user","content":"here"}"#.into())]))
            .unwrap();
        assert_eq!(import_state_dir(&store, &km(), None, &root, 9).unwrap().messages, 0);
        assert_eq!(texts(&store, "s").len(), 2);
    }
}

#[test]
fn export_writes_back_entries_that_are_not_messages_with_their_parent_links_in_order() {
    for [a, b] in store_pairs() {
        let root = tmp("tree");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:main": {"sessionId": "s", "updatedAt": 1}}"#,
        );
        let entries = vec![
            json!({"type": "model_change", "id": "mc", "parentId": null, "provider": "p", "modelId": "x"}),
            m("a", Some("mc"), "one"),
            m("b", Some("a"), "two"),
            json!({"type": "branch_summary", "id": "bs", "parentId": "a", "fromId": "b", "summary": "went back"}),
            m("c", Some("bs"), "three"),
            json!({"type": "custom", "id": "cu", "parentId": "c", "customType": "x", "data": {"k": 1}}),
        ];
        write(&root, "agents/main/sessions/s.jsonl", &v3("s", &entries));
        import_state_dir(&a, &km(), None, &root, 9).unwrap();
        assert_eq!(texts(&a, "s").len(), 3);
        let out = tmp("tree-out");
        assert_eq!(export_state_dir(&a, &km(), &out, None).unwrap().messages, 3);
        let text = fs::read_to_string(out.join("agents/main/sessions/s.jsonl")).unwrap();
        let lines: Vec<Value> = text.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines, entries);
        import_state_dir(&b, &km(), None, &out, 9).unwrap();
        assert_eq!(dump(&b), dump(&a));
    }
}

#[test]
fn under_global_scope_every_agents_main_session_stays_reachable_and_the_collision_is_reported() {
    for store in testdb::stores() {
        let root = tmp("global");
        write(&root, "agents/main/sessions/sessions.json", r#"{"global": {"sessionId": "g-main", "updatedAt": 1}}"#);
        write(&root, "agents/main/sessions/g-main.jsonl", &v3("g-main", &[m("a", None, "main's")]));
        write(&root, "agents/ops/sessions/sessions.json", r#"{"global": {"sessionId": "g-ops", "updatedAt": 2}}"#);
        write(&root, "agents/ops/sessions/g-ops.jsonl", &v3("g-ops", &[m("b", None, "ops's")]));
        let km = KeyModel::new(true, "main", "main");
        let r = import_state_dir(&store, &km, None, &root, 9).unwrap();
        let (sessions, _, _) = dump(&store);
        // The default agent's keeps `global` (the gateway resolves `global` to its store) although
        // the other is newer; the other is kept under a key of its own that canonicalises to itself.
        assert_eq!(sessions["global"]["sessionId"], "g-main");
        assert_eq!(sessions["agent:ops:global"]["sessionId"], "g-ops");
        assert_eq!(km.canonical("agent:ops:global").unwrap(), "agent:ops:global");
        assert_eq!((r.sessions, r.messages), (2, 2));
        assert_eq!(r.merged.len(), 1);
        assert_eq!(r.merged[0].kept_as.as_deref(), Some("agent:ops:global"));
        assert_eq!((r.merged[0].into.as_str(), r.merged[0].session_id.as_str()), ("global", "g-ops"));
    }
}

#[test]
fn an_entry_that_loses_a_collision_is_reported() {
    for store in testdb::stores() {
        let root = tmp("collide");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"main": {"sessionId": "old", "updatedAt": 1}, "agent:main:main": {"sessionId": "new", "updatedAt": 2}}"#,
        );
        let r = import_state_dir(&store, &km(), None, &root, 9).unwrap();
        assert_eq!(dump(&store).0["agent:main:main"]["sessionId"], "new");
        assert_eq!(r.merged.len(), 1);
        assert_eq!((r.merged[0].key.as_str(), r.merged[0].session_id.as_str()), ("main", "old"));
        assert_eq!(r.merged[0].kept_as, None);
    }
}

#[test]
fn a_topic_sessions_file_is_written_for_the_folder_it_will_be_used_from() {
    for store in testdb::stores() {
        let root = tmp("topic");
        write(
            &root,
            "agents/main/sessions/sessions.json",
            r#"{"agent:main:telegram:group:-1:topic:42": {"sessionId": "t", "updatedAt": 1},
                "agent:main:main": {"sessionId": "m", "updatedAt": 1}}"#,
        );
        write(&root, "agents/main/sessions/t-topic-42.jsonl", &v3("t", &[m("a", None, "in topic")]));
        write(&root, "agents/main/sessions/m.jsonl", &v3("m", &[m("b", None, "main")]));
        import_state_dir(&store, &km(), None, &root, 9).unwrap();
        let out = tmp("topic-out");
        let live = Path::new("/srv/gateway/state");
        export_state_dir(&store, &km(), &out, Some(live)).unwrap();
        let text = fs::read_to_string(out.join("agents/main/sessions/sessions.json")).unwrap();
        let written: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            written["agent:main:telegram:group:-1:topic:42"]["sessionFile"],
            "/srv/gateway/state/agents/main/sessions/t-topic-42.jsonl"
        );
        assert!(out.join("agents/main/sessions/t-topic-42.jsonl").is_file());
        // every session has one, as the gateway records it (its listing finds transcripts only so)
        assert_eq!(written["agent:main:main"]["sessionFile"], "/srv/gateway/state/agents/main/sessions/m.jsonl");
    }
}

#[test]
fn a_folder_moved_through_postgres_comes_out_as_it_does_through_sqlite() {
    let root = gateway_folder();
    let live = Path::new("/srv/gateway/state");
    let mut outcomes = Vec::new();
    for store in testdb::stores() {
        let d = store.dialect();
        let report = import_state_dir(&store, &km(), None, &root, 99).unwrap();
        let out = tmp("cross");
        let ex = export_state_dir(&store, &km(), &out, Some(live)).unwrap();
        let stats = store.read(|db| db.stats()).unwrap();
        assert_eq!((stats.sessions, stats.messages, stats.subagent_runs), (8, 8, 2), "{d:?}");
        assert!(stats.db_bytes > 0, "{d:?}");
        outcomes.push((report, ex, dump(&store), snapshot(&out)));
    }
    let (lite, pg) = (&outcomes[0], &outcomes[1]);
    assert_eq!(pg.0, lite.0, "the import reports");
    assert_eq!(pg.1, lite.1, "the export reports");
    assert_eq!(pg.2, lite.2, "the stores");
    assert_eq!(pg.3, lite.3, "the exported files, byte for byte");
}

#[test]
fn a_large_transcript_exports_from_postgresql_byte_for_byte_as_from_sqlite() {
    // more rows than one streamed chunk many times over, some of them large and multi-byte
    let root = tmp("big");
    write(
        &root,
        "agents/main/sessions/sessions.json",
        r#"{"agent:main:main": {"sessionId": "big", "updatedAt": 1700000000000}}"#,
    );
    let mut entries = Vec::new();
    let mut parent: Option<String> = None;
    for i in 0..3000 {
        let id = format!("e{i}");
        let text =
            if i % 97 == 0 { "ü€😀 ".repeat(2000) } else { format!("message {i} «{}»", "x".repeat(i % 300)) };
        entries.push(m(&id, parent.as_deref(), &text));
        parent = Some(id);
    }
    write(&root, "agents/main/sessions/big.jsonl", &v3("big", &entries));
    let mut exports = Vec::new();
    // one folder for both (paths in sessions.json name it)
    let out = tmp("big-out");
    for store in testdb::stores() {
        let r = import_state_dir(&store, &km(), None, &root, 99).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let ex = export_state_dir(&store, &km(), &out, None).unwrap();
        assert_eq!((ex.sessions, ex.messages), (1, 3000), "{}", store.path());
        exports.push(snapshot(&out));
        fs::remove_dir_all(&out).unwrap();
    }
    fs::remove_dir_all(&root).unwrap();
    let [lite, pg] = [&exports[0], &exports[1]];
    assert_eq!(lite.keys().collect::<Vec<_>>(), pg.keys().collect::<Vec<_>>());
    for (path, bytes) in lite {
        assert!(bytes == &pg[path], "{path} differs between the SQLite and the PostgreSQL export");
    }
    assert!(lite["agents/main/sessions/big.jsonl"].len() > 1_000_000);
}
