//! What an upsert writes to the log: the pages of one commit that moves only `updatedAt`
//! (counted in the -wal file's frame headers), the one index that holds `updated_at` for every
//! row, and the agent lists served from it, alike on both backends.

use super::inventory::InventoryFilter;
use super::*;
use crate::entry;
use crate::store::sessions::ListFilter;
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
    let list = super::tests::plan(&s, &super::tests::unbound(sessions::LIST_BY_UPDATED));
    assert!(list.contains("MERGE (UNION ALL)") && list.contains("sessions_by_archived"), "{list}");
    let whole_sort = list.lines().any(|l| l.contains("TEMP B-TREE") && !l.contains("LAST TERM OF ORDER BY"));
    assert!(!whole_sort, "{list}");
    // the 2026.9 page of one agent, archived or not: the index's own order, nothing sorted
    for q in [inventory::BY_UPDATED, inventory::BY_ARCHIVED] {
        let p = super::tests::plan(&s, &super::tests::unbound(q));
        assert!(p.contains("sessions_by_archived") && !p.contains("TEMP B-TREE"), "{p}");
    }
}

#[test]
fn a_rare_agent_is_listed_from_its_own_rows_a_common_one_from_the_newest_first_index() {
    let s = Store::open(":memory:").unwrap();
    let common = sessions::COMMON_AGENT_ROWS as usize;
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
    let p = super::tests::plan(&s, &super::tests::unbound(sessions::LIST_BY_AGENT));
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
