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
mod group;
pub mod oc9_read;
pub mod oc9_write;
pub mod outbox;
pub mod runs;
mod schema;
pub mod sessions;
pub mod subagents;
pub mod tasks9;
pub mod transcripts;
mod wal;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Error, ErrorCode, Result};

pub use group::{Deliver, GroupJob, GroupWriter};
pub use sessions::{ListFilter, ListedRow};
pub use transcripts::HistoryPage;
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

/// Locks a connection: at once in inline mode (or [`would_block`]), else waiting.
fn lock_conn(m: &Mutex<Option<Connection>>) -> Result<std::sync::MutexGuard<'_, Option<Connection>>> {
    if inline_mode() {
        return match m.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(would_block()),
        };
    }
    Ok(m.lock().unwrap_or_else(|p| p.into_inner()))
}

/// How long a writer waits for another writer's lock before SQLite gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a write that still found the database busy is tried again, in all.
const BUSY_RETRIES: u32 = 6;

/// A handle on the open database, for the statements of one read or one transaction.
pub struct Db<'c> {
    conn: &'c Connection,
}

impl<'c> Db<'c> {
    fn new(conn: &'c Connection) -> Self {
        Db { conn }
    }
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
}

impl Store {
    /// Opens (creating when missing, with its folder) the database at `path`, or a throwaway
    /// in-memory one for `:memory:`. A file that is not a SQLite database, or a SQLite database
    /// holding tables that are not ours, is refused with `STORE_ERROR` naming the path, and
    /// nothing is written to it.
    pub fn open(path: &str) -> Result<Store> {
        Store::open_with_wal_limit(path, WAL_LIMIT_BYTES)
    }

    /// As [`open`](Self::open), with the write-ahead log bounded at `wal_limit` bytes.
    pub(crate) fn open_with_wal_limit(path: &str, wal_limit: u64) -> Result<Store> {
        if path.contains('\0') {
            return Err(Error::store("cannot open the store: the path contains a NUL character"));
        }
        if path == ":memory:" {
            let conn = Connection::open_in_memory().map_err(|e| open_error(path, e))?;
            schema::prepare(&conn, path)?;
            return Ok(Store {
                path: path.to_owned(),
                file: None,
                writer: Mutex::new(Some(conn)),
                reader: None,
                wal: None,
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
        let writer = Connection::open_with_flags(&file, flags).map_err(|e| open_error(path, e))?;
        writer.busy_timeout(BUSY_TIMEOUT).map_err(|e| open_error(path, e))?;
        schema::prepare(&writer, path)?;
        let wal = wal::WalBound::new(&file, wal_limit);
        wal.configure(&writer).map_err(|e| open_error(path, e))?;
        let reader = Connection::open_with_flags(
            &file,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )
        .map_err(|e| open_error(path, e))?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(|e| open_error(path, e))?;
        Ok(Store {
            path: path.to_owned(),
            file: Some(file),
            writer: Mutex::new(Some(writer)),
            reader: Some(Mutex::new(Some(reader))),
            wal: Some(wal),
        })
    }

    /// The path the store was opened with.
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
        if let Some(r) = &self.reader {
            let conn = r.lock().unwrap_or_else(|p| p.into_inner()).take();
            drop(conn);
        }
        let conn = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(c) = conn {
            // A clean close folds the WAL back into the main file; failure here loses nothing.
            let _ = c.execute_batch("PRAGMA wal_checkpoint(PASSIVE);");
        }
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
        if self.in_batch() {
            if let Some(out) = self.write_in_batch(&mut f, after) {
                return out;
            }
            return Err(Error::store("internal error: the write batch ended under its job"));
        }
        let mut guard = lock_conn(&self.writer)?;
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
            let _ = conn.busy_timeout(Duration::ZERO);
            let out = run_tx(conn, &mut f);
            let _ = conn.busy_timeout(BUSY_TIMEOUT);
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

    /// How many times the write-ahead log was truncated by a checkpoint that waited for readers.
    pub fn wal_truncations(&self) -> u64 {
        self.wal.as_ref().map(wal::WalBound::truncations).unwrap_or(0)
    }

    /// Runs `f` with a read connection (a consistent snapshot for the duration of `f`).
    pub fn read<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        if self.in_batch() {
            return self.read_in_batch(f);
        }
        let lock = match &self.reader {
            Some(r) => r,
            None => &self.writer,
        };
        let mut guard = lock_conn(lock)?;
        let conn = guard.as_mut().ok_or_else(Error::closed)?;
        let inline = inline_mode();
        if inline {
            let _ = conn.busy_timeout(Duration::ZERO);
        }
        let out = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred).map_err(sql)?;
            let out = f(&Db::new(&tx));
            // A read transaction has nothing to commit; ending it releases the snapshot.
            let _ = tx.rollback();
            out
        })();
        if inline {
            let _ = conn.busy_timeout(BUSY_TIMEOUT);
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

fn run_tx<T>(conn: &mut Connection, f: &mut impl FnMut(&Db<'_>) -> Result<T>) -> Result<T, TxError> {
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) if is_busy(&e) => return Err(TxError::Busy(busy_error(e))),
        Err(e) => return Err(TxError::Other(e.into())),
    };
    let out = f(&Db::new(&tx)).map_err(TxError::Other)?;
    match tx.commit() {
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
        let r: String = self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(sql)?;
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
mod wal_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry;
    use crate::store::sessions::ListFilter;
    use serde_json::{json, Map, Value};

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("st-store-{}-{}", std::process::id(), uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn put(store: &Store, key: &str, patch: Value) {
        let patch: Map<String, Value> = patch.as_object().cloned().unwrap();
        store
            .write(|db| {
                let e = entry::merge(db.session(key)?.as_ref(), &patch, entry::now_ms());
                db.put_session(key, &e)
            })
            .unwrap();
    }

    #[test]
    fn inline_calls_never_wait_they_report_would_block_instead() {
        let p = tmp("inline.db");
        let a = Store::open(p.to_str().unwrap()).unwrap();
        let b = Store::open(p.to_str().unwrap()).unwrap();
        put(&a, "agent:main:k", json!({"label": "one"}));
        // another thread holds this store's writer connection
        let guard = a.writer.lock().unwrap();
        let started = std::time::Instant::now();
        let e = inline(|| a.write(|db| db.session("agent:main:k"))).unwrap_err();
        assert!(is_would_block(&e));
        drop(guard);
        // another connection (another process, as far as SQLite knows) holds the write lock
        let mut held = b.writer.lock().unwrap();
        let tx = held.as_mut().unwrap().transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let e = inline(|| {
            a.write(|db| {
                let mut en = db.session("agent:main:k")?.unwrap_or_default();
                en.insert("label".into(), json!("two"));
                db.put_session("agent:main:k", &en)
            })
        })
        .unwrap_err();
        assert!(is_would_block(&e), "{}", e.message());
        assert!(started.elapsed() < Duration::from_secs(5), "an inline call waited for a lock");
        // reads are not blocked by a writer in WAL mode
        let en = inline(|| a.read(|db| db.session("agent:main:k"))).unwrap().unwrap();
        assert_eq!(en["label"], "one");
        drop(tx);
        drop(held);
        // a job that swallows the refusal (as a fail-closed policy read does) still counts as
        // would-block, so its made-up answer never reaches the caller
        let held_reader = a.reader.as_ref().unwrap().lock().unwrap();
        let swallowed = std::thread::scope(|sc| {
            sc.spawn(|| {
                inline(|| {
                    let r = a.read(|db| db.session("agent:main:k"));
                    Ok(if r.is_err() { "deny" } else { "allow" })
                })
            })
            .join()
            .unwrap()
        });
        drop(held_reader);
        assert!(swallowed.as_ref().is_err_and(is_would_block), "{swallowed:?}");
        // once the lock is free the same call goes through, and waiting calls wait again
        put(&a, "agent:main:k", json!({"label": "three"}));
        assert!(!inline_mode(), "inline mode ends with its call");
        let en = a.read(|db| db.session("agent:main:k")).unwrap().unwrap();
        assert_eq!(en["label"], "three");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused_and_left_unchanged() {
        let p = tmp("notes.txt");
        let text = "not a database, just some text that is long enough to look like a header........".repeat(20);
        std::fs::write(&p, &text).unwrap();
        let err = Store::open(p.to_str().unwrap()).err().unwrap();
        assert_eq!(err.code(), ErrorCode::StoreError);
        assert!(err.message().contains(p.to_str().unwrap()));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    }

    #[test]
    fn a_sqlite_database_with_foreign_tables_is_refused() {
        let p = tmp("foreign.db");
        {
            let c = Connection::open(&p).unwrap();
            c.execute_batch("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ann');").unwrap();
        }
        let before = std::fs::read(&p).unwrap();
        let err = Store::open(p.to_str().unwrap()).err().unwrap();
        assert_eq!(err.code(), ErrorCode::StoreError);
        assert!(err.message().contains("not a session-tools store"), "{}", err.message());
        assert_eq!(std::fs::read(&p).unwrap(), before);
    }

    #[test]
    fn an_empty_file_opens_as_a_new_store_and_reopens_with_its_data() {
        let p = tmp("empty.db");
        std::fs::write(&p, b"").unwrap();
        let s = Store::open(p.to_str().unwrap()).unwrap();
        put(&s, "agent:main:main", json!({"label": "x"}));
        s.close();
        assert!(s.is_closed());
        assert_eq!(s.read(|db| db.session_count()).unwrap_err().code(), ErrorCode::Closed);
        let s2 = Store::open(p.to_str().unwrap()).unwrap();
        let e = s2.read(|db| db.session("agent:main:main")).unwrap().unwrap();
        assert_eq!(e["label"], "x");
    }

    #[test]
    fn many_stores_opening_one_new_file_at_once_all_succeed() {
        for _ in 0..10 {
            let p = tmp("race.db");
            let path = p.to_str().unwrap().to_owned();
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (path, barrier) = (path.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        Store::open(&path).map(|_| ()).map_err(|e| e.message().to_owned())
                    })
                })
                .collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), Ok(()));
            }
        }
    }

    #[test]
    fn a_store_from_a_newer_schema_is_refused() {
        let p = tmp("newer.db");
        drop(Store::open(p.to_str().unwrap()).unwrap());
        Connection::open(&p).unwrap().pragma_update(None, "user_version", 99).unwrap();
        let err = Store::open(p.to_str().unwrap()).err().unwrap();
        assert!(err.message().contains("newer"), "{}", err.message());
    }

    #[test]
    fn two_stores_on_one_file_lose_no_read_modify_write_update() {
        let p = tmp("shared.db");
        let path = p.to_str().unwrap().to_owned();
        let a = std::sync::Arc::new(Store::open(&path).unwrap());
        let b = std::sync::Arc::new(Store::open(&path).unwrap());
        let mut handles = Vec::new();
        for store in [a.clone(), b.clone(), a.clone(), b.clone()] {
            handles.push(std::thread::spawn(move || {
                for _ in 0..100 {
                    store
                        .write(|db| {
                            let existing = db.session("agent:main:counter")?;
                            let n = existing.as_ref().and_then(|e| e.get("n")).and_then(Value::as_i64).unwrap_or(0);
                            let mut patch = Map::new();
                            patch.insert("n".into(), json!(n + 1));
                            let e = entry::merge(existing.as_ref(), &patch, entry::now_ms());
                            db.put_session("agent:main:counter", &e)
                        })
                        .unwrap();
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        let e = a.read(|db| db.session("agent:main:counter")).unwrap().unwrap();
        assert_eq!(e["n"], 400);
    }

    #[test]
    fn history_pages_back_with_a_cursor() {
        let s = Store::open(":memory:").unwrap();
        let msgs: Vec<(Option<String>, String)> =
            (1..=250).map(|i| (Some("user".to_owned()), format!(r#"{{"role":"user","content":"m{i}"}}"#))).collect();
        s.write(|db| db.append_messages("sid", &msgs)).unwrap();
        let p1 = s.read(|db| db.history_page("sid", 100, None)).unwrap();
        assert_eq!(p1.messages.len(), 100);
        assert!(p1.messages[0].json.contains("m151") && p1.messages[99].json.contains("m250"));
        let p2 = s.read(|db| db.history_page("sid", 100, p1.next_before)).unwrap();
        assert!(p2.messages[0].json.contains("m51"));
        let p3 = s.read(|db| db.history_page("sid", 100, p2.next_before)).unwrap();
        assert_eq!(p3.messages.len(), 50);
        assert_eq!(p3.next_before, None);
    }

    fn plan(s: &Store, sql: &str) -> String {
        s.read(|db| {
            let mut st = db.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).map_err(super::sql)?;
            let rows = st
                .query_map([], |r| r.get::<_, String>(3))
                .map_err(super::sql)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(super::sql)?;
            Ok(rows.join("\n"))
        })
        .unwrap()
    }

    #[test]
    fn reading_the_last_messages_searches_the_primary_key_without_sorting() {
        let s = Store::open(":memory:").unwrap();
        let p = plan(
            &s,
            "SELECT seq, role, message FROM messages WHERE session_id = 'x' AND seq < 9 ORDER BY seq DESC LIMIT 21",
        );
        assert!(p.contains("SEARCH messages USING PRIMARY KEY"), "{p}");
        assert!(!p.contains("TEMP B-TREE"), "{p}");
    }

    #[test]
    fn every_list_variant_walks_an_index_in_order_without_sorting() {
        let s = Store::open(":memory:").unwrap();
        for (name, q) in [
            ("updated", sessions::LIST_BY_UPDATED),
            ("spawned", sessions::LIST_BY_SPAWNED_BY),
            ("label", sessions::LIST_BY_LABEL),
            ("agent", sessions::LIST_BY_AGENT),
        ] {
            let q = q
                .replace(":include_global", "0")
                .replace(":include_unknown", "0")
                .replace(":agent_id", "'main'")
                .replace(":spawned_by", "'agent:main:main'")
                .replace(":label", "'l'")
                .replace(":search", "NULL")
                .replace(":active_since", "NULL")
                .replace(":kinds", "NULL")
                .replace(":main_key", "'main'")
                .replace(":global_scope", "0")
                .replace(":agents", "NULL")
                .replace(":default_agent", "'main'")
                .replace(":limit", "50");
            let p = plan(&s, &q);
            assert!(!p.contains("TEMP B-TREE"), "{name}: {p}");
            assert!(p.contains("USING INDEX") || p.contains("USING COVERING INDEX"), "{name}: {p}");
        }
    }

    /// Stores an entry as given (no merge rule, so `updatedAt` may lie in the past).
    fn put_raw(store: &Store, key: &str, e: Value) {
        let mut e: Map<String, Value> = e.as_object().cloned().unwrap();
        e.insert("sessionId".into(), json!(uuid::Uuid::new_v4().to_string()));
        store.write(|db| db.put_session(key, &e)).unwrap();
    }

    #[test]
    fn list_filters_sort_newest_first_and_limit() {
        let s = Store::open(":memory:").unwrap();
        put_raw(&s, "agent:main:a", json!({"updatedAt": 100, "label": "A"}));
        put_raw(&s, "agent:main:b", json!({"updatedAt": 300}));
        put_raw(&s, "agent:main:subagent:c", json!({"updatedAt": 200, "spawnedBy": "agent:main:main"}));
        put_raw(&s, "global", json!({"updatedAt": 400}));
        let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
        let keys = |f: &ListFilter| s.read(|db| db.list(f)).unwrap().into_iter().map(|r| r.key).collect::<Vec<_>>();
        // global is dropped unless asked for; newest first
        assert_eq!(keys(&base), ["agent:main:b", "agent:main:subagent:c", "agent:main:a"]);
        assert_eq!(keys(&ListFilter { include_global: true, limit: Some(1), ..base.clone() }), ["global"]);
        assert_eq!(
            keys(&ListFilter { spawned_by: Some("agent:main:main".into()), ..base.clone() }),
            ["agent:main:subagent:c"]
        );
        assert_eq!(keys(&ListFilter { label: Some("A".into()), ..base.clone() }), ["agent:main:a"]);
        assert_eq!(keys(&ListFilter { search: Some("subagent".into()), ..base.clone() }), ["agent:main:subagent:c"]);
        assert_eq!(
            keys(&ListFilter { active_since: Some(150), ..base.clone() }),
            ["agent:main:b", "agent:main:subagent:c"]
        );
    }
}
