//! The outbox rows on both backends: one row per idempotency key, claims in due order up to
//! the limit and only of the kinds asked for, a settled row leaves its claim, and the counts.

use serde_json::json;

use crate::store::pg::testdb;

const A2A: [Option<&str>; 2] = [Some("a2a_announce"), None];

/// The claimant "me", holding a lease until long after the times below.
fn me() -> crate::store::owners::OwnerRecord {
    crate::store::owners::OwnerRecord {
        owner_id: "me".into(),
        host_id: "h".into(),
        host_name: "h".into(),
        pid: 1,
        started_at: 0,
        expires_at: i64::MAX,
    }
}

#[test]
fn items_are_recorded_once_claimed_in_due_order_settled_and_counted() {
    for s in testdb::stores() {
        let on = s.dialect();
        let added = s
            .write(|db| {
                db.put_owner(&me())?;
                Ok([
                    db.insert_outbox("late", "a2a_announce", Some("agent:main:x"), &json!({"n": 1}), 30)?,
                    db.insert_outbox("early", "a2a_announce", None, &json!({"n": 2}), 10)?,
                    db.insert_outbox("child", "subagent_announce", None, &json!({}), 10)?,
                    db.insert_outbox("early", "a2a_announce", None, &json!({"n": 3}), 5)?,
                ])
            })
            .unwrap();
        assert_eq!(added, [true, true, true, false], "{on:?}: a key is recorded once");
        let early = s.read(|db| db.outbox_item("early")).unwrap().unwrap();
        assert_eq!((early.payload.clone(), early.status.as_str(), early.created_at), (json!({"n": 2}), "pending", 10));
        assert_eq!(s.read(|db| db.outbox_pending_count()).unwrap(), 3, "{on:?}");
        assert_eq!(s.read(|db| db.outbox_next_claimable("me", 0)).unwrap(), Some(10), "{on:?}");

        // nothing is due before its time; then the oldest due first, up to the limit
        assert!(s.write(|db| db.claim_outbox("me", A2A, 9, 1_000, 8)).unwrap().is_empty(), "{on:?}");
        let got = s.write(|db| db.claim_outbox("me", A2A, 100, 1_000, 1)).unwrap();
        assert_eq!(got.iter().map(|r| r.idempotency_key.as_str()).collect::<Vec<_>>(), ["early"], "{on:?}");
        let got = s.write(|db| db.claim_outbox("me", A2A, 100, 1_000, 8)).unwrap();
        assert_eq!(got[0].session_key.as_deref(), Some("agent:main:x"), "{on:?}");
        assert_eq!(got.len(), 1, "{on:?}: only the a2a item is left to claim");

        // a settled item leaves its claim (the other one stays with its live claimant): pending
        // again when due, or final
        s.write(|db| db.settle_outbox(early.id, "pending", 1, 500, Some("boom"), 100)).unwrap();
        assert_eq!(s.read(|db| db.outbox_next_claimable("other", 100)).unwrap(), Some(10), "{on:?}: the child item");
        let again = s.write(|db| db.claim_outbox("other", A2A, 500, 1_000, 8)).unwrap();
        assert_eq!((again.len(), again[0].attempts, again[0].last_error.as_deref()), (1, 1, Some("boom")), "{on:?}");
        s.write(|db| db.settle_outbox(early.id, "delivered", 2, 500, None, 500)).unwrap();
        let statuses: Vec<String> = s.read(|db| db.outbox_items()).unwrap().into_iter().map(|r| r.status).collect();
        assert_eq!(statuses, ["pending", "delivered", "pending"], "{on:?}: in the order recorded");
        assert_eq!(s.read(|db| db.outbox_pending_count()).unwrap(), 2, "{on:?}");
    }
}

#[test]
fn claims_given_back_are_claimable_at_once_except_those_being_attempted() {
    for s in testdb::stores() {
        let on = s.dialect();
        s.write(|db| {
            db.put_owner(&me())?;
            db.insert_outbox("one", "a2a_announce", None, &json!({}), 10)?;
            db.insert_outbox("two", "a2a_announce", None, &json!({}), 10)?;
            Ok(())
        })
        .unwrap();
        let got = s.write(|db| db.claim_outbox("me", A2A, 100, 60_000, 8)).unwrap();
        assert_eq!(got.len(), 2, "{on:?}");
        // both held until their attempt deadline
        assert!(s.write(|db| db.claim_outbox("me", A2A, 200, 60_000, 8)).unwrap().is_empty(), "{on:?}");
        let attempting = got.iter().find(|r| r.idempotency_key == "one").map(|r| r.id).unwrap();
        assert_eq!(s.write(|db| db.release_outbox_claims("me", &[attempting])).unwrap(), 1, "{on:?}");
        let again = s.write(|db| db.claim_outbox("me", A2A, 200, 60_000, 8)).unwrap();
        assert_eq!(again.iter().map(|r| r.idempotency_key.as_str()).collect::<Vec<_>>(), ["two"], "{on:?}");
        // another owner never gets them while "me" holds its lease
        s.write(|db| db.release_outbox_claims("me", &[])).unwrap();
        assert!(s.write(|db| db.claim_outbox("other", A2A, 300, 60_000, 8)).unwrap().is_empty(), "{on:?}");
    }
}
