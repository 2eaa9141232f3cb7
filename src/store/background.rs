//! The store's background threads (the group-commit writer, the checkpointer) give way to
//! every other thread of the process when the CPU is short: each lowers its own scheduling
//! priority (a nice value of [`NICE`]) when it starts.
//!
//! On a machine with more runnable threads than cores (2 cores, a burst's writer and a
//! checkpoint running, anything else), a JS thread woken to settle answers otherwise waits for
//! a slice behind them: the event loop's delay is then the scheduler's, not a call's (issue 17
//! target 4). With a lower priority they only take what the others leave; on an idle machine
//! nothing changes. The JS thread never waits on a lock these threads hold, so a lower
//! priority cannot hold it back.
//!
//! It owns nothing but that; it never runs store work.

/// Linux's per-thread nice value given to the store's background threads.
const NICE: i32 = 10;

/// Lowers the calling thread's priority (Linux; elsewhere, and if refused, nothing changes).
pub(super) fn give_way() {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn gettid() -> i32;
            fn setpriority(which: i32, who: u32, prio: i32) -> i32;
        }
        const PRIO_PROCESS: i32 = 0;
        // SAFETY: plain system calls on the calling thread's own id; a failure changes nothing.
        unsafe {
            let tid = gettid();
            if tid > 0 {
                setpriority(PRIO_PROCESS, tid as u32, NICE);
            }
        }
    }
}
