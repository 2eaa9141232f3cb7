//! Keeping the write-ahead log of a file store bounded.
//!
//! SQLite's own automatic checkpoint copies the log back into the database after a commit, but
//! it never waits for readers, and the log file only starts over (and shrinks to
//! `journal_size_limit`) once no reader still reads from it. A reader that is always there (a
//! long export, a backup, another process listing in a loop) therefore lets the log grow
//! without end: the gateway's users saw logs of gigabytes. This module owns the bound: when
//! the log (its frames, as the writer's commits report them) has grown past the limit, one
//! `wal_checkpoint(RESTART)` waits for the readers of the moment to finish (new readers then
//! read the database file, not the log) and starts the log over; the commit after it cuts the
//! file back to twice the limit (`journal_size_limit`), and the next writes go over pages of the
//! file the OS already holds. Truncating it to nothing, as `TRUNCATE` does, took 16-18 ms of the
//! writer's time each time, and every page written after that was a new page of the file; cut
//! back to the limit itself, a log that ran a few MiB past it before its checkpoint was cut and
//! grown again every 100 ms under writes back to back (the cut 1-5 ms of the writer's time).
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
//! A passive checkpoint that leaves frames behind does not sync the database pages it copied:
//! SQLite syncs them all at once, in the checkpoint that copies the log to its end, which at
//! the bound is the writer's and holds the write lock. So the checkpointer syncs the database
//! itself after each pass, and once the log is past the limit it catches up (passes back to
//! back until at most [`CAUGHT_UP_FRAMES`] are left) before that checkpoint is due: under
//! writes back to back at 50,000 sessions it held every write 16-24 ms once every 100 ms (12-20
//! of them the sync), and with both changes 2.7 ms at the median (issue 17).
//!
//! The checkpoint at the bound and the checkpointer's passes never overlap ([`PassGate`]): the
//! checkpoint needs SQLite's checkpoint lock, which a pass holds through its copy and its sync,
//! and SQLite's busy handler waits for it by sleeping 1, 2, 5 ms at a time. Traced (issue 17):
//! under 8 writers back to back at 10,000 sessions, 283 of the 302 rounds over 2 ms in 30 s
//! began while a pass ran, and waited 4.0 ms for it (median) and 2.2 ms more. So the checkpoint
//! is not due while a pass runs (writes go on meanwhile, on the JS thread too), a catch-up that
//! is done holds later passes back until the checkpoint has run, and a checkpoint that must
//! wait for a pass anyway is woken when it ends.
//!
//! The checkpointer never takes the write lock. It used to, after each passive checkpoint, to
//! copy the frames written meanwhile (`FULL`) so that the log would start over sooner: under
//! writes back to back it held the lock through the log's and the database's syncs, 20-65 ms at
//! a time, and a try that could not have the lock at once ran a whole passive checkpoint, syncs
//! included (perf, issue 17: eight writers back to back spent a third of their time in rounds
//! over 2 ms, the round's p99 was 5-23 ms; without it and with `RESTART` at the limit 1 ms).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use super::dbfile::DbFile;

/// The size past which a checkpoint that waits for readers is due (it starts the log over).
pub const WAL_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// The log file is cut back to this many times the limit when it starts over
/// (`journal_size_limit`): a log that ran somewhat past the limit before its checkpoint (up to
/// [`CHECK_EVERY`] and [`CATCH_UP_WAIT`] of writes) keeps its file, rather than being cut back
/// and grown again, new pages of the file, every time.
const KEEP_FACTOR: u64 = 2;
/// The log file's header, and a frame's (each frame is one and a page).
const LOG_HEADER_BYTES: u64 = 32;
const FRAME_HEADER_BYTES: u64 = 24;
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
    /// milliseconds after `started` when the checkpoint was marked due
    due_since_ms: AtomicU64,
    /// what the checkpointer shares with the writer: the catch-up (see [`WalBound::is_due`])
    catch_up: Arc<CatchUp>,
    /// checkpoints in a row that found readers still there
    failures: AtomicU32,
    /// checkpoints that started the log over
    restarts: AtomicU64,
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

/// What one wake-up of the checkpointer runs: a passive checkpoint (it copies what no reader
/// still needs and never waits; a failure loses nothing, the next commit past the mark asks
/// again) and the sync of what it copied; while a catch-up is wanted, passes back to back until
/// it has caught up or run out of tries.
fn run_passes(conn: &Connection, catch_up: &CatchUp) {
    let wanted = catch_up.wanted.load(Ordering::Acquire);
    for extra in 0..=CATCH_UP_PASSES {
        // held back: the checkpoint at the bound is about to run, or running
        if !catch_up.gate.enter() {
            return;
        }
        // (busy, frames in the log when the pass began, frames copied back so far)
        let copied = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(2));
        // when SQLite synced (it copied the whole log), this sync finds little to write
        if copied.as_ref().is_ok_and(|c| *c > 0) && DbFile::of(conn).is_some_and(|f| f.sync()) {
            catch_up.syncs.fetch_add(1, Ordering::Relaxed);
        }
        catch_up.passes.fetch_add(1, Ordering::Relaxed);
        if !wanted {
            catch_up.gate.leave(false);
            return;
        }
        // what was committed during the pass (none when the log has started over since)
        let left = catch_up.frames.load(Ordering::Acquire) - copied.unwrap_or(0);
        if left <= CAUGHT_UP_FRAMES || extra == CATCH_UP_PASSES {
            // no pass until the checkpoint it made due has run (it releases the gate)
            catch_up.gate.leave(true);
            catch_up.wanted.store(false, Ordering::Release);
            catch_up.done.store(true, Ordering::Release);
            return;
        }
        catch_up.gate.leave(false);
    }
}

/// Keeps the checkpointer's passes and the checkpoint at the bound apart (see the module's
/// header): a pass begins only when no checkpoint holds the gate, and a checkpoint that holds it
/// waits for the pass running, woken when that ends rather than polling SQLite's lock.
#[derive(Default)]
struct PassGate {
    /// no pass may begin (a checkpoint at the bound is due or running)
    held: Mutex<bool>,
    ended: Condvar,
    /// a pass is running; changed only under `held`'s lock, so a hold waits on it with `ended`,
    /// and read without the lock by [`is_running`](Self::is_running), which the JS thread asks
    /// (it never waits on a lock of ours)
    running: AtomicBool,
}

impl PassGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, bool> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a pass may begin now; if so it is running until [`leave`](Self::leave).
    fn enter(&self) -> bool {
        let held = self.lock();
        if *held {
            return false;
        }
        self.running.store(true, Ordering::Release);
        true
    }

    /// The pass has ended; with `hold`, no other begins until [`release`](Self::release).
    fn leave(&self, hold: bool) {
        let mut held = self.lock();
        self.running.store(false, Ordering::Release);
        *held |= hold;
        self.ended.notify_all();
    }

    fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// No pass begins until [`release`](Self::release); waits up to `wait` for the one running.
    fn hold(&self, wait: Duration) {
        let mut held = self.lock();
        *held = true;
        let deadline = Instant::now() + wait;
        while self.is_running() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            held = self.ended.wait_timeout(held, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    fn release(&self) {
        *self.lock() = false;
    }
}

struct Checkpointer {
    wake: SyncSender<()>,
    thread: JoinHandle<()>,
}

/// What the checkpointer shares with the writer, above all the catch-up before the checkpoint at
/// the bound: once the log is past the limit, the checkpointer runs passive passes (no write
/// lock) until what is left to copy is small, so that the checkpoint that starts the log over,
/// which holds the write lock through its copy and its sync, has little of either to do.
#[derive(Default)]
struct CatchUp {
    /// the checkpointer is to catch up (set when the checkpoint is marked due)
    wanted: AtomicBool,
    /// it has: at most [`CAUGHT_UP_FRAMES`] were left after its last pass (or it gave up)
    done: AtomicBool,
    /// the log's length in frames after the last commit (the writer's hook)
    frames: AtomicI64,
    /// bytes of a log frame (its header and a page), once the writer's hook is set; 0 before
    frame_bytes: AtomicU64,
    /// the checkpointer's passes and the checkpoint at the bound, kept apart
    gate: PassGate,
    /// passive checkpoints the checkpointer ran, and syncs of the database it made (tests)
    passes: AtomicU64,
    syncs: AtomicU64,
}

/// Frames left to copy under which the catch-up ends.
const CAUGHT_UP_FRAMES: i64 = 64;
/// Passes the catch-up runs at most after the first.
const CATCH_UP_PASSES: u32 = 4;
/// How long the due checkpoint waits for the catch-up before it runs anyway (a checkpointer
/// that gets no core).
const CATCH_UP_WAIT: Duration = Duration::from_millis(60);

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
            due_since_ms: AtomicU64::new(0),
            catch_up: Arc::default(),
            failures: AtomicU32::new(0),
            restarts: AtomicU64::new(0),
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
        let catch_up = self.catch_up.clone();
        let thread = std::thread::Builder::new()
            .name("session-tools-checkpoint".into())
            .spawn(move || {
                // maintenance: only on a core nothing else wants (`priority`)
                super::priority::lower_this_thread(super::priority::Background::Checkpointer);
                while rx.recv().is_ok() {
                    run_passes(&conn, &catch_up);
                    running.store(false, Ordering::Release);
                }
            })
            .map_err(|e| {
                rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
                    Some(format!("cannot start the checkpoint thread: {e}")),
                )
            })?;
        let page: i64 = writer.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let hook_wake = wake.clone();
        let mut mark = WakeMark::default();
        let log = self.catch_up.clone();
        writer.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
            log.frames.store(i64::from(pages), Ordering::Release);
            if mark.due(pages) && !busy.swap(true, Ordering::AcqRel) {
                if hook_wake.try_send(()).is_ok() {
                    mark.woke(pages);
                } else {
                    busy.store(false, Ordering::Release);
                }
            }
            Ok(())
        }))?;
        self.catch_up.frame_bytes.store(page.unsigned_abs() + FRAME_HEADER_BYTES, Ordering::Release);
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

    /// Sets `journal_size_limit` on a connection that writes ([`KEEP_FACTOR`] times the limit).
    pub fn configure(&self, conn: &Connection) -> rusqlite::Result<()> {
        conn.pragma_update(None, "journal_size_limit", self.kept_bytes() as i64)
    }

    /// The size the log file is cut back to when it starts over.
    pub fn kept_bytes(&self) -> u64 {
        self.limit.saturating_mul(KEEP_FACTOR)
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// How long the log is: its frames after the last commit when the writer's hook counts them,
    /// else the file's size (which stays as it was after the log starts over).
    fn log_bytes(&self) -> u64 {
        let frame = self.catch_up.frame_bytes.load(Ordering::Acquire);
        if frame == 0 {
            return std::fs::metadata(&self.wal).map(|m| m.len()).unwrap_or(0);
        }
        let frames = self.catch_up.frames.load(Ordering::Acquire).max(0).unsigned_abs();
        LOG_HEADER_BYTES + frames.saturating_mul(frame)
    }

    /// Called after each commit: cheap (a clock read; the log's length at most every
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
        if self.log_bytes() > self.limit && !self.due.load(Ordering::Relaxed) {
            self.mark_due(now);
        }
    }

    /// The log is past the limit: the checkpoint that starts it over is due once the
    /// checkpointer has caught up ([`CatchUp`]), so that it has few pages left to copy and sync
    /// under the write lock (see the module's header).
    fn mark_due(&self, now: u64) {
        let wake = self.checkpointer.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|c| c.wake.clone());
        self.catch_up.done.store(wake.is_none(), Ordering::Release);
        self.catch_up.wanted.store(wake.is_some(), Ordering::Release);
        if let Some(wake) = wake {
            // a pass already queued reads `wanted` when it begins
            let _ = wake.try_send(());
        }
        self.due_since_ms.store(now, Ordering::Relaxed);
        self.due.store(true, Ordering::Release);
    }

    /// Whether the next write should run [`checkpoint`](Self::checkpoint) first: the log is
    /// past the limit and the checkpointer has caught up (it then runs no pass until the
    /// checkpoint has), or has had [`CATCH_UP_WAIT`] to and is not in a pass; in a pass, that
    /// pass has until twice the wait.
    pub fn is_due(&self) -> bool {
        if !self.due.load(Ordering::Acquire) {
            return false;
        }
        if self.catch_up.done.load(Ordering::Acquire) {
            return true;
        }
        let waited = self.now_ms().saturating_sub(self.due_since_ms.load(Ordering::Relaxed));
        let wait = CATCH_UP_WAIT.as_millis() as u64;
        waited >= wait && (waited >= 2 * wait || !self.catch_up.gate.is_running())
    }

    /// The due checkpoint, on the writer connection (its caller holds it): waits for the write
    /// lock and the readers of the moment, then starts the log over (the commit after it cuts
    /// the file back to the limit); `busy` is the connection's usual wait for a lock, set back
    /// afterwards. A checkpoint that found readers still there loses nothing: a later one tries
    /// again, waiting longer.
    pub fn checkpoint(&self, conn: &Connection, busy: Duration) {
        self.due.store(false, Ordering::Relaxed);
        // no pass from now until it has run; one running is waited for (woken when it ends)
        self.catch_up.gate.hold(CATCH_UP_WAIT);
        self.restart(conn, busy);
        self.catch_up.gate.release();
    }

    /// The checkpoint's tries (see [`checkpoint`](Self::checkpoint)).
    fn restart(&self, conn: &Connection, busy: Duration) {
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
        self.catch_up.passes.load(Ordering::Relaxed)
    }

    /// How many times the checkpointer synced the database after a pass (tests).
    #[cfg(test)]
    pub fn syncs(&self) -> u64 {
        self.catch_up.syncs.load(Ordering::Relaxed)
    }

    /// Whether the checkpointer has caught up since the checkpoint was last marked due (tests).
    #[cfg(test)]
    pub fn caught_up(&self) -> bool {
        self.catch_up.done.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod gate_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::PassGate;

    /// A checkpoint that holds the gate waits for the pass running, and returns once it ends
    /// (not at its deadline); no pass begins while it is held, and one does once released.
    #[test]
    fn holding_waits_for_the_running_pass_and_keeps_the_next_one_out() {
        let gate = Arc::new(PassGate::default());
        assert!(gate.enter());
        let holder = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let began = std::time::Instant::now();
                gate.hold(Duration::from_secs(30));
                (gate.is_running(), began.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        gate.leave(false);
        let (running, waited) = holder.join().unwrap();
        assert!(!running, "the hold returned while the pass still ran");
        assert!(waited < Duration::from_secs(30), "woken when the pass ended, not at the deadline");
        assert!(!gate.enter(), "no pass begins while the gate is held");
        gate.release();
        assert!(gate.enter());
        // a pass that ends caught up holds the gate itself
        gate.leave(true);
        assert!(!gate.enter());
        gate.release();
        assert!(gate.enter());
    }

    /// A hold whose pass does not end gives up at its deadline (a checkpointer with no core).
    #[test]
    fn a_hold_gives_up_at_its_deadline() {
        let gate = PassGate::default();
        assert!(gate.enter());
        gate.hold(Duration::from_millis(20));
        assert!(gate.is_running());
    }
}
