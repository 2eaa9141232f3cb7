//! Group commit on a real PostgreSQL server: every job told its own outcome, only after the
//! commit that holds it; a failing or panicking job rolls back only itself.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map};

use super::testdb;
use crate::args;
use crate::entry;
use crate::error::{Error, Result};
use crate::store::group::tests::{label, put, Owner};
use crate::store::{Deliver, GroupJob, GroupWriter, Store};

fn open() -> (Arc<Owner>, String) {
    let url = testdb::fresh_url();
    (Arc::new(Owner(Store::open(&url).expect("open"))), url)
}

/// Submits a job that waits until `jobs` are all queued behind it, then `jobs`: they run as
/// one batch. Their outcomes, in order.
fn submit_behind(w: &GroupWriter, jobs: Vec<GroupJob>) -> Vec<Result<String>> {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (first_tx, first_rx) = mpsc::channel();
    w.submit(
        Box::new(move || {
            go_rx.recv_timeout(Duration::from_secs(10)).ok();
            Ok("first".into())
        }),
        Box::new(move |out| first_tx.send(out).expect("send")),
    );
    let (tx, rx) = mpsc::channel();
    let n = jobs.len();
    for (i, job) in jobs.into_iter().enumerate() {
        let tx = tx.clone();
        let deliver: Deliver = Box::new(move |out| tx.send((i, out)).expect("send"));
        w.submit(job, deliver);
    }
    go_tx.send(()).expect("go");
    assert_eq!(first_rx.recv_timeout(Duration::from_secs(20)).expect("first").expect("ok"), "first");
    let mut outs: Vec<(usize, Result<String>)> =
        (0..n).map(|_| rx.recv_timeout(Duration::from_secs(20)).expect("an outcome")).collect();
    outs.sort_by_key(|(i, _)| *i);
    outs.into_iter().map(|(_, o)| o).collect()
}

fn job(f: impl FnMut() -> Result<String> + Send + 'static) -> GroupJob {
    Box::new(f)
}

#[test]
fn concurrent_writes_share_one_transaction_on_postgres_and_each_gets_its_own_result() {
    let (o, _) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let jobs: Vec<GroupJob> = (0..40)
        .map(|i| {
            let o = o.clone();
            job(move || {
                put(&o.0, &format!("agent:main:k{i}"), &format!("l{i}"))?;
                // which transaction it ran in
                o.0.write(|db| db.count("SELECT CAST(txid_current() AS BIGINT)", args![])).map(|t| format!("l{i} {t}"))
            })
        })
        .collect();
    let outs = submit_behind(&w, jobs);
    let mut txids = std::collections::BTreeSet::new();
    for (i, out) in outs.iter().enumerate() {
        let (l, txid) = out.as_deref().expect("ok").split_once(' ').expect("two words");
        assert_eq!(l, format!("l{i}"));
        txids.insert(txid.to_owned());
        assert_eq!(label(&o.0, &format!("agent:main:k{i}")), Some(json!(format!("l{i}"))));
    }
    assert_eq!(txids.len(), 1, "40 queued jobs in one transaction: {txids:?}");
}

#[test]
fn a_failing_job_in_a_postgres_batch_rolls_back_only_itself_and_is_told_its_own_error() {
    let (o, _) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let (a, b, c, d, e) = (o.clone(), o.clone(), o.clone(), o.clone(), o.clone());
    let outs = submit_behind(
        &w,
        vec![
            job(move || put(&a.0, "agent:main:a", "A")),
            // a statement the server refuses, after a write of its own in the same job
            job(move || {
                b.0.write(|db| {
                    db.put_session("agent:main:b", &entry::merge(None, &Map::new(), 1))?;
                    db.exec("INSERT INTO no_such_table (x) VALUES (?1)", args![1i64])?;
                    Ok("unreachable".to_owned())
                })
            }),
            // a job that swallows the failed statement: the server aborted its work all the same
            job(move || {
                c.0.write(|db| {
                    db.put_session("agent:main:c", &entry::merge(None, &Map::new(), 1))?;
                    let _ = db.exec("INSERT INTO no_such_table (x) VALUES (?1)", args![1i64]);
                    Ok("swallowed".to_owned())
                })
            }),
            // a job that refuses after writing
            job(move || {
                d.0.write(|db| {
                    db.put_session("agent:main:d", &entry::merge(None, &Map::new(), 1))?;
                    Err::<String, _>(Error::invalid_request("no, after all"))
                })
            }),
            job(move || put(&e.0, "agent:main:e", "E")),
        ],
    );
    assert_eq!(outs[0].as_deref().expect("a"), "A");
    let b_err = outs[1].as_ref().expect_err("b fails");
    assert!(b_err.message().contains("no_such_table"), "{}", b_err.message());
    let c_err = outs[2].as_ref().expect_err("c is told its write was lost");
    assert!(c_err.message().contains("rolled back"), "{}", c_err.message());
    assert_eq!(outs[3].as_ref().expect_err("d refuses").message(), "no, after all");
    assert_eq!(outs[4].as_deref().expect("e"), "E");
    assert_eq!(label(&o.0, "agent:main:a"), Some(json!("A")));
    assert_eq!(label(&o.0, "agent:main:e"), Some(json!("E")));
    for k in ["agent:main:b", "agent:main:c", "agent:main:d"] {
        assert!(o.0.read(|db| db.session(k)).expect("read").is_none(), "{k} was rolled back");
    }
}

#[test]
fn a_job_that_panics_mid_write_in_a_postgres_batch_loses_only_its_own_write() {
    let (o, _) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let outs = submit_behind(
        &w,
        vec![
            job(move || put(&a.0, "agent:main:a", "A")),
            job(move || {
                b.0.write(|db| {
                    db.put_session("agent:main:b", &entry::merge(None, &Map::new(), 1))?;
                    let nothing: Vec<&str> = Vec::new();
                    Ok(nothing[0].to_owned())
                })
            }),
            job(move || put(&c.0, "agent:main:c", "C")),
        ],
    );
    assert_eq!(outs[0].as_deref().expect("a"), "A");
    assert!(outs[1].as_ref().expect_err("b panicked").message().contains("internal error"));
    assert_eq!(outs[2].as_deref().expect("c"), "C");
    assert_eq!(label(&o.0, "agent:main:a"), Some(json!("A")));
    assert_eq!(label(&o.0, "agent:main:c"), Some(json!("C")));
    assert!(o.0.read(|db| db.session("agent:main:b")).expect("read").is_none());
}

#[test]
fn reads_in_a_postgres_batch_see_its_writes_and_side_effects_follow_their_commit() {
    let (o, url) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let outs = submit_behind(
        &w,
        vec![
            job(move || put(&a.0, "agent:main:a", "A")),
            // sees the write of the job before it, not committed yet
            job(move || Ok(label(&b.0, "agent:main:a").map(|v| v.to_string()).unwrap_or_default())),
            // its side effect runs once its write (and the one before) is committed: another
            // connection sees both then
            job(move || {
                let (seen_tx, seen_rx) = mpsc::channel();
                c.0.write_then(
                    |db| {
                        db.put_session("agent:main:c", &entry::merge(None, &Map::new(), 1))?;
                        Ok("C".to_owned())
                    },
                    |_| {
                        let other = Store::open(&url).expect("open");
                        seen_tx.send(other.read(|db| db.session_count()).expect("count")).expect("send");
                    },
                )?;
                Ok(seen_rx.recv().expect("seen").to_string())
            }),
        ],
    );
    assert_eq!(outs[0].as_deref().expect("a"), "A");
    assert_eq!(outs[1].as_deref().expect("b"), "\"A\"");
    assert_eq!(outs[2].as_deref().expect("c"), "2");
}

#[test]
fn a_postgres_batch_holds_the_write_lock_until_its_commit() {
    let (o, url) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let (wrote_tx, wrote_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let a = o.clone();
    w.submit(
        Box::new(move || {
            let out = put(&a.0, "agent:main:a", "A");
            wrote_tx.send(()).expect("wrote");
            go_rx.recv_timeout(Duration::from_secs(10)).ok();
            out
        }),
        Box::new(move |out| done_tx.send(out).expect("send")),
    );
    wrote_rx.recv_timeout(Duration::from_secs(10)).expect("the job wrote");
    // another store (as another process would) waits for the lock: its write cannot go now
    let other = Store::open(&url).expect("open");
    let held = other
        .read(|db| {
            db.count(
                // the write lock's key, 0x7365_7373_746f_6f6c, in its two halves
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                 AND classid = 1936028531 AND objid = 1953460076 AND objsubid = 1",
                args![],
            )
        })
        .expect("locks");
    assert_eq!(held, 1, "the batch holds the write lock between its jobs' round trips");
    assert!(other.read(|db| db.session("agent:main:a")).expect("read").is_none(), "not committed yet");
    go_tx.send(()).expect("go");
    assert_eq!(done_rx.recv_timeout(Duration::from_secs(20)).expect("done").expect("ok"), "A");
    assert_eq!(label(&other, "agent:main:a"), Some(json!("A")));
}

#[test]
fn when_the_connection_of_a_postgres_batch_is_cut_its_jobs_are_told_and_the_rest_go_on() {
    let (o, url) = open();
    let w = GroupWriter::start(o.clone()).expect("writer");
    let other = Arc::new(Store::open(&url).expect("open"));
    let pid = Arc::new(std::sync::Mutex::new(0i64));
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let (pid_a, pid_b) = (pid.clone(), pid.clone());
    let outs = submit_behind(
        &w,
        vec![
            // writes in the batch's transaction, and notes which server process holds it
            job(move || {
                put(&a.0, "agent:main:a", "A")?;
                *pid_a.lock().expect("pid") =
                    i64::try_from(a.0.read(|db| db.count("SELECT CAST(pg_backend_pid() AS BIGINT)", args![]))?)
                        .expect("a pid");
                Ok("A".into())
            }),
            // the server ends that process (as a restart or a cut network would), then this job
            // writes: its write finds the connection gone and is tried again alone
            job(move || {
                let pid = *pid_b.lock().expect("pid");
                // with a timeout, the call waits until the process is gone (without one it only
                // signals it, and a write that came first could still commit: a flaky test)
                let ended = other.read(|db| {
                    db.row("SELECT pg_terminate_backend(CAST(?1 AS INTEGER), 10000)", args![pid], |r| r.get::<bool>(0))
                })?;
                assert_eq!(ended, Some(true), "the batch's server process was ended");
                put(&b.0, "agent:main:b", "B")
            }),
            job(move || put(&c.0, "agent:main:c", "C")),
        ],
    );
    // the first job's write was in the transaction that went with the connection: it is told so
    let lost = outs[0].as_ref().expect_err("a was lost");
    assert!(lost.message().contains("not committed"), "{}", lost.message());
    assert!(o.0.read(|db| db.session("agent:main:a")).expect("read").is_none());
    // the second job's write went through alone, the third in a new transaction
    assert_eq!(outs[1].as_deref().expect("b"), "B");
    assert_eq!(outs[2].as_deref().expect("c"), "C");
    assert_eq!(label(&o.0, "agent:main:b"), Some(json!("B")));
    assert_eq!(label(&o.0, "agent:main:c"), Some(json!("C")));
}
