//! Keeping the write-ahead log of a file store bounded.
//!
//! SQLite's own automatic checkpoint copies the log back into the database after a commit, but
//! it never waits for readers, and the log file only starts over (and shrinks to
//! `journal_size_limit`) once no reader still reads from it. A reader that is always there (a
//! long export, a backup, another process listing in a loop) therefore lets the log grow
//! without end: the gateway's users saw logs of gigabytes. This module owns the bound:
//! `journal_size_limit` on the writer connection, and, when the log has grown past the limit
//! anyway, one `wal_checkpoint(RESTART)` that waits for the readers of the moment to finish
//! (new readers then read the database file, not the log) and starts the log over; the commit
//! after it cuts the file back to the limit, and the next writes go over pages of the file the
//! OS already holds (truncating it to nothing, as `TRUNCATE` does, took 16-18 ms of the
//! writer's time each time, and every page written after that was a new page of the file).
//!
//! That checkpoint runs on the writer connection, by the next write that runs on a worker
//! (before its transaction), so it never competes with our own writers for the lock. It never
//! runs on the JS thread: an inline write that finds it due goes to the worker instead.
//!
//! SQLite's automatic checkpoint is replaced too: it ran inside the commit that crossed 1,000
//! log pages, on whatever thread committed, the JS thread included (copying the pages back and
//! an fsync: 15% of an upsert's time on average, and a stall of several milliseconds on the
//! event loop every hundred or so upserts). Every 1,000 new log pages a commit now only wakes
//! the checkpointer, a thread with a connection of its own that runs the same passive
//! checkpoint (it never takes the write lock, never waits for a reader). The log starts over
//! when a write finds it wholly copied back, or at the limit.
//!
//! The checkpointer never takes the write lock. It used to, after each passive checkpoint, to
//! copy the frames written meanwhile (`FULL`) so that the log would start over sooner: under
//! writes back to back it held the lock through the log's and the database's syncs, 20-65 ms at
//! a time, and a try that could not have the lock at once ran a whole passive checkpoint, syncs
//! included (perf, issue 17: eight writers back to back spent a third of their time in rounds
//! over 2 ms, the round's p99 was 5-23 ms; without it and with `RESTART` at the limit 1 ms).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// The size the log is truncated to when it starts over, and past which a checkpoint that waits
/// for readers is due.
pub const WAL_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// How often a commit looks at the log's size.
const CHECK_EVERY: Duration = Duration::from_millis(50);
/// The first checkpoint waits this long for readers (writers wait meanwhile: the log cannot
/// start over while it grows); each one that found readers still there waits twice as long
/// the next time, up to [`MAX_WAIT`], and the next is not due before as long again has passed,
/// so writers get at least half of the time.
const FIRST_WAIT: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(4);
/// Within that wait: how long one try waits for a lock, and the pause between tries.
const TRY_WAIT: Duration = Duration::from_millis(5);
const TRY_PAUSE: Duration = Duration::from_millis(2);

/// The bound on one file store's log.
pub struct WalBound {
    wal: PathBuf,
    limit: u64,
    started: Instant,
    /// milliseconds after `started` before which no commit looks at the log again
    next_check_ms: AtomicU64,
    /// milliseconds after `started` before which no checkpoint is due again
    not_before_ms: AtomicU64,
    due: AtomicBool,
    /// checkpoints in a row that found readers still there
    failures: AtomicU32,
    /// checkpoints that started the log over
    restarts: AtomicU64,
    /// passive checkpoints the checkpointer ran
    passes: Arc<AtomicU64>,
    /// the checkpointer thread, while the store is open
    checkpointer: Mutex<Option<Checkpointer>>,
}

/// New log pages after which a commit wakes the checkpointer (SQLite's own default size).
const AUTO_CHECKPOINT_PAGES: i32 = 1000;

/// When a commit wakes the checkpointer: once every [`AUTO_CHECKPOINT_PAGES`] pages the log
/// gained since the last wake-up. SQLite's own rule looks at the log's length, which is right
/// when the checkpoint runs in the commit and the log starts over after it; here the log keeps
/// its length until a write finds it wholly copied back, and that rule woke the checkpointer
/// after nearly every commit meanwhile (a passive checkpoint of a few pages and two syncs each:
/// the checkpointer's time per append went from 9 to 33 µs).
#[derive(Default)]
struct WakeMark {
    /// the log's length at the last wake-up
    at: i32,
}

impl WakeMark {
    /// Whether a commit that left the log `pages` long should wake the checkpointer.
    fn due(&mut self, pages: i32) -> bool {
        if pages < self.at {
            self.at = 0; // the log started over
        }
        pages - self.at >= AUTO_CHECKPOINT_PAGES
    }

    /// The checkpointer was woken with the log `pages` long.
    fn woke(&mut self, pages: i32) {
        self.at = pages;
    }
}

struct Checkpointer {
    wake: SyncSender<()>,
    thread: JoinHandle<()>,
}

impl WalBound {
    pub fn new(db: &Path, limit: u64) -> WalBound {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        WalBound {
            wal: PathBuf::from(wal),
            limit,
            started: Instant::now(),
            next_check_ms: AtomicU64::new(0),
            not_before_ms: AtomicU64::new(0),
            due: AtomicBool::new(false),
            failures: AtomicU32::new(0),
            restarts: AtomicU64::new(0),
            passes: Arc::new(AtomicU64::new(0)),
            checkpointer: Mutex::new(None),
        }
    }

    /// Replaces SQLite's automatic checkpoint on `writer` by the checkpointer thread (see the
    /// module's header), which opens a connection of its own to `db`.
    pub fn start_checkpointer(&self, db: &Path, writer: &mut Connection) -> rusqlite::Result<()> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(db, flags)?;
        // a passive checkpoint never waits for a lock anyway
        super::busy::wait_up_to(&conn, Duration::ZERO)?;
        // one wake-up waiting is enough: the checkpoint it runs copies every page there is
        let (wake, rx) = mpsc::sync_channel::<()>(1);
        let busy = Arc::new(AtomicBool::new(false));
        let running = busy.clone();
        let passes = self.passes.clone();
        let thread = std::thread::Builder::new()
            .name("session-tools-checkpoint".into())
            .spawn(move || {
                // maintenance: only on a core nothing else wants (`priority`)
                super::priority::lower_this_thread(super::priority::Background::Checkpointer);
                while rx.recv().is_ok() {
                    // passive: copies what no reader still needs, never waits (a failure loses
                    // nothing; the next commit past the mark asks again)
                    let _ = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE)");
                    passes.fetch_add(1, Ordering::Relaxed);
                    running.store(false, Ordering::Release);
                }
            })
            .map_err(|e| {
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
                    Some(format!("cannot start the checkpoint thread: {e}")),
                )
            })?;
        let hook_wake = wake.clone();
        let mut mark = WakeMark::default();
        writer.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            if mark.due(pages) && !busy.swap(true, Ordering::AcqRel) {
                if hook_wake.try_send(()).is_ok() {
                    mark.woke(pages);
                } else {
                    busy.store(false, Ordering::Release);
                }
            }
            Ok(())
        }))?;
        *self.checkpointer.lock().unwrap_or_else(|p| p.into_inner()) = Some(Checkpointer { wake, thread });
        Ok(())
    }

    /// Ends the checkpointer thread (after the checkpoint it is running), closing its
    /// connection. The writer's hook must be gone first (the writer closed or its hook reset).
    pub fn stop_checkpointer(&self) {
        let taken = self.checkpointer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(Checkpointer { wake, thread }) = taken {
            drop(wake);
            let _ = thread.join();
        }
    }

    /// Sets `journal_size_limit` on a connection that writes.
    pub fn configure(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.pragma_update(None, "journal_size_limit", self.limit as i64)
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Called after each commit: cheap (a clock read; a file size at most every
    /// [`CHECK_EVERY`]); marks the checkpoint due when the log is past the limit.
    pub fn after_commit(&self) {
        let now = self.now_ms();
        let next = self.next_check_ms.load(Ordering::Relaxed);
        if now < next
            || self
                .next_check_ms
                .compare_exchange(next, now + CHECK_EVERY.as_millis() as u64, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if now < self.not_before_ms.load(Ordering::Relaxed) {
            return;
        }
        let size = std::fs::metadata(&self.wal).map(|m| m.len()).unwrap_or(0);
        if size > self.limit {
            self.due.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the next write should run [`checkpoint`](Self::checkpoint) first.
    pub fn is_due(&self) -> bool {
        self.due.load(Ordering::Relaxed)
    }

    /// The due checkpoint, on the writer connection (its caller holds it): waits for the write
    /// lock and the readers of the moment, then starts the log over (the commit after it cuts
    /// the file back to the limit); `busy` is the connection's usual wait for a lock, set back
    /// afterwards. A checkpoint that found readers still there loses nothing: a later one tries
    /// again, waiting longer.
    pub fn checkpoint(&self, conn: &Connection, busy: Duration) {
        self.due.store(false, Ordering::Relaxed);
        let wait = FIRST_WAIT.saturating_mul(1 << self.failures.load(Ordering::Relaxed).min(4)).min(MAX_WAIT);
        // Many short tries rather than one long wait: one call reads the readers' positions
        // once, and a reader that ends and begins again at once (a listing in a loop) takes
        // the same slot back before a long wait notices it was free. Our writes wait meanwhile
        // (the caller holds the writer), so each try sees the readers of the moment.
        let _ = super::busy::wait_up_to(conn, TRY_WAIT);
        let start = Instant::now();
        let restarted = loop {
            // (busy, log frames, frames checkpointed): busy = 0 when the log was started over
            let out: rusqlite::Result<i64> = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0));
            match out {
                Ok(0) => break true,
                Ok(_) if start.elapsed() < wait => std::thread::sleep(TRY_PAUSE),
                _ => break false,
            }
        };
        let _ = super::busy::wait_up_to(conn, busy);
        if restarted {
            self.failures.store(0, Ordering::Relaxed);
            self.restarts.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failures.fetch_add(1, Ordering::Relaxed);
            self.not_before_ms.store(self.now_ms() + wait.as_millis() as u64, Ordering::Relaxed);
        }
    }

    /// How many checkpoints started the log over so far.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// How many passive checkpoints the checkpointer ran so far (tests).
    #[cfg(test)]
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }
}
