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

#[test]
fn the_writer_keeps_savepoint_journals_in_memory() {
    let p = tmp("temp.db");
    let store = Store::open(p.to_str().unwrap()).unwrap();
    let guard = store.writer.lock().unwrap();
    let temp_store: i64 = guard.as_ref().unwrap().query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap();
    assert_eq!(temp_store, 2, "MEMORY");
}
