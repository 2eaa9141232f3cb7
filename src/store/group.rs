//! Group commit: writes submitted while another is running are folded into one transaction.
//!
//! SQLite has one writer; each transaction of its own pays the write lock, the log frames of
//! every page it touched and the commit. A [`GroupWriter`] is one thread per store that takes
//! every write job waiting when it comes round and runs them in one `BEGIN IMMEDIATE`
//! transaction: a job that fails rolls back only its own changes and is told its own error; the
//! others commit together. No job is told of success before the commit that holds its write,
//! and if that commit fails, every job in it is told.
//!
//! Savepoints are paid for only when a job fails: a batch first runs its jobs with none (SQLite
//! copies every page a savepoint touches for the first time, and each `SAVEPOINT`/`RELEASE` is a
//! statement). If a job's write fails there, the whole open transaction is rolled back and its
//! jobs run again from its start, this time each in a savepoint of its own, so that failure
//! (and any later one) rolls back only its own job. No outcome of a rolled-back run is kept or
//! delivered; a job must therefore be safe to run again (it is a closure over its arguments
//! whose effects are its store writes; [`GroupJob`] is `FnMut`).
//!
//! The jobs are opaque closures (the engine's own write methods): [`Store::write`] and
//! [`Store::write_then`], called inside a batch on the writer thread, use the batch's
//! transaction instead of opening one. A write with a side effect after its commit (`after`,
//! the JSONL mirror) commits the batch so far at that point, runs the side effect, and the rest
//! of the batch goes on in a new transaction, so side effects keep the order of the commits.
//! This module never decides what a job does, and never runs on the JS thread.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;

use super::{Db, Store, TxSql};
use crate::error::{Error, ErrorCode, Result};

/// A write job: at most one write transaction's worth of work, answering JSON text. It may be
/// run a second time when the first run's transaction was rolled back under another job's
/// failure (see the module header), so it keeps no state of its own between runs.
pub type GroupJob = Box<dyn FnMut() -> Result<String> + Send + 'static>;
/// Where a job's outcome goes once it is known to hold (after the commit).
pub type Deliver = Box<dyn FnOnce(Result<String>) + Send + 'static>;

/// Most jobs folded into one transaction (the rest wait for the next one).
const MAX_BATCH: usize = 256;

/// The group-commit writer of one store: a thread fed by a channel.
pub struct GroupWriter {
    tx: Mutex<Option<Sender<(GroupJob, Deliver)>>>,
    batches: Arc<AtomicU64>,
}

impl GroupWriter {
    /// Starts the writer thread for the store `owner` gives access to (kept alive by it until
    /// the writer is dropped).
    pub fn start<S: AsRef<Store> + Send + Sync + 'static>(owner: Arc<S>) -> Result<GroupWriter> {
        let (tx, rx) = mpsc::channel::<(GroupJob, Deliver)>();
        let batches = Arc::new(AtomicU64::new(0));
        let counter = batches.clone();
        std::thread::Builder::new()
            .name("session-tools-writer".into())
            .spawn(move || {
                // behind the JS thread when both want a core (`priority`)
                super::priority::lower_this_thread(super::priority::Background::Writer);
                run(owner, rx, &counter)
            })
            .map_err(|e| Error::store(format!("cannot start the writer thread: {e}")))?;
        Ok(GroupWriter { tx: Mutex::new(Some(tx)), batches })
    }

    /// Queues a job; `deliver` is called once with its outcome, on the writer thread.
    pub fn submit(&self, job: GroupJob, deliver: Deliver) {
        let sent = match &*self.tx.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(tx) => tx.send((job, deliver)).map_err(|e| e.0 .1),
            None => Err(deliver),
        };
        if let Err(deliver) = sent {
            deliver(Err(Error::closed()));
        }
    }

    /// How many batches ran so far (each one transaction, or more where a job's side effect
    /// split it).
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Stops taking jobs; the thread ends once the queued ones are done.
    pub fn stop(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

fn run<S: AsRef<Store>>(owner: Arc<S>, rx: Receiver<(GroupJob, Deliver)>, batches: &AtomicU64) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        (*owner).as_ref().run_batch(batch);
        batches.fetch_add(1, Ordering::Relaxed);
    }
}

/// The batch open on this thread: the writer connection, held by its runner.
struct Batch {
    store: *const Store,
    conn: *const Connection,
    /// a transaction is open
    open: Cell<bool>,
    /// the job running (its index in the batch)
    current: Cell<usize>,
    /// the first job whose write is in the open (or next) transaction
    tx_start: Cell<usize>,
    /// transactions rolled back under their jobs (an I/O error, a full disk): the jobs
    /// `start..=end` lost their writes
    lost: RefCell<Vec<(usize, usize, String)>>,
    /// inline (on the JS thread): a transaction that would wait for a lock is not begun
    inline: bool,
    /// the open transaction holds a write (of an earlier job, or of this job's earlier write)
    dirty: Cell<bool>,
    /// the index of the batch's last job
    last: usize,
    /// no savepoint per job (until a job's write fails: see the module header)
    optimistic: Cell<bool>,
    /// the open transaction was rolled back under a job without a savepoint: its jobs run again
    redo: Cell<bool>,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// How many times a batch tries `BEGIN IMMEDIATE` while another process holds the write lock
/// (each try waits the busy timeout) before its job fails.
const BEGIN_RETRIES: u32 = 6;

fn internal_error() -> Error {
    Error::new(ErrorCode::StoreError, "internal error: the operation failed unexpectedly (a bug; please report it)")
}

impl Store {
    /// Runs the jobs of one batch on the writer thread (see the module header) and delivers
    /// their outcomes once they hold.
    fn run_batch(&self, jobs: Vec<(GroupJob, Deliver)>) {
        if let Some(pg) = &self.pg {
            // PostgreSQL: the same, on a connection of the pool (see `pg::batch`)
            pg.run_batch(jobs);
            return;
        }
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(conn) = guard.as_mut() else {
            drop(guard);
            for (_, deliver) in jobs {
                deliver(Err(Error::closed()));
            }
            return;
        };
        if let Some(w) = self.wal.as_ref().filter(|w| w.is_due()) {
            w.checkpoint(conn, super::BUSY_TIMEOUT);
        }
        let (jobs, delivers): (Vec<GroupJob>, Vec<Deliver>) = jobs.into_iter().unzip();
        let (outs, wrote) = self.run_jobs(conn, jobs, false);
        drop(guard);
        if wrote {
            self.committed();
        }
        for (deliver, out) in delivers.into_iter().zip(outs) {
            deliver(out);
        }
    }

    /// Runs `jobs` as one batch on this thread (the JS thread) if it can go at once: the
    /// writer connection free, no other process holding the write lock, no checkpoint due, the
    /// file in the OS's cache and no recent inline run slow (`Store::inline_ready`).
    /// Otherwise nothing runs and the jobs come back. A job whose outcome is a would-block
    /// refusal ([`super::is_would_block`]) wrote nothing and may be run again elsewhere.
    pub fn try_run_inline(&self, jobs: Vec<GroupJob>) -> std::result::Result<Vec<Result<String>>, Vec<GroupJob>> {
        if self.pg.is_some() || !self.inline_ready() {
            return Err(jobs);
        }
        let mut guard = match self.writer.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(jobs),
        };
        let Some(conn) = guard.as_mut() else { return Err(jobs) };
        if self.wal.as_ref().is_some_and(|w| w.is_due()) {
            return Err(jobs);
        }
        let _ = super::busy::wait_up_to(conn, Duration::ZERO);
        let began = super::exec_cached(conn, TxSql::BeginImmediate);
        if began.is_err() {
            let _ = super::busy::wait_up_to(conn, super::BUSY_TIMEOUT);
            return Err(jobs);
        }
        let (outs, wrote) = self.cool.timed(|| super::inline_flag(|| self.run_jobs(conn, jobs, true)));
        let _ = super::busy::wait_up_to(conn, super::BUSY_TIMEOUT);
        drop(guard);
        if wrote {
            self.committed();
        }
        Ok(outs)
    }

    /// The jobs in savepoints of shared transactions on `conn` (already in one when `inline`),
    /// committed at the end; each job's outcome, and whether anything was committed.
    fn run_jobs(&self, conn: &Connection, jobs: Vec<GroupJob>, inline: bool) -> (Vec<Result<String>>, bool) {
        BATCH.with(|b| {
            *b.borrow_mut() = Some(Batch {
                store: self as *const Store,
                conn: conn as *const Connection,
                open: Cell::new(inline),
                current: Cell::new(0),
                tx_start: Cell::new(0),
                lost: RefCell::new(Vec::new()),
                inline,
                dirty: Cell::new(false),
                last: jobs.len().saturating_sub(1),
                optimistic: Cell::new(true),
                redo: Cell::new(false),
            })
        });
        let mut jobs = jobs;
        let mut outs: Vec<Result<String>> = Vec::with_capacity(jobs.len());
        // inline, once a job would have waited, the later ones do not run (they run again
        // elsewhere, after it, in order)
        let mut stopped = false;
        let mut i = 0;
        while i < jobs.len() {
            if stopped {
                outs.push(Err(super::would_block()));
                i += 1;
                continue;
            }
            with_batch(|b| b.current.set(i));
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut jobs[i]))
                .unwrap_or_else(|_| Err(internal_error()));
            if let Some(start) = with_batch(|b| b.redo.replace(false).then(|| b.tx_start.get())).flatten() {
                // rolled back under this job: its transaction's jobs again, each in a savepoint
                outs.truncate(start);
                i = start;
                continue;
            }
            stopped = inline && out.as_ref().is_err_and(super::is_would_block);
            outs.push(out);
            i += 1;
        }
        let Some(batch) = BATCH.with(|b| b.borrow_mut().take()) else {
            return (outs, false);
        };
        let mut lost = batch.lost.into_inner();
        let mut wrote = batch.tx_start.get() > 0;
        if batch.open.get() {
            match super::exec_cached(conn, TxSql::Commit) {
                Ok(()) => wrote = true,
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    lost.push((
                        batch.tx_start.get(),
                        outs.len().saturating_sub(1),
                        format!("the write was not committed: {e}"),
                    ));
                }
            }
        }
        for (start, end, why) in lost {
            for out in outs.iter_mut().take(end + 1).skip(start) {
                if out.is_ok() {
                    *out = Err(Error::store(why.clone()));
                }
            }
        }
        (outs, wrote)
    }

    /// [`Store::write_then`] inside a batch on this thread, if one is open for this store:
    /// `f` in a savepoint of the batch's transaction. `None` when no batch is open here.
    pub(super) fn write_in_batch<T>(
        &self,
        f: &mut impl FnMut(&Db<'_>) -> Result<T>,
        after: Option<impl FnOnce(&T)>,
    ) -> Option<Result<T>> {
        let (conn, open, inline, alone, optimistic) = BATCH.with(|b| {
            b.borrow().as_ref().filter(|b| std::ptr::eq(b.store, self)).map(|b| {
                (b.conn, b.open.get(), b.inline, !b.dirty.get() && b.current.get() == b.last, b.optimistic.get())
            })
        })?;
        // SAFETY: the pointer is to the connection the batch's runner holds locked, on this
        // thread, for as long as the batch is registered in the thread-local.
        let conn: &Connection = unsafe { &*conn };
        Some((|| {
            if !open {
                begin(conn, inline)?;
                with_batch(|b| {
                    b.open.set(true);
                    b.tx_start.set(b.current.get());
                });
            }
            // The first write of the batch's last job is alone in its transaction: it needs no
            // savepoint of its own (on failure the transaction is rolled back, nothing else in it).
            // Optimistic, no write has one: a failure rolls the transaction back and runs it again.
            let bare = alone || optimistic;
            if !bare {
                super::exec_cached(conn, TxSql::Savepoint).map_err(super::sql)?;
            }
            let out = {
                let unwind = UndoOnPanic { conn, alone, optimistic };
                let out = f(&Db::new(conn));
                std::mem::forget(unwind);
                out
            };
            let out = match out {
                Ok(v) if bare => Ok(v),
                Ok(v) => super::exec_cached(conn, TxSql::Release).map_err(super::sql).map(|()| v),
                Err(e) => Err(e),
            };
            match out {
                Ok(v) => {
                    with_batch(|b| b.dirty.set(true));
                    if let Some(after) = after {
                        // Commit what the batch holds so far, then the side effect, in commit
                        // order; the rest of the batch goes on in a new transaction.
                        with_batch(|b| {
                            b.open.set(false);
                            b.dirty.set(false);
                        });
                        if let Err(e) = super::exec_cached(conn, TxSql::Commit) {
                            let _ = conn.execute_batch("ROLLBACK");
                            return Err(lose(format!("the write was not committed: {e}")));
                        }
                        with_batch(|b| b.tx_start.set(b.current.get() + 1));
                        after(&v);
                    }
                    Ok(v)
                }
                Err(e) if alone => {
                    if !conn.is_autocommit() {
                        let _ = super::exec_cached(conn, TxSql::Rollback);
                    }
                    with_batch(|b| b.open.set(false));
                    Err(e)
                }
                Err(e) if optimistic && !conn.is_autocommit() => {
                    redo_with_savepoints(conn);
                    Err(e)
                }
                Err(e) => {
                    if conn.is_autocommit() {
                        // SQLite rolled the whole transaction back (an I/O error, a full disk):
                        // the jobs before this one in it lost their writes too.
                        with_batch(|b| b.open.set(false));
                        lose(e.message().to_owned());
                    } else {
                        let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                    }
                    Err(e)
                }
            }
        })())
    }
}

impl Store {
    /// Whether a batch of this store is open on this thread.
    pub(super) fn in_batch(&self) -> bool {
        with_batch(|b| std::ptr::eq(b.store, self)).unwrap_or(false)
    }

    /// A read inside a batch job runs on the batch's connection (it sees the batch's writes so
    /// far, and the writer connection is held by the batch). Only when [`in_batch`](Self::in_batch).
    pub(super) fn read_in_batch<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let Some(conn) = with_batch(|b| std::ptr::eq(b.store, self).then_some(b.conn)).flatten() else {
            return Err(Error::store("internal error: the write batch ended under its job"));
        };
        // SAFETY: as in `write_in_batch`.
        f(&Db::new(unsafe { &*conn }))
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
pub(crate) mod tests;

fn with_batch<R>(f: impl FnOnce(&Batch) -> R) -> Option<R> {
    BATCH.with(|b| b.borrow().as_ref().map(f))
}

/// Undoes a job's write when the job panics in the middle of it (the panic is caught by the
/// batch, which goes on and commits the others).
struct UndoOnPanic<'c> {
    conn: &'c Connection,
    alone: bool,
    optimistic: bool,
}

impl Drop for UndoOnPanic<'_> {
    fn drop(&mut self) {
        if self.conn.is_autocommit() {
            with_batch(|b| b.open.set(false));
        } else if self.optimistic && !self.alone {
            redo_with_savepoints(self.conn);
        } else if self.alone {
            let _ = super::exec_cached(self.conn, TxSql::Rollback);
            with_batch(|b| b.open.set(false));
        } else {
            let _ = self.conn.execute_batch("ROLLBACK TO job; RELEASE job");
        }
    }
}

/// A write without a savepoint failed with the transaction still open: rolls the whole
/// transaction back (the failed job's partial changes with it) and has its jobs run again from
/// its start, each in a savepoint from now on (see `run_jobs`).
fn redo_with_savepoints(conn: &Connection) {
    let _ = super::exec_cached(conn, TxSql::Rollback);
    with_batch(|b| {
        b.open.set(false);
        b.dirty.set(false);
        b.optimistic.set(false);
        b.redo.set(true);
    });
}

/// Records that the open transaction was rolled back under its jobs; the error for the job
/// that found out.
fn lose(why: String) -> Error {
    let why = format!("the write was rolled back: {why}");
    with_batch(|b| {
        let start = b.tx_start.get();
        b.lost.borrow_mut().push((start, b.current.get(), why.clone()));
        b.tx_start.set(b.current.get() + 1);
    });
    Error::store(why)
}

/// `BEGIN IMMEDIATE`: inline, one try that never waits (a would-block refusal when another
/// process holds the write lock); else tried again a few times.
fn begin(conn: &Connection, inline: bool) -> Result<()> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match super::exec_cached(conn, TxSql::BeginImmediate) {
            Ok(()) => return Ok(()),
            Err(e) if super::is_busy(&e) && inline => return Err(super::sql(e)),
            Err(e) if super::is_busy(&e) && attempt < BEGIN_RETRIES => {
                std::thread::sleep(Duration::from_millis(5 * u64::from(attempt)));
            }
            Err(e) if super::is_busy(&e) => return Err(super::busy_error(e)),
            Err(e) => return Err(super::sql(e)),
        }
    }
}
