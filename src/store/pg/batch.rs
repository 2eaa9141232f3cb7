//! Group commit on PostgreSQL: the write jobs waiting for the store's writer thread run in one
//! transaction on one connection, under one take of the advisory write lock, each write in a
//! savepoint of its own (as `store::group` does on SQLite).
//!
//! A write that fails (or swallowed a failed statement, or panicked) is rolled back to its
//! savepoint: only its own changes go, and its job is told its own error; the others commit
//! together. No job is told of success before the commit that holds its writes; if that commit
//! fails, every job with writes in it is told. The savepoint steps cost no round trip of their
//! own (they travel with the next statement, see `tx`). A write with a side effect after its
//! commit commits the batch so far first. When the connection breaks under a batch, the jobs
//! whose writes were in its transaction are told they were lost, the write that found out is
//! tried again alone on a fresh connection, and the rest of the batch goes on in a new
//! transaction. Reads in a job run in the batch's transaction (they see its writes so far).
//! This module never decides what a job does.

use std::cell::{Cell, RefCell};

use super::tx::{Begin, PgTx};
use super::PgStore;
use crate::error::{Error, ErrorCode, Result};
use crate::store::Db;
use crate::store::{Deliver, GroupJob};

/// The batch open on this thread.
struct Open {
    store: *const PgStore,
    /// the batch's `PgTx`, alive on the runner's stack while this is registered
    tx: *const (),
    /// the job running (its index in the batch)
    current: Cell<usize>,
    /// the jobs with a write in the transaction not committed yet
    writers: RefCell<Vec<usize>>,
    /// the connection broke: what is left of the job runs alone, the next job in a new transaction
    dead: Cell<bool>,
    /// jobs whose writes were lost, and why
    lost: RefCell<Vec<(usize, String)>>,
}

impl Open {
    /// The writes of the open transaction are lost: their jobs are told `why`.
    fn lose(&self, why: &str) {
        let mut lost = self.lost.borrow_mut();
        lost.extend(self.writers.borrow_mut().drain(..).map(|i| (i, why.to_owned())));
    }
}

thread_local! {
    static OPEN: RefCell<Option<Open>> = const { RefCell::new(None) };
}

fn with_open<R>(f: impl FnOnce(&Open) -> R) -> Option<R> {
    OPEN.with(|b| b.borrow().as_ref().map(f))
}

fn internal_error() -> Error {
    Error::new(ErrorCode::StoreError, "internal error: the operation failed unexpectedly (a bug; please report it)")
}

/// Rolls a write back to its savepoint when its job panics in the middle of it.
struct UndoOnPanic<'a, 'c>(&'a PgTx<'c>);

impl Drop for UndoOnPanic<'_, '_> {
    fn drop(&mut self) {
        self.0.rollback_to();
    }
}

impl PgStore {
    /// Runs one batch of write jobs (see the module header) and delivers their outcomes once
    /// they hold.
    pub fn run_batch(&self, jobs: Vec<(GroupJob, Deliver)>) {
        let (jobs, delivers): (Vec<GroupJob>, Vec<Deliver>) = jobs.into_iter().unzip();
        let n = jobs.len();
        let mut outs: Vec<Result<String>> = Vec::with_capacity(n);
        let mut lost: Vec<(usize, String)> = Vec::new();
        let mut jobs = jobs.into_iter();
        let run = |job: GroupJob| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| Err(internal_error()))
        };
        while outs.len() < n {
            let Ok(conn) = self.conn() else {
                // no connection now: the next job runs alone (its writes wait for one themselves)
                if let Some(job) = jobs.next() {
                    outs.push(run(job));
                }
                continue;
            };
            let tx = PgTx::new(&conn, Begin::Write);
            let first = outs.len();
            OPEN.with(|b| {
                *b.borrow_mut() = Some(Open {
                    store: self as *const PgStore,
                    tx: &tx as *const PgTx<'_> as *const (),
                    current: Cell::new(first),
                    writers: RefCell::new(Vec::new()),
                    dead: Cell::new(false),
                    lost: RefCell::new(Vec::new()),
                })
            });
            for job in jobs.by_ref() {
                let i = outs.len();
                with_open(|o| o.current.set(i));
                outs.push(run(job));
                if with_open(|o| o.dead.get()).unwrap_or(true) {
                    break;
                }
            }
            let Some(open) = OPEN.with(|b| b.borrow_mut().take()) else {
                // not reached: the registration is only taken here
                lost.extend((first..outs.len()).map(|i| (i, "internal error: the write batch ended".to_owned())));
                continue;
            };
            if !open.dead.get() {
                if let Err(e) = tx.commit() {
                    open.lose(&format!("the write was not committed: {}", e.message()));
                }
            }
            lost.extend(open.lost.into_inner());
        }
        for (i, why) in lost {
            if let Some(out) = outs.get_mut(i).filter(|o| o.is_ok()) {
                *out = Err(Error::store(why));
            }
        }
        for (deliver, out) in delivers.into_iter().zip(outs) {
            deliver(out);
        }
    }

    /// The open batch's transaction on this thread, when it is this store's and alive.
    fn batch_tx(&self) -> Option<&PgTx<'_>> {
        let ptr = with_open(|o| (std::ptr::eq(o.store, self) && !o.dead.get()).then_some(o.tx)).flatten()?;
        // SAFETY: the pointer is to the batch's transaction on the runner's stack, which outlives
        // its registration in the thread-local; it is only used through shared references.
        Some(unsafe { &*(ptr as *const PgTx<'_>) })
    }

    /// [`write`](Self::write), then `after` with the result once it is committed. Inside a
    /// batch on this thread, `f` runs in a savepoint of the batch's transaction.
    pub fn write_then<T>(&self, mut f: impl FnMut(&Db<'_>) -> Result<T>, after: Option<impl FnOnce(&T)>) -> Result<T> {
        let Some(tx) = self.batch_tx() else {
            let v = self.write(f)?;
            if let Some(after) = after {
                after(&v);
            }
            return Ok(v);
        };
        let out = in_savepoint(tx, &mut f);
        match out {
            Ok(v) => {
                match after {
                    None => {
                        with_open(|o| {
                            let mut writers = o.writers.borrow_mut();
                            if writers.last() != Some(&o.current.get()) {
                                writers.push(o.current.get());
                            }
                        });
                    }
                    Some(after) => {
                        // commit the batch so far, then the side effect, in commit order
                        let committed = tx.commit();
                        with_open(|o| match &committed {
                            Ok(()) => o.writers.borrow_mut().clear(),
                            Err(e) => {
                                o.lose(&format!("the write was not committed: {}", e.message()));
                                o.dead.set(true);
                            }
                        });
                        committed?;
                        after(&v);
                    }
                }
                Ok(v)
            }
            Err(e) if tx.broken() => {
                // The transaction is gone with the connection: what the batch wrote in it is
                // lost; this write is tried again alone, on a fresh connection.
                with_open(|o| {
                    o.lose(&format!("the write was not committed: {}", e.message()));
                    o.dead.set(true);
                });
                let v = self.write(f)?;
                if let Some(after) = after {
                    after(&v);
                }
                Ok(v)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether a live batch of this store is open on this thread.
    pub(super) fn in_batch(&self) -> bool {
        self.batch_tx().is_some()
    }

    /// [`read`](Self::read) inside a batch on this thread: `f` in a savepoint of the batch's
    /// transaction. Only when [`in_batch`](Self::in_batch).
    pub(super) fn read_in_batch<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let Some(tx) = self.batch_tx() else {
            return Err(Error::store("internal error: the write batch ended under its job"));
        };
        let mut f = Some(f);
        in_savepoint(tx, &mut |db| match f.take() {
            Some(f) => f(db),
            None => Err(internal_error()),
        })
    }
}

/// `f` in a savepoint of `tx`: kept when it succeeds, rolled back when it fails, panics, or
/// swallowed the error of a statement (which leaves the transaction unable to commit).
fn in_savepoint<T>(tx: &PgTx<'_>, f: &mut impl FnMut(&Db<'_>) -> Result<T>) -> Result<T> {
    tx.savepoint();
    let undo = UndoOnPanic(tx);
    let out = f(&Db::pg(tx));
    std::mem::forget(undo);
    match (out, tx.failed()) {
        (Ok(v), None) => {
            tx.release();
            Ok(v)
        }
        (Ok(_), Some(why)) => {
            tx.rollback_to();
            Err(Error::store(format!("the write was rolled back: a statement in it failed: {why}")))
        }
        (Err(e), _) => {
            tx.rollback_to();
            Err(e)
        }
    }
}
