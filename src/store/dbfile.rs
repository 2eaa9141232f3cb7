//! The database file as one connection's own SQLite file object, for the store's background
//! threads that work on the file itself (syncing it, reading it into the OS's cache).
//!
//! They must not open a descriptor of their own: POSIX record locks belong to the process and
//! the file, and closing any descriptor of the file drops every one of them, including the locks
//! another connection of the process holds on it (a second store on the same path, say). SQLite
//! keeps its own descriptors open while its locks stand for that reason; a descriptor of ours
//! would bypass it. So these threads open a connection and work through its file object
//! (`SQLITE_FCNTL_FILE_POINTER`): its size, reads, sync, and on the unix VFS its descriptor for
//! advice to the OS, which is never closed but by SQLite. This module only reaches the file; it
//! never decides what is done with it.

use std::ffi::{c_int, CStr};
use std::path::Path;

use rusqlite::{ffi, Connection};

/// The database file of one connection, while the connection is borrowed.
pub struct DbFile<'c> {
    conn: &'c Connection,
    file: *mut ffi::sqlite3_file,
    methods: &'c ffi::sqlite3_io_methods,
}

/// What the file control `op` writes about `conn`'s main database: a pointer to one of SQLite's
/// objects, `None` when it fails or answers null.
fn main_pointer<T>(conn: &Connection, op: c_int) -> Option<*mut T> {
    let mut out: *mut T = std::ptr::null_mut();
    // SAFETY: `conn` is open; the pointer file controls write one pointer (or null) into `out`.
    let rc =
        unsafe { ffi::sqlite3_file_control(conn.handle(), c"main".as_ptr(), op, (&mut out as *mut *mut T).cast()) };
    (rc == ffi::SQLITE_OK && !out.is_null()).then_some(out)
}

impl<'c> DbFile<'c> {
    /// The file of `conn`'s main database; `None` when SQLite has none to give (an in-memory
    /// database) or its file has no methods.
    pub fn of(conn: &'c Connection) -> Option<DbFile<'c>> {
        // the file object lives as long as the connection, which outlives `'c`
        let file = main_pointer::<ffi::sqlite3_file>(conn, ffi::SQLITE_FCNTL_FILE_POINTER)?;
        // SAFETY: `file` is SQLite's open file object; its methods table is static in SQLite.
        let methods = unsafe { (*file).pMethods.as_ref()? };
        Some(DbFile { conn, file, methods })
    }

    /// The file's length in bytes.
    pub fn size(&self) -> Option<u64> {
        let size = self.methods.xFileSize?;
        let mut bytes: ffi::sqlite3_int64 = 0;
        // SAFETY: an open file object and its own method, given a place to write the size.
        let rc = unsafe { size(self.file, &mut bytes) };
        (rc == ffi::SQLITE_OK).then_some(bytes as u64)
    }

    /// Reads `buf.len()` bytes from `at`; whether they were all there (a read past the end
    /// fills the rest with zeros and answers false).
    pub fn read_at(&self, buf: &mut [u8], at: u64) -> bool {
        let (Some(read), Ok(len)) = (self.methods.xRead, c_int::try_from(buf.len())) else { return false };
        // SAFETY: an open file object and its own method, reading into a buffer of `len` bytes.
        let rc = unsafe { read(self.file, buf.as_mut_ptr().cast(), len, at as ffi::sqlite3_int64) };
        rc == ffi::SQLITE_OK
    }

    /// Syncs the file to the disk (as SQLite syncs it at a commit); whether it did.
    pub fn sync(&self) -> bool {
        let Some(sync) = self.methods.xSync else { return false };
        // SAFETY: an open file object and its own method.
        unsafe { sync(self.file, ffi::SQLITE_SYNC_NORMAL) == ffi::SQLITE_OK }
    }

    /// The descriptor SQLite reads `path` through, for advice to the OS (never to close): only
    /// on SQLite's unix VFS, whose file object begins with its methods, its VFS, its lock
    /// record and then the descriptor (as in every SQLite since 3.7), and only when that
    /// descriptor is `path`'s file (same device and inode), so a layout of another build
    /// answers `None` rather than a wrong descriptor.
    #[cfg(unix)]
    pub fn descriptor(&self, path: &Path) -> Option<c_int> {
        use std::os::unix::fs::MetadataExt;
        const HEAD: usize = 3 * std::mem::size_of::<*const ()>();
        let vfs = main_pointer::<ffi::sqlite3_vfs>(self.conn, ffi::SQLITE_FCNTL_VFS_POINTER)?;
        // SAFETY: a VFS SQLite hands back is registered for the process's life.
        let vfs = unsafe { &*vfs };
        // SAFETY: a registered VFS's name is a C string that lives as long as it.
        let name = unsafe { CStr::from_ptr(vfs.zName) };
        if !name.to_bytes().starts_with(b"unix") || (vfs.szOsFile as usize) < HEAD + std::mem::size_of::<c_int>() {
            return None;
        }
        // SAFETY: the unix VFS's file objects are `szOsFile` bytes, checked to reach past `HEAD`.
        let fd = unsafe { std::ptr::read_unaligned(self.file.cast::<u8>().add(HEAD).cast::<c_int>()) };
        let ours = std::fs::metadata(path).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fstat` writes a `stat` for a valid descriptor, or fails for any other value.
        let theirs = (unsafe { libc::fstat(fd, st.as_mut_ptr()) } == 0).then(|| unsafe { st.assume_init() })?;
        (theirs.st_dev as u64 == ours.dev() && theirs.st_ino as u64 == ours.ino()).then_some(fd)
    }

    /// No descriptor to give off the unix VFS.
    #[cfg(not(unix))]
    pub fn descriptor(&self, _: &Path) -> Option<c_int> {
        None
    }
}
