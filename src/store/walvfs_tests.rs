//! The log VFS: one write per commit, and every committed frame on the file when the commit
//! returns (another connection on the default VFS, or a copy of the files, sees it).

use rusqlite::{Connection, OpenFlags};

use super::{register, FLUSHES, NAME};

/// A folder of its own, removed when the test ends.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new() -> Dir {
        let dir = crate::scratch::path("walvfs");
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open_ours(p: &std::path::Path) -> Connection {
    assert!(register());
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let c = Connection::open_with_flags_and_vfs(p, flags, NAME).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL, u INTEGER NOT NULL);
         CREATE INDEX t_u ON t (u); CREATE INDEX t_v ON t (v);",
    )
    .unwrap();
    c
}

#[test]
fn each_commit_is_on_the_file_when_it_returns_for_a_connection_on_the_default_vfs() {
    let dir = Dir::new();
    let p = dir.file("a.db");
    let w = open_ours(&p);
    let r = Connection::open_with_flags(&p, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    for i in 0..300i64 {
        // a commit of several frames: the row and two index pages, a new page now and then
        w.execute(
            "INSERT INTO t (k, v, u) VALUES (?1, ?2, ?3)",
            rusqlite::params![i, "v".repeat(300 + (i as usize % 50)), -i],
        )
        .unwrap();
        if i % 3 == 0 {
            w.execute("UPDATE t SET u = ?1, v = ?2 WHERE k = ?3", rusqlite::params![i * 7, format!("w{i}"), i / 2])
                .unwrap();
        }
        let n: i64 = r.query_row("SELECT count(*) FROM t", [], |x| x.get(0)).unwrap();
        assert_eq!(n, i + 1);
        let u: i64 = r.query_row("SELECT u FROM t WHERE k = ?1", [i / 2], |x| x.get(0)).unwrap();
        let expect = if i % 3 == 0 {
            i * 7
        } else {
            w.query_row("SELECT u FROM t WHERE k = ?1", [i / 2], |x| x.get(0)).unwrap()
        };
        assert_eq!(u, expect);
    }
    let ok: String = r.query_row("PRAGMA integrity_check", [], |x| x.get(0)).unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_copy_of_the_files_taken_between_commits_holds_every_commit() {
    let dir = Dir::new();
    let p = dir.file("b.db");
    let w = open_ours(&p);
    let before = flushes();
    for i in 0..200i64 {
        w.execute("INSERT INTO t (k, v, u) VALUES (?1, ?2, ?3)", rusqlite::params![i, format!("{i:>500}"), i % 17])
            .unwrap();
    }
    // one write per commit (the first may write the log's header in one more)
    let writes = flushes() - before;
    assert!((200..=201).contains(&writes), "{writes} writes for 200 commits");
    // a crash now: the files as they are, the writer never closed or checkpointed
    let copy = dir.file("copy.db");
    std::fs::copy(&p, &copy).unwrap();
    let mut wal = p.as_os_str().to_owned();
    wal.push("-wal");
    let mut copy_wal = copy.as_os_str().to_owned();
    copy_wal.push("-wal");
    std::fs::copy(&wal, &copy_wal).unwrap();
    let c = Connection::open(&copy).unwrap();
    let n: i64 = c.query_row("SELECT count(*) FROM t", [], |x| x.get(0)).unwrap();
    assert_eq!(n, 200);
    let v: String = c.query_row("SELECT v FROM t WHERE k = 199", [], |x| x.get(0)).unwrap();
    assert_eq!(v.trim_start(), "199");
    let ok: String = c.query_row("PRAGMA integrity_check", [], |x| x.get(0)).unwrap();
    assert_eq!(ok, "ok");
    drop(w);
}

#[test]
fn the_frames_of_one_commit_go_in_one_write() {
    let dir = Dir::new();
    let p = dir.file("c.db");
    let w = open_ours(&p);
    w.execute_batch("BEGIN").unwrap();
    for i in 0..40i64 {
        w.execute("INSERT INTO t (k, v, u) VALUES (?1, ?2, ?3)", rusqlite::params![i, "x".repeat(900), i]).unwrap();
    }
    let before = frames(&p);
    let at = flushes();
    w.execute_batch("COMMIT").unwrap();
    let frames = frames(&p) - before;
    // 40 rows of 900 bytes: a dozen table pages and the two indexes, all in one commit
    assert!(frames >= 12, "{frames} frames");
    let writes = flushes() - at;
    assert_eq!(writes, 1, "{writes} writes for {frames} frames");
}

/// Log frames on file (the log's size in frames).
pub(super) fn frames(p: &std::path::Path) -> i64 {
    let mut wal = p.as_os_str().to_owned();
    wal.push("-wal");
    let len = std::fs::metadata(&wal).map(|m| m.len() as i64).unwrap_or(0);
    (len - 32).max(0) / (24 + 4096)
}

fn flushes() -> u64 {
    FLUSHES.with(|c| c.get())
}
