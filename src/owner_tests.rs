//! The ownership rule at the store level, on an injected clock and injected host identities:
//! a live lease blocks takeover, an expired one allows it, a renewed one keeps its work, a clean
//! release frees it at once, a dead process on this host is taken over at once (and one on
//! another host never before expiry), and two owners never both claim one outbox item.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::store::pg::testdb;
use crate::store::runs::RunRecord;
use crate::store::Store;

const LEN: u64 = 1_000;
/// A lease that outlives any test (on PostgreSQL the server's clock runs while a test does).
const LONG: u64 = 600_000;
const KINDS: [Option<&str>; 2] = [Some("a2a_announce"), None];
/// The pid of a process that is gone, as the injected probes below see it.
const DEAD_PID: u32 = 4_000_000_000;

fn clock_at(t: i64) -> (Arc<AtomicI64>, Clock) {
    let at = Arc::new(AtomicI64::new(t));
    let c = at.clone();
    (at, Arc::new(move || c.load(Ordering::SeqCst)))
}

fn here(host: &str, pid: u32) -> Here {
    Here { host_id: host.into(), host_name: host.into(), pid, pid_running: |p| p != DEAD_PID }
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

/// A store where `a` holds a running run `r` and a claim on the outbox item `k`, taken at `t`.
fn with_work_of(a: &Lease, t: i64) -> Store {
    with_work_in(Store::open(":memory:").unwrap(), a, t, LEN)
}

/// `s`, where `a` holds (a lease of `len`) a running run `r` and a claim on the item `k` taken at `t`.
fn with_work_in(s: Store, a: &Lease, t: i64, len: u64) -> Store {
    s.write(|db| {
        a.acquire(db, len)?;
        db.insert_run(&run("r"), a.id())?;
        db.insert_outbox("k", "a2a_announce", None, &json!({}), t)?;
        assert_eq!(db.claim_outbox(a.id(), KINDS, t, 60_000, 8)?.len(), 1);
        Ok(())
    })
    .unwrap();
    s
}

/// What `b` takes over at its clock's time: (owners reaped, runs ended, items claimed).
fn take(s: &Store, b: &Lease) -> (Vec<String>, Vec<String>, usize) {
    s.write(|db| {
        let now = b.now(db)?;
        let reaped = b.reap(db, now)?;
        let ended = db.end_unheld_runs(now, "error", "interrupted")?;
        let claimed = db.claim_outbox(b.id(), KINDS, now, 60_000, 8)?.len();
        Ok((reaped, ended, claimed))
    })
    .unwrap()
}

#[test]
fn a_live_lease_on_another_host_blocks_takeover_and_its_expiry_allows_it() {
    let (t, clock) = clock_at(10_000);
    let a = Lease::new(here("host-a", DEAD_PID), clock.clone());
    let b = Lease::new(here("host-b", 7), clock);
    let s = with_work_of(&a, 10_000);
    // a's pid is not running here, but a runs on another host: only expiry counts
    t.store(10_999, Ordering::SeqCst);
    assert_eq!(take(&s, &b), (vec![], vec![], 0));
    assert_eq!(s.read(|db| db.outbox_next_claimable(b.id(), 10_999)).unwrap(), None);
    t.store(11_000, Ordering::SeqCst);
    assert_eq!(take(&s, &b), (vec![a.id().to_owned()], vec!["r".to_owned()], 1));
    let r = s.read(|db| db.run("r")).unwrap().unwrap();
    assert_eq!((r.status.as_str(), r.error.as_deref()), ("error", Some("interrupted")));
    // taken once: nothing left for a second pass
    assert_eq!(take(&s, &b), (vec![], vec![], 0));
}

#[test]
fn a_renewed_lease_keeps_its_work_past_its_first_expiry() {
    let (t, clock) = clock_at(0);
    let a = Lease::new(here("host-a", 1), clock.clone());
    let b = Lease::new(here("host-b", 2), clock);
    let s = with_work_of(&a, 0);
    for at in [900, 1_800, 2_700] {
        t.store(at, Ordering::SeqCst);
        assert!(a.renew(&s, LEN).unwrap(), "renewed while on record");
        t.store(at + 500, Ordering::SeqCst);
        assert_eq!(take(&s, &b), (vec![], vec![], 0), "at {}", at + 500);
    }
    assert_eq!(s.read(|db| db.run("r")).unwrap().unwrap().status, "running");
    t.store(3_700, Ordering::SeqCst);
    assert_eq!(take(&s, &b).1, ["r"]);
}

#[test]
fn a_clean_release_frees_the_work_at_once_and_a_late_renewal_does_not_take_it_back() {
    for s in testdb::stores() {
        let on = s.dialect();
        let (_t, clock) = clock_at(0);
        let a = Lease::new(here("host-a", 1), clock.clone());
        let b = Lease::new(here("host-b", 2), clock);
        let s = with_work_in(s, &a, 0, LONG);
        s.write(|db| a.release(db)).unwrap();
        assert!(a.renew(&s, LONG).unwrap());
        assert!(s.read(|db| db.owners()).unwrap().is_empty(), "{on:?}: a released lease is never written again");
        // well before any expiry
        assert_eq!(take(&s, &b), (vec![], vec!["r".to_owned()], 1), "{on:?}");
    }
}

#[test]
fn a_dead_process_on_this_host_is_taken_over_at_once_and_a_live_one_is_not() {
    for s in testdb::stores() {
        let on = s.dialect();
        let (_t, clock) = clock_at(0);
        let dead = Lease::new(here("host-a", DEAD_PID), clock.clone());
        let alive = Lease::new(here("host-a", 3), clock.clone());
        let me = Lease::new(here("host-a", 2), clock.clone());
        let s = with_work_in(s, &dead, 0, LONG);
        s.write(|db| alive.acquire(db, LONG)).unwrap();
        assert_eq!(take(&s, &me), (vec![dead.id().to_owned()], vec!["r".to_owned()], 1), "{on:?}");
        let left: Vec<String> = s.read(|db| db.owners()).unwrap().into_iter().map(|o| o.owner_id).collect();
        assert_eq!(left, [alive.id()], "{on:?}: the live owner on this host keeps its lease");
        // another store of this very process (same pid) holds while its lease does
        let sibling = Lease::new(here("host-a", 2), clock);
        let rec = OwnerRecord {
            owner_id: sibling.id().into(),
            host_id: "host-a".into(),
            host_name: "a".into(),
            pid: 2,
            started_at: 0,
            expires_at: 1,
        };
        assert!(me.holds(&rec, 0));
        assert!(!me.holds(&rec, 1));
    }
}

#[test]
fn a_lapsed_lease_learns_it_on_renewal_and_holds_again_from_then_on() {
    let (t, clock) = clock_at(0);
    let a = Lease::new(here("host-a", 1), clock.clone());
    let b = Lease::new(here("host-b", 2), clock);
    let s = with_work_of(&a, 0);
    t.store(5_000, Ordering::SeqCst);
    assert_eq!(take(&s, &b).0, [a.id()]);
    assert!(!a.renew(&s, LEN).unwrap(), "the renewal reports the lapse");
    s.write(|db| a.restore(db, LEN)).unwrap();
    s.write(|db| db.insert_run(&run("r2"), a.id())).unwrap();
    assert_eq!(take(&s, &b), (vec![], vec![], 0), "its new work is held");
    // a taken-over run's late end does not overwrite the takeover's
    assert!(!s.write(|db| db.finish_run("r", "ok", 6_000, None)).unwrap());
    assert_eq!(s.read(|db| db.run("r")).unwrap().unwrap().status, "error");
}

#[test]
fn an_owner_tries_its_own_stuck_claim_again_only_after_the_attempt_deadline() {
    for s in testdb::stores() {
        let on = s.dialect();
        let (_t, clock) = clock_at(0);
        let a = Lease::new(here("host-a", 1), clock);
        let s = with_work_in(s, &a, 0, LONG);
        let in_flight = s.write(|db| db.claim_outbox(a.id(), KINDS, 10, 60_000, 8)).unwrap();
        assert!(in_flight.is_empty(), "{on:?}: in flight");
        assert_eq!(s.read(|db| db.outbox_next_claimable(a.id(), 10)).unwrap(), None, "{on:?}");
        assert_eq!(s.write(|db| db.claim_outbox(a.id(), KINDS, 60_000, 60_000, 8)).unwrap().len(), 1, "{on:?}");
    }
}

#[test]
fn two_owners_on_one_file_never_both_claim_an_item() {
    let dir = crate::scratch::path("owner");
    let path = dir.join("s.db").to_string_lossy().into_owned();
    drop(seed_outbox(&path, 300));
    assert_claimed_once(claim_race(&path, &[("host-a", 1), ("host-b", 1)]), 300);
}

/// Opens the store at `location` and records `n` due announces (`k0` …), in one write.
pub(super) fn seed_outbox(location: &str, n: usize) -> Store {
    let store = Store::open(location).unwrap();
    store
        .write(|db| {
            for i in 0..n {
                db.insert_outbox(&format!("k{i}"), "a2a_announce", None, &json!({}), 0)?;
            }
            Ok(())
        })
        .unwrap();
    store
}

/// One store per `(host, pid)` on `location`, each on its own thread, claiming until nothing is
/// left: the idempotency keys each one claimed.
pub(super) fn claim_race(location: &str, claimers: &[(&'static str, u32)]) -> Vec<Vec<String>> {
    let threads: Vec<_> = claimers
        .iter()
        .map(|&(host, pid)| {
            let location = location.to_owned();
            std::thread::spawn(move || {
                let store = Store::open(&location).unwrap();
                let lease = Lease::new(here(host, pid), system_clock());
                store.write(|db| lease.acquire(db, 600_000)).unwrap();
                let mut mine = Vec::new();
                loop {
                    let got = store.write(|db| db.claim_outbox(lease.id(), KINDS, lease.now(db)?, 600_000, 7)).unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.into_iter().map(|r| r.idempotency_key));
                }
            })
        })
        .collect();
    threads.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Every one of `n` items was claimed, none twice.
pub(super) fn assert_claimed_once(got: Vec<Vec<String>>, n: usize) {
    let mut all: Vec<&String> = got.iter().flatten().collect();
    let claimed = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), claimed, "an item was claimed twice");
    assert_eq!(claimed, n, "every item was claimed once");
}

#[test]
fn this_process_is_identified_by_a_host_id_and_its_own_pid_is_running() {
    let me = Here::detect();
    assert_eq!(me.pid, std::process::id());
    assert!(!me.host_id.is_empty());
    assert!((me.pid_running)(me.pid));
    if std::path::Path::new("/proc/self").exists() {
        assert!(me.host_id.starts_with("linux:"), "{}", me.host_id);
        assert!(!(me.pid_running)(u32::MAX), "a pid above the kernel's maximum is not running");
    }
    assert_eq!(Here::detect().host_id, me.host_id, "stable within a process");
}
