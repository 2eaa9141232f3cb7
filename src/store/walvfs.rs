//! A VFS that writes the frames of each commit to the write-ahead log in one system call.
//!
//! SQLite writes every log frame with two `pwrite`s (its 24-byte header, then the page), and a
//! frame of 4,120 bytes straddles two pages of the OS page cache, so a commit of six frames is
//! twelve system calls and some eighteen page-cache lookups. Profiled (issue 17), writing the
//! frames was 38% of the JS thread's time in an upsert, most of it in the kernel's per-call and
//! per-page work rather than in copying bytes. This VFS wraps the platform's default one and
//! changes only how a log file (`-wal`) is written: contiguous writes are gathered in memory and
//! handed to the real file in one write when the commit's last frame is complete (the frame whose
//! header carries the database size; SQLite writes nothing else of that commit before it
//! publishes the frames in the shared index, and checks every write's result), or before
//! anything else touches the file (a read, a sync, a truncation, its size, a lock, a file
//! control, closing it), or past [`MAX_GATHERED`] bytes. The bytes on disk, their order and every
//! sync are SQLite's own; a failed write is the failure of the commit that made it. Database
//! files and every other file are the default VFS's own objects, untouched.
//!
//! It owns the registration of the VFS (once per process, not the default) and never decides
//! what is written.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name connections open their files with.
pub const NAME: &CStr = c"session-tools-wal";

/// Most bytes gathered before they are written anyway (a large import's transaction).
const MAX_GATHERED: usize = 4 << 20;
/// Most bytes handed to the default VFS in one write (the unix VFS takes less than 128 KiB at a
/// time: it masks a write's length with 0x1ffff).
const MAX_WRITE: usize = 0x1_ffff;
/// A log frame's header (the page follows it).
const FRAME_HEADER: usize = 24;
/// The log file's own header, before the first frame.
const LOG_HEADER: i64 = 32;

/// A log file of this VFS: ours first (SQLite sees `base`), the default VFS's file after it.
#[repr(C)]
struct LogFile {
    base: ffi::sqlite3_file,
    real: *mut ffi::sqlite3_file,
    /// bytes written by SQLite and not yet handed to `real`, from `start`
    gathered: Vec<u8>,
    start: i64,
    /// the last write was the header of a frame that ends a commit
    commit_header: bool,
}

struct Registered {
    real: *mut ffi::sqlite3_vfs,
    /// where the default VFS's file starts inside ours
    real_offset: usize,
}

// SAFETY: the pointers are to SQLite's process-wide VFS objects, which live until exit.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Option<Registered>> = OnceLock::new();

#[cfg(test)]
thread_local! {
    /// Writes handed to the real log files by this thread.
    static FLUSHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Registers the VFS (once); whether it is there. Without it (no default VFS, a registration
/// error) connections open with the default VFS as before.
pub fn register() -> bool {
    REGISTERED
        .get_or_init(|| {
            // SAFETY: plain SQLite calls; the VFS object is leaked, as SQLite keeps a pointer to it.
            unsafe {
                let real = ffi::sqlite3_vfs_find(std::ptr::null());
                if real.is_null() {
                    return None;
                }
                let align = std::mem::align_of::<u64>();
                let real_offset = std::mem::size_of::<LogFile>().div_ceil(align) * align;
                let mut vfs: ffi::sqlite3_vfs = *real;
                vfs.szOsFile = c_int::try_from(real_offset).ok()?.checked_add((*real).szOsFile)?;
                vfs.zName = NAME.as_ptr();
                vfs.pNext = std::ptr::null_mut();
                vfs.pAppData = real.cast();
                vfs.xOpen = Some(open);
                let vfs = Box::leak(Box::new(vfs));
                (ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK).then_some(Registered { real, real_offset })
            }
        })
        .is_some()
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let Some(Some(reg)) = REGISTERED.get() else { return ffi::SQLITE_ERROR };
    // SAFETY: `file` has room for `szOsFile` bytes (ours + the default VFS's), per SQLite's
    // contract; the default VFS's functions are called with its own VFS object.
    unsafe {
        let real_open = match (*reg.real).xOpen {
            Some(f) => f,
            None => return ffi::SQLITE_ERROR,
        };
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            // not a log: the default VFS's own file object, at the start of the space
            return real_open(reg.real, name, file, flags, out_flags);
        }
        let real = file.cast::<u8>().add(reg.real_offset).cast::<ffi::sqlite3_file>();
        (*file).pMethods = std::ptr::null();
        let rc = real_open(reg.real, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        file.cast::<LogFile>().write(LogFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            real,
            gathered: Vec::new(),
            start: 0,
            commit_header: false,
        });
        ffi::SQLITE_OK
    }
}

/// The log file behind SQLite's pointer.
unsafe fn log<'a>(file: *mut ffi::sqlite3_file) -> &'a mut LogFile {
    // SAFETY: SQLite calls these methods only with files `open` made as `LogFile`s.
    unsafe { &mut *file.cast::<LogFile>() }
}

unsafe fn methods<'a>(f: &LogFile) -> &'a ffi::sqlite3_io_methods {
    // SAFETY: the default VFS's file stays open (its methods set) until `close`.
    unsafe { &*(*f.real).pMethods }
}

/// Hands the gathered bytes to the real file in one write.
unsafe fn flush(f: &mut LogFile) -> c_int {
    if f.gathered.is_empty() {
        return ffi::SQLITE_OK;
    }
    f.commit_header = false;
    #[cfg(test)]
    FLUSHES.with(|c| c.set(c.get() + 1));
    let mut rc = ffi::SQLITE_OK;
    let mut at = f.start;
    for piece in f.gathered.chunks(MAX_WRITE) {
        // SAFETY: a write of our own buffer through the default VFS's method.
        rc = unsafe {
            match methods(f).xWrite {
                Some(w) => w(f.real, piece.as_ptr().cast(), piece.len() as c_int, at),
                None => ffi::SQLITE_IOERR_WRITE,
            }
        };
        if rc != ffi::SQLITE_OK {
            break;
        }
        at += piece.len() as i64;
    }
    f.gathered.clear();
    rc
}

unsafe extern "C" fn write(file: *mut ffi::sqlite3_file, data: *const c_void, amt: c_int, off: i64) -> c_int {
    // SAFETY: SQLite hands `amt` readable bytes at `data`.
    unsafe {
        let f = log(file);
        let Ok(n) = usize::try_from(amt) else { return ffi::SQLITE_IOERR_WRITE };
        if !f.gathered.is_empty() && off != f.start + f.gathered.len() as i64 {
            let rc = flush(f);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        if f.gathered.is_empty() {
            f.start = off;
        }
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), n);
        f.gathered.extend_from_slice(bytes);
        let ends_commit = f.commit_header && n != FRAME_HEADER;
        // a frame header at its place: bytes 4..8 hold the database size on a commit's last frame
        f.commit_header = n == FRAME_HEADER && off >= LOG_HEADER && bytes[4..8] != [0, 0, 0, 0];
        if ends_commit || f.gathered.len() >= MAX_GATHERED {
            return flush(f);
        }
        ffi::SQLITE_OK
    }
}

/// Flushes, then runs `call` on the real file (an error of the flush wins).
unsafe fn then(file: *mut ffi::sqlite3_file, call: impl FnOnce(&LogFile) -> c_int) -> c_int {
    // SAFETY: see `log`.
    unsafe {
        let f = log(file);
        let rc = flush(f);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        call(f)
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: see `log`; the buffer is dropped once, here.
    unsafe {
        let f = log(file);
        let flushed = flush(f);
        let rc = match methods(f).xClose {
            Some(c) => c(f.real),
            None => ffi::SQLITE_OK,
        };
        std::ptr::drop_in_place(&mut f.gathered);
        if flushed != ffi::SQLITE_OK {
            flushed
        } else {
            rc
        }
    }
}

unsafe extern "C" fn read(file: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: i64) -> c_int {
    unsafe { then(file, |f| methods(f).xRead.map_or(ffi::SQLITE_IOERR_READ, |m| m(f.real, buf, amt, off))) }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    unsafe { then(file, |f| methods(f).xTruncate.map_or(ffi::SQLITE_IOERR_TRUNCATE, |m| m(f.real, size))) }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xSync.map_or(ffi::SQLITE_IOERR_FSYNC, |m| m(f.real, flags))) }
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    unsafe { then(file, |f| methods(f).xFileSize.map_or(ffi::SQLITE_IOERR_FSTAT, |m| m(f.real, size))) }
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xLock.map_or(ffi::SQLITE_OK, |m| m(f.real, level))) }
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xUnlock.map_or(ffi::SQLITE_OK, |m| m(f.real, level))) }
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xCheckReservedLock.map_or(ffi::SQLITE_OK, |m| m(f.real, out))) }
}

unsafe extern "C" fn file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    unsafe { then(file, |f| methods(f).xFileControl.map_or(ffi::SQLITE_NOTFOUND, |m| m(f.real, op, arg))) }
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let f = log(file);
        methods(f).xSectorSize.map_or(4096, |m| m(f.real))
    }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let f = log(file);
        methods(f).xDeviceCharacteristics.map_or(0, |m| m(f.real))
    }
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        then(file, |f| methods(f).xShmMap.map_or(ffi::SQLITE_IOERR_SHMMAP, |m| m(f.real, region, size, extend, out)))
    }
}

unsafe extern "C" fn shm_lock(file: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xShmLock.map_or(ffi::SQLITE_IOERR_SHMLOCK, |m| m(f.real, offset, n, flags))) }
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    unsafe {
        let f = log(file);
        if let Some(m) = methods(f).xShmBarrier {
            m(f.real);
        }
    }
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    unsafe { then(file, |f| methods(f).xShmUnmap.map_or(ffi::SQLITE_OK, |m| m(f.real, delete))) }
}

unsafe extern "C" fn fetch(file: *mut ffi::sqlite3_file, off: i64, amt: c_int, out: *mut *mut c_void) -> c_int {
    unsafe {
        then(file, |f| match methods(f).xFetch {
            Some(m) => m(f.real, off, amt, out),
            None => {
                *out = std::ptr::null_mut();
                ffi::SQLITE_OK
            }
        })
    }
}

unsafe extern "C" fn unfetch(file: *mut ffi::sqlite3_file, off: i64, p: *mut c_void) -> c_int {
    unsafe { then(file, |f| methods(f).xUnfetch.map_or(ffi::SQLITE_OK, |m| m(f.real, off, p))) }
}

#[cfg(test)]
#[path = "walvfs_tests.rs"]
mod tests;
