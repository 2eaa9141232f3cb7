//! Scratch paths for tests: a fresh path under the OS's temp folder, removed when the test
//! process exits (the harness ends with `exit`, after every test, passed or failed, which runs the
//! `atexit` handler registered here), so `cargo test` leaves nothing behind. Before, every run
//! left its folders in the temp folder (4,620 of them, about 1 GB, after a day of runs here).

use std::path::PathBuf;
use std::sync::{Mutex, Once};

static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// A path no one else uses, named after `tag`; nothing is made there (the caller makes the folder
/// or the file it needs), and whatever is there when the process exits is removed.
pub fn path(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("st-{tag}-{}-{}", std::process::id(), uuid::Uuid::new_v4()));
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function with no arguments, run once by `exit`.
        unsafe { libc::atexit(remove_all) };
    });
    PATHS.lock().unwrap_or_else(|e| e.into_inner()).push(p.clone());
    p
}

extern "C" fn remove_all() {
    // a test that panicked while registering a path may have poisoned the lock: its paths stand
    let Ok(paths) = PATHS.try_lock() else { return };
    for p in paths.iter() {
        if std::fs::remove_dir_all(p).is_err() {
            let _ = std::fs::remove_file(p);
        }
    }
}
