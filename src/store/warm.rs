//! Keeping a file store's pages in the OS's cache, so that work run on the JS thread does not
//! wait for the disk.
//!
//! Short calls run inline on the JS thread when the store is free at once (`napi::lanes`). That
//! is only safe while the pages they read are in memory: SQLite keeps a small cache of its own
//! per connection, and every other page is a `pread` that the OS answers from its page cache,
//! or from the disk. On a cold file an 8-writer round at 50,000 sessions read from the disk for
//! 5-10 ms a round, every round, on the JS thread (perf, issue 17: the bench's `writers8` row at
//! 50,000 held the event loop 22-35 ms in each of four full runs; its file had been left alone
//! for two minutes while the other stores were timed). The page cache does not keep an unused
//! file for ever: on our machines it gave back about 100 KB a second of one.
//!
//! So a thread of the store's own (`session-tools-keep`, in the idle class like the
//! checkpointer: `priority`) reads the database file through once when the store opens, and
//! until that first pass has ended the store says its file is cold ([`Warmth::is_warm`]) and
//! inline mode treats it as a taken lock (`store::inline`): the work goes to the store's
//! threads, where a read from the disk waits on a thread nobody else waits for. After that it asks the OS every [`KEEP_EVERY`] to read back whatever
//! it let go (`posix_fadvise(WILLNEED)`, [`ADVISE_BYTES`] at a time: the kernel caps one
//! request; 1.3 ms of system time for a file of 54 MB that is all there). A file larger than
//! [`WARM_MAX_BYTES`] is left to the OS (which pages of it matter is its working set, not the
//! whole file); it is never called cold. The log (`-wal`) is not read: its pages were written
//! a moment ago. Not Linux: nothing is read, and the file is never called cold. The thread
//! reads and advises through a read-only connection of its own, which never reads a page as
//! SQLite, and never through a descriptor it opened (`dbfile` says why).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::dbfile::DbFile;

/// How often the OS is asked to read back the pages it let go.
pub const KEEP_EVERY: Duration = Duration::from_secs(1);
/// The largest database file kept in the cache.
pub const WARM_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// One `WILLNEED` request (the kernel reads at most a few MiB for one).
const ADVISE_BYTES: u64 = 2 * 1024 * 1024;
/// One read of the first pass.
const READ_BYTES: usize = 1024 * 1024;

/// The warm thread of one file store, while it is open.
pub struct Warmth {
    warm: Arc<AtomicBool>,
    /// passes that asked the OS to read back what it let go (tests)
    #[cfg_attr(not(test), allow(dead_code))]
    keeps: Arc<AtomicU64>,
    thread: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

impl Warmth {
    /// Starts keeping `db` in the cache. A file that cannot be opened or measured is left to
    /// the OS (never called cold): the store works the same, only inline work may wait for the
    /// disk.
    pub fn start(db: &Path) -> Warmth {
        let warm = Arc::new(AtomicBool::new(true));
        let keeps = Arc::new(AtomicU64::new(0));
        let idle = |warm, keeps| Warmth { warm, keeps, thread: Mutex::new(None) };
        // the file is read through a connection of its own (`dbfile`: no descriptor of ours)
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let Some(conn) = imp::SUPPORTED.then(|| Connection::open_with_flags(db, flags).ok()).flatten() else {
            return idle(warm, keeps);
        };
        let kept = DbFile::of(&conn).and_then(|f| f.size()).is_some_and(|len| len <= WARM_MAX_BYTES);
        if !kept {
            return idle(warm, keeps);
        }
        warm.store(false, Ordering::Release);
        let (stop, stopped) = mpsc::channel::<()>();
        let (flag, count, path) = (warm.clone(), keeps.clone(), db.to_owned());
        let spawned = std::thread::Builder::new().name("session-tools-keep".into()).spawn(move || {
            super::priority::lower_this_thread(super::priority::Background::Warmer);
            if let Some(file) = DbFile::of(&conn) {
                // a store closed meanwhile ends the pass at the next read
                let closed = || matches!(stopped.try_recv(), Err(TryRecvError::Disconnected));
                read_through(&file, closed);
                flag.store(true, Ordering::Release);
                let fd = file.descriptor(&path);
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(KEEP_EVERY) {
                    if let Some(fd) = fd {
                        keep(&file, fd);
                    }
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
            flag.store(true, Ordering::Release);
        });
        match spawned {
            Ok(handle) => Warmth { warm, keeps, thread: Mutex::new(Some((stop, handle))) },
            Err(_) => {
                warm.store(true, Ordering::Release);
                idle(warm, keeps)
            }
        }
    }

    /// Whether work that reads the file may run on the JS thread: false only until the first
    /// pass has read a file the store keeps.
    pub fn is_warm(&self) -> bool {
        self.warm.load(Ordering::Acquire)
    }

    /// Ends the thread (the first pass at its next read of 1 MiB). Idempotent.
    pub fn stop(&self) {
        let taken = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((stop, handle)) = taken {
            drop(stop);
            let _ = handle.join();
        }
    }

    /// Calls the file cold (or warm again) whatever the thread found (tests).
    #[cfg(test)]
    pub fn set_warm(&self, warm: bool) {
        self.warm.store(warm, Ordering::Release);
    }

    /// How many times the OS was asked to read back what it let go (tests).
    #[cfg(test)]
    pub fn keeps(&self) -> u64 {
        self.keeps.load(Ordering::Relaxed)
    }
}

impl Drop for Warmth {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads the whole file once (its pages then come from the cache); a failed read, or `stop`
/// answering true, ends the pass.
fn read_through(file: &DbFile, stop: impl Fn() -> bool) {
    let len = file.size().unwrap_or(0);
    let mut buf = vec![0u8; READ_BYTES];
    let mut at = 0u64;
    while at < len && !stop() {
        let n = (len - at).min(READ_BYTES as u64) as usize;
        if !file.read_at(&mut buf[..n], at) {
            break;
        }
        at += n as u64;
    }
}

/// Asks the OS to read back, in the background, the pages of `file` (SQLite's descriptor `fd`
/// of it) it let go.
fn keep(file: &DbFile, fd: std::ffi::c_int) {
    let len = file.size().unwrap_or(0);
    let mut at = 0;
    while at < len.min(WARM_MAX_BYTES) {
        imp::will_need(fd, at, ADVISE_BYTES);
        at += ADVISE_BYTES;
    }
}

#[cfg(target_os = "linux")]
mod imp {
    pub const SUPPORTED: bool = true;

    pub fn will_need(fd: std::ffi::c_int, at: u64, len: u64) {
        // SAFETY: SQLite's open descriptor of the file (`DbFile::descriptor`); the call only
        // advises the kernel and never closes it.
        unsafe {
            libc::posix_fadvise(fd, at as libc::off_t, len as libc::off_t, libc::POSIX_FADV_WILLNEED);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub const SUPPORTED: bool = false;

    pub fn will_need(_: std::ffi::c_int, _: u64, _: u64) {}
}

#[cfg(all(test, target_os = "linux"))]
#[path = "warm_tests.rs"]
mod tests;
