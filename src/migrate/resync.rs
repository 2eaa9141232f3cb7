//! Bringing a stored transcript in line with the gateway's file on a re-import: the file's
//! entries are matched against the stored ones entry by entry (by id, or by content for an entry
//! without one). Stored ones that begin the file: only the rest is added; a file that begins the
//! stored ones (messages appended here since): nothing changes; anything else means the gateway
//! rewrote the file (a compaction, a branch) and the stored transcript is replaced by it. Reads
//! and decides only; the import writes.

use crate::error::Result;
use crate::store::transcripts::{seq_id, Appended, EntryBody, NewEntry, StoredEntry};
use crate::store::Db;

/// What a re-import does with a transcript the store already has entries of.
pub enum Sync {
    /// the file holds nothing the store lacks
    Nothing,
    /// the stored entries begin the file: add the file's entries from this index
    Append(usize),
    /// the file was rewritten: replace the stored transcript with it
    Replace,
}

/// Whether an entry read from a file is the stored one: by id when it has one, else by content.
fn same_entry(read: &NewEntry, stored: &StoredEntry) -> bool {
    if let Some(id) = &read.id {
        return *id == stored.id && read.body.is_message() == stored.body.is_message();
    }
    match (&read.body, &stored.body) {
        (EntryBody::Message { message: a, .. }, EntryBody::Message { message: b, .. }) => a == b,
        (EntryBody::Other { entry: a, .. }, EntryBody::Other { entry: b, .. }) => a == b,
        _ => false,
    }
}

/// Compares the file's entries with the stored ones (read only when there are some).
pub fn sync_plan(db: &Db<'_>, sid: &str, file: &[NewEntry]) -> Result<Sync> {
    if db.entry_count(sid)? == 0 {
        return Ok(if file.is_empty() { Sync::Nothing } else { Sync::Append(0) });
    }
    let (mut matched, mut diverged, mut stored_n) = (0usize, false, 0usize);
    db.each_entry(sid, |e| {
        stored_n += 1;
        if !diverged {
            match file.get(matched) {
                Some(read) if same_entry(read, &e) => matched += 1,
                Some(_) => diverged = true,
                None => {}
            }
        }
        Ok(())
    })?;
    Ok(if diverged {
        Sync::Replace
    } else if matched == stored_n && file.len() > matched {
        Sync::Append(matched)
    } else {
        // Everything the file holds is stored (and perhaps more appended here since).
        Sync::Nothing
    })
}

/// The mirror lines of entries just written where `at` says.
pub fn stored_lines(at: &Appended, added: &[NewEntry], now: i64) -> Vec<String> {
    let mut parent = at.first_parent.clone();
    let mut lines = Vec::with_capacity(added.len());
    for (i, e) in added.iter().enumerate() {
        let seq = at.first_seq + i as i64;
        let id = at.ids.get(i).cloned().unwrap_or_else(|| seq_id(seq));
        let parent_id = if e.id.is_some() { e.parent_id.clone() } else { parent.clone() };
        let stored = StoredEntry { seq, id: id.clone(), parent_id, body: e.body.clone() };
        lines.push(crate::mirror::entry_line(&stored, now));
        parent = Some(id);
    }
    lines
}
