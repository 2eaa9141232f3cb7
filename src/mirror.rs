//! The JSONL mirror (DECISIONS.md #8): every appended message is also written to
//! `<mirrorDir>/<sessionId>.jsonl` in the gateway's transcript format (REFERENCE.md §2.6), so
//! tools that read transcript files keep working.
//!
//! SQLite stays the source of truth: the mirror is written after the rows, a failure to write
//! it never fails the append, and it never writes outside its folder. A session id that is not
//! a plain file name (a path separator, `..`, a leading dot) has no mirror file.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

/// Where an open store mirrors its transcripts, as the caller asked (API.md §1 `mirrorDir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorDir {
    /// not given: `transcripts/` beside the store file; none for `:memory:`
    Default,
    /// `null`: no mirror
    Off,
    At(PathBuf),
}

impl MirrorDir {
    /// The folder for a store opened at `path`, if any.
    pub fn resolve(self, path: &str) -> Option<PathBuf> {
        match self {
            MirrorDir::Default => (path != ":memory:").then(|| {
                Path::new(path).parent().map(|d| d.join("transcripts")).unwrap_or_else(|| PathBuf::from("transcripts"))
            }),
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

/// The 8-hex-digit entry id of the message with sequence number `seq`.
fn entry_id(seq: i64) -> String {
    format!("{:08x}", seq & 0xffff_ffff)
}

/// The version-3 header line of a transcript (REFERENCE.md §2.6), without its newline.
pub fn header_line(session_id: &str, now: i64) -> String {
    let cwd = std::env::current_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    json!({"type": "session", "version": 3, "id": session_id, "timestamp": iso(now), "cwd": cwd}).to_string()
}

/// The entry line of the message with sequence number `seq` (`message`: its JSON text, as
/// stored), chained to the one before by `parentId`, without its newline. The text is spliced in
/// as is, not parsed again.
pub fn message_line(seq: i64, message: &str, now: i64) -> String {
    let parent = if seq > 1 { format!("\"{}\"", entry_id(seq - 1)) } else { "null".to_owned() };
    let id = entry_id(seq);
    let ts = iso(now);
    let message = if message.trim().is_empty() { "null" } else { message };
    format!(r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{message}}}"#)
}

/// Appends messages (their JSON texts, with the sequence number of the first) to the session's
/// mirror file, writing the version-3 header first when the file is new. Errors are returned
/// for the caller to report; they never undo anything.
pub fn append(dir: &Path, session_id: &str, first_seq: i64, messages: &[String], now: i64) -> std::io::Result<()> {
    let Some(file) = file_for(dir, session_id) else { return Ok(()) };
    fs::create_dir_all(dir)?;
    // Only a regular file of the folder is appended to: a link planted there is never followed
    // (it could lead anywhere), nor is anything else that is not a file.
    let existing = match fs::symlink_metadata(&file) {
        Ok(m) if m.file_type().is_file() => true,
        Ok(_) => return Err(std::io::Error::other(format!("{} is not a regular file; not written", file.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    let mut out = String::new();
    if !existing {
        out.push_str(&header_line(session_id, now));
        out.push('\n');
    }
    for (i, text) in messages.iter().enumerate() {
        out.push_str(&message_line(first_seq + i as i64, text, now));
        out.push('\n');
    }
    let mut opts = OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(&file)?.write_all(out.as_bytes())
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
    use serde_json::Value;

    fn tmp() -> PathBuf {
        std::env::temp_dir().join(format!("st-mirror-{}", uuid::Uuid::new_v4()))
    }

    #[test]
    fn iso_matches_javascript() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_706_103_360_123), "2024-01-24T13:36:00.123Z");
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
        append(&dir, "s1", 1, &[r#"{"role":"user","content":"a"}"#.into()], 0).unwrap();
        append(&dir, "s1", 2, &[r#"{"role":"assistant","content":[{"type":"text","text":"b"}]}"#.into()], 0).unwrap();
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
        append(&dir, "../escape", 1, &["{}".into()], 0).unwrap();
        assert!(!dir.exists());
        assert!(!dir.parent().unwrap().join("escape.jsonl").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_in_the_folder_is_not_followed() {
        let dir = tmp();
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.with_extension("victim");
        fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("s3.jsonl")).unwrap();
        assert!(append(&dir, "s3", 1, &["{}".into()], 0).is_err());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        fs::create_dir(dir.join("s4.jsonl")).unwrap();
        assert!(append(&dir, "s4", 1, &["{}".into()], 0).is_err());
    }

    #[test]
    fn a_deleted_sessions_file_is_moved_aside() {
        let dir = tmp();
        append(&dir, "s2", 1, &["{}".into()], 0).unwrap();
        let to = archive(&dir, "s2", 0).unwrap().unwrap();
        assert!(!dir.join("s2.jsonl").exists());
        assert!(to.to_string_lossy().ends_with("s2.jsonl.deleted.1970-01-01T00-00-00.000Z"));
        assert_eq!(archive(&dir, "s2", 0).unwrap(), None);
    }
}
