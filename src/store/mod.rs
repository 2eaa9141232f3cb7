//! The SQLite store: one file holds every session entry, every transcript message, the run
//! registry and the outbox.
//!
//! This module owns the connections, the schema and its numbered migrations, and the
//! transaction discipline: every write is one `BEGIN IMMEDIATE` transaction, or a savepoint of
//! one shared with the writes waiting at the same moment (`group`: group commit), so several
//! [`Store`]s on one file, in one process or several, never lose an update and never see a
//! half-written entry; and the bound on the write-ahead log (`wal`). All SQL of the engine
//! lives below this module, as `prepare_cached` statements with bound parameters only. It never
//! decides policy: callers hand it canonical keys and finished entries.

pub mod bulk;
mod busy;
mod cooldown;
mod db;
mod dbfile;
mod group;
pub mod inventory;
pub mod listing;
pub mod oc9_read;
pub mod oc9_write;
pub mod outbox;
pub mod owners;
pub mod pg;
mod priority;
pub mod runs;
mod schema;
pub mod sessions;
pub mod spawn_turns;
pub mod subagents;
pub mod tasks;
pub mod transcripts;
mod value;
mod wal;
mod walvfs;
mod warm;
pub mod watches;
pub mod windows;
pub mod yields;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, ErrorCode, Result};

pub use db::{Db, Dialect};
pub use group::{Deliver, GroupJob, GroupWriter};
pub use listing::{FieldSet, ListFilter, Listed, ListedRow, SparseEntry};
pub use transcripts::HistoryPage;
pub use value::{Arg, FromCol, Row, ToArg, Ty, Typed};
pub use wal::WAL_LIMIT_BYTES;

thread_local! {
    /// Set while a job runs inline on the caller's thread (see [`inline`]).
    static INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set when a store call inside the inline job would have waited.
    static BLOCKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set when the inline job committed a write.
    static WROTE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

const WOULD_BLOCK: &str = "the store is busy: the call goes to the worker";

/// Runs `f` in *inline* mode: every store call inside it either proceeds at once or fails with
/// an error [`is_would_block`] recognises, instead of waiting (for a connection another thread
/// holds, or for another process's write lock). The napi skin uses it to run short, bounded
/// jobs on the JS thread without ever stalling it, and sends the job to the worker when it
/// would have waited. A job that may write more than once must not run inline (a retry would
/// repeat the first write).
///
/// A call that would have waited makes the whole job count as would-block, even when the job
/// swallowed that error (a fail-closed policy read, say), unless the job had already committed
/// its write: then its own result stands.
pub fn inline<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            INLINE.with(|c| c.set(false));
        }
    }
    INLINE.with(|c| c.set(true));
    BLOCKED.with(|c| c.set(false));
    WROTE.with(|c| c.set(false));
    let _reset = Reset;
    let out = f();
    if BLOCKED.with(|c| c.get()) && !WROTE.with(|c| c.get()) {
        return Err(would_block());
    }
    out
}

/// Runs `f` with inline mode on (no store call waits; see [`inline`]), leaving the outcome of
/// each call to `f` itself: for a batch of jobs, each with its own outcome.
fn inline_flag<T>(f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            INLINE.with(|c| c.set(false));
        }
    }
    INLINE.with(|c| c.set(true));
    let _reset = Reset;
    f()
}

/// Whether `e` is the refusal of a store call in inline mode that would have waited.
pub fn is_would_block(e: &Error) -> bool {
    e.code() == ErrorCode::Unavailable && e.message() == WOULD_BLOCK
}

fn would_block() -> Error {
    BLOCKED.with(|c| c.set(true));
    Error::new(ErrorCode::Unavailable, WOULD_BLOCK)
}

fn inline_mode() -> bool {
    INLINE.with(|c| c.get())
}

/// How long a writer waits for another writer's lock before SQLite gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a write that still found the database busy is tried again, in all.
const BUSY_RETRIES: u32 = 6;
/// Prepared statements kept per connection (rusqlite's default, 16, is fewer than one call's
/// statements plus the transaction's own, so the list queries were parsed again and again).
const STATEMENT_CACHE: usize = 128;

/// Per-connection settings: the statement cache, and the query planner's stability guarantee.
/// Without it SQLite marks a statement whose plan looked at a bound value (the list queries'
/// `:x IS NULL OR …` terms, weighed against the partial indexes) as expired whenever that value
/// is bound again, and parses and plans it anew on every call (perf3: 7% of a `sessions_list`).
fn tune(conn: &Connection) {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let _ = conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true);
}

/// The store. Cheap to share behind an `Arc`; every method blocks, so async callers run them
/// on a blocking thread.
pub struct Store {
    path: String,
    file: Option<PathBuf>,
    writer: Mutex<Option<Connection>>,
    /// A second connection for reads (WAL lets it read while the writer writes); `None` for
    /// `:memory:`, whose reads go through the writer.
    reader: Option<Mutex<Option<Connection>>>,
    /// The bound on the write-ahead log; `None` for `:memory:`.
    wal: Option<wal::WalBound>,
    /// The thread keeping the file in the OS's cache; `None` for `:memory:`.
    warm: Option<warm::Warmth>,
    /// Inline runs refused for a while after a slow one (`cooldown`).
    cool: cooldown::Cooldown,
    /// The PostgreSQL store when the store was opened with a `postgres://` URL; the SQLite
    /// fields above are then empty and every call goes here.
    pg: Option<pg::PgStore>,
}

impl Store {
    /// Opens (creating when missing, with its folder) the database at `path`, or a throwaway
    /// in-memory one for `:memory:`. A file that is not a SQLite database, or a SQLite database
    /// holding tables that are not ours, is refused with `STORE_ERROR` naming the path, and
    /// nothing is written to it.
    ///
    /// A `postgres://` (or `postgresql://`) URL opens a PostgreSQL store instead (see `pg`).
    pub fn open(path: &str) -> Result<Store> {
        if pg::is_url(path) {
            let pg = pg::PgStore::open(path)?;
            return Ok(Store {
                path: pg.shown().to_owned(),
                file: None,
                writer: Mutex::new(None),
                reader: None,
                wal: None,
                warm: None,
                cool: cooldown::Cooldown::default(),
                pg: Some(pg),
            });
        }
        Store::open_with_wal_limit(path, WAL_LIMIT_BYTES)
    }

    /// Calls `waker` (soon, on another thread) whenever an outbox item is recorded in this
    /// store by any process, when the database can tell (PostgreSQL: `LISTEN`/`NOTIFY`); on a
    /// SQLite file it is never called (polling finds the items).
    pub fn on_outbox_notify(&self, waker: Box<dyn Fn() + Send + Sync>) {
        if let Some(pg) = &self.pg {
            pg.on_notify(waker);
        }
    }

    /// Which database the store is on.
    pub fn dialect(&self) -> Dialect {
        if self.pg.is_some() {
            Dialect::Postgres
        } else {
            Dialect::Sqlite
        }
    }

    /// As [`open`](Self::open), with the write-ahead log bounded at `wal_limit` bytes.
    pub(crate) fn open_with_wal_limit(path: &str, wal_limit: u64) -> Result<Store> {
        if path.contains('\0') {
            return Err(Error::store("cannot open the store: the path contains a NUL character"));
        }
        if path == ":memory:" {
            let conn = Connection::open_in_memory().map_err(|e| open_error(path, e))?;
            tune(&conn);
            schema::prepare(&conn, path)?;
            return Ok(Store {
                path: path.to_owned(),
                file: None,
                writer: Mutex::new(Some(conn)),
                reader: None,
                wal: None,
                warm: None,
                cool: cooldown::Cooldown::default(),
                pg: None,
            });
        }
        if path.trim().is_empty() {
            return Err(Error::store("cannot open the store: the path is empty"));
        }
        let file = PathBuf::from(path);
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::store(format!("cannot open the store at {path}: cannot create its folder: {e}")))?;
        }
        if file.is_dir() {
            return Err(Error::store(format!("cannot open the store at {path}: it is a folder")));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        // the writer writes each commit's log frames in one system call (`walvfs`)
        let mut writer = if walvfs::register() {
            Connection::open_with_flags_and_vfs(&file, flags, walvfs::NAME)
        } else {
            Connection::open_with_flags(&file, flags)
        }
        .map_err(|e| open_error(path, e))?;
        busy::wait_up_to(&writer, BUSY_TIMEOUT).map_err(|e| open_error(path, e))?;
        tune(&writer);
        // A savepoint's undo log (each write of a batch has one) in memory, never a temp file:
        // SQLite writes it to a file past 64 KiB and then keeps writing there until the
        // commit (perf, issue 17: 28% of the writer thread in a burst of 1,000 upserts).
        writer.pragma_update(None, "temp_store", "MEMORY").map_err(|e| open_error(path, e))?;
        schema::prepare(&writer, path)?;
        let wal = wal::WalBound::new(&file, wal_limit);
        wal.configure(&writer).map_err(|e| open_error(path, e))?;
        wal.start_checkpointer(&file, &mut writer).map_err(|e| open_error(path, e))?;
        let reader = Connection::open_with_flags(
            &file,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| open_error(path, e))?;
        busy::wait_up_to(&reader, BUSY_TIMEOUT).map_err(|e| open_error(path, e))?;
        tune(&reader);
        let warm = warm::Warmth::start(&file);
        Ok(Store {
            path: path.to_owned(),
            file: Some(file),
            writer: Mutex::new(Some(writer)),
            reader: Some(Mutex::new(Some(reader))),
            wal: Some(wal),
            warm: Some(warm),
            cool: cooldown::Cooldown::default(),
            pg: None,
        })
    }

    /// The path the store was opened with (for PostgreSQL, its URL without the password).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The database file, `None` for `:memory:`.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Closes the connections (after any statement in progress). Idempotent; afterwards every
    /// call fails with `CLOSED`.
    pub fn close(&self) {
        if let Some(pg) = &self.pg {
            pg.close();
        }
        if let Some(r) = &self.reader {
            let conn = r.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(conn);
        }
        let conn = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(c) = conn {
            // A clean close folds the WAL back into the main file; failure here loses nothing.
            let _ = c.execute_batch("PRAGMA wal_checkpoint(PASSIVE);");
        }
        if let Some(w) = &self.wal {
            w.stop_checkpointer();
        }
        if let Some(w) = &self.warm {
            w.stop();
        }
    }

    /// Whether work on this store may run on the JS thread without waiting for the disk: false
    /// while a file store's first pass through its file has not ended (`warm`). Inline mode
    /// treats a cold store as a taken lock: the call would wait (here, for the disk).
    fn is_warm(&self) -> bool {
        self.warm.as_ref().is_none_or(warm::Warmth::is_warm)
    }

    /// Whether an inline run may start: the file in the OS's cache (`warm`), and no recent
    /// inline run slow (`cooldown`).
    fn inline_ready(&self) -> bool {
        self.is_warm() && !self.cool.is_cooling()
    }

    /// How many inline runs took longer than the event loop's budget (`cooldown`; tests).
    #[cfg(test)]
    pub fn slow_inline_runs(&self) -> u64 {
        self.cool.slow_runs()
    }

    /// Locks one of this store's connections: at once in inline mode, or [`would_block`] when
    /// another thread holds it or inline runs must wait ([`inline_ready`](Self::inline_ready));
    /// else waiting.
    fn lock_conn<'a>(&self, m: &'a Mutex<Option<Connection>>) -> Result<std::sync::MutexGuard<'a, Option<Connection>>> {
        if inline_mode() {
            if !self.inline_ready() {
                return Err(would_block());
            }
            return match m.try_lock() {
                Ok(g) => Ok(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => Err(would_block()),
            };
        }
        Ok(m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Injects (or, with `None`, clears) a real SQLite failure into the writer connection, for
    /// the fault tests: `DiskFull` caps the file at its current size (any write that needs a new
    /// page fails with SQLITE_FULL); `ReadOnly` makes every write fail with SQLITE_READONLY.
    #[cfg(test)]
    pub fn inject_fault(&self, fault: Option<Fault>) -> Result<()> {
        let guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let conn = guard.as_ref().ok_or_else(Error::closed)?;
        let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(sql)?;
        let (max_pages, query_only) = match fault {
            Some(Fault::DiskFull) => (pages, false),
            Some(Fault::ReadOnly) => (i64::from(u32::MAX >> 1), true),
            None => (i64::from(u32::MAX >> 1), false),
        };
        conn.pragma_update(None, "max_page_count", max_pages).map_err(sql)?;
        conn.pragma_update(None, "query_only", query_only).map_err(sql)?;
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        if let Some(pg) = &self.pg {
            return pg.is_closed();
        }
        if self.in_batch() {
            return false;
        }
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction, committed when `f` returns `Ok`,
    /// rolled back otherwise. A database still busy after the busy timeout is tried again a few
    /// times before `STORE_ERROR` is returned.
    pub fn write<T>(&self, f: impl FnMut(&Db<'_>) -> Result<T>) -> Result<T> {
        self.write_inner(f, None::<fn(&T)>)
    }

    /// As [`write`](Self::write), then `after` with the result once the transaction has
    /// committed, still holding the writer lock (so side effects such as mirror files keep the
    /// order of the commits, and never show what a failed transaction did not write).
    ///
    /// Inside a group-commit batch on this thread (see `group`), `f` runs in a savepoint of the
    /// batch's transaction instead.
    pub fn write_then<T>(&self, f: impl FnMut(&Db<'_>) -> Result<T>, after: impl FnOnce(&T)) -> Result<T> {
        self.write_inner(f, Some(after))
    }

    fn write_inner<T>(&self, mut f: impl FnMut(&Db<'_>) -> Result<T>, after: Option<impl FnOnce(&T)>) -> Result<T> {
        if let Some(pg) = &self.pg {
            // Every PostgreSQL call is a round trip: never on the JS thread.
            if inline_mode() {
                return Err(would_block());
            }
            return pg.write_then(f, after);
        }
        if self.in_batch() {
            if let Some(out) = self.write_in_batch(&mut f, after) {
                return out;
            }
            return Err(Error::store("internal error: the write batch ended under its job"));
        }
        let mut guard = self.lock_conn(&self.writer)?;
        let conn = guard.as_mut().ok_or_else(Error::closed)?;
        if let Some(w) = self.wal.as_ref().filter(|w| w.is_due()) {
            // It waits for readers: never on the JS thread.
            if inline_mode() {
                return Err(would_block());
            }
            w.checkpoint(conn, BUSY_TIMEOUT);
        }
        if inline_mode() {
            // One try that never waits for another process's write lock: BUSY → the worker.
            let _ = busy::wait_up_to(conn, Duration::ZERO);
            let out = self.cool.timed(|| run_tx(conn, &mut f));
            let _ = busy::wait_up_to(conn, BUSY_TIMEOUT);
            return match out {
                Ok(v) => {
                    WROTE.with(|c| c.set(true));
                    if let Some(after) = after {
                        after(&v);
                    }
                    self.committed();
                    Ok(v)
                }
                Err(TxError::Busy(_)) => Err(would_block()),
                Err(TxError::Other(e)) => Err(e),
            };
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match run_tx(conn, &mut f) {
                Err(TxError::Busy(e)) if attempt < BUSY_RETRIES => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(5 * u64::from(attempt)));
                }
                Err(TxError::Busy(e)) => return Err(e),
                Err(TxError::Other(e)) => return Err(e),
                Ok(v) => {
                    if let Some(after) = after {
                        after(&v);
                    }
                    self.committed();
                    return Ok(v);
                }
            }
        }
    }

    /// After each commit: keeps the write-ahead log bounded (never waits; see `wal`).
    fn committed(&self) {
        if let Some(w) = &self.wal {
            w.after_commit();
        }
    }

    /// How many times a checkpoint that waited for readers started the write-ahead log over.
    pub fn wal_restarts(&self) -> u64 {
        self.wal.as_ref().map(wal::WalBound::restarts).unwrap_or(0)
    }

    /// How many passive checkpoints the checkpointer thread ran (tests).
    #[cfg(test)]
    pub fn wal_passes(&self) -> u64 {
        self.wal.as_ref().map(wal::WalBound::passes).unwrap_or(0)
    }

    /// How many times the checkpointer thread synced the database after a pass (tests).
    #[cfg(test)]
    pub fn wal_syncs(&self) -> u64 {
        self.wal.as_ref().map(wal::WalBound::syncs).unwrap_or(0)
    }

    /// Runs `f` with a read connection (a consistent snapshot for the duration of `f`).
    pub fn read<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        if let Some(pg) = &self.pg {
            if inline_mode() {
                return Err(would_block());
            }
            return pg.read(f);
        }
        if self.in_batch() {
            return self.read_in_batch(f);
        }
        let lock = match &self.reader {
            Some(r) => r,
            None => &self.writer,
        };
        let mut guard = self.lock_conn(lock)?;
        let conn = guard.as_mut().ok_or_else(Error::closed)?;
        let inline = inline_mode();
        if inline {
            let _ = busy::wait_up_to(conn, Duration::ZERO);
        }
        let run = || {
            let tx = Tx::begin(conn, TxSql::BeginDeferred).map_err(sql)?;
            let out = f(&Db::new(conn));
            // A read transaction has nothing to commit; ending it releases the snapshot.
            let _ = tx.end(TxSql::Rollback);
            out
        };
        let out = if inline { self.cool.timed(run) } else { run() };
        if inline {
            let _ = busy::wait_up_to(conn, BUSY_TIMEOUT);
        }
        out
    }
}

enum TxError {
    Busy(Error),
    Other(Error),
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked))
}

/// The statements that open and close transactions and savepoints.
#[derive(Clone, Copy)]
enum TxSql {
    BeginImmediate,
    BeginDeferred,
    Commit,
    Rollback,
    Savepoint,
    Release,
}

/// Runs one of them from the connection's statement cache: parsed once per connection, not once
/// per transaction (as `execute_batch` would).
fn exec_cached(conn: &Connection, which: TxSql) -> rusqlite::Result<()> {
    let mut st = match which {
        TxSql::BeginImmediate => conn.prepare_cached("BEGIN IMMEDIATE")?,
        TxSql::BeginDeferred => conn.prepare_cached("BEGIN DEFERRED")?,
        TxSql::Commit => conn.prepare_cached("COMMIT")?,
        TxSql::Rollback => conn.prepare_cached("ROLLBACK")?,
        TxSql::Savepoint => conn.prepare_cached("SAVEPOINT job")?,
        TxSql::Release => conn.prepare_cached("RELEASE job")?,
    };
    st.execute([]).map(|_| ())
}

/// An open transaction, rolled back when dropped before [`Tx::end`] (an error, a panic).
struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Tx<'c> {
    fn begin(conn: &'c Connection, which: TxSql) -> rusqlite::Result<Tx<'c>> {
        exec_cached(conn, which)?;
        Ok(Tx { conn, open: true })
    }

    /// `COMMIT` (a write) or `ROLLBACK` (a read's snapshot released); a failed commit is rolled
    /// back.
    fn end(mut self, which: TxSql) -> rusqlite::Result<()> {
        let out = exec_cached(self.conn, which);
        self.open = out.is_err();
        out
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open && !self.conn.is_autocommit() {
            let _ = exec_cached(self.conn, TxSql::Rollback);
        }
    }
}

fn run_tx<T>(conn: &mut Connection, f: &mut impl FnMut(&Db<'_>) -> Result<T>) -> Result<T, TxError> {
    let tx = match Tx::begin(conn, TxSql::BeginImmediate) {
        Ok(tx) => tx,
        Err(e) if is_busy(&e) => return Err(TxError::Busy(busy_error(e))),
        Err(e) => return Err(TxError::Other(e.into())),
    };
    let out = f(&Db::new(conn)).map_err(TxError::Other)?;
    match tx.end(TxSql::Commit) {
        Ok(()) => Ok(out),
        Err(e) if is_busy(&e) => Err(TxError::Busy(busy_error(e))),
        Err(e) => Err(TxError::Other(e.into())),
    }
}

fn busy_error(e: rusqlite::Error) -> Error {
    Error::store(format!("the store stayed busy (another writer held it): {e}"))
}

fn open_error(path: &str, e: rusqlite::Error) -> Error {
    Error::new(ErrorCode::StoreError, format!("cannot open the store at {path}: {e}"))
}

/// Turns a row-level SQLite failure into our error (used with `?` below this module).
impl Db<'_> {
    /// `PRAGMA integrity_check` says `ok`.
    pub fn integrity_ok(&self) -> Result<bool> {
        if self.dialect() == Dialect::Postgres {
            // PostgreSQL checks its own pages; there is no whole-database check to run.
            return Ok(true);
        }
        let r: String = self.conn()?.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(sql)?;
        Ok(r == "ok")
    }
}

/// A failure [`Store::inject_fault`] can make happen.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    DiskFull,
    ReadOnly,
}

pub(crate) fn sql(e: rusqlite::Error) -> Error {
    // In inline mode a lock met anywhere (a read during another process's WAL recovery, say)
    // sends the job to the worker instead of failing it.
    if inline_mode() && is_busy(&e) {
        return would_block();
    }
    Error::store(format!("sqlite: {e}"))
}

#[cfg(test)]
mod frames_tests;

#[cfg(test)]
mod wal_tests;

#[cfg(test)]
mod tests;
