//! How a connection waits for a lock another connection holds.
//!
//! SQLite's own busy timeout sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms
//! between tries, so a wait for a lock held 9 ms lasts 18 ms and one held 40 ms lasts 78 ms.
//! Our writers wait on locks held for milliseconds (a checkpoint that copies the log back and
//! syncs the file, another process's transaction), so each wait here tries again after 50, 100,
//! 200 and 500 µs and then every millisecond, up to its bound: at most about a millisecond later
//! than the lock came free (perf, issue 17: 8 writers back to back lost 41% of their time in
//! rounds over 2 ms, most of it asleep past the lock's release).

use std::ffi::{c_int, c_void};
use std::time::Duration;

use rusqlite::Connection;

/// The first pauses between tries (µs); every later one is [`STEADY_US`].
const FIRST_PAUSES_US: [u64; 4] = [50, 100, 200, 500];
const STEADY_US: u64 = 1000;

/// How long the waits before try `n` (from 0) add up to, in µs.
fn waited_before(n: u64) -> u64 {
    let first = FIRST_PAUSES_US.len() as u64;
    let head: u64 = FIRST_PAUSES_US.iter().take(n.min(first) as usize).sum();
    head + n.saturating_sub(first) * STEADY_US
}

/// The pause before the next try when try `n` (from 0) found the lock taken.
fn pause_after(n: u64) -> u64 {
    FIRST_PAUSES_US.get(n as usize).copied().unwrap_or(STEADY_US)
}

/// SQLite's busy callback: `bound` carries the wait's bound in µs (a number, not a pointer);
/// nonzero to try again.
extern "C" fn on_busy(bound: *mut c_void, tries: c_int) -> c_int {
    let bound = bound as usize as u64;
    let n = u64::try_from(tries).unwrap_or(0);
    let pause = pause_after(n);
    if waited_before(n) + pause > bound {
        return 0;
    }
    std::thread::sleep(Duration::from_micros(pause));
    1
}

/// Makes `conn` wait up to `bound` for a lock another connection holds (zero: not at all),
/// trying again as described in the module header. Replaces any earlier busy handler or
/// timeout of the connection.
pub fn wait_up_to(conn: &Connection, bound: Duration) -> rusqlite::Result<()> {
    #[cfg(test)]
    record(conn, bound);
    if bound.is_zero() {
        return conn.busy_timeout(Duration::ZERO);
    }
    let micros = usize::try_from(bound.as_micros()).unwrap_or(usize::MAX);
    // SAFETY: the handle is this open connection's; the callback reads its argument as a number
    // and never dereferences it, so nothing it points to has to outlive anything.
    let rc = unsafe { rusqlite::ffi::sqlite3_busy_handler(conn.handle(), Some(on_busy), micros as *mut c_void) };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rc), None))
    }
}

/// The bound each connection was last given (tests: SQLite has no getter for a busy handler).
#[cfg(test)]
static BOUNDS: std::sync::Mutex<Vec<(usize, Duration)>> = std::sync::Mutex::new(Vec::new());

#[cfg(test)]
fn record(conn: &Connection, bound: Duration) {
    // SAFETY: only the handle's address is kept, as a key
    let key = unsafe { conn.handle() } as usize;
    let mut all = BOUNDS.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|(k, _)| *k != key);
    all.push((key, bound));
}

/// How long `conn` waits for a lock, as [`wait_up_to`] last set it (tests).
#[cfg(test)]
pub fn bound_of(conn: &Connection) -> Option<Duration> {
    // SAFETY: as in `record`
    let key = unsafe { conn.handle() } as usize;
    BOUNDS.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == key).map(|(_, b)| *b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pauses_add_up_and_stop_at_the_bound() {
        assert_eq!(waited_before(0), 0);
        assert_eq!(waited_before(4), 850);
        assert_eq!(waited_before(14), 10_850);
        assert_eq!(pause_after(2), 200);
        assert_eq!(pause_after(99), STEADY_US);
        // a 5 ms bound: the tries whose pause would end past it are refused
        let bound = 5_000u64;
        let last = (0..100u64).take_while(|&n| waited_before(n) + pause_after(n) <= bound).last();
        assert_eq!(last, Some(7), "50+100+200+500+1000*4 = 4850 µs, the next would pass 5 ms");
    }

    #[test]
    fn a_writer_waits_for_the_lock_and_gets_it_once_it_is_free() {
        let dir = crate::scratch::path("busy");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("busy.db");
        let holder = Connection::open(&file).unwrap();
        holder
            .execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);")
            .unwrap();
        let waiter = Connection::open(&file).unwrap();
        wait_up_to(&waiter, Duration::from_millis(2)).unwrap();
        let refused = waiter.execute_batch("BEGIN IMMEDIATE");
        assert_eq!(refused.unwrap_err().sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy));
        wait_up_to(&waiter, Duration::from_secs(10)).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            holder.execute_batch("COMMIT").unwrap();
        });
        let started = std::time::Instant::now();
        waiter.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT").unwrap();
        release.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(25), "it waited for the holder");
        let n: i64 = waiter.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
        drop(waiter);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
