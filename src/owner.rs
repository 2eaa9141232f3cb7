//! Who is doing a piece of work: every run and every outbox claim records the process instance
//! (`<pid>:<uuid>`) that took it, so that a later open can tell work whose process died (to be
//! ended or retried) from work another live process is still doing on the same file.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

fn live() -> &'static Mutex<HashSet<String>> {
    static LIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
}

/// A new owner id for this process, live until [`retire`]d.
pub fn new_owner() -> String {
    let id = format!("{}:{}", std::process::id(), uuid::Uuid::new_v4());
    live().lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone());
    id
}

/// Marks an owner of this process as gone (its store was closed).
pub fn retire(owner: &str) {
    live().lock().unwrap_or_else(|p| p.into_inner()).remove(owner);
}

/// Whether the work of `owner` may still be going on: an owner of this process while not
/// retired, or an owner of another process that is still running (Linux: `/proc/<pid>`).
/// An owner that cannot be read is taken as gone.
pub fn is_alive(owner: &str) -> bool {
    let Some(pid) = owner.split(':').next().and_then(|p| p.parse::<u32>().ok()) else { return false };
    if pid == std::process::id() {
        return live().lock().unwrap_or_else(|p| p.into_inner()).contains(owner);
    }
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_of_this_process_live_until_retired_and_dead_processes_are_gone() {
        let me = new_owner();
        assert!(is_alive(&me));
        retire(&me);
        assert!(!is_alive(&me));
        assert!(!is_alive(&format!("{}:never-registered", std::process::id())));
        assert!(!is_alive("garbage"));
        // pid 1 exists on Linux; a pid above the kernel maximum does not
        assert!(is_alive("1:other-process"));
        assert!(!is_alive("4294967295:x"));
    }
}
