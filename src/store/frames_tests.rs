//! What an upsert writes to the log: the pages of one commit that moves only `updatedAt`
//! (counted in the -wal file's frame headers), the one index that holds `updated_at` for every
//! row, and the agent lists served from it, alike on both backends.

use super::inventory::InventoryFilter;
use super::*;
use crate::entry;
use crate::store::listing::ListFilter;
use serde_json::{json, Map, Value};

fn tmp(name: &str) -> PathBuf {
    let dir = crate::scratch::path("frames");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Session `j` of a seeded store, shaped as the bench's (a tenth with a label and a parent).
fn seed_entry(j: usize) -> (String, Map<String, Value>) {
    let mut e = json!({
        "sessionId": format!("{j:08x}-0000-4000-a000-{j:012x}"),
        "updatedAt": 1_700_000_000_000_i64 + j as i64,
        "chatType": "direct",
        "lastChannel": "telegram",
        "lastTo": format!("+1555{j:07}"),
        "inputTokens": j * 7,
        "outputTokens": j * 3,
        "model": "claude-opus-4-5",
        "origin": {"label": format!("User {j}"), "provider": "telegram", "from": format!("+1555{j:07}")},
    });
    if j % 10 == 9 {
        e["label"] = json!(format!("nightly-{j}"));
        e["spawnedBy"] = json!("agent:main:main");
    }
    (format!("agent:main:telegram:dm:u{j}"), e.as_object().cloned().unwrap())
}

/// (frames, commits) of the log from its start, with its current salt.
fn log_frames(db: &Path) -> (usize, usize) {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let buf = std::fs::read(PathBuf::from(wal)).unwrap();
    let be = |at: usize| u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    let page = be(8) as usize;
    let (salt1, salt2) = (be(16), be(20));
    let (mut frames, mut commits, mut at) = (0, 0, 32);
    while at + 24 + page <= buf.len() && be(at + 8) == salt1 && be(at + 12) == salt2 {
        frames += 1;
        if be(at + 4) != 0 {
            commits += 1;
        }
        at += 24 + page;
    }
    (frames, commits)
}

#[test]
fn an_upsert_that_moves_only_updated_at_writes_about_three_log_pages() {
    let p = tmp("frames.db");
    let s = Store::open(p.to_str().unwrap()).unwrap();
    let n = 3_000;
    s.write(|db| {
        for j in 0..n {
            let (k, e) = seed_entry(j);
            db.put_session(&k, &e)?;
        }
        Ok(())
    })
    .unwrap();
    // the log starts over with the next commit (no reader, nothing left to copy)
    let side = rusqlite::Connection::open(&p).unwrap();
    let _: i64 = side.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).unwrap();
    drop(side);
    // 100 upserts of keys spread over the store, each its own commit (under the checkpointer's
    // 1,000 pages: the log does not start over meanwhile)
    let upserts = 100;
    for i in 0..upserts {
        let (k, _) = seed_entry((i * 7_919) % n);
        let patch: Map<String, Value> =
            json!({"inputTokens": 100 + i, "lastTo": format!("+1555{}", 1000 + i)}).as_object().cloned().unwrap();
        s.write(|db| {
            let old = db.session(&k)?;
            let merged = entry::merge(old.as_ref(), &patch, entry::now_ms());
            db.put_session_over(&k, old.as_ref(), &merged)
        })
        .unwrap();
    }
    let (frames, commits) = log_frames(&p);
    assert_eq!(commits, upserts, "one commit per upsert");
    // the row, the old and the new leaf of `sessions_by_archived`, the label and parent
    // indexes of a tenth of the rows, a page split now and then (two indexes holding
    // `updated_at`, the newest entry at the front of each: 7 pages)
    let per_commit = frames as f64 / commits as f64;
    assert!(per_commit <= 4.5, "{per_commit} log pages per upsert ({frames} / {commits})");
    s.close();
}

#[test]
fn one_index_holds_updated_at_for_every_row() {
    let s = Store::open(":memory:").unwrap();
    let whole = s
        .read(|db| {
            db.rows(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions'
                 AND sql LIKE '%updated_at%' AND sql NOT LIKE '% WHERE %' ORDER BY name",
                crate::args![],
                |r| r.get::<String>(0),
            )
        })
        .unwrap();
    assert_eq!(whole, ["sessions_by_archived"]);
    // the agents stored, from an index an upsert leaves alone
    let p = super::tests::plan(&s, "SELECT DISTINCT agent_id FROM sessions WHERE agent_id IS NOT NULL");
    assert!(p.contains("COVERING INDEX sessions_by_agent_id"), "{p}");
}

#[test]
fn agent_lists_and_pages_keep_their_order_on_both_backends() {
    for s in pg::testdb::stores() {
        let d = s.dialect();
        let put = |key: &str, e: Value| {
            let mut e: Map<String, Value> = e.as_object().cloned().unwrap();
            e.insert("sessionId".into(), json!(uuid::Uuid::new_v4().to_string()));
            s.write(|db| db.put_session(key, &e)).unwrap();
        };
        // inserted in this order; equal timestamps list in insertion order (pages: by key)
        put("agent:ops:z", json!({"updatedAt": 100}));
        put("agent:main:y", json!({"updatedAt": 100}));
        put("agent:ops:a", json!({"updatedAt": 100, "archivedAt": 1}));
        put("agent:main:x", json!({"updatedAt": 300}));
        put("agent:ops:m", json!({"updatedAt": 100}));
        put("agent:ops:b", json!({"updatedAt": 200}));
        put("agent:ops:c", json!({"updatedAt": 50, "archivedAt": 2}));
        put("global", json!({"updatedAt": 400}));
        let keys = |f: &ListFilter| s.read(|db| db.list(f)).unwrap().into_iter().map(|r| r.key).collect::<Vec<_>>();
        let base = ListFilter {
            agent_id: Some("ops".into()),
            main_key: "main".into(),
            default_agent: "main".into(),
            ..ListFilter::default()
        };
        assert_eq!(keys(&base), ["agent:ops:b", "agent:ops:z", "agent:ops:a", "agent:ops:m", "agent:ops:c"], "{d:?}");
        assert_eq!(keys(&ListFilter { limit: Some(2), ..base.clone() }), ["agent:ops:b", "agent:ops:z"], "{d:?}");
        assert_eq!(
            keys(&ListFilter { agent_id: Some("main".into()), ..base.clone() }),
            ["agent:main:x", "agent:main:y"]
        );
        assert!(keys(&ListFilter { agent_id: Some("nobody".into()), ..base.clone() }).is_empty(), "{d:?}");
        let page = |f: &InventoryFilter| {
            s.read(|db| db.inventory_page(f)).unwrap().into_iter().map(|r| r.key).collect::<Vec<_>>()
        };
        let inv = InventoryFilter {
            agent_id: Some("ops".into()),
            main_key: "main".into(),
            default_agent: "main".into(),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(page(&inv), ["agent:ops:b", "agent:ops:a", "agent:ops:m", "agent:ops:z", "agent:ops:c"], "{d:?}");
        assert_eq!(page(&InventoryFilter { offset: 1, limit: 2, ..inv.clone() }), ["agent:ops:a", "agent:ops:m"]);
        assert_eq!(page(&InventoryFilter { archived: Some(true), ..inv.clone() }), ["agent:ops:a", "agent:ops:c"]);
        assert_eq!(
            page(&InventoryFilter { archived: Some(false), ..inv.clone() }),
            ["agent:ops:b", "agent:ops:m", "agent:ops:z"],
            "{d:?}"
        );
    }
}

#[test]
fn agent_lists_walk_the_archived_index_in_order() {
    let s = Store::open(":memory:").unwrap();
    let list = super::tests::plan(&s, &super::tests::unbound(listing::LIST_BY_UPDATED));
    assert!(list.contains("MERGE (UNION ALL)") && list.contains("sessions_by_archived"), "{list}");
    assert!(!list.contains("TEMP B-TREE"), "{list}");
    // the 2026.9 page of one agent, archived or not: the index's own order, nothing sorted
    for q in [inventory::BY_UPDATED, inventory::BY_ARCHIVED] {
        let p = super::tests::plan(&s, &super::tests::unbound(q));
        assert!(p.contains("sessions_by_archived") && !p.contains("TEMP B-TREE"), "{p}");
    }
}

#[test]
fn a_rare_agent_is_listed_from_its_own_rows_a_common_one_from_the_newest_first_index() {
    let s = Store::open(":memory:").unwrap();
    let common = listing::COMMON_AGENT_ROWS as usize;
    s.write(|db| {
        for j in 0..common + 5 {
            // the rare agent's rows are the oldest: the newest-first walk would pass every other
            let agent = if j < 5 { "ops" } else { "main" };
            let e = json!({"sessionId": format!("s{j}"), "updatedAt": 1_000 + (j as i64) / 3});
            db.put_session(&format!("agent:{agent}:k{j:05}"), e.as_object().unwrap())?;
        }
        Ok(())
    })
    .unwrap();
    let (rare, many) = s.read(|db| Ok((db.agent_is_common(Some("ops"))?, db.agent_is_common(Some("main"))?))).unwrap();
    assert!(!rare && many);
    let p = super::tests::plan(&s, &super::tests::unbound(listing::LIST_BY_AGENT));
    assert!(p.contains("sessions_by_agent_id (agent_id=?)"), "{p}");
    let p = super::tests::plan(&s, &super::tests::unbound(inventory::BY_AGENT));
    assert!(p.contains("sessions_by_agent_id (agent_id=?)"), "{p}");
    // both ways list what the unfiltered list shows of that agent, in its order (ties by
    // insertion, three rows a millisecond)
    let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
    let all: Vec<String> = s.read(|db| db.list(&base)).unwrap().into_iter().map(|r| r.key).collect();
    for agent in ["ops", "main"] {
        let f = ListFilter { agent_id: Some(agent.into()), limit: Some(7), ..base.clone() };
        let got: Vec<String> = s.read(|db| db.list(&f)).unwrap().into_iter().map(|r| r.key).collect();
        let want: Vec<String> =
            all.iter().filter(|k| k.starts_with(&format!("agent:{agent}:"))).take(7).cloned().collect();
        assert_eq!(got, want, "{agent}");
        let inv = InventoryFilter {
            agent_id: Some(agent.into()),
            main_key: "main".into(),
            default_agent: "main".into(),
            offset: 1,
            limit: 3,
            ..Default::default()
        };
        let page: Vec<String> = s.read(|db| db.inventory_page(&inv)).unwrap().into_iter().map(|r| r.key).collect();
        // pages order ties by key
        let mut by_key: Vec<(i64, String)> = all
            .iter()
            .filter(|k| k.starts_with(&format!("agent:{agent}:")))
            .map(|k| {
                let j: i64 = k.rsplit(":k").next().unwrap().parse().unwrap();
                (-(1_000 + j / 3), k.clone())
            })
            .collect();
        by_key.sort();
        let want: Vec<String> = by_key.into_iter().skip(1).take(3).map(|(_, k)| k).collect();
        assert_eq!(page, want, "{agent}");
    }
}

#[test]
fn every_run_of_equal_timestamps_lists_in_insertion_order_at_any_limit_on_both_backends() {
    for s in pg::testdb::stores() {
        let d = s.dialect();
        // 300 rows over 12 timestamps; keys in an order unrelated to insertion, a third archived
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut rows = Vec::new();
        s.write(|db| {
            for i in 0..300u64 {
                let at = 1_000 + (next() % 12) as i64;
                let key = format!("agent:main:k{:016x}", next());
                let mut e = json!({"sessionId": format!("s{i}"), "updatedAt": at});
                if next() % 3 == 0 {
                    e["archivedAt"] = json!(1);
                }
                db.put_session(&key, e.as_object().unwrap())?;
                rows.push((at, i, key));
            }
            Ok(())
        })
        .unwrap();
        // newest first, equal timestamps in insertion order
        rows.sort_by_key(|(at, i, _)| (std::cmp::Reverse(*at), *i));
        let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
        let keys = |f: &ListFilter| s.read(|db| db.list(f)).unwrap().into_iter().map(|r| r.key).collect::<Vec<_>>();
        for limit in [None, Some(0), Some(1), Some(7), Some(25), Some(26), Some(299), Some(300), Some(1_000)] {
            let n = limit.map_or(rows.len(), |l| (l as usize).min(rows.len()));
            let want: Vec<&String> = rows.iter().take(n).map(|r| &r.2).collect();
            assert_eq!(keys(&ListFilter { limit, ..base.clone() }).iter().collect::<Vec<_>>(), want, "{d:?} {limit:?}");
        }
        // a filter that passes over rows inside the runs keeps the order of the rest; the texts
        // path hands on the same rows with their stored entries
        let f = ListFilter { search: Some("b".into()), limit: Some(40), ..base.clone() };
        let want: Vec<&String> = rows.iter().filter(|r| r.2.contains('b')).take(40).map(|r| &r.2).collect();
        let got = keys(&f);
        assert!(want.len() == 40 && rows.iter().filter(|r| r.2.contains('b')).count() < rows.len(), "{d:?}");
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "{d:?}");
        let texts = s
            .read(|db| {
                let mut out = Vec::new();
                db.list_texts(&f, |k, e| {
                    let entry: Map<String, Value> = serde_json::from_str(e).expect("a stored entry");
                    out.push((k.to_owned(), entry["updatedAt"].clone()));
                    Ok(())
                })?;
                Ok(out)
            })
            .unwrap();
        let at_of = |k: &str| rows.iter().find(|r| r.2 == k).map(|r| json!(r.0)).unwrap();
        assert_eq!(texts, got.iter().map(|k| (k.clone(), at_of(k))).collect::<Vec<_>>(), "{d:?}");
    }
}

#[test]
fn a_long_run_of_equal_timestamps_lists_in_insertion_order_whatever_the_limit_cuts() {
    for s in pg::testdb::stores() {
        let d = s.dialect();
        let long = 300;
        // 5 newer rows, a long run at 500 inserted in descending key order (the walk meets it in
        // ascending key order), every seventh archived, then 5 older rows
        let mut order = Vec::new();
        s.write(|db| {
            let mut put = |key: String, at: i64, archived: bool| {
                let mut e = json!({"sessionId": format!("s{}", order.len()), "updatedAt": at});
                if archived {
                    e["archivedAt"] = json!(1);
                }
                db.put_session(&key, e.as_object().unwrap())?;
                order.push((at, key));
                Ok::<_, crate::error::Error>(())
            };
            for i in 0..5 {
                put(format!("agent:main:new{i}"), 600 + i, false)?;
            }
            for i in (0..long).rev() {
                put(format!("agent:main:tie{i:04}"), 500, i % 7 == 0)?;
            }
            for i in 0..5 {
                put(format!("agent:main:old{i}"), 400 - i as i64, false)?;
            }
            Ok(())
        })
        .unwrap();
        let mut want: Vec<(usize, &(i64, String))> = order.iter().enumerate().collect();
        want.sort_by_key(|(i, (at, _))| (std::cmp::Reverse(*at), *i));
        let want: Vec<&String> = want.into_iter().map(|(_, (_, k))| k).collect();
        let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
        for limit in
            [None, Some(3), Some(5), Some(6), Some(100), Some(long as u32 + 4), Some(long as u32 + 7), Some(10_000)]
        {
            let got: Vec<String> = s
                .read(|db| db.list(&ListFilter { limit, ..base.clone() }))
                .unwrap()
                .into_iter()
                .map(|r| r.key)
                .collect();
            let n = limit.map_or(want.len(), |l| (l as usize).min(want.len()));
            assert_eq!(got.iter().collect::<Vec<_>>(), want[..n], "{d:?} {limit:?}");
        }
    }
}
