//! Ownership across hosts on one PostgreSQL schema: claims taken concurrently by two stores take
//! every item exactly once, a claim skips the rows another transaction holds instead of waiting
//! for them, and leases are written and judged by the server's clock, whatever the hosts'
//! clocks say.

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
    s.write(|db| {
        db.insert_run(&run("r"), ahead.id())?;
        ahead.renew(db, 0)
    })
    .unwrap();
    let (reaped, ended) = s
        .write(|db| {
            let now = behind.now(db)?;
            Ok((behind.reap(db, now)?, db.end_unheld_runs(now, "error", "interrupted")?))
        })
        .unwrap();
    assert_eq!((reaped, ended), (vec![ahead.id().to_owned()], vec!["r".to_owned()]));
}
