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

/// Writes `total` bytes of messages in transactions of about 64 KiB while another connection
/// holds read transactions of 150 ms back to back: the largest log seen after a commit, and
/// how many messages were written.
fn largest_wal_under_a_long_reader(store: &Store, path: &std::path::Path, total: usize) -> (u64, u64) {
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
    let (mut written, mut largest, mut n) = (0usize, 0u64, 0u64);
    while written < total {
        let msgs: Vec<(Option<String>, String)> = (0..16)
            .map(|_| {
                n += 1;
                (Some("user".into()), format!(r#"{{"role":"user","content":"{n} {body}"}}"#))
            })
            .collect();
        store.write(|db| db.append_messages("sid", &msgs)).unwrap();
        written += 16 * 4000;
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    (largest, n)
}

#[test]
fn the_log_is_truncated_while_a_reader_is_always_there() {
    let p = tmp("wal.db");
    let limit = 1024 * 1024;
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), limit).unwrap();
    let total = 32 * 1024 * 1024;
    let (largest, written) = largest_wal_under_a_long_reader(&store, &p, total);
    assert!(store.wal_truncations() >= 1, "no checkpoint truncated the log");
    // Without the bound the log holds about everything written (over 32 MiB here).
    assert!(largest < (total / 2) as u64, "the log reached {largest} bytes");
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
