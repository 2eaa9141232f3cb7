//! Keeps the addon's shared library loaded until the process ends.
//!
//! Node unloads (`dlclose`) an addon when the last worker thread that loaded it exits, while the
//! main thread never loaded it. Our library cannot be unloaded safely: its allocator (mimalloc)
//! and the runtimes' thread-local storage register per-thread destructors with the C library,
//! and a thread that exits after the unload calls into code that is no longer mapped. A second
//! load from later workers would also start a second allocator over the first one's leftovers.
//! Both ended in a segmentation fault (one worker using the addon, then two more at once: every
//! run). So the first environment that loads the module marks the library `RTLD_NODELETE`:
//! every later load shares it, and no unload happens.
//!
//! It owns that one call; it never touches an environment or the store.

use std::sync::OnceLock;

/// Marks this library as never to be unloaded (the first call does it); whether it is marked.
pub fn pin_library() -> bool {
    static PINNED: OnceLock<bool> = OnceLock::new();
    *PINNED.get_or_init(mark_nodelete)
}

#[cfg(unix)]
fn mark_nodelete() -> bool {
    // SAFETY: `dladdr` fills `info` for an address inside a loaded object (this function's
    // own); `dlopen` with RTLD_NOLOAD only looks the already-loaded object up by the name the
    // loader gave it and sets its flag, and the reference it takes is kept on purpose.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let here = mark_nodelete as *const libc::c_void;
        if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
            return false;
        }
        let handle = libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE);
        !handle.is_null()
    }
}

#[cfg(not(unix))]
fn mark_nodelete() -> bool {
    false
}
