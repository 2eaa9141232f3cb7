//! Tests of `warm`: they read the page cache's own account of a file (`mincore`), so they need a
//! temp folder on a disk (a `tmpfs` one never lets a page go).

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::*;

/// A file of `bytes` in a folder of its own, written through to the disk.
fn file_of(bytes: usize) -> (PathBuf, PathBuf) {
    let dir = crate::scratch::path("warm");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sessions.db");
    let mut f = File::create(&path).unwrap();
    let block: Vec<u8> = (0..65_536u32).map(|i| (i * 7 % 251) as u8).collect();
    for _ in 0..bytes / block.len() {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    (dir, path)
}

/// The share of the file's pages in the page cache.
fn resident(path: &std::path::Path) -> f64 {
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let pages = len.div_ceil(page);
    let mut vec = vec![0u8; pages];
    unsafe {
        let map = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(map, libc::MAP_FAILED);
        assert_eq!(libc::mincore(map, len, vec.as_mut_ptr()), 0);
        libc::munmap(map, len);
    }
    vec.iter().filter(|b| *b & 1 == 1).count() as f64 / pages as f64
}

/// Lets the page cache drop the file (its pages are clean: written through).
fn drop_cached(path: &std::path::Path) {
    let f = File::open(path).unwrap();
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

fn until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_cold_file_is_called_cold_until_read_through_and_read_back_after_the_os_drops_it() {
    let (dir, path) = file_of(16 * 1024 * 1024);
    drop_cached(&path);
    assert!(resident(&path) < 0.1, "the temp folder must be on a disk: {:.2} of the file stayed", resident(&path));
    let warmth = Warmth::start(&path);
    until("the first pass", Duration::from_secs(20), || warmth.is_warm());
    assert_eq!(resident(&path), 1.0);
    // the OS lets the file go: the next keep asks for it back
    drop_cached(&path);
    assert!(resident(&path) < 0.1);
    let keeps = warmth.keeps();
    until("a keep", Duration::from_secs(5), || warmth.keeps() > keeps);
    until("the pages back", Duration::from_secs(10), || resident(&path) == 1.0);
    assert!(warmth.is_warm(), "a dropped page never makes the file cold again");
    warmth.stop();
    warmth.stop();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_file_over_the_bound_or_missing_is_left_to_the_os() {
    let (dir, path) = file_of(0);
    File::options().write(true).open(&path).unwrap().set_len(WARM_MAX_BYTES + 1).unwrap();
    let big = Warmth::start(&path);
    assert!(big.is_warm());
    assert!(big.thread.lock().unwrap().is_none(), "no thread for a file over the bound");
    let missing = Warmth::start(&dir.join("nothing.db"));
    assert!(missing.is_warm());
    assert!(missing.thread.lock().unwrap().is_none());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Whether some record lock of this process stands on the file `probe` is open on (an open
/// file description's lock conflicts with the process's own record locks; `probe` stays open,
/// as closing it would drop them).
fn locked(probe: &File) -> bool {
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as i16;
    lock.l_whence = libc::SEEK_SET as i16;
    assert_eq!(unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) }, 0);
    lock.l_type != libc::F_UNLCK as i16
}

#[test]
fn ending_the_thread_leaves_the_locks_another_connection_of_the_process_holds() {
    let (dir, path) = file_of(0);
    std::fs::remove_file(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
    let probe = File::open(&path).unwrap();
    // a write in progress: the connection holds SQLite's exclusive lock on the database file
    conn.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2);").unwrap();
    assert!(locked(&probe));
    let warmth = Warmth::start(&path);
    until("the first pass", Duration::from_secs(20), || warmth.is_warm());
    let keeps = warmth.keeps();
    until("a keep", Duration::from_secs(5), || warmth.keeps() > keeps);
    drop(warmth);
    assert!(locked(&probe), "ending the warm thread dropped the write's lock");
    conn.execute_batch("COMMIT").unwrap();
    assert!(!locked(&probe));
    let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 2);
    drop(probe);
    std::fs::remove_dir_all(dir).unwrap();
}
