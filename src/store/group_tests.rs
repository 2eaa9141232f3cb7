//! Group commit: every job told its own outcome, only after the commit that holds it.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{Deliver, GroupJob, GroupWriter};
use crate::entry;
use crate::error::{Error, ErrorCode, Result};
use crate::store::tests::{busy_timeout_ms, warm};
use crate::store::{Fault, Store};

/// A store as the writer's owner (the PostgreSQL batch tests use these helpers too).
pub(crate) struct Owner(pub(crate) Store);
impl AsRef<Store> for Owner {
    fn as_ref(&self) -> &Store {
        &self.0
    }
}

/// A new file store, once its file is read into the OS's cache (until then nothing runs inline:
/// `warm`).
fn open() -> Arc<Owner> {
    let dir = crate::scratch::path("group");
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(dir.join("g.db").to_str().unwrap()).unwrap();
    warm(&store);
    Arc::new(Owner(store))
}

pub(crate) fn put(store: &Store, key: &str, label: &str) -> Result<String> {
    let mut patch = Map::new();
    patch.insert("label".into(), json!(label));
    store.write(|db| {
        let e = entry::merge(db.session(key)?.as_ref(), &patch, entry::now_ms());
        db.put_session(key, &e)?;
        Ok(label.to_owned())
    })
}

pub(crate) fn label(store: &Store, key: &str) -> Option<Value> {
    store.read(|db| db.session(key)).unwrap().and_then(|e| e.get("label").cloned())
}

/// Submits `jobs` while the writer connection is held, so that they all wait for one batch.
fn submit_held(o: &Arc<Owner>, w: &GroupWriter, jobs: Vec<GroupJob>) -> Vec<Result<String>> {
    let (tx, rx) = mpsc::channel();
    let n = jobs.len();
    {
        let held = o.0.writer.lock().unwrap();
        for (i, job) in jobs.into_iter().enumerate() {
            let tx = tx.clone();
            let deliver: Deliver = Box::new(move |out| tx.send((i, out)).unwrap());
            w.submit(job, deliver);
        }
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
    }
    let mut outs: Vec<(usize, Result<String>)> =
        (0..n).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
    outs.sort_by_key(|(i, _)| *i);
    outs.into_iter().map(|(_, o)| o).collect()
}

#[test]
fn concurrent_writes_share_one_transaction_and_each_gets_its_own_result() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    let jobs: Vec<GroupJob> = (0..40)
        .map(|i| {
            let o = o.clone();
            Box::new(move || put(&o.0, &format!("agent:main:k{i}"), &format!("l{i}"))) as GroupJob
        })
        .collect();
    let before = w.batches();
    let outs = submit_held(&o, &w, jobs);
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out.as_deref().unwrap(), format!("l{i}"));
        assert_eq!(label(&o.0, &format!("agent:main:k{i}")), Some(json!(format!("l{i}"))));
    }
    // the first may have been taken alone before the rest queued up; the rest share one
    assert!(w.batches() - before <= 2, "{} batches for 40 jobs", w.batches() - before);
}

#[test]
fn a_failing_job_rolls_back_only_its_own_write_and_is_told_its_own_error() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let jobs: Vec<GroupJob> = vec![
        Box::new(move || put(&a.0, "agent:main:a", "one")),
        Box::new(move || {
            b.0.write(|db| {
                let e = entry::merge(None, &Map::new(), entry::now_ms());
                db.put_session("agent:main:b", &e)?;
                Err::<String, _>(Error::invalid_request("refused after writing"))
            })
        }),
        Box::new(move || -> Result<String> { panic!("a bug in a job") }),
        Box::new(move || put(&c.0, "agent:main:c", "three")),
    ];
    let outs = submit_held(&o, &w, jobs);
    assert_eq!(outs[0].as_deref().unwrap(), "one");
    let e = outs[1].as_ref().unwrap_err();
    assert_eq!((e.code(), e.message()), (ErrorCode::InvalidRequest, "refused after writing"));
    assert!(outs[2].as_ref().unwrap_err().message().contains("internal error"));
    assert_eq!(outs[3].as_deref().unwrap(), "three");
    assert_eq!(label(&o.0, "agent:main:a"), Some(json!("one")));
    assert_eq!(o.0.read(|db| db.session("agent:main:b")).unwrap(), None);
    assert_eq!(label(&o.0, "agent:main:c"), Some(json!("three")));
    assert!(o.0.read(|db| db.integrity_ok()).unwrap());
}

#[test]
fn a_side_effect_after_a_commit_sees_its_write_committed_and_the_batch_goes_on() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    let path = o.0.file().unwrap().to_owned();
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let jobs: Vec<GroupJob> = vec![
        Box::new(move || put(&a.0, "agent:main:a", "one")),
        Box::new(move || {
            b.0.write_then(
                |db| {
                    let e = entry::merge(None, &Map::new(), entry::now_ms());
                    db.put_session("agent:main:b", &e)?;
                    Ok("two".to_owned())
                },
                |_| {
                    // another connection sees both writes: they are committed
                    let c = rusqlite::Connection::open(&path).unwrap();
                    let n: i64 = c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).unwrap();
                    *seen2.lock().unwrap() = Some(n);
                },
            )
        }),
        Box::new(move || put(&c.0, "agent:main:c", "three")),
    ];
    let outs = submit_held(&o, &w, jobs);
    assert!(outs.iter().all(Result::is_ok), "{outs:?}");
    assert_eq!(*seen.lock().unwrap(), Some(2));
    assert_eq!(label(&o.0, "agent:main:c"), Some(json!("three")));
}

#[test]
fn a_transaction_lost_under_the_jobs_fails_every_job_in_it_and_the_store_recovers() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    for i in 0..20 {
        put(&o.0, &format!("agent:main:seed{i}"), "x").unwrap();
    }
    o.0.inject_fault(Some(Fault::DiskFull)).unwrap();
    let big = "y".repeat(200_000);
    let jobs: Vec<GroupJob> = (0..6)
        .map(|i| {
            let (o, big) = (o.clone(), big.clone());
            Box::new(move || put(&o.0, &format!("agent:main:big{i}"), &big).map(|_| format!("ok{i}"))) as GroupJob
        })
        .collect();
    let outs = submit_held(&o, &w, jobs);
    assert!(outs.iter().all(Result::is_err), "{outs:?}");
    for out in &outs {
        assert_eq!(out.as_ref().unwrap_err().code(), ErrorCode::StoreError);
    }
    o.0.inject_fault(None).unwrap();
    for i in 0..6 {
        assert_eq!(o.0.read(|db| db.session(&format!("agent:main:big{i}"))).unwrap(), None);
    }
    let (tx, rx) = mpsc::channel();
    let o2 = o.clone();
    w.submit(Box::new(move || put(&o2.0, "agent:main:after", "fine")), Box::new(move |out| tx.send(out).unwrap()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap(), "fine");
    assert!(o.0.read(|db| db.integrity_ok()).unwrap());
}

#[test]
fn a_closed_store_or_a_stopped_writer_answers_closed() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    o.0.close();
    let (tx, rx) = mpsc::channel();
    let o2 = o.clone();
    let tx2 = tx.clone();
    w.submit(Box::new(move || put(&o2.0, "agent:main:a", "one")), Box::new(move |out| tx2.send(out).unwrap()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap_err().code(), ErrorCode::Closed);
    w.stop();
    w.submit(Box::new(|| Ok(String::new())), Box::new(move |out| tx.send(out).unwrap()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap_err().code(), ErrorCode::Closed);
}

#[test]
fn an_inline_batch_runs_at_once_or_hands_every_job_back_without_waiting() {
    let o = open();
    let jobs = |n: usize| -> Vec<GroupJob> {
        (0..n)
            .map(|i| {
                let o = o.clone();
                Box::new(move || put(&o.0, &format!("agent:main:i{i}"), &format!("v{i}"))) as GroupJob
            })
            .collect()
    };
    // our own writer connection busy on another thread: every job comes back, none ran
    let held = o.0.writer.lock().unwrap();
    let back = std::thread::scope(|sc| sc.spawn(|| o.0.try_run_inline(jobs(3))).join().unwrap());
    assert_eq!(back.err().map(|j| j.len()), Some(3));
    drop(held);
    // another connection (another process, as far as SQLite knows) holds the write lock
    let other = rusqlite::Connection::open(o.0.file().unwrap()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(o.0.try_run_inline(jobs(3)).err().map(|j| j.len()), Some(3));
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(o.0.read(|db| db.session("agent:main:i0")).unwrap(), None);
    // free: all run in one transaction, each with its own outcome
    let mut js = jobs(3);
    js.push(Box::new(|| Err(Error::invalid_request("mine alone"))));
    let outs = o.0.try_run_inline(js).ok().unwrap();
    assert_eq!(outs.len(), 4);
    for (i, out) in outs.iter().take(3).enumerate() {
        assert_eq!(out.as_deref().unwrap(), format!("v{i}"));
        assert_eq!(label(&o.0, &format!("agent:main:i{i}")), Some(json!(format!("v{i}"))));
    }
    assert_eq!(outs[3].as_ref().unwrap_err().message(), "mine alone");
    // why a held lock hands the jobs back rather than waiting: an inline batch asks SQLite for
    // the lock with no busy timeout at all, where the writer thread's batches wait up to
    // BUSY_TIMEOUT for it (and the connection has that back once the inline batch is over)
    let timeout =
        |o: Arc<Owner>| -> GroupJob { Box::new(move || o.0.write(|db| Ok(busy_timeout_ms(db)?.to_string()))) };
    let inline_timeout = o.0.try_run_inline(vec![timeout(o.clone())]).ok().unwrap();
    assert_eq!(inline_timeout[0].as_deref().unwrap(), "0", "an inline batch never waits for the lock");
    let w = GroupWriter::start(o.clone()).unwrap();
    let (tx, rx) = mpsc::channel();
    w.submit(timeout(o.clone()), Box::new(move |out| tx.send(out).unwrap()));
    assert_eq!(rx.recv().unwrap().unwrap(), super::super::BUSY_TIMEOUT.as_millis().to_string());
    // the batch is over: this thread writes on its own again
    put(&o.0, "agent:main:after", "alone").unwrap();
    assert_eq!(label(&o.0, "agent:main:after"), Some(json!("alone")));
}

#[test]
fn the_last_job_alone_in_its_transaction_fails_without_a_savepoint_and_rolls_back_only_itself() {
    let o = open();
    let refuse_after_writing = |o: Arc<Owner>, key: &'static str| -> GroupJob {
        Box::new(move || {
            o.0.write(|db| {
                db.put_session(key, &entry::merge(None, &Map::new(), entry::now_ms()))?;
                Err::<String, _>(Error::invalid_request("refused after writing"))
            })
        })
    };
    // a batch of one: its write is alone in the transaction, and is rolled back
    let outs = o.0.try_run_inline(vec![refuse_after_writing(o.clone(), "agent:main:solo")]).ok().unwrap();
    assert_eq!(outs[0].as_ref().unwrap_err().message(), "refused after writing");
    assert_eq!(o.0.read(|db| db.session("agent:main:solo")).unwrap(), None);
    // the last job, after a job that wrote: only its own write goes
    let a = o.clone();
    let jobs: Vec<GroupJob> =
        vec![Box::new(move || put(&a.0, "agent:main:kept", "one")), refuse_after_writing(o.clone(), "agent:main:last")];
    let outs = o.0.try_run_inline(jobs).ok().unwrap();
    assert_eq!(outs[0].as_deref().unwrap(), "one");
    assert_eq!(label(&o.0, "agent:main:kept"), Some(json!("one")));
    assert_eq!(o.0.read(|db| db.session("agent:main:last")).unwrap(), None);
    // a job whose second write fails keeps its first (that one was alone, the second was not)
    let b = o.clone();
    let twice: GroupJob = Box::new(move || {
        put(&b.0, "agent:main:first", "kept")?;
        b.0.write(|db| {
            db.put_session("agent:main:second", &entry::merge(None, &Map::new(), entry::now_ms()))?;
            Err::<String, _>(Error::invalid_request("second refused"))
        })
    });
    let outs = o.0.try_run_inline(vec![twice]).ok().unwrap();
    assert_eq!(outs[0].as_ref().unwrap_err().message(), "second refused");
    assert_eq!(label(&o.0, "agent:main:first"), Some(json!("kept")));
    assert_eq!(o.0.read(|db| db.session("agent:main:second")).unwrap(), None);
    // a panic after writing, alone: rolled back, and the store goes on
    let c = o.clone();
    let panics: GroupJob = Box::new(move || {
        c.0.write(|db| -> Result<String> {
            db.put_session("agent:main:panic", &entry::merge(None, &Map::new(), entry::now_ms()))?;
            panic!("a bug after writing")
        })
    });
    let outs = o.0.try_run_inline(vec![panics]).ok().unwrap();
    assert!(outs[0].as_ref().unwrap_err().message().contains("internal error"));
    assert_eq!(o.0.read(|db| db.session("agent:main:panic")).unwrap(), None);
    put(&o.0, "agent:main:after", "fine").unwrap();
    assert_eq!(label(&o.0, "agent:main:after"), Some(json!("fine")));
    assert!(o.0.read(|db| db.integrity_ok()).unwrap());
}

/// Jobs on one key: "a", then one that writes and refuses, then one that appends "b" to what it
/// reads; each counts its runs.
fn redo_jobs(o: &Arc<Owner>, runs: &Arc<[std::sync::atomic::AtomicUsize; 3]>) -> Vec<GroupJob> {
    use std::sync::atomic::Ordering::Relaxed;
    let (a, b, c) = (o.clone(), o.clone(), o.clone());
    let (ra, rb, rc) = (runs.clone(), runs.clone(), runs.clone());
    vec![
        Box::new(move || {
            ra[0].fetch_add(1, Relaxed);
            put(&a.0, "agent:main:redo", "a")
        }),
        Box::new(move || {
            rb[1].fetch_add(1, Relaxed);
            b.0.write(|db| {
                let mut patch = Map::new();
                patch.insert("label".into(), json!("refused"));
                db.put_session("agent:main:redo", &entry::merge(db.session("agent:main:redo")?.as_ref(), &patch, 1))?;
                Err::<String, _>(Error::invalid_request("refused after writing"))
            })
        }),
        Box::new(move || {
            rc[2].fetch_add(1, Relaxed);
            let old = label(&c.0, "agent:main:redo").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            put(&c.0, "agent:main:redo", &format!("{old}b"))
        }),
    ]
}

#[test]
fn a_batch_runs_without_savepoints_and_a_failure_runs_its_transaction_again_each_job_in_a_savepoint() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let counts = |r: &[AtomicUsize; 3]| r.iter().map(|c| c.load(Relaxed)).collect::<Vec<_>>();
    // with no failure every job runs once
    let o = open();
    let runs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
    let r = runs.clone();
    let ok: Vec<GroupJob> = (0..3)
        .map(|i| {
            let (o, r) = (o.clone(), r.clone());
            Box::new(move || {
                r[i].fetch_add(1, Relaxed);
                put(&o.0, &format!("agent:main:ok{i}"), "v")
            }) as GroupJob
        })
        .collect();
    assert!(o.0.try_run_inline(ok).ok().unwrap().iter().all(Result::is_ok));
    assert_eq!(counts(&runs), [1, 1, 1]);
    // a write that fails without a savepoint: the transaction again from its start, the failed
    // job rolled back alone, the later job sees the earlier one's write and not the failed one's
    for inline in [true, false] {
        let o = open();
        let runs = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
        let outs = if inline {
            o.0.try_run_inline(redo_jobs(&o, &runs)).ok().unwrap()
        } else {
            let w = GroupWriter::start(o.clone()).unwrap();
            submit_held(&o, &w, redo_jobs(&o, &runs))
        };
        assert_eq!(outs[0].as_deref().unwrap(), "a", "inline {inline}");
        assert_eq!(outs[1].as_ref().unwrap_err().message(), "refused after writing");
        assert_eq!(outs[2].as_deref().unwrap(), "ab");
        // the writer may take the first job alone before the others are queued (then it is not
        // in the failed transaction and runs once); inline, all three share it
        let first = if inline { vec![2] } else { vec![1, 2] };
        let c = counts(&runs);
        assert!(first.contains(&c[0]) && c[1..] == [2, 1], "inline {inline}: {c:?}");
        assert_eq!(label(&o.0, "agent:main:redo"), Some(json!("ab")));
        assert!(o.0.read(|db| db.integrity_ok()).unwrap());
    }
}

#[test]
fn many_jobs_queued_at_once_run_in_order_in_bounded_transactions_each_told_its_own_result() {
    let o = open();
    let w = GroupWriter::start(o.clone()).unwrap();
    let (tx, rx) = mpsc::channel();
    let n = 600;
    let before = w.batches();
    {
        // held, so that all 600 are queued before the first batch is taken
        let _held = o.0.writer.lock().unwrap();
        for i in 0..n {
            let (o, tx) = (o.clone(), tx.clone());
            w.submit(
                Box::new(move || put(&o.0, "agent:main:burst", &format!("l{i}"))),
                Box::new(move |out| tx.send((i, out)).unwrap()),
            );
        }
    }
    let mut outs: Vec<(usize, Result<String>)> =
        (0..n).map(|_| rx.recv_timeout(Duration::from_secs(20)).unwrap()).collect();
    outs.sort_by_key(|(i, _)| *i);
    for (i, out) in outs {
        assert_eq!(out.unwrap(), format!("l{i}"));
    }
    assert_eq!(label(&o.0, "agent:main:burst"), Some(json!(format!("l{}", n - 1))));
    // at most MAX_BATCH (256) jobs a transaction (a batch is counted after it delivered)
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while w.batches() - before < 3 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(w.batches() - before >= 3, "{} batches for {n} jobs", w.batches() - before);
}
