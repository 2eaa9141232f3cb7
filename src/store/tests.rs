//! The store: opening, refusing files that are not ours, inline calls that never wait, lists
//! and history pages walking their indexes, writes that keep every projected column in step.

use super::*;
use crate::entry;
use crate::store::listing::ListFilter;
use rusqlite::TransactionBehavior;
use serde_json::{json, Map, Value};

fn tmp(name: &str) -> PathBuf {
    let dir = crate::scratch::path("store");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// How long (ms) the connection `db` runs on waits for another connection's lock before SQLite
/// refuses, as `busy::wait_up_to` last set it.
pub(super) fn busy_timeout_ms(db: &Db<'_>) -> Result<i64> {
    let bound = super::busy::bound_of(db.conn()?).unwrap_or_default();
    Ok(bound.as_millis() as i64)
}

/// Waits until `store`'s file is read into the OS's cache: until then nothing runs inline (`warm`).
pub(super) fn warm(store: &Store) {
    let start = std::time::Instant::now();
    while !store.is_warm() {
        assert!(start.elapsed() < Duration::from_secs(20), "the store's file was never read through");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn put(store: &Store, key: &str, patch: Value) {
    let patch: Map<String, Value> = patch.as_object().cloned().unwrap();
    store
        .write(|db| {
            let e = entry::merge(db.session(key)?.as_ref(), &patch, entry::now_ms());
            db.put_session(key, &e)
        })
        .unwrap();
}

#[test]
fn inline_calls_never_wait_they_report_would_block_instead() {
    let p = tmp("inline.db");
    let a = Store::open(p.to_str().unwrap()).unwrap();
    let b = Store::open(p.to_str().unwrap()).unwrap();
    warm(&a);
    put(&a, "agent:main:k", json!({"label": "one"}));
    // another thread holds this store's writer connection (held by this very thread: a call
    // that waited for it would never return)
    let guard = a.writer.lock().unwrap();
    let e = inline(|| a.write(|db| db.session("agent:main:k"))).unwrap_err();
    assert!(is_would_block(&e));
    drop(guard);
    // another connection (another process, as far as SQLite knows) holds the write lock
    let mut held = b.writer.lock().unwrap();
    let tx = held.as_mut().unwrap().transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    let e = inline(|| {
        a.write(|db| {
            let mut en = db.session("agent:main:k")?.unwrap_or_default();
            en.insert("label".into(), json!("two"));
            db.put_session("agent:main:k", &en)
        })
    })
    .unwrap_err();
    assert!(is_would_block(&e), "{}", e.message());
    // reads are not blocked by a writer in WAL mode
    let en = inline(|| a.read(|db| db.session("agent:main:k"))).unwrap().unwrap();
    assert_eq!(en["label"], "one");
    drop(tx);
    drop(held);
    // why it did not wait: an inline write asks SQLite for the lock with no busy timeout at all
    // (a refusal at once), where any other write waits for it up to BUSY_TIMEOUT
    assert_eq!(inline(|| a.write(busy_timeout_ms)).unwrap(), 0, "an inline write never waits for the lock");
    assert_eq!(a.write(busy_timeout_ms).unwrap(), BUSY_TIMEOUT.as_millis() as i64);
    assert_eq!(a.write(busy_timeout_ms).unwrap(), a.read(busy_timeout_ms).unwrap(), "and it is set back");
    // a job that swallows the refusal (as a fail-closed policy read does) still counts as
    // would-block, so its made-up answer never reaches the caller
    let held_reader = a.reader.as_ref().unwrap().lock().unwrap();
    let swallowed = std::thread::scope(|sc| {
        sc.spawn(|| {
            inline(|| {
                let r = a.read(|db| db.session("agent:main:k"));
                Ok(if r.is_err() { "deny" } else { "allow" })
            })
        })
        .join()
        .unwrap()
    });
    drop(held_reader);
    assert!(swallowed.as_ref().is_err_and(is_would_block), "{swallowed:?}");
    // once the lock is free the same call goes through, and waiting calls wait again
    put(&a, "agent:main:k", json!({"label": "three"}));
    assert!(!inline_mode(), "inline mode ends with its call");
    let en = a.read(|db| db.session("agent:main:k")).unwrap().unwrap();
    assert_eq!(en["label"], "three");
}

#[test]
fn a_cold_file_sends_inline_calls_to_the_threads_as_a_taken_lock_does() {
    let p = tmp("cold.db");
    let a = Store::open(p.to_str().unwrap()).unwrap();
    put(&a, "agent:main:k", json!({"label": "one"}));
    let warmth = a.warm.as_ref().unwrap();
    warm(&a);
    // the first pass has not ended (or the file was cold): nothing inline reads the file
    warmth.set_warm(false);
    let read = inline(|| a.read(|db| db.session("agent:main:k"))).unwrap_err();
    assert!(is_would_block(&read));
    let write = inline(|| a.write(|db| db.put_session("agent:main:k", &Map::new()))).unwrap_err();
    assert!(is_would_block(&write));
    let batch: Vec<GroupJob> = vec![Box::new(|| Ok(String::from("ran")))];
    assert_eq!(a.try_run_inline(batch).err().map(|j| j.len()), Some(1), "the batch comes back unrun");
    assert_eq!(
        a.read(|db| db.session("agent:main:k")).unwrap().unwrap()["label"],
        "one",
        "the inline write wrote nothing"
    );
    // off the JS thread the same calls simply run
    put(&a, "agent:main:k", json!({"label": "two"}));
    assert_eq!(a.read(|db| db.session("agent:main:k")).unwrap().unwrap()["label"], "two");
    // warm: inline again
    warmth.set_warm(true);
    assert_eq!(inline(|| a.read(|db| db.session("agent:main:k"))).unwrap().unwrap()["label"], "two");
    let batch: Vec<GroupJob> = vec![Box::new(|| Ok(String::from("ran")))];
    assert_eq!(a.try_run_inline(batch).ok().unwrap()[0].as_deref().unwrap(), "ran");
}

#[test]
fn a_slow_inline_run_sends_the_inline_calls_of_its_cool_down_to_the_threads() {
    let p = tmp("slow.db");
    let a = Store::open(p.to_str().unwrap()).unwrap();
    warm(&a);
    // a cool-down no pause of a loaded machine outlasts between a slow run and the checks
    a.cool.set_first(Duration::from_secs(1));
    put(&a, "agent:main:k", json!({"label": "one"}));
    let runs = a.slow_inline_runs();
    // an inline read longer than the event loop's budget (a page read from the disk, say) still
    // answers
    let slow = inline(|| {
        a.read(|db| {
            std::thread::sleep(cooldown::SLOW + Duration::from_millis(1));
            db.session("agent:main:k")
        })
    });
    assert_eq!(slow.unwrap().unwrap()["label"], "one");
    assert!(a.slow_inline_runs() > runs);
    // then inline reads, writes and batches are refused as if the store were busy
    assert!(inline(|| a.read(|db| db.session("agent:main:k"))).is_err_and(|e| is_would_block(&e)));
    let write = inline(|| a.write(|db| db.put_session("agent:main:k", &Map::new())));
    assert!(write.is_err_and(|e| is_would_block(&e)));
    let batch: Vec<GroupJob> = vec![Box::new(|| Ok(String::from("ran")))];
    assert_eq!(a.try_run_inline(batch).err().map(|j| j.len()), Some(1));
    // off the JS thread the same calls run
    put(&a, "agent:main:k", json!({"label": "two"}));
    // once the cool-down is over, inline again
    std::thread::sleep(a.cool.left());
    assert_eq!(inline(|| a.read(|db| db.session("agent:main:k"))).unwrap().unwrap()["label"], "two");
    // a slow inline write is committed, and starts a cool-down likewise
    std::thread::sleep(a.cool.left());
    let runs = a.slow_inline_runs();
    let wrote = inline(|| {
        a.write(|db| {
            std::thread::sleep(cooldown::SLOW + Duration::from_millis(1));
            let mut e = db.session("agent:main:k")?.unwrap_or_default();
            e.insert("label".into(), json!("three"));
            db.put_session("agent:main:k", &e)
        })
    });
    assert!(wrote.is_ok());
    assert!(a.slow_inline_runs() > runs);
    assert!(inline(|| a.read(|db| db.session("agent:main:k"))).is_err_and(|e| is_would_block(&e)));
    assert_eq!(a.read(|db| db.session("agent:main:k")).unwrap().unwrap()["label"], "three");
    // and so does a slow inline batch
    std::thread::sleep(a.cool.left());
    let runs = a.slow_inline_runs();
    let slow_job: GroupJob = Box::new(|| {
        std::thread::sleep(cooldown::SLOW + Duration::from_millis(1));
        Ok(String::from("ran"))
    });
    assert_eq!(a.try_run_inline(vec![slow_job]).ok().unwrap()[0].as_deref().unwrap(), "ran");
    assert!(a.slow_inline_runs() > runs);
    assert!(inline(|| a.read(|db| db.session("agent:main:k"))).is_err_and(|e| is_would_block(&e)));
}

#[test]
fn a_write_over_an_entry_keeps_every_projected_column_in_step() {
    let s = Store::open(":memory:").unwrap();
    let cols = |k: &str| {
        s.read(|db| {
            db.conn()?
                .query_row(
                    "SELECT session_id, label, spawned_by, archived, grp, updated_at FROM sessions WHERE key = ?1",
                    [k],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, Option<String>>(2)?,
                            r.get::<_, i64>(3)?,
                            r.get::<_, Option<String>>(4)?,
                            r.get::<_, i64>(5)?,
                        ))
                    },
                )
                .map_err(super::sql)
        })
        .unwrap()
    };
    let over = |k: &str, patch: Value, now: i64| {
        let patch: Map<String, Value> = patch.as_object().cloned().unwrap();
        s.write(|db| {
            let old = db.session(k)?;
            let e = entry::merge(old.as_ref(), &patch, now);
            db.put_session_over(k, old.as_ref(), &e)
        })
        .unwrap();
    };
    let k = "agent:main:k";
    over(k, json!({"sessionId": "s1", "label": "a"}), 1_000);
    // only counters and the time change: the short path
    over(k, json!({"inputTokens": 5}), 2_000);
    assert_eq!(cols(k), ("s1".into(), Some("a".into()), None, 0, None, 2_000));
    assert_eq!(s.read(|db| db.session(k)).unwrap().unwrap()["inputTokens"], 5);
    // an indexed or projected field changes: every column follows
    over(k, json!({"label": "b", "spawnedBy": "agent:main:main", "archivedAt": 5, "category": "g"}), 3_000);
    assert_eq!(cols(k), ("s1".into(), Some("b".into()), Some("agent:main:main".into()), 1, Some("g".into()), 3_000));
    over(k, json!({"sessionId": "s2"}), 4_000);
    assert_eq!(cols(k).0, "s2");
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_unchanged() {
    let p = tmp("notes.txt");
    let text = "not a database, just some text that is long enough to look like a header........".repeat(20);
    std::fs::write(&p, &text).unwrap();
    let err = Store::open(p.to_str().unwrap()).err().unwrap();
    assert_eq!(err.code(), ErrorCode::StoreError);
    assert!(err.message().contains(p.to_str().unwrap()));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
}

#[test]
fn a_sqlite_database_with_foreign_tables_is_refused() {
    let p = tmp("foreign.db");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ann');").unwrap();
    }
    let before = std::fs::read(&p).unwrap();
    let err = Store::open(p.to_str().unwrap()).err().unwrap();
    assert_eq!(err.code(), ErrorCode::StoreError);
    assert!(err.message().contains("not a session-tools store"), "{}", err.message());
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn an_empty_file_opens_as_a_new_store_and_reopens_with_its_data() {
    let p = tmp("empty.db");
    std::fs::write(&p, b"").unwrap();
    let s = Store::open(p.to_str().unwrap()).unwrap();
    put(&s, "agent:main:main", json!({"label": "x"}));
    s.close();
    assert!(s.is_closed());
    assert_eq!(s.read(|db| db.session_count()).unwrap_err().code(), ErrorCode::Closed);
    let s2 = Store::open(p.to_str().unwrap()).unwrap();
    let e = s2.read(|db| db.session("agent:main:main")).unwrap().unwrap();
    assert_eq!(e["label"], "x");
}

#[test]
fn many_stores_opening_one_new_file_at_once_all_succeed() {
    for _ in 0..10 {
        let p = tmp("race.db");
        let path = p.to_str().unwrap().to_owned();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&path).map(|_| ()).map_err(|e| e.message().to_owned())
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), Ok(()));
        }
    }
}

#[test]
fn a_store_from_a_newer_schema_is_refused() {
    let p = tmp("newer.db");
    drop(Store::open(p.to_str().unwrap()).unwrap());
    Connection::open(&p).unwrap().pragma_update(None, "user_version", 99).unwrap();
    let err = Store::open(p.to_str().unwrap()).err().unwrap();
    assert!(err.message().contains("newer"), "{}", err.message());
}

#[test]
fn two_stores_on_one_file_lose_no_read_modify_write_update() {
    let p = tmp("shared.db");
    let path = p.to_str().unwrap().to_owned();
    let a = std::sync::Arc::new(Store::open(&path).unwrap());
    let b = std::sync::Arc::new(Store::open(&path).unwrap());
    let mut handles = Vec::new();
    for store in [a.clone(), b.clone(), a.clone(), b.clone()] {
        handles.push(std::thread::spawn(move || {
            for _ in 0..100 {
                store
                    .write(|db| {
                        let existing = db.session("agent:main:counter")?;
                        let n = existing.as_ref().and_then(|e| e.get("n")).and_then(Value::as_i64).unwrap_or(0);
                        let mut patch = Map::new();
                        patch.insert("n".into(), json!(n + 1));
                        let e = entry::merge(existing.as_ref(), &patch, entry::now_ms());
                        db.put_session("agent:main:counter", &e)
                    })
                    .unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let e = a.read(|db| db.session("agent:main:counter")).unwrap().unwrap();
    assert_eq!(e["n"], 400);
}

#[test]
fn history_pages_back_with_a_cursor() {
    for s in pg::testdb::stores() {
        let d = s.dialect();
        let msgs: Vec<(Option<String>, String)> =
            (1..=250).map(|i| (Some("user".to_owned()), format!(r#"{{"role":"user","content":"m{i}"}}"#))).collect();
        s.write(|db| db.append_messages("sid", &msgs)).unwrap();
        let p1 = s.read(|db| db.history_page("sid", 100, None)).unwrap();
        assert_eq!(p1.messages.len(), 100, "{d:?}");
        assert!(p1.messages[0].json.contains("m151") && p1.messages[99].json.contains("m250"), "{d:?}");
        let p2 = s.read(|db| db.history_page("sid", 100, p1.next_before)).unwrap();
        assert!(p2.messages[0].json.contains("m51"), "{d:?}");
        let p3 = s.read(|db| db.history_page("sid", 100, p2.next_before)).unwrap();
        assert_eq!(p3.messages.len(), 50, "{d:?}");
        assert_eq!(p3.next_before, None, "{d:?}");
        let first = s.read(|db| db.first_messages("sid", 2)).unwrap();
        assert_eq!(first.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 2], "{d:?}");
    }
}

pub(super) fn plan(s: &Store, sql: &str) -> String {
    s.read(|db| {
        let mut st = db.conn()?.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).map_err(super::sql)?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(3))
            .map_err(super::sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(super::sql)?;
        Ok(rows.join("\n"))
    })
    .unwrap()
}

#[test]
fn reading_the_last_messages_searches_the_primary_key_without_sorting() {
    let s = Store::open(":memory:").unwrap();
    let p = plan(
        &s,
        "SELECT seq, role, message FROM messages WHERE session_id = 'x' AND seq < 9 ORDER BY seq DESC LIMIT 21",
    );
    assert!(p.contains("SEARCH messages USING PRIMARY KEY"), "{p}");
    assert!(!p.contains("TEMP B-TREE"), "{p}");
}

#[test]
fn every_list_variant_walks_an_index_in_order_without_sorting() {
    let s = Store::open(":memory:").unwrap();
    for (name, q) in [
        ("updated", listing::LIST_BY_UPDATED),
        ("spawned", listing::LIST_BY_SPAWNED_BY),
        ("label", listing::LIST_BY_LABEL),
    ] {
        let q = q
            .replace(":include_global", "0")
            .replace(":include_unknown", "0")
            .replace(":agent_id", "'main'")
            .replace(":spawned_by", "'agent:main:main'")
            .replace(":label", "'l'")
            .replace(":search", "NULL")
            .replace(":active_since", "NULL")
            .replace(":kinds", "NULL")
            .replace(":main_key", "'main'")
            .replace(":global_scope", "0")
            .replace(":agents", "NULL")
            .replace(":default_agent", "'main'")
            .replace(":limit", "50");
        let p = plan(&s, &q);
        if name.starts_with("updated") {
            // the two halves of sessions_by_archived merged
            assert!(p.contains("MERGE (UNION ALL)") && p.contains("sessions_by_archived"), "{name}: {p}");
        }
        // (the newest-first walk puts equal timestamps in insertion order itself:
        // Db::list_newest_first)
        assert!(!p.contains("TEMP B-TREE"), "{name}: {p}");
        assert!(p.contains("USING INDEX") || p.contains("USING COVERING INDEX"), "{name}: {p}");
    }
    // the rows the newest-first walk picked: read by rowid in the order given, nothing sorted
    let p = plan(&s, &listing::ROWS_BY_ROWID.replace("?1", "'[3,1,2]'"));
    assert!(p.contains("SEARCH s USING INTEGER PRIMARY KEY") && !p.contains("TEMP B-TREE"), "{p}");
}

/// `sql` with every named parameter replaced by NULL (`:limit` 50, `:offset` 0), for its plan.
pub(super) fn unbound(sql: &str) -> String {
    let mut out = String::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ':' {
            out.push(c);
            continue;
        }
        let mut name = String::new();
        while let Some(&n) = chars.peek().filter(|n| n.is_ascii_alphanumeric() || **n == '_') {
            name.push(n);
            chars.next();
        }
        out.push_str(match name.as_str() {
            "limit" => "50",
            "offset" => "0",
            _ => "NULL",
        });
    }
    out
}

#[test]
fn the_unfiltered_inventory_page_merges_the_archived_index_without_sorting() {
    let s = Store::open(":memory:").unwrap();
    let p = plan(&s, &unbound(inventory::BY_UPDATED));
    assert!(p.contains("MERGE (UNION ALL)") && p.contains("sessions_by_archived"), "{p}");
    assert!(!p.contains("TEMP B-TREE"), "{p}");
}

#[test]
fn the_migrations_drop_sessions_by_updated() {
    let s = Store::open(":memory:").unwrap();
    let n = s
        .read(|db| db.count("SELECT count(*) FROM sqlite_master WHERE name = 'sessions_by_updated'", crate::args![]))
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn equal_timestamps_list_in_insertion_order_and_page_by_key_on_both_backends() {
    for s in pg::testdb::stores() {
        let d = s.dialect();
        // inserted in this order; z, a and m share a timestamp, a and c are archived
        put_raw(&s, "agent:main:z", json!({"updatedAt": 100}));
        put_raw(&s, "agent:main:a", json!({"updatedAt": 100, "archivedAt": 1}));
        put_raw(&s, "agent:main:m", json!({"updatedAt": 100}));
        put_raw(&s, "agent:main:b", json!({"updatedAt": 200}));
        put_raw(&s, "agent:main:c", json!({"updatedAt": 50, "archivedAt": 2}));
        // a rewrite keeps the row, so its place among equal timestamps
        put_raw(&s, "agent:main:z", json!({"updatedAt": 100, "label": "again"}));
        let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
        let keys = |f: &ListFilter| {
            s.read(|db| db.list(f))
                .unwrap()
                .into_iter()
                .map(|r| r.key.trim_start_matches("agent:main:").to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&base), ["b", "z", "a", "m", "c"], "{d:?}");
        // the rows' texts as stored, in the same order
        let texts = s
            .read(|db| {
                let mut out = Vec::new();
                db.list_texts(&base, |k, e| {
                    let entry: Map<String, Value> = serde_json::from_str(e).expect("stored entry");
                    out.push((k.trim_start_matches("agent:main:").to_owned(), entry.get("label").cloned()));
                    Ok(())
                })?;
                Ok(out)
            })
            .unwrap();
        let labels: Vec<_> = texts.iter().map(|(k, l)| (k.as_str(), l.clone())).collect();
        assert_eq!(labels, [("b", None), ("z", Some(json!("again"))), ("a", None), ("m", None), ("c", None)], "{d:?}");
        assert_eq!(keys(&ListFilter { limit: Some(3), ..base.clone() }), ["b", "z", "a"], "{d:?}");
        assert_eq!(keys(&ListFilter { limit: Some(2), ..base.clone() }), ["b", "z"], "{d:?}");
        assert_eq!(keys(&ListFilter { limit: Some(1), ..base.clone() }), ["b"], "{d:?}");
        // the 2026.9 inventory page: ties by key, offsets into the merged order
        let inv = inventory::InventoryFilter {
            main_key: "main".into(),
            default_agent: "main".into(),
            limit: 10,
            ..Default::default()
        };
        let page = |f: &inventory::InventoryFilter| {
            s.read(|db| db.inventory_page(f))
                .unwrap()
                .into_iter()
                .map(|r| r.key.trim_start_matches("agent:main:").to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(page(&inv), ["b", "a", "m", "z", "c"], "{d:?}");
        assert_eq!(page(&inventory::InventoryFilter { offset: 2, limit: 2, ..inv.clone() }), ["m", "z"], "{d:?}");
        assert_eq!(page(&inventory::InventoryFilter { archived: Some(true), ..inv.clone() }), ["a", "c"], "{d:?}");
    }
}

/// Stores an entry as given (no merge rule, so `updatedAt` may lie in the past).
fn put_raw(store: &Store, key: &str, e: Value) {
    let mut e: Map<String, Value> = e.as_object().cloned().unwrap();
    e.insert("sessionId".into(), json!(uuid::Uuid::new_v4().to_string()));
    store.write(|db| db.put_session(key, &e)).unwrap();
}

#[test]
fn list_filters_sort_newest_first_and_limit() {
    let s = Store::open(":memory:").unwrap();
    put_raw(&s, "agent:main:a", json!({"updatedAt": 100, "label": "A"}));
    put_raw(&s, "agent:main:b", json!({"updatedAt": 300}));
    put_raw(&s, "agent:main:subagent:c", json!({"updatedAt": 200, "spawnedBy": "agent:main:main"}));
    put_raw(&s, "global", json!({"updatedAt": 400}));
    let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
    let keys = |f: &ListFilter| s.read(|db| db.list(f)).unwrap().into_iter().map(|r| r.key).collect::<Vec<_>>();
    // global is dropped unless asked for; newest first
    assert_eq!(keys(&base), ["agent:main:b", "agent:main:subagent:c", "agent:main:a"]);
    assert_eq!(keys(&ListFilter { include_global: true, limit: Some(1), ..base.clone() }), ["global"]);
    assert_eq!(
        keys(&ListFilter { spawned_by: Some("agent:main:main".into()), ..base.clone() }),
        ["agent:main:subagent:c"]
    );
    assert_eq!(keys(&ListFilter { label: Some("A".into()), ..base.clone() }), ["agent:main:a"]);
    assert_eq!(keys(&ListFilter { search: Some("subagent".into()), ..base.clone() }), ["agent:main:subagent:c"]);
    assert_eq!(
        keys(&ListFilter { active_since: Some(150), ..base.clone() }),
        ["agent:main:b", "agent:main:subagent:c"]
    );
}

#[test]
fn a_sparse_listing_reads_the_kept_fields_as_the_whole_entry_has_them() {
    use crate::entry::Fields;
    static KEPT: std::sync::LazyLock<listing::FieldSet> =
        std::sync::LazyLock::new(|| listing::FieldSet::new(&["n", "label", "model"]));
    for s in crate::store::pg::testdb::stores() {
        put_raw(
            &s,
            "agent:main:a",
            json!({"updatedAt": 100, "label": "A", "x": {"deep": [1, 2]}, "model": "m", "n": 1.5}),
        );
        put_raw(&s, "agent:main:b", json!({"updatedAt": 200, "other": "\u{e9}\"\\"}));
        put_raw(&s, "agent:main:c", json!({"updatedAt": 50}));
        put_raw(&s, "agent:main:d", json!({"updatedAt": 40}));
        // texts no writer of ours makes: an escaped key, a repeated key (the last wins), non-ASCII
        // text, a huge field read past and a huge field kept
        let huge = "\u{1F600}z".repeat(100_000);
        let odd = [
            (
                "agent:main:c",
                r#"{"updatedAt":50,"mod\u0065l":"esc","label":"first","label":"s\u00e9cond \"q\"","n":[1,{"a":null}],"sessionId":"c"}"#
                    .to_string(),
            ),
            (
                "agent:main:d",
                format!(r#"{{"big":"{huge}","updatedAt":40,"model":"{huge}","sessionId":"d","n":-0.5e-3}}"#),
            ),
        ];
        for (key, text) in &odd {
            s.write(|db| {
                db.exec("UPDATE sessions SET entry = ?1 WHERE key = ?2", crate::args![text.as_str(), *key]).map(|_| ())
            })
            .unwrap();
        }
        let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
        let full = s.read(|db| db.list(&base)).unwrap();
        let kept = ["label", "model", "n"];
        let sparse = s.read(|db| db.list_sparse(&base, &KEPT)).unwrap();
        assert_eq!(sparse.len(), 4);
        for (f, p) in full.iter().zip(&sparse) {
            assert_eq!(f.key, p.key);
            for name in kept {
                assert_eq!(p.entry.field(name), f.entry.get(name), "{} {name}", f.key);
            }
            for name in ["updatedAt", "x", "other", "big", "sessionId", "zzz", ""] {
                assert_eq!(p.entry.field(name), None, "{} {name}", f.key);
            }
        }
        assert_eq!(sparse[0].entry.field("n"), None);
        assert_eq!(sparse[1].entry.field("n"), Some(&json!(1.5)));
        assert_eq!(sparse[2].entry.field("model"), Some(&json!("esc")));
        assert_eq!(sparse[2].entry.field("label"), Some(&json!("s\u{e9}cond \"q\"")));
        assert_eq!(sparse[3].entry.field("model").and_then(Value::as_str).map(str::len), Some(huge.len()));
        // a stored entry that is not JSON is an error, as for a whole listing
        s.write(|db| {
            db.exec("UPDATE sessions SET entry = '{\"label\":' WHERE key = 'agent:main:a'", crate::args![]).map(|_| ())
        })
        .unwrap();
        assert!(s.read(|db| db.list_sparse(&base, &KEPT)).is_err());
        assert!(s.read(|db| db.list(&base)).is_err());
    }
}
