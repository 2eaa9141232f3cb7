//! [`RowMemo`]: texts rendered from stored entries, remembered by the exact stored text they
//! were rendered from (issue 17: a `sessions_list` row is a pure function of its key, its
//! stored entry text, the config and the requester's agent; building it again for every call
//! was most of a listing's own work). A lookup compares the whole stored text, so an entry
//! changed in any way (by this process or another one on the same file) is a miss and is
//! rendered again: the memo can never give a row other than the one rendering would give.
//! Every call still reads its rows from the store; only their rendering is remembered.
//!
//! It owns the memo and its bound; it never reads the store and never decides what a row says.
//! It never makes a caller wait: a memo in use by another thread is simply not used.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::Config;

/// Most rows remembered (more than one listing's most, 1,000); past it the memo starts over.
const MAX_ROWS: usize = 2048;

/// What every remembered row was rendered under: the config (held, so that its address is not
/// reused while it is compared) and the requester's agent.
struct Tag {
    config: Arc<Config>,
    agent: String,
}

#[derive(Default)]
struct Rows {
    tag: Option<Tag>,
    /// key → (stored text, rendered text)
    rows: HashMap<Box<str>, (Box<str>, Box<str>)>,
}

/// Rendered rows by key and stored text, for one engine.
#[derive(Default)]
pub struct RowMemo {
    inner: Mutex<Rows>,
}

impl RowMemo {
    /// Appends to `out` the text rendered from `stored` under `key` for this config and agent,
    /// when it is remembered; whether it was.
    pub fn append(&self, config: &Arc<Config>, agent: &str, key: &str, stored: &str, out: &mut String) -> bool {
        let Ok(m) = self.inner.try_lock() else { return false };
        if !m.tag.as_ref().is_some_and(|t| Arc::ptr_eq(&t.config, config) && t.agent == agent) {
            return false;
        }
        match m.rows.get(key) {
            Some((s, row)) if **s == *stored => {
                out.push_str(row);
                true
            }
            _ => false,
        }
    }

    /// Remembers `rendered` as the text of `stored` under `key` for this config and agent (rows
    /// remembered under another config or agent are forgotten).
    pub fn put(&self, config: &Arc<Config>, agent: &str, key: &str, stored: &str, rendered: &str) {
        let Ok(mut m) = self.inner.try_lock() else { return };
        if !m.tag.as_ref().is_some_and(|t| Arc::ptr_eq(&t.config, config) && t.agent == agent) {
            m.rows.clear();
            m.tag = Some(Tag { config: config.clone(), agent: agent.to_owned() });
        }
        if m.rows.len() >= MAX_ROWS && !m.rows.contains_key(key) {
            m.rows.clear();
        }
        m.rows.insert(key.into(), (stored.into(), rendered.into()));
    }

    /// How many rows are remembered.
    pub fn len(&self) -> usize {
        self.inner.try_lock().map(|m| m.rows.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
