//! Run records on both backends: the first end stands, the newest running run of a session is
//! found, a chain's runs are counted, and the runs of owners that hold no lease are ended.

use super::*;
use crate::store::owners::OwnerRecord;
use crate::store::pg::testdb;

fn run(id: &str, session: &str, started: i64) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        session_key: session.into(),
        lane: "nested".into(),
        chain_id: Some("chain".into()),
        status: "running".into(),
        started_at: Some(started),
        ended_at: None,
        error: None,
    }
}

fn owner(id: &str, expires_at: i64) -> OwnerRecord {
    OwnerRecord { owner_id: id.into(), host_id: "h".into(), host_name: "h".into(), pid: 1, started_at: 0, expires_at }
}

#[test]
fn runs_end_once_are_found_and_counted_and_unheld_ones_are_ended() {
    for s in testdb::stores() {
        let on = s.dialect();
        s.write(|db| {
            db.put_owner(&owner("live", 1_000))?;
            db.put_owner(&owner("lapsed", 50))?;
            db.insert_run(&run("a", "agent:main:x", 1), "live")?;
            db.insert_run(&run("b", "agent:main:x", 2), "lapsed")?;
            db.insert_run(&run("c", "agent:main:y", 3), "gone")
        })
        .unwrap();
        assert_eq!(s.read(|db| db.chain_run_count("chain")).unwrap(), 3, "{on:?}");
        assert_eq!(s.read(|db| db.running_on("agent:main:x")).unwrap(), Some(("b".into(), Some("chain".into()))));
        assert!(s.write(|db| db.finish_run("b", "ok", 10, None)).unwrap(), "{on:?}");
        assert!(!s.write(|db| db.end_if_running("b", "error", 11, "late")).unwrap(), "{on:?}: the first end stands");
        let b = s.read(|db| db.run("b")).unwrap().unwrap();
        assert_eq!((b.status.as_str(), b.ended_at, b.error), ("ok", Some(10), None), "{on:?}");
        assert_eq!(s.read(|db| db.running_on("agent:main:x")).unwrap().map(|r| r.0), Some("a".into()), "{on:?}");

        // at 100 "live" still holds; "gone" has no row
        let mut ended = s.write(|db| db.end_unheld_runs(100, "error", "interrupted")).unwrap();
        ended.sort();
        assert_eq!(ended, ["c"], "{on:?}");
        s.write(|db| db.renew_owner("live", 100)).unwrap();
        assert_eq!(s.write(|db| db.end_unheld_runs(100, "error", "interrupted")).unwrap(), ["a"], "{on:?}");
        let a = s.read(|db| db.run("a")).unwrap().unwrap();
        assert_eq!((a.status.as_str(), a.ended_at, a.error.as_deref()), ("error", Some(100), Some("interrupted")));
        assert_eq!(s.read(|db| db.run("nope")).unwrap(), None, "{on:?}");
        s.write(|db| db.delete_owner("live")).unwrap();
        let left: Vec<String> = s.read(|db| db.owners()).unwrap().into_iter().map(|o| o.owner_id).collect();
        assert_eq!(left, ["lapsed"], "{on:?}");
    }
}
