//! The write-ahead log stays bounded under continuous writes while a reader is always there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::Store;

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("st-wal-{}-{}", std::process::id(), uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Bytes of messages written before the test gives up waiting for the truncations (a broken
/// bound would otherwise write without end). A working bound needs about 10 MiB here; a reader
/// whose transactions are twice as long as this test's (so every first wait misses) about 100.
const GIVE_UP_BYTES: u64 = 1024 * 1024 * 1024;

/// Removes a test's folder however the test ends (a failed one may leave a large log).
struct Cleanup(std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes messages in transactions of about 64 KiB while another connection holds read
/// transactions of 150 ms back to back (a reader is always there), until `rounds` checkpoints
/// have truncated the log: the log's size right after each write that truncated it, and how
/// many messages were written.
fn log_after_each_truncation_under_a_long_reader(
    store: &Store,
    path: &std::path::Path,
    rounds: u64,
) -> (Vec<u64>, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, path) = (stop.clone(), path.to_owned());
        std::thread::spawn(move || {
            let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
            while !stop.load(Ordering::Relaxed) {
                conn.execute_batch("BEGIN").unwrap();
                let _: i64 = conn.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).unwrap();
                std::thread::sleep(Duration::from_millis(150));
                conn.execute_batch("COMMIT").unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let body = "x".repeat(4000);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let (mut after, mut n) = (Vec::new(), 0u64);
    while store.wal_truncations() < rounds && n * 4000 < GIVE_UP_BYTES {
        let before = store.wal_truncations();
        let msgs: Vec<(Option<String>, String)> = (0..16)
            .map(|_| {
                n += 1;
                (Some("user".into()), format!(r#"{{"role":"user","content":"{n} {body}"}}"#))
            })
            .collect();
        store.write(|db| db.append_messages("sid", &msgs)).unwrap();
        if store.wal_truncations() > before {
            after.push(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    (after, n)
}

/// The bound holds by what happens, not by how fast: each time the log passes the limit, a
/// checkpoint waits for the reader of the moment and truncates it, again and again, though
/// the reader never lets go of the database; the write that truncated it starts the log over
/// with its own frames only. (How far the log grows before that depends on the machine's
/// speed: a checkpoint that found the reader still there after its wait lets writers run for as
/// long again before the next, so a loaded machine writes more in between. That is not asserted.)
#[test]
fn the_log_is_truncated_while_a_reader_is_always_there() {
    let p = tmp("wal.db");
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    let limit = 1024 * 1024;
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), limit).unwrap();
    let rounds = 3;
    let (after, written) = log_after_each_truncation_under_a_long_reader(&store, &p, rounds);
    let truncations = store.wal_truncations();
    assert_eq!(truncations, rounds, "the log was truncated {truncations} times in {} MiB", (written * 4000) >> 20);
    assert_eq!(after.len() as u64, rounds);
    // Without the bound the log is never truncated while the reader is there: it holds all
    // that was written.
    for size in after {
        assert!(size < limit, "after a truncation the log holds only the truncating write's frames: {size} bytes");
    }
    assert!(store.read(|db| db.integrity_ok()).unwrap());
    assert_eq!(store.read(|db| db.message_count("sid")).unwrap(), written);
}

#[test]
fn the_writer_connection_carries_the_journal_size_limit() {
    let p = tmp("limit.db");
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), 123_456).unwrap();
    let guard = store.writer.lock().unwrap();
    let limit: i64 = guard.as_ref().unwrap().query_row("PRAGMA journal_size_limit", [], |r| r.get(0)).unwrap();
    assert_eq!(limit, 123_456);
}

/// `(busy, log frames, frames checkpointed)` of a passive checkpoint on `conn`.
fn passive(conn: &Connection) -> (i64, i64, i64) {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap()
}

/// Frames in the log file of `conn`'s database (a 32-byte header, then 24 bytes + a page each).
fn frames_in_file(conn: &Connection) -> u64 {
    let path: String = conn.query_row("PRAGMA database_list", [], |r| r.get(2)).unwrap();
    let page: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    let len = std::fs::metadata(format!("{path}-wal")).map(|m| m.len()).unwrap_or(0);
    len.saturating_sub(32) / (page as u64 + 24)
}

fn wal_pair(name: &str) -> (Connection, Connection) {
    let p = tmp(name);
    let writer = Connection::open(&p).unwrap();
    writer.pragma_update(None, "journal_mode", "WAL").unwrap();
    // no automatic checkpoint: the log grows until this test checkpoints it
    writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    writer.execute_batch("CREATE TABLE t (x TEXT)").unwrap();
    for i in 0..200 {
        writer.execute("INSERT INTO t (x) VALUES (?1)", [format!("row {i} {}", "y".repeat(500))]).unwrap();
    }
    let checkpointer = Connection::open(&p).unwrap();
    checkpointer.busy_timeout(Duration::ZERO).unwrap();
    (writer, checkpointer)
}

#[test]
fn after_catching_up_the_next_write_starts_the_log_over() {
    let (writer, checkpointer) = wal_pair("restart.db");
    let before = frames_in_file(&writer) as i64;
    assert!(before > 100, "the log holds {before} frames");
    super::wal::catch_up(&checkpointer);
    let (busy, log, done) = passive(&checkpointer);
    assert_eq!((busy, log), (0, done), "every frame is in the database");
    writer.execute("INSERT INTO t (x) VALUES ('next')", []).unwrap();
    let (_, after, _) = passive(&checkpointer);
    assert!(after < before, "the log started over: {after} frames after, {before} before");
    let rows: i64 = writer.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, 201);
}

#[test]
fn catching_up_never_waits_for_a_writer() {
    let (writer, checkpointer) = wal_pair("busy.db");
    writer.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (x) VALUES ('held');").unwrap();
    // the write lock is held: the catch-up gives up (busy timeout 0) instead of waiting for it
    super::wal::catch_up(&checkpointer);
    writer.execute_batch("COMMIT").unwrap();
    let rows: i64 = writer.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, 201);
    super::wal::catch_up(&checkpointer);
    let (busy, log, done) = passive(&checkpointer);
    assert_eq!((busy, log), (0, done));
}

#[test]
fn the_writer_keeps_savepoint_journals_in_memory() {
    let p = tmp("temp.db");
    let store = Store::open(p.to_str().unwrap()).unwrap();
    let guard = store.writer.lock().unwrap();
    let temp_store: i64 = guard.as_ref().unwrap().query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap();
    assert_eq!(temp_store, 2, "MEMORY");
}
