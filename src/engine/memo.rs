//! [`RowMemo`]: texts rendered from stored entries, remembered by the exact stored text they
//! were rendered from (issue 17: a `sessions_list` row is a pure function of its key, its
//! stored entry text, the config and the requester's agent; building it again for every call
//! was most of a listing's own work). A lookup compares the whole stored text, so an entry
//! changed in any way (by this process or another one on the same file) is a miss and is
//! rendered again: the memo can never give a row other than the one rendering would give.
//! Every call still reads its rows from the store; only their rendering is remembered.
//!
//! Each remembered text carries a stamp, given once in the life of the process and to that text
//! only, so that the JS side may keep the value it parsed from it by stamp (`tools::indexed`).
//!
//! It owns the memo and its bound; it never reads the store and never decides what a row says.
//! It never makes a caller wait: a memo in use by another thread is simply not used.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::Config;

/// Most rows remembered, all agents together (more than one listing's most, 1,000; about
/// 1–3 MB); past it the memo starts over.
const MAX_ROWS: usize = 2048;

/// key → (stored text, rendered text: JSON, so UTF-8, its stamp)
type Rendered = HashMap<Box<str>, (Box<str>, Box<[u8]>, u64)>;

/// The next stamp, for every memo of the process (an environment's JS keeps the rows of all
/// its stores together).
static NEXT_STAMP: AtomicU64 = AtomicU64::new(1);

#[derive(Default)]
struct Rows {
    /// the config every remembered row was rendered under (held, so that its address is not
    /// reused while it is compared)
    config: Option<Arc<Config>>,
    /// by the requester's agent (a row shows its key as that agent sees it)
    by_agent: HashMap<Box<str>, Rendered>,
    count: usize,
}

/// Rendered rows by requester agent, key and stored text, for one engine.
#[derive(Default)]
pub struct RowMemo {
    inner: Mutex<Rows>,
}

impl RowMemo {
    /// Appends to `out` the text rendered from `stored` under `key` for this config and agent,
    /// when it is remembered; its stamp if it was.
    pub fn append(&self, config: &Arc<Config>, agent: &str, key: &str, stored: &str, out: &mut Vec<u8>) -> Option<u64> {
        let m = self.inner.try_lock().ok()?;
        if !m.config.as_ref().is_some_and(|c| Arc::ptr_eq(c, config)) {
            return None;
        }
        match m.by_agent.get(agent).and_then(|rows| rows.get(key)) {
            Some((s, row, stamp)) if **s == *stored => {
                out.extend_from_slice(row);
                Some(*stamp)
            }
            _ => None,
        }
    }

    /// Remembers `rendered` as the text of `stored` under `key` for this config and agent (rows
    /// remembered under another config are forgotten); its new stamp, or 0 when it could not be
    /// remembered (the memo in use by another thread).
    pub fn put(&self, config: &Arc<Config>, agent: &str, key: &str, stored: &str, rendered: &[u8]) -> u64 {
        let Ok(mut m) = self.inner.try_lock() else { return 0 };
        if !m.config.as_ref().is_some_and(|c| Arc::ptr_eq(c, config)) || m.count >= MAX_ROWS {
            *m = Rows { config: Some(config.clone()), ..Rows::default() };
        }
        let m = &mut *m;
        if !m.by_agent.contains_key(agent) {
            m.by_agent.insert(agent.into(), Rendered::default());
        }
        let Some(rows) = m.by_agent.get_mut(agent) else { return 0 };
        let stamp = NEXT_STAMP.fetch_add(1, Ordering::Relaxed);
        if rows.insert(key.into(), (stored.into(), rendered.into(), stamp)).is_none() {
            m.count += 1;
        }
        stamp
    }

    /// How many rows are remembered.
    pub fn len(&self) -> usize {
        self.inner.try_lock().map(|m| m.count).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
