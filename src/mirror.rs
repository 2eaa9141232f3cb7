//! The JSONL mirror (DECISIONS.md #8): every appended message is also written to
//! `<mirrorDir>/<sessionId>.jsonl` in the gateway's transcript format (REFERENCE.md §2.6), so
//! tools that read transcript files keep working.
//!
//! The store stays the source of truth: the mirror is written after the rows, a failure to write
//! it never fails the append, and it never writes outside its folder. A session id that is not
//! a plain file name (a path separator, `..`, a leading dot) has no mirror file.
//!
//! The files appended to last stay open ([`Kept`]): an append looks at the path (never following
//! a link) and writes through the handle it kept when the path still names that same file, so
//! a file moved aside, replaced or deleted meanwhile is opened anew, by path.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

use crate::store::transcripts::{seq_id, Appended, EntryBody, StoredEntry};

/// Where an open store mirrors its transcripts, as the caller asked (API.md §1 `mirrorDir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorDir {
    /// not given: `transcripts/` beside the store file; none for `:memory:` or PostgreSQL
    Default,
    /// `null`: no mirror
    Off,
    At(PathBuf),
}

impl MirrorDir {
    /// The folder for a store whose database file is `store_file` (`None`: a store without
    /// one, `:memory:` or PostgreSQL, has no default folder), if any.
    pub fn resolve(self, store_file: Option<&Path>) -> Option<PathBuf> {
        match self {
            MirrorDir::Default => store_file
                .map(|f| f.parent().map(|d| d.join("transcripts")).unwrap_or_else(|| PathBuf::from("transcripts"))),
            MirrorDir::Off => None,
            MirrorDir::At(dir) => Some(dir),
        }
    }
}

/// Longest session id that gets a mirror file.
const MAX_FILE_ID: usize = 200;

/// Whether a session id can name a file inside the mirror folder.
pub fn is_safe_file_id(session_id: &str) -> bool {
    !session_id.is_empty()
        && session_id.len() <= MAX_FILE_ID
        && !session_id.starts_with('.')
        && !session_id.chars().any(|c| c == '/' || c == '\\' || c == ':' || c.is_control())
}

/// The mirror file of a session, when its id can name one.
pub fn file_for(dir: &Path, session_id: &str) -> Option<PathBuf> {
    is_safe_file_id(session_id).then(|| dir.join(format!("{session_id}.jsonl")))
}

/// ISO-8601 UTC time of an epoch-ms instant, as JavaScript's `toISOString`.
pub fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The version-3 header line of a transcript (REFERENCE.md §2.6), without its newline.
pub fn header_line(session_id: &str, now: i64) -> String {
    let cwd = std::env::current_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    json!({"type": "session", "version": 3, "id": session_id, "timestamp": iso(now), "cwd": cwd}).to_string()
}

/// A plain message entry line (`message`: its JSON text, as stored, spliced in as is, not parsed
/// again), without its newline.
fn message_line(id: &str, parent: Option<&str>, message: &str, now: i64) -> String {
    let id = Value::from(id);
    let parent = parent.map_or(Value::Null, Value::from);
    let ts = iso(now);
    let message = if message.trim().is_empty() { "null" } else { message };
    format!(r#"{{"type":"message","id":{id},"parentId":{parent},"timestamp":"{ts}","message":{message}}}"#)
}

/// `{…}` with `"message":<message>` added as its last field (the text spliced in as is).
fn with_message(obj: &Map<String, Value>, message: &str) -> String {
    let head = Value::Object(obj.clone()).to_string();
    let body = &head[..head.len() - 1];
    let sep = if obj.is_empty() { "" } else { "," };
    format!(r#"{body}{sep}"message":{message}}}"#)
}

/// The `timestamp` (ms) of a stored message, read without building the whole message.
fn message_time(text: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Stamp {
        timestamp: Option<Value>,
    }
    let s: Stamp = serde_json::from_str(text).ok()?;
    s.timestamp?.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)
}

/// An entry object with its id and parent link set when it had none (a version-3 transcript
/// needs them).
fn with_ids(text: &str, e: &StoredEntry) -> Option<Map<String, Value>> {
    let mut obj: Map<String, Value> = serde_json::from_str(text).ok()?;
    if !obj.get("id").is_some_and(Value::is_string) {
        obj.insert("id".into(), Value::from(e.id.clone()));
        obj.insert("parentId".into(), e.parent_id.clone().map_or(Value::Null, Value::from));
    }
    Some(obj)
}

/// The line of a stored transcript entry, without its newline: the entry as it was read (an
/// entry with a message gets its message back as its last field), or a plain message entry for
/// a message stored without one (timestamped by the message's own `timestamp`, else `now`).
pub fn entry_line(e: &StoredEntry, now: i64) -> String {
    match &e.body {
        EntryBody::Message { message, envelope: Some(env), .. } => match with_ids(env, e) {
            Some(obj) => with_message(&obj, message),
            None => message_line(&e.id, e.parent_id.as_deref(), message, now),
        },
        EntryBody::Message { message, envelope: None, .. } => {
            let ts = message_time(message).unwrap_or(now);
            message_line(&e.id, e.parent_id.as_deref(), message, ts)
        }
        EntryBody::Other { entry, .. } => {
            let obj: Option<Map<String, Value>> = serde_json::from_str(entry).ok();
            match obj {
                Some(o) if !o.get("id").is_some_and(Value::is_string) => {
                    with_ids(entry, e).map_or_else(|| entry.clone(), |o| Value::Object(o).to_string())
                }
                _ => entry.clone(),
            }
        }
    }
}

/// The mirror files appended to last, open for appending (at most [`KEPT_FILES`]).
#[derive(Default)]
pub struct Kept {
    /// the latest last
    files: Mutex<Vec<KeptFile>>,
}

struct KeptFile {
    path: PathBuf,
    /// device and inode of the file when it was opened
    id: (u64, u64),
    handle: File,
}

/// Open mirror files one store keeps (a gateway appends to a few sessions at a time).
pub const KEPT_FILES: usize = 8;

/// Which file `m` describes (device, inode); `None` where that cannot be told (nothing is kept).
fn identity(m: &fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

impl Kept {
    /// Writes `out` through the handle kept for `file`, if it is the file the path names now
    /// (`now`: its device and inode); whether it did.
    fn write_through(&self, file: &Path, now: (u64, u64), out: &[u8]) -> std::io::Result<bool> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let Some(i) = files.iter().position(|f| f.path == file) else { return Ok(false) };
        if files[i].id != now {
            files.remove(i);
            return Ok(false);
        }
        let kept = files.remove(i);
        let written = (&kept.handle).write_all(out);
        if written.is_ok() {
            files.push(kept);
        }
        written.map(|()| true)
    }

    fn keep(&self, file: PathBuf, handle: File) {
        let Some(id) = handle.metadata().ok().as_ref().and_then(identity) else { return };
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.retain(|f| f.path != file);
        if files.len() >= KEPT_FILES {
            files.remove(0);
        }
        files.push(KeptFile { path: file, id, handle });
    }

    /// Closes every kept file (the store is closing).
    pub fn close(&self) {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// How many files are open (tests).
    #[cfg(test)]
    pub fn open_files(&self) -> usize {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Writes lines to the session's mirror file: appended (the version-3 header first when the
/// file is new) or, with `replace`, as the whole file after a new header. Errors are returned
/// for the caller to report; they never undo anything.
pub fn write_lines(dir: &Path, session_id: &str, lines: &[String], now: i64, replace: bool) -> std::io::Result<()> {
    write_kept(dir, session_id, lines, now, replace, None)
}

/// As [`write_lines`], an append going through `kept` when it holds the file open.
fn write_kept(
    dir: &Path,
    session_id: &str,
    lines: &[String],
    now: i64,
    replace: bool,
    kept: Option<&Kept>,
) -> std::io::Result<()> {
    let Some(file) = file_for(dir, session_id) else { return Ok(()) };
    // Only a regular file of the folder is written to: a link planted there is never followed
    // (it could lead anywhere), nor is anything else that is not a file. The folder is made only
    // when the file is not there (issue 17: `create_dir_all` on every append was a `mkdir` and a
    // `stat`, 5% of an append).
    let existing = match fs::symlink_metadata(&file) {
        Ok(m) if m.file_type().is_file() => Some(identity(&m)),
        Ok(_) => return Err(std::io::Error::other(format!("{} is not a regular file; not written", file.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir)?;
            None
        }
        Err(e) => return Err(e),
    };
    let mut out = String::new();
    if existing.is_none() || replace {
        out.push_str(&header_line(session_id, now));
        out.push('\n');
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    if let (Some(kept), Some(Some(id)), false) = (kept, existing, replace) {
        if kept.write_through(&file, id, out.as_bytes())? {
            return Ok(());
        }
    }
    let mut opts = OpenOptions::new();
    opts.create(true);
    if replace {
        opts.write(true).truncate(true);
    } else {
        opts.append(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut handle = opts.open(&file)?;
    handle.write_all(out.as_bytes())?;
    if let (Some(kept), false) = (kept, replace) {
        kept.keep(file, handle);
    }
    Ok(())
}

/// Appends plain messages (their JSON texts, where the append of the store put them) to the
/// session's mirror file, chained by `parentId` as the store chains them.
pub fn append(
    dir: &Path,
    kept: &Kept,
    session_id: &str,
    at: &Appended,
    messages: &[String],
    now: i64,
) -> std::io::Result<()> {
    let mut parent = at.first_parent.clone();
    let mut lines = Vec::with_capacity(messages.len());
    for (i, text) in messages.iter().enumerate() {
        let id = at.ids.get(i).cloned().unwrap_or_else(|| seq_id(at.first_seq + i as i64));
        lines.push(message_line(&id, parent.as_deref(), text, now));
        parent = Some(id);
    }
    write_kept(dir, session_id, &lines, now, false, Some(kept))
}

/// Moves a deleted session's mirror file aside as `<file>.deleted.<time>` (the gateway's rule).
pub fn archive(dir: &Path, session_id: &str, now: i64) -> std::io::Result<Option<PathBuf>> {
    let Some(file) = file_for(dir, session_id) else { return Ok(None) };
    if !file.exists() {
        return Ok(None);
    }
    let mut to = file.clone().into_os_string();
    to.push(format!(".deleted.{}", iso(now).replace(':', "-")));
    let to = PathBuf::from(to);
    fs::rename(&file, &to)?;
    Ok(Some(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> PathBuf {
        crate::scratch::path("mirror")
    }

    fn at(first_seq: i64) -> Appended {
        Appended { first_seq, first_parent: None, ids: vec![seq_id(first_seq)] }
    }

    #[test]
    fn iso_matches_javascript() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_706_103_360_123), "2024-01-24T13:36:00.123Z");
    }

    #[test]
    fn the_default_folder_is_beside_the_database_file_and_a_store_without_one_has_none() {
        let file = crate::store::Store::open(&tmp().join("db/sessions.db").to_string_lossy()).unwrap();
        let beside = file.file().unwrap().parent().unwrap().join("transcripts");
        assert_eq!(MirrorDir::Default.resolve(file.file()), Some(beside));
        assert_eq!(MirrorDir::Default.resolve(Some(Path::new("sessions.db"))), Some(PathBuf::from("transcripts")));
        // `:memory:` and PostgreSQL stores have no file: no mirror unless one is named
        for s in crate::store::pg::testdb::stores() {
            assert_eq!(s.file(), None, "{:?}", s.dialect());
            assert_eq!(MirrorDir::Default.resolve(s.file()), None);
            assert_eq!(MirrorDir::At("/m".into()).resolve(s.file()), Some(PathBuf::from("/m")));
        }
        assert_eq!(MirrorDir::Off.resolve(file.file()), None);
    }

    #[test]
    fn ids_that_are_not_plain_file_names_get_no_file() {
        for bad in ["", "../../etc/passwd", "a/b", "a\\b", ".hidden", "..", "c:x", "a\nb", &"x".repeat(201)] {
            assert!(!is_safe_file_id(bad), "{bad:?}");
            assert_eq!(file_for(Path::new("/m"), bad), None);
        }
        assert!(is_safe_file_id("0f9a1c2e-1111-4222-8333-444455556666"));
        assert!(is_safe_file_id("sess-group"));
    }

    #[test]
    fn the_first_append_writes_a_header_and_entries_chain_by_parent_id() {
        let dir = tmp();
        append(&dir, &Kept::default(), "s1", &at(1), &[r#"{"role":"user","content":"a"}"#.into()], 0).unwrap();
        append(
            &dir,
            &Kept::default(),
            "s1",
            &Appended { first_seq: 2, first_parent: Some(seq_id(1)), ids: vec![seq_id(2)] },
            &[r#"{"role":"assistant","content":[{"type":"text","text":"b"}]}"#.into()],
            0,
        )
        .unwrap();
        let text = fs::read_to_string(dir.join("s1.jsonl")).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["type"], "session");
        assert_eq!(lines[0]["version"], 3);
        assert_eq!(lines[0]["id"], "s1");
        assert_eq!(lines[1]["parentId"], Value::Null);
        assert_eq!(lines[2]["parentId"], lines[1]["id"]);
        assert_eq!(lines[2]["message"]["content"][0]["text"], "b");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(dir.join("s1.jsonl")).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn an_escaping_session_id_writes_nothing_anywhere() {
        let dir = tmp();
        append(&dir, &Kept::default(), "../escape", &at(1), &["{}".into()], 0).unwrap();
        assert!(!dir.exists());
        assert!(!dir.parent().unwrap().join("escape.jsonl").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_in_the_folder_is_not_followed() {
        let dir = tmp();
        fs::create_dir_all(&dir).unwrap();
        let victim = crate::scratch::path("mirror-victim");
        fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("s3.jsonl")).unwrap();
        assert!(append(&dir, &Kept::default(), "s3", &at(1), &["{}".into()], 0).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        fs::create_dir(dir.join("s4.jsonl")).unwrap();
        assert!(append(&dir, &Kept::default(), "s4", &at(1), &["{}".into()], 0).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_kept_file_is_written_while_the_path_names_it_and_opened_anew_once_moved_replaced_or_linked() {
        let dir = tmp();
        let kept = Kept::default();
        let lines = |name: &str| fs::read_to_string(dir.join(name)).map(|t| t.lines().count()).unwrap_or(0);
        append(&dir, &kept, "k", &at(1), &["{}".into()], 0).unwrap();
        append(&dir, &kept, "k", &at(2), &["{}".into()], 0).unwrap();
        assert_eq!((lines("k.jsonl"), kept.open_files()), (3, 1), "a header and two entries, one handle");
        // moved aside: a new file, with its own header; the old one untouched
        let aside = archive(&dir, "k", 0).unwrap().unwrap();
        append(&dir, &kept, "k", &at(3), &["{}".into()], 0).unwrap();
        assert_eq!(lines("k.jsonl"), 2);
        assert_eq!(fs::read_to_string(&aside).unwrap().lines().count(), 3);
        // replaced by another file: written there
        fs::remove_file(dir.join("k.jsonl")).unwrap();
        fs::write(dir.join("k.jsonl"), "{\"type\":\"session\"}\n").unwrap();
        append(&dir, &kept, "k", &at(4), &["{}".into()], 0).unwrap();
        assert_eq!(lines("k.jsonl"), 2);
        // a link planted in its place: not followed, though a handle of the old file is kept
        let victim = crate::scratch::path("mirror-victim");
        fs::write(&victim, "untouched").unwrap();
        fs::remove_file(dir.join("k.jsonl")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("k.jsonl")).unwrap();
        assert!(append(&dir, &kept, "k", &at(5), &["{}".into()], 0).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        // a bounded number of files stay open
        for i in 0..KEPT_FILES + 4 {
            append(&dir, &kept, &format!("m{i}"), &at(1), &["{}".into()], 0).unwrap();
        }
        assert_eq!(kept.open_files(), KEPT_FILES);
        assert_eq!(lines("m0.jsonl"), 2);
    }

    #[test]
    fn a_deleted_sessions_file_is_moved_aside() {
        let dir = tmp();
        append(&dir, &Kept::default(), "s2", &at(1), &["{}".into()], 0).unwrap();
        let to = archive(&dir, "s2", 0).unwrap().unwrap();
        assert!(!dir.join("s2.jsonl").exists());
        assert!(to.to_string_lossy().ends_with("s2.jsonl.deleted.1970-01-01T00-00-00.000Z"));
        assert_eq!(archive(&dir, "s2", 0).unwrap(), None);
    }
}
