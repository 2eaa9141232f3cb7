//! Ownership across hosts on one PostgreSQL schema: claims taken concurrently by two stores take
//! every item exactly once, a claim skips the rows another transaction holds instead of waiting
//! for them, leases are written and judged by the server's clock, whatever the hosts' clocks
//! say, and a renewal never waits for the write lock yet stays exact against a takeover.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::json;

use super::tests::{assert_claimed_once, claim_race, seed_outbox};
use super::*;
use crate::store::pg::testdb;
use crate::store::runs::RunRecord;
use crate::store::Store;

const KINDS: [Option<&str>; 2] = [Some("a2a_announce"), None];
const DAY: i64 = 86_400_000;

fn here(host: &str, pid: u32) -> Here {
    Here { host_id: host.into(), host_name: host.into(), pid, pid_running: |_| true }
}

/// A host clock `skew` ms off the system clock.
fn skewed(skew: i64) -> Clock {
    Arc::new(move || crate::entry::now_ms() + skew)
}

fn run(id: &str) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        session_key: "agent:main:main".into(),
        lane: "nested".into(),
        chain_id: Some("c".into()),
        status: "running".into(),
        started_at: Some(0),
        ended_at: None,
        error: None,
    }
}

#[test]
fn two_stores_on_one_schema_claiming_at_once_claim_every_item_exactly_once() {
    let url = testdb::fresh_url();
    let first = seed_outbox(&url, 300);
    let claimers = [("host-a", 0), ("host-a", 1), ("host-b", 2), ("host-b", 3)];
    assert_claimed_once(claim_race(&url, &claimers), 300);
    assert_eq!(first.read(|db| db.outbox_next_claimable("nobody", 0)).unwrap(), None);
}

#[test]
fn a_claim_skips_a_row_another_transaction_holds_instead_of_waiting_for_it() {
    let url = testdb::fresh_url();
    let schema = url.rsplit("schema=").next().unwrap().to_owned();
    // a lock wait fails the claim after 5 s instead of hanging the test
    let store = Store::open(&format!("{url}&options=-c%20lock_timeout%3D5000")).unwrap();
    let lease = Lease::new(here("host-a", 1), system_clock());
    store
        .write(|db| {
            lease.acquire(db, 600_000)?;
            for k in ["k0", "k1", "k2"] {
                db.insert_outbox(k, "a2a_announce", None, &json!({}), 0)?;
            }
            Ok(())
        })
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let holder = rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&testdb::server_url(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let hold = format!("BEGIN; SELECT id FROM {schema}.outbox WHERE idempotency_key = 'k1' FOR UPDATE");
        client.batch_execute(&hold).await.unwrap();
        client
    });
    let got = store.write(|db| db.claim_outbox(lease.id(), KINDS, lease.now(db)?, 600_000, 8)).unwrap();
    let keys: Vec<&str> = got.iter().map(|r| r.idempotency_key.as_str()).collect();
    assert_eq!(keys, ["k0", "k2"], "the held row is skipped");
    rt.block_on(holder.batch_execute("ROLLBACK")).unwrap();
    let got = store.write(|db| db.claim_outbox(lease.id(), KINDS, lease.now(db)?, 600_000, 8)).unwrap();
    assert_eq!(got.len(), 1, "and claimed once it is free");
    assert_eq!(got[0].idempotency_key, "k1");
}

#[test]
fn leases_of_hosts_whose_clocks_are_a_day_off_are_written_and_judged_by_the_servers_clock() {
    let s = Store::open(&testdb::fresh_url()).unwrap();
    let ahead = Lease::new(here("host-ahead", 1), skewed(DAY));
    let behind = Lease::new(here("host-behind", 2), skewed(-DAY));
    let before = s.read(|db| db.now_ms()).unwrap();
    assert!((before - crate::entry::now_ms()).abs() < DAY / 2, "the test server runs on this machine's clock");
    // a lease of a minute ends a minute after the server's now, not a day away from it
    s.write(|db| ahead.acquire(db, 60_000)).unwrap();
    s.write(|db| behind.acquire(db, 60_000)).unwrap();
    let after = s.read(|db| db.now_ms()).unwrap();
    for o in s.read(|db| db.owners()).unwrap() {
        assert!((before + 60_000..=after + 60_000).contains(&o.expires_at), "{o:?} between {before} and {after}");
    }
    // each sees the other's minute-long lease live: the one ahead does not reap the one behind
    assert!(s.write(|db| ahead.reap(db, ahead.now(db)?)).unwrap().is_empty());
    assert!(s.write(|db| behind.reap(db, behind.now(db)?)).unwrap().is_empty());
    // an item the host ahead records is due at once for the host behind
    s.write(|db| db.insert_outbox("k", "a2a_announce", None, &json!({}), ahead.now(db)?)).unwrap();
    let claimed = s.write(|db| db.claim_outbox(behind.id(), KINDS, behind.now(db)?, 60_000, 8)).unwrap();
    assert_eq!(claimed.len(), 1, "due on the server's clock");
    // a lease the host ahead lets lapse (renewed for no time) is over for the host behind at once
    s.write(|db| db.insert_run(&run("r"), ahead.id())).unwrap();
    assert!(ahead.renew(&s, 0).unwrap());
    let (reaped, ended) = s
        .write(|db| {
            let now = behind.now(db)?;
            Ok((behind.reap(db, now)?, db.end_unheld_runs(now, "error", "interrupted")?))
        })
        .unwrap();
    assert_eq!((reaped, ended), (vec![ahead.id().to_owned()], vec!["r".to_owned()]));
}

/// A store whose lock waits fail after a minute instead of hanging a test that went wrong.
fn store_with_lock_timeout() -> Store {
    Store::open(&format!("{}&options=-c%20lock_timeout%3D60000", testdb::fresh_url())).unwrap()
}

fn expiry_of(s: &Store, lease: &Lease) -> Option<i64> {
    s.read(|db| db.owners()).unwrap().into_iter().find(|o| o.owner_id == lease.id()).map(|o| o.expires_at)
}

/// A store where `a`'s lease lapsed at once with its run `r` running, and `b`, who may take it.
fn lapsed_owner_and_taker() -> (Store, Lease, Lease) {
    let s = store_with_lock_timeout();
    let (a, b) = (Lease::new(here("host-a", 1), system_clock()), Lease::new(here("host-b", 2), system_clock()));
    s.write(|db| {
        a.acquire(db, 0)?;
        db.insert_run(&run("r"), a.id())
    })
    .unwrap();
    (s, a, b)
}

#[test]
fn a_renewal_completes_while_another_session_holds_the_write_lock_and_a_write_waits() {
    let s = store_with_lock_timeout();
    let a = Lease::new(here("host-a", 1), system_clock());
    s.write(|db| a.acquire(db, 1_000)).unwrap();
    let before = expiry_of(&s, &a).unwrap();
    let holder = testdb::Session::open();
    holder.hold_write_lock();
    let wrote = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // a write queued behind the lock
        let writer = scope.spawn(|| {
            let out = s.write(|db| db.insert_outbox("k", "a2a_announce", None, &json!({}), 0));
            wrote.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        });
        assert!(a.renew(&s, 600_000).unwrap(), "renewed while the write lock is held elsewhere");
        // the order: the renewal is done, the lock still held, the write still behind it
        assert!(holder.holds_write_lock(), "the other session still holds the write lock");
        assert!(!wrote.load(std::sync::atomic::Ordering::SeqCst), "a write still waits for the lock");
        // committed: a read (which never waits for the lock) sees it
        let after = expiry_of(&s, &a).unwrap();
        assert!(after >= before + 599_000, "the renewal was committed: {before} -> {after}");
        holder.end();
        writer.join().unwrap().unwrap();
    });
    assert!(wrote.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn a_renewal_that_reaches_the_row_before_the_takers_delete_keeps_the_lease_and_its_runs() {
    let (s, a, b) = lapsed_owner_and_taker();
    let (kept, reaped, ended) = s
        .write(|db| {
            let now = b.now(db)?;
            let seen = db.owners()?.into_iter().find(|o| o.owner_id == a.id()).unwrap();
            assert!(!b.holds(&seen, now), "b judges a's lease lapsed");
            // a renews between b's judgement and b's delete, while b holds the write lock
            assert!(a.renew(&s, 600_000)?);
            Ok((!db.reap_owner(&seen)?, b.reap(db, now)?, db.end_unheld_runs(now, "error", "interrupted")?))
        })
        .unwrap();
    assert!(kept, "the delete of the row as judged finds it renewed and deletes nothing");
    assert_eq!((reaped, ended), (vec![], vec![]));
    assert_eq!(s.read(|db| db.run("r")).unwrap().unwrap().status, "running");
    assert!(a.renew(&s, 600_000).unwrap());
}

#[test]
fn a_renewal_racing_a_takeover_that_deleted_its_row_fails_once_it_commits_and_the_work_is_taken_once() {
    let (s, a, b) = lapsed_owner_and_taker();
    let watcher = testdb::Session::open();
    let renewed = std::thread::scope(|scope| {
        let (taken, renewal) = s
            .write(|db| {
                let now = b.now(db)?;
                let reaped = b.reap(db, now)?;
                assert_eq!(reaped, [a.id()]);
                // a renews now: it waits for b's transaction on the deleted row (not for the lock)
                let renewal = scope.spawn(|| a.renew(&s, 600_000));
                watcher.until_waiting_on_a_lock(testdb::LEASE_CONNECTION);
                Ok((db.end_unheld_runs(now, "error", "interrupted")?, renewal))
            })
            .unwrap();
        assert_eq!(taken, ["r"]);
        renewal.join().unwrap().unwrap()
    });
    assert!(!renewed, "the renewal after the takeover fails");
    // taken over once: a second taker finds nothing
    let c = Lease::new(here("host-c", 3), system_clock());
    let again = s
        .write(|db| {
            let now = c.now(db)?;
            Ok((c.reap(db, now)?, db.end_unheld_runs(now, "error", "interrupted")?))
        })
        .unwrap();
    assert_eq!(again, (vec![], vec![]));
    assert_eq!(expiry_of(&s, &a), None, "the failed renewal wrote nothing");
    s.write(|db| a.restore(db, 600_000)).unwrap();
    assert!(expiry_of(&s, &a).is_some(), "restored, it holds from then on");
}

#[test]
fn a_renewal_after_the_server_dropped_the_renewing_connection_renews_on_a_new_one() {
    let s = Store::open(&testdb::fresh_url()).unwrap();
    let a = Lease::new(here("host-a", 1), system_clock());
    s.write(|db| a.acquire(db, 1_000)).unwrap();
    assert!(a.renew(&s, 60_000).unwrap());
    let first = expiry_of(&s, &a).unwrap();
    let killer = testdb::Session::open();
    // with a timeout the call returns once the process is gone (without one it only signals it,
    // and the renewal could still go through the old connection)
    let sql = "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
               WHERE application_name = $1) k";
    assert!(killer.count(sql, &[&testdb::LEASE_CONNECTION]) >= 1, "the renewing connection was there");
    assert!(a.renew(&s, 600_000).unwrap(), "renewed on a new connection");
    assert!(expiry_of(&s, &a).unwrap() > first);
}
