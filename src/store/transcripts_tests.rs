//! Tests of the transcript store on SQLite and PostgreSQL: appends, ids, reads and plans.

use super::*;
use crate::args;
use crate::store::pg::testdb;
use crate::store::{Dialect, Store};

fn msg(i: usize) -> NewEntry {
    NewEntry::message(Some("user".into()), format!(r#"{{"role":"user","content":"m{i}"}}"#))
}

fn other(id: &str, parent: Option<&str>, kind: &str) -> NewEntry {
    let entry = serde_json::json!({"type": kind, "id": id, "parentId": parent, "summary": "s"}).to_string();
    NewEntry {
        id: Some(id.into()),
        parent_id: parent.map(str::to_owned),
        body: EntryBody::Other { kind: Some(kind.into()), entry },
    }
}

fn all(s: &Store, sid: &str) -> Vec<StoredEntry> {
    s.read(|db| {
        let mut out = Vec::new();
        db.each_entry(sid, |e| {
            out.push(e);
            Ok(())
        })?;
        Ok(out)
    })
    .unwrap()
}

#[test]
fn entries_that_are_not_messages_are_kept_in_order_but_never_read_as_messages() {
    for s in testdb::stores() {
        let mut entries: Vec<NewEntry> = (1..=3).map(msg).collect();
        entries.push(other("c1", Some("00000003"), "compaction"));
        entries.extend((4..=5).map(msg));
        s.write(|db| db.append_entries("sid", &entries)).unwrap();

        let page = s.read(|db| db.history_page("sid", 10, None)).unwrap();
        assert_eq!(page.messages.len(), 5);
        assert!(page.messages.iter().all(|m| m.json.contains("\"m")));
        // A page of 2 before the last message skips the compaction entry without counting it.
        let page = s.read(|db| db.history_page("sid", 2, Some(5))).unwrap();
        assert_eq!(page.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(s.read(|db| db.message_count("sid")).unwrap(), 5);
        assert_eq!(s.read(|db| db.entry_count("sid")).unwrap(), 6);

        let got = all(&s, "sid");
        assert_eq!(got.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(got[3].id, "c1");
        assert!(!got[3].body.is_message());
        // Entries appended without ids chain to the one before, whatever it is.
        assert_eq!(got[0].parent_id, None);
        assert_eq!(got[1].parent_id.as_deref(), Some("00000001"));
        assert_eq!(got[4].id, "00000005");
        assert_eq!(got[4].parent_id.as_deref(), Some("c1"));
    }
}

#[test]
fn appends_after_an_entry_with_an_id_chain_to_it_and_report_where_they_went() {
    for s in testdb::stores() {
        let first = s.write(|db| db.append_entries("sid", &[other("root", None, "model_change")])).unwrap();
        assert_eq!(first, Appended { first_seq: 1, first_parent: None, ids: vec!["root".into()] });
        let at = s
            .write(|db| db.append_messages("sid", &[(Some("user".into()), r#"{"role":"user","content":"x"}"#.into())]))
            .unwrap();
        assert_eq!(at, Appended { first_seq: 2, first_parent: Some("root".into()), ids: vec!["00000002".into()] });
    }
}

#[test]
fn replacing_a_transcript_leaves_only_the_new_entries() {
    for s in testdb::stores() {
        s.write(|db| db.append_entries("sid", &[msg(1), other("c", None, "compaction"), msg(2)])).unwrap();
        s.write(|db| db.replace_transcript("sid", &[msg(9)])).unwrap();
        let got = all(&s, "sid");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].seq, 1);
        assert!(matches!(&got[0].body, EntryBody::Message { message, .. } if message.contains("m9")));
        assert_eq!(s.write(|db| db.delete_transcript("sid")).unwrap(), 1);
        assert_eq!(s.read(|db| db.entry_count("sid")).unwrap(), 0);
    }
}

#[test]
fn rows_stored_before_ids_were_kept_read_with_the_ids_the_mirror_gave_them() {
    for s in testdb::stores() {
        s.write(|db| {
            for seq in 1..=2i64 {
                db.exec(
                    "INSERT INTO messages (session_id, seq, role, message) VALUES ('old', ?1, 'user', '{}')",
                    args![seq],
                )?;
            }
            Ok(())
        })
        .unwrap();
        let got = all(&s, "old");
        assert_eq!((got[1].id.as_str(), got[1].parent_id.as_deref()), ("00000002", Some("00000001")));
        let at = s.write(|db| db.append_messages("old", &[(None, "{}".into())])).unwrap();
        assert_eq!(at, Appended { first_seq: 3, first_parent: Some("00000002".into()), ids: vec!["00000003".into()] });
    }
}

#[test]
fn a_generated_id_never_repeats_an_id_read_from_a_file() {
    for s in testdb::stores() {
        // A file (our own export of another store, compacted by the gateway) already holds ids of
        // the form the numbering gives; after it replaces the transcript, appends avoid them.
        let read = |id: &str, parent: Option<&str>| NewEntry {
            id: Some(id.into()),
            parent_id: parent.map(str::to_owned),
            body: EntryBody::Message { role: Some("user".into()), message: "{}".into(), envelope: Some("{}".into()) },
        };
        s.write(|db| db.replace_transcript("sid", &[read("00000003", None), read("00000004", Some("00000003"))]))
            .unwrap();
        let at = s.write(|db| db.append_messages("sid", &[(None, "{}".into()), (None, "{}".into())])).unwrap();
        assert_eq!(at.ids, ["00000003-1", "00000004-1"]);
        assert_eq!(at.first_parent.as_deref(), Some("00000004"));
        let ids: Vec<String> = all(&s, "sid").into_iter().map(|e| e.id).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        // a transcript with nothing read from a file numbers its messages plainly
        let plain = s.write(|db| db.append_messages("other", &[(None, "{}".into())])).unwrap();
        assert_eq!(plain.ids, ["00000001"]);
    }
}

#[test]
fn the_lookups_of_read_ids_search_an_index_not_the_transcript() {
    let s = Store::open(":memory:").unwrap();
    let p = s
        .read(|db| {
            let mut st = db
                .conn()?
                .prepare(
                    "EXPLAIN QUERY PLAN SELECT EXISTS (SELECT 1 FROM messages INDEXED BY messages_by_entry_id \
                     WHERE session_id = 'a' AND entry_id = 'b' AND envelope IS NOT NULL) \
                     OR EXISTS (SELECT 1 FROM transcript_entries INDEXED BY transcript_entries_by_id \
                     WHERE session_id = 'a' AND entry_id = 'b')",
                )
                .map_err(crate::store::sql)?;
            let rows = st.query_map([], |r| r.get::<_, String>(3)).map_err(crate::store::sql)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>().map_err(crate::store::sql)?.join("; "))
        })
        .unwrap();
    assert!(p.contains("USING INDEX messages_by_entry_id (session_id=? AND entry_id=?)"), "{p}");
    assert!(p.contains("INDEX transcript_entries_by_id (session_id=? AND entry_id=?)"), "{p}");
}

#[test]
fn a_long_append_of_both_kinds_reads_back_exactly_nulls_and_text_included() {
    // Long enough that PostgreSQL takes both tables' rows through COPY.
    let mut entries = Vec::new();
    for i in 0..40 {
        entries.push(match i % 4 {
            0 => NewEntry::message(None, format!(r#"{{"content":"ü {i} \u0000 'q' \"d\""}}"#)),
            1 => other(&format!("o{i}"), None, "custom"),
            2 => NewEntry {
                id: Some(format!("r{i}")),
                parent_id: Some(format!("o{}", i - 1)),
                body: EntryBody::Message {
                    role: Some("assistant".into()),
                    message: "{}".into(),
                    envelope: Some(r#"{"type":"message"}"#.into()),
                },
            },
            _ => NewEntry { id: None, parent_id: None, body: EntryBody::Other { kind: None, entry: "{}".into() } },
        });
    }
    for s in testdb::stores() {
        let d = s.dialect();
        let at = s.write(|db| db.append_entries("long", &entries)).unwrap();
        assert_eq!((at.first_seq, at.ids.len()), (1, 40), "{d:?}");
        let got = all(&s, "long");
        assert_eq!(got.len(), 40, "{d:?}");
        for (i, (g, e)) in got.iter().zip(&entries).enumerate() {
            assert_eq!(g.seq, i as i64 + 1, "{d:?}");
            assert_eq!(g.body, e.body, "{d:?} entry {i}");
            assert_eq!(g.id, at.ids[i], "{d:?} entry {i}");
        }
        assert_eq!(got[2].parent_id.as_deref(), Some("o1"), "{d:?}");
        assert_eq!(got[3].parent_id.as_deref(), Some("r2"), "{d:?}: a generated entry chains to the one before");
        assert_eq!(s.read(|db| db.message_count("long")).unwrap(), 20, "{d:?}");
        assert_eq!(s.read(|db| db.entry_count("long")).unwrap(), 40, "{d:?}");
        // appending again continues the numbering after the last entry, whichever table holds it
        let more = s.write(|db| db.append_messages("long", &[(None, "{}".into())])).unwrap();
        assert_eq!((more.first_seq, more.first_parent.as_deref()), (41, Some(at.ids[39].as_str())), "{d:?}");
    }
}

/// The plan PostgreSQL keeps for a prepared statement once it stops re-planning per call.
pub(crate) fn pg_generic_plan(s: &Store, prepare: &'static str, explain: &'static str) -> String {
    s.write(|db| {
        db.exec("SET LOCAL plan_cache_mode = force_generic_plan", args![])?;
        db.exec(prepare, args![])?;
        let plan = db.rows(explain, args![], |r| r.get::<String>(0))?;
        db.exec("DEALLOCATE p", args![])?;
        Ok(plan.join("\n"))
    })
    .unwrap()
}

#[test]
fn on_postgres_a_history_page_and_an_id_lookup_walk_an_index_without_sorting() {
    let [_, s] = testdb::stores();
    assert_eq!(s.dialect(), Dialect::Postgres);
    s.write(|db| {
        for sid in ["a", "b", "c"] {
            let entries: Vec<NewEntry> = (0..2000).map(msg).collect();
            db.append_entries(sid, &entries)?;
        }
        db.exec("ANALYZE messages", args![])?;
        Ok(())
    })
    .unwrap();
    let page = pg_generic_plan(
        &s,
        "PREPARE p (text, bigint, bigint) AS SELECT seq, role, message FROM messages \
         WHERE session_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
        "EXPLAIN EXECUTE p('b', 1500, 21)",
    );
    assert!(page.contains("Index Scan Backward using messages_pkey"), "{page}");
    assert!(!page.contains("Sort") && !page.contains("Seq Scan"), "{page}");
    let lookup = pg_generic_plan(
        &s,
        "PREPARE p (text, text) AS SELECT EXISTS (SELECT 1 FROM messages \
         WHERE session_id = $1 AND entry_id = $2 AND envelope IS NOT NULL) \
         OR EXISTS (SELECT 1 FROM transcript_entries WHERE session_id = $1 AND entry_id = $2)",
        "EXPLAIN EXECUTE p('b', '00000001')",
    );
    // either partial index on (session_id, entry_id) answers it: the planner picks by cost
    assert!(lookup.contains("using messages_by_"), "{lookup}");
    assert!(lookup.contains("transcript_entries_by_id"), "{lookup}");
    assert!(!lookup.contains("Seq Scan"), "{lookup}");
    // every append asks whether anything was read from a file: the partial index on read
    // messages answers at once, where the transcript's key would walk all 2,000 appended ones
    let any_read = pg_generic_plan(
        &s,
        "PREPARE p (text) AS SELECT EXISTS (SELECT 1 FROM messages WHERE session_id = $1 AND envelope IS NOT NULL) \
         OR EXISTS (SELECT 1 FROM transcript_entries WHERE session_id = $1)",
        "EXPLAIN EXECUTE p('b')",
    );
    assert!(any_read.contains("messages_by_read_id"), "{any_read}");
}
