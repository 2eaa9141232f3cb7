//! The write-ahead log stays bounded under continuous writes while a reader is always there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::Store;

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = crate::scratch::path("wal");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Bytes of messages written before the test gives up waiting for the restarts (a broken
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
/// have started the log over: the log file's size right after each write that did, and how many
/// messages were written.
fn log_after_each_restart_under_a_long_reader(store: &Store, path: &std::path::Path, rounds: u64) -> (Vec<u64>, u64) {
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
    while store.wal_restarts() < rounds && n * 4000 < GIVE_UP_BYTES {
        let before = store.wal_restarts();
        let msgs: Vec<(Option<String>, String)> = (0..16)
            .map(|_| {
                n += 1;
                (Some("user".into()), format!(r#"{{"role":"user","content":"{n} {body}"}}"#))
            })
            .collect();
        store.write(|db| db.append_messages("sid", &msgs)).unwrap();
        if store.wal_restarts() > before {
            after.push(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    (after, n)
}

/// The bound holds by what happens, not by how fast: each time the log passes the limit, a
/// checkpoint waits for the reader of the moment and starts it over, again and again, though
/// the reader never lets go of the database; the write after it cuts the file back to the
/// limit. (How far the log grows before that depends on the machine's
/// speed: a checkpoint that found the reader still there after its wait lets writers run for as
/// long again before the next, so a loaded machine writes more in between. That is not asserted.)
#[test]
fn the_log_is_started_over_while_a_reader_is_always_there() {
    let p = tmp("wal.db");
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    let limit = 1024 * 1024;
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), limit).unwrap();
    let rounds = 3;
    let (after, written) = log_after_each_restart_under_a_long_reader(&store, &p, rounds);
    let restarts = store.wal_restarts();
    assert_eq!(restarts, rounds, "the log was started over {restarts} times in {} MiB", (written * 4000) >> 20);
    assert_eq!(after.len() as u64, rounds);
    // Without the bound the log never starts over while the reader is there: it holds all
    // that was written.
    for size in after {
        assert!(size <= 2 * limit, "after a restart the log file is back within twice the limit: {size} bytes");
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
    assert_eq!(limit, 2 * 123_456, "twice the bound");
}

/// The checkpointer is woken once per 1,000 new log pages, also while the log cannot start
/// over (a reader holds it): SQLite's own rule, a log 1,000 pages long, would wake it after
/// every commit then, each wake-up a passive checkpoint with two syncs.
#[test]
fn the_checkpointer_runs_once_per_thousand_new_log_pages() {
    let p = tmp("passes.db");
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), 1 << 30).unwrap();
    store
        .write(|db| db.append_messages("sid", &[(Some("user".into()), r#"{"role":"user","content":"first"}"#.into())]))
        .unwrap();
    let reader = Connection::open_with_flags(&p, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)).unwrap();
    let body = "x".repeat(3000);
    // about 3,000 log pages in 1,500 commits of two pages or so each
    for n in 0..1500 {
        let msg = format!(r#"{{"role":"user","content":"{n} {body}"}}"#);
        store.write(|db| db.append_messages("sid", &[(Some("user".into()), msg.clone())])).unwrap();
    }
    // the last wake-up's checkpoint ends
    std::thread::sleep(Duration::from_millis(500));
    let mut wal = p.as_os_str().to_owned();
    wal.push("-wal");
    // a 32-byte header, then 24 bytes and a 4 KiB page a frame
    let frames = std::fs::metadata(&wal).unwrap().len().saturating_sub(32) / (4096 + 24);
    let passes = store.wal_passes();
    assert!(frames >= 2500, "the log holds {frames} pages");
    assert!(passes >= 1 && passes <= frames / 1000 + 1, "{passes} checkpoints for {frames} log pages");
    reader.execute_batch("COMMIT").unwrap();
    assert_eq!(store.read(|db| db.message_count("sid")).unwrap(), 1501);
}

#[test]
fn the_writer_keeps_savepoint_journals_in_memory() {
    let p = tmp("temp.db");
    let store = Store::open(p.to_str().unwrap()).unwrap();
    let guard = store.writer.lock().unwrap();
    let temp_store: i64 = guard.as_ref().unwrap().query_row("PRAGMA temp_store", [], |r| r.get(0)).unwrap();
    assert_eq!(temp_store, 2, "MEMORY");
}

/// The checkpointer syncs the database pages it copied after each pass that copied some: a
/// passive checkpoint that leaves frames behind does not, and they would all be synced by the
/// checkpoint at the bound, under the write lock.
#[test]
fn the_checkpointer_syncs_the_database_after_a_pass() {
    let p = tmp("syncs.db");
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    let store = Store::open_with_wal_limit(p.to_str().unwrap(), 1 << 30).unwrap();
    let body = "x".repeat(3000);
    // about 3,000 log pages, no reader: each pass copies what it finds
    for n in 0..1500 {
        let msg = format!(r#"{{"role":"user","content":"{n} {body}"}}"#);
        store.write(|db| db.append_messages("sid", &[(Some("user".into()), msg.clone())])).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.wal_syncs() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (syncs, passes) = (store.wal_syncs(), store.wal_passes());
    assert!(syncs >= 1 && syncs <= passes, "{syncs} syncs in {passes} passes");
    assert!(store.read(|db| db.integrity_ok()).unwrap());
}

/// Writes rows through `writer` (the bound's writer connection) until the bound says its
/// checkpoint is due, telling it of each commit as the store does; whether it did in 10 s.
fn write_until_due(writer: &Connection, bound: &super::wal::WalBound) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let body = "y".repeat(3000);
    while !bound.is_due() && std::time::Instant::now() < deadline {
        writer.execute("INSERT INTO t (body) VALUES (?1)", [&body]).unwrap();
        bound.after_commit();
    }
    bound.is_due()
}

fn bound_at(name: &str, limit: u64, checkpointer: bool) -> (std::path::PathBuf, Connection, super::wal::WalBound) {
    let p = tmp(name);
    let mut writer = Connection::open(&p).unwrap();
    writer.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)").unwrap();
    let bound = super::wal::WalBound::new(&p, limit);
    bound.configure(&writer).unwrap();
    if checkpointer {
        bound.start_checkpointer(&p, &mut writer).unwrap();
    }
    (p, writer, bound)
}

/// Past the limit, the checkpoint that starts the log over becomes due once the checkpointer
/// has caught up (passive passes until little is left), so that it has little to copy and sync
/// under the write lock; then it starts the log over.
#[test]
fn the_checkpoint_at_the_bound_follows_the_checkpointers_catch_up() {
    let (p, writer, bound) = bound_at("catchup.db", 256 * 1024, true);
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    assert!(write_until_due(&writer, &bound), "the checkpoint came due");
    // it may also come due after a wait when the checkpointer has no core yet; it catches up
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !bound.caught_up() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(bound.caught_up(), "the checkpointer caught up");
    assert!(bound.passes() >= 1 && bound.syncs() >= 1, "{} passes, {} syncs", bound.passes(), bound.syncs());
    bound.checkpoint(&writer, Duration::from_secs(1));
    assert_eq!(bound.restarts(), 1);
    assert!(!bound.is_due());

    // the next commit starts the log over in a file kept past the limit (up to twice it): the
    // log's length is its frames, so that file makes nothing due until the log is long again
    std::thread::sleep(Duration::from_millis(60));
    writer.execute("INSERT INTO t (body) VALUES ('after')", []).unwrap();
    bound.after_commit();
    let mut wal = p.as_os_str().to_owned();
    wal.push("-wal");
    let file = std::fs::metadata(&wal).unwrap().len();
    assert!(file > 256 * 1024 && file <= bound.kept_bytes(), "the file is kept: {file} bytes");
    // (past the catch-up's longest wait, so a checkpoint marked due would be due by now)
    std::thread::sleep(Duration::from_millis(100));
    assert!(!bound.is_due(), "a short log in a long file is not due");
    assert!(write_until_due(&writer, &bound), "a long log is due again");
    drop(writer);
    bound.stop_checkpointer();
}

/// Once the checkpointer has caught up, it runs no pass until the checkpoint at the bound has
/// run (a pass then would hold SQLite's checkpoint lock while that checkpoint waits for it);
/// the checkpoint lets it run again.
#[test]
fn a_caught_up_checkpointer_waits_for_the_checkpoint_at_the_bound() {
    let (p, writer, bound) = bound_at("held.db", 256 * 1024, true);
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    assert!(write_until_due(&writer, &bound));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !bound.caught_up() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(bound.caught_up(), "the checkpointer caught up");
    assert!(bound.is_due(), "caught up, the checkpoint is due");
    let held_at = bound.passes();
    // 2,500 new log pages: two wake-ups of the checkpointer, each a pass if it were let run
    let body = "z".repeat(3000);
    for _ in 0..2500 {
        writer.execute("INSERT INTO t (body) VALUES (?1)", [&body]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(bound.passes(), held_at, "no pass ran before the checkpoint");
    bound.checkpoint(&writer, Duration::from_secs(1));
    assert_eq!(bound.restarts(), 1);
    for _ in 0..2500 {
        writer.execute("INSERT INTO t (body) VALUES (?1)", [&body]).unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while bound.passes() == held_at && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(bound.passes() > held_at, "passes run again after the checkpoint");
    drop(writer);
    bound.stop_checkpointer();
}

/// Without a checkpointer (none started, or it could not be) nothing is waited for: the
/// checkpoint is due as soon as the log is past the limit.
#[test]
fn without_a_checkpointer_the_checkpoint_is_due_at_the_limit() {
    let (p, writer, bound) = bound_at("alone.db", 256 * 1024, false);
    let _cleanup = Cleanup(p.parent().unwrap().to_owned());
    assert!(write_until_due(&writer, &bound));
    assert!(bound.caught_up(), "nothing to wait for");
    assert_eq!(bound.passes(), 0);
}
