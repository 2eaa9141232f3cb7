//! After an inline run that turned out slow, no inline runs for a while.
//!
//! Work runs inline on the JS thread when the store can take it at once (`store::inline`), and
//! it is short because its pages are in memory (`warm`) and its size is bounded (`Tool`). Neither
//! holds everywhere: a file over `warm::WARM_MAX_BYTES` is not kept in the OS's cache, so a read
//! of a page the OS let go waits for the disk; an entry or a page of messages can be large. Such
//! a run holds the event loop for as long as it takes, and the next one likely would too (the
//! cause is the store's state, not the call). So a store times its inline runs: one that took
//! longer than [`SLOW`] (the event loop's budget, issue 17 target 4) makes every inline call of
//! a while answer would-block, as a taken lock does, and the work goes to the store's threads;
//! after that, inline runs are tried again. A run is timed on the wall clock, so one the OS
//! took the core from counts too.
//!
//! The while grows with the evidence. Most slow runs come alone: under 8-writer rounds back to
//! back at 10,000 sessions, 1-3 in 12,000 rounds took 2-8 ms, the thread blocked once in the
//! kernel or preempted (its `getrusage`: 0.7 ms of CPU in a run of 3.6 ms), the runs on either
//! side of it as quick as ever. A fixed second of the threads' path after each one sent 2,300-
//! 6,800 of those rounds there (their median 290-420 µs against 210-230 inline). So the first
//! slow run after a quiet spell cools for [`COOL_FIRST`]; each slow run that follows within
//! [`QUIET`] of the one before doubles it, up to [`COOL_MAX`]. A store that stays slow (a cold
//! file) cools a second from its sixth slow run on (50, 100, 200, 400 and 800 ms before it),
//! and so pays one late tick a second, as before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// An inline run longer than this sends the next ones to the threads.
pub const SLOW: Duration = Duration::from_millis(2);
/// The cool-down after a slow run that came alone.
pub const COOL_FIRST: Duration = Duration::from_millis(50);
/// The longest cool-down.
pub const COOL_MAX: Duration = Duration::from_secs(1);
/// A slow run this long after the last one came alone: the cool-down starts over.
pub const QUIET: Duration = Duration::from_secs(5);

/// The inline clock of one store.
pub struct Cooldown {
    born: Instant,
    /// until when (ns since `born`) inline runs are refused; 0 when never
    until: AtomicU64,
    /// when (ns since `born`) the last slow run ended, and the cool-down it started
    last_slow: AtomicU64,
    last_cool: AtomicU64,
    /// the cool-down after a slow run that came alone
    first: AtomicU64,
    /// inline runs that took longer than [`SLOW`]
    #[cfg_attr(not(test), allow(dead_code))]
    slow_runs: AtomicU64,
}

impl Default for Cooldown {
    fn default() -> Self {
        Cooldown {
            born: Instant::now(),
            until: AtomicU64::new(0),
            last_slow: AtomicU64::new(0),
            last_cool: AtomicU64::new(0),
            first: AtomicU64::new(ns(COOL_FIRST)),
            slow_runs: AtomicU64::new(0),
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Cooldown {
    fn now_ns(&self) -> u64 {
        ns(self.born.elapsed()).max(1)
    }

    /// Whether inline runs are refused now.
    pub fn is_cooling(&self) -> bool {
        self.cooling_at(self.now_ns())
    }

    fn cooling_at(&self, now: u64) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        until != 0 && now < until
    }

    /// Runs `f` (an inline run), and starts a cool-down when it took longer than [`SLOW`].
    pub fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let took = start.elapsed();
        self.ran(self.now_ns(), took);
        out
    }

    /// A run that ended at `now` took `took`: a slow one starts a cool-down (see the header).
    fn ran(&self, now: u64, took: Duration) {
        if took <= SLOW {
            return;
        }
        self.slow_runs.fetch_add(1, Ordering::Relaxed);
        let last = self.last_slow.swap(now, Ordering::Relaxed);
        let first = self.first.load(Ordering::Relaxed);
        let cool = if last != 0 && now.saturating_sub(last) <= ns(QUIET) {
            self.last_cool.load(Ordering::Relaxed).saturating_mul(2).clamp(first, ns(COOL_MAX).max(first))
        } else {
            first
        };
        self.last_cool.store(cool, Ordering::Relaxed);
        self.until.store(now.saturating_add(cool), Ordering::Relaxed);
    }

    /// How many inline runs took longer than [`SLOW`] (tests).
    #[cfg(test)]
    pub fn slow_runs(&self) -> u64 {
        self.slow_runs.load(Ordering::Relaxed)
    }

    /// Sets the cool-down after a slow run that came alone (tests that must see a cool-down
    /// outlast a slow machine's pauses).
    #[cfg(test)]
    pub fn set_first(&self, first: Duration) {
        self.first.store(ns(first), Ordering::Relaxed);
    }

    /// How long the cool-down of the moment still lasts (tests).
    #[cfg(test)]
    pub fn left(&self) -> Duration {
        Duration::from_nanos(self.until.load(Ordering::Relaxed).saturating_sub(self.now_ns()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SLOW_RUN: Duration = Duration::from_millis(3);

    #[test]
    fn a_quick_run_starts_nothing() {
        let c = Cooldown::default();
        c.ran(10 * MS, SLOW);
        assert!(!c.cooling_at(10 * MS + 1));
        assert_eq!(c.slow_runs(), 0);
    }

    #[test]
    fn a_slow_run_alone_cools_briefly_and_slow_runs_in_a_row_double_it_up_to_the_most() {
        let c = Cooldown::default();
        let first = ns(COOL_FIRST);
        let mut now = 100 * MS;
        c.ran(now, SLOW_RUN);
        assert!(c.cooling_at(now + first - 1));
        assert!(!c.cooling_at(now + first));
        // each slow run right after the cool-down doubles the next one, up to COOL_MAX
        let mut cool = first;
        for _ in 0..8 {
            now += cool;
            c.ran(now, SLOW_RUN);
            cool = (cool * 2).min(ns(COOL_MAX));
            assert!(c.cooling_at(now + cool - 1), "a cool-down of {cool} ns");
            assert!(!c.cooling_at(now + cool));
        }
        assert_eq!(cool, ns(COOL_MAX));
        // a slow run after a quiet spell starts over
        now += ns(QUIET) + 1;
        c.ran(now, SLOW_RUN);
        assert!(c.cooling_at(now + first - 1));
        assert!(!c.cooling_at(now + first));
        assert_eq!(c.slow_runs(), 10);
    }

    #[test]
    fn a_first_cool_down_set_over_the_most_is_the_most_too() {
        let c = Cooldown::default();
        c.set_first(Duration::from_secs(2));
        c.ran(MS, SLOW_RUN);
        assert!(c.cooling_at(MS + 2_000 * MS - 1));
        c.ran(2_001 * MS, SLOW_RUN);
        assert!(c.cooling_at(2_001 * MS + 2_000 * MS - 1));
        assert!(!c.cooling_at(2_001 * MS + 2_000 * MS));
    }
}
