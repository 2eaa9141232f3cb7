//! Moving in and out (API.md §5): reading an existing gateway state folder into the store
//! ([`import`]) and writing the store back as a state folder a gateway without the addon can
//! read ([`export`]), in the gateway's own formats (REFERENCE.md §2.1–§2.8, §6.6).
//!
//! Everything read from a state folder is untrusted: a file or line that cannot be used is
//! skipped and reported, never fatal; no path taken from a file leads outside the folder given;
//! the source folder is never written to. SQL stays in `store/`; key rules in `keys`; entry rules
//! in `entry`.

pub mod export;
pub mod import;
pub mod json5;
pub mod jsonl;
pub mod report;
pub mod resync;
pub mod sqlite9;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use export::{export_state_dir, ExportReport};
pub use import::{import_state_dir, ImportReport, Layout};
pub use sqlite9::export::export_state_dir_2026_9;

/// A file or line left out, and why (`file` relative to the folder given, `line` 1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: String,
    pub line: Option<usize>,
    pub reason: String,
}

impl Skipped {
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("file".into(), Value::from(self.file.clone()));
        if let Some(l) = self.line {
            o.insert("line".into(), Value::from(l));
        }
        o.insert("reason".into(), Value::from(self.reason.clone()));
        Value::Object(o)
    }
}

/// `path` relative to `root`, with `/` separators (the path itself when it is not below root).
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Where a path taken from a state folder really leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// nothing exists there
    Missing,
    /// it exists inside the folder: its real path
    Inside(PathBuf),
    /// it resolves (through `..` or a symbolic link) outside the folder
    Outside,
}

/// `path` with `.` and `..` folded away without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolves `path` against `root` (itself a real path): outside when it leads out of `root` as
/// written (whether or not anything exists there) or once symbolic links are followed.
pub fn inside(root: &Path, path: &Path) -> Resolved {
    if !lexical(path).starts_with(root) {
        return Resolved::Outside;
    }
    match std::fs::canonicalize(path) {
        Ok(real) if real.starts_with(root) => Resolved::Inside(real),
        Ok(_) => Resolved::Outside,
        Err(_) => Resolved::Missing,
    }
}

/// JavaScript's `encodeURIComponent`, for topic ids in transcript file names (§2.1).
pub fn encode_uri_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The topic id of a key with a `:topic:<id>` part (the text after the last marker).
pub fn topic_of(key: &str) -> Option<&str> {
    let at = key.rfind(":topic:")?;
    Some(&key[at + ":topic:".len()..]).filter(|t| !t.is_empty())
}

/// Every file below `root` with its bytes, by relative path (tests compare folders with it).
#[cfg(test)]
pub(crate) fn snapshot(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_ids_are_uri_encoded_as_javascript_does() {
        assert_eq!(encode_uri_component("a b/c:ü"), "a%20b%2Fc%3A%C3%BC");
        assert_eq!(encode_uri_component("42"), "42");
        assert_eq!(topic_of("agent:main:telegram:group:-1:topic:42"), Some("42"));
        assert_eq!(topic_of("agent:main:main"), None);
    }

    #[test]
    fn a_path_is_outside_when_it_leads_out_as_written_even_if_nothing_is_there() {
        let root = Path::new("/state");
        assert_eq!(inside(root, Path::new("/state/agents/main/sessions/../../../../etc/passwd")), Resolved::Outside);
        assert_eq!(inside(root, Path::new("/elsewhere/x.jsonl")), Resolved::Outside);
        assert_eq!(inside(root, Path::new("/state/agents/./x/../missing.jsonl")), Resolved::Missing);
    }
}

#[cfg(test)]
mod folder_tests;
