//! After an inline run that turned out slow, no inline runs for a while.
//!
//! Work runs inline on the JS thread when the store can take it at once (`store::inline`), and
//! it is short because its pages are in memory (`warm`) and its size is bounded (`Tool`). Neither
//! holds everywhere: a file over `warm::WARM_MAX_BYTES` is not kept in the OS's cache, so a read
//! of a page the OS let go waits for the disk; an entry or a page of messages can be large. Such
//! a run holds the event loop for as long as it takes, and the next one likely would too (the
//! cause is the store's state, not the call). So a store times its inline runs: one that took
//! longer than [`SLOW`] (the event loop's budget, issue 17 target 4) makes every inline call of
//! the next [`COOL`] answer would-block, as a taken lock does, and the work goes to the store's
//! threads; after that, inline runs are tried again. A run is timed on the wall clock, so one
//! the OS took the core from counts too: it costs a second of the threads' path (tens of µs a
//! call), never a late tick.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// An inline run longer than this sends the next ones to the threads.
pub const SLOW: Duration = Duration::from_millis(2);
/// For this long.
pub const COOL: Duration = Duration::from_secs(1);

/// The inline clock of one store.
pub struct Cooldown {
    born: Instant,
    /// until when (ns since `born`) inline runs are refused; 0 when never
    until: AtomicU64,
    /// inline runs that took longer than [`SLOW`]
    #[cfg_attr(not(test), allow(dead_code))]
    slow_runs: AtomicU64,
}

impl Default for Cooldown {
    fn default() -> Self {
        Cooldown { born: Instant::now(), until: AtomicU64::new(0), slow_runs: AtomicU64::new(0) }
    }
}

impl Cooldown {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether inline runs are refused now.
    pub fn is_cooling(&self) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        until != 0 && self.now_ns() < until
    }

    /// Runs `f` (an inline run), and starts a cool-down when it took longer than [`SLOW`].
    pub fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        if start.elapsed() > SLOW {
            self.slow_runs.fetch_add(1, Ordering::Relaxed);
            let cool = u64::try_from(COOL.as_nanos()).unwrap_or(u64::MAX);
            self.until.store(self.now_ns().saturating_add(cool), Ordering::Relaxed);
        }
        out
    }

    /// How many inline runs took longer than [`SLOW`] (tests).
    #[cfg(test)]
    pub fn slow_runs(&self) -> u64 {
        self.slow_runs.load(Ordering::Relaxed)
    }
}
