//! The CPU priority of the store's own background threads: the event loop's thread comes first.
//!
//! Every call's answer is settled on the JS thread, and every late tick of the event loop is a
//! caller kept waiting. A burst of writes keeps three threads of ours busy at once: the JS
//! thread (handing the burst on, settling the answers), the group writer (`group`) and the
//! checkpointer (`wal`). On two cores the JS thread waited for a core 57–99 ms in 15 bursts of
//! 1,000 upserts (`bench/bursts.mjs`, issue 17), and the event loop's p99 delay was 2.3–4.1 ms.
//! So the two background threads step back when the JS thread wants a core:
//! - **The checkpointer runs under `SCHED_IDLE`**: only on a core nothing else wants. It is
//!   maintenance, and the log's bound does not depend on it: past the limit, the writer
//!   checkpoints itself (`wal`). A lower nice value alone (19) did not help: a waking JS thread
//!   does not take the core from a nice thread at once; it does from an idle-class one.
//! - **The group writer runs at nice [`WRITER_NICE`]**: it still has a core whenever one is free
//!   (the JS thread is mostly waiting), but a JS thread that wakes gets the core first. Its work
//!   is what the JS thread asked for; the answers are settled on the JS thread anyway.
//!
//! Measured side by side on one seeded store (15 bursts, 7 runs of each): the p99 delay from
//! 2.3–4.1 ms to 0.9–1.8 ms at 10,000 and 50,000 sessions, the JS thread's wait for a core from
//! 57–99 ms to 12–40 ms, the bursts' median time unchanged. The log's bound and its peak did
//! not change, nor did the writes' latency grow, under a reader that is always there
//! (`bench/lib/wal.mjs`).
//!
//! What a thread may not do, it does not: lowering one's own priority needs no privilege, and
//! is never undone (raising it back would). So only threads that are the store's alone are
//! lowered, never the caller's thread, a runtime's worker or the reader (its reads are waited
//! for by a caller). A system that refuses (a sandbox's seccomp filter) leaves the thread as it
//! was: the store works the same, only the event loop may be later under load. Linux only.
//! With several processes in one session or cgroup, a nice value ranks the writer behind their
//! threads too; across sessions (autogroup) and cgroups the kernel shares the CPU by group first.

/// The group writer's nice value (0 is the default, 19 the lowest priority).
pub const WRITER_NICE: i32 = 10;

/// A background thread of the store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Background {
    /// The checkpointer: `SCHED_IDLE`.
    Checkpointer,
    /// The thread keeping the file in the OS's cache (`warm`): `SCHED_IDLE`.
    Warmer,
    /// The group-commit writer: nice [`WRITER_NICE`].
    Writer,
}

/// Lowers the calling thread's CPU priority as `role` says; whether the system agreed. Call it
/// first thing on a thread of the store's own.
pub fn lower_this_thread(role: Background) -> bool {
    imp::lower(role)
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Background, WRITER_NICE};

    pub fn lower(role: Background) -> bool {
        match role {
            Background::Checkpointer | Background::Warmer => {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: pid 0 is the calling thread; `param` outlives the call.
                unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
            }
            Background::Writer => {
                // SAFETY: plain system calls on the calling thread's own id (on Linux a
                // PRIO_PROCESS priority set on a thread id applies to that thread alone).
                unsafe {
                    let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                    libc::setpriority(libc::PRIO_PROCESS, tid, WRITER_NICE) == 0
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub fn lower(_: super::Background) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// (scheduling policy, nice) of the calling thread, from the kernel's own account.
    fn policy_and_nice() -> (i64, i64) {
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // the fields after the command's closing parenthesis start at field 3 (state)
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        (fields[41 - 3].parse().unwrap(), fields[19 - 3].parse().unwrap())
    }

    #[test]
    fn the_checkpointer_runs_in_the_idle_class_and_the_writer_at_a_higher_nice() {
        let idle = std::thread::spawn(|| (lower_this_thread(Background::Checkpointer), policy_and_nice()));
        let (agreed, (policy, _)) = idle.join().unwrap();
        assert!(agreed);
        assert_eq!(policy, libc::SCHED_IDLE as i64);
        let writer = std::thread::spawn(|| (lower_this_thread(Background::Writer), policy_and_nice()));
        let (agreed, (policy, nice)) = writer.join().unwrap();
        assert!(agreed);
        assert_eq!((policy, nice), (libc::SCHED_OTHER as i64, WRITER_NICE as i64));
        // the thread that asked for neither is as it was
        assert_eq!(policy_and_nice().0, libc::SCHED_OTHER as i64);
    }
}
