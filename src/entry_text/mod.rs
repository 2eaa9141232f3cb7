//! The merge rule of §2.5 applied to an entry's stored text (issue 17, 8 writers: parsing the
//! stored entry into a map, cloning it, overlaying the patch and serialising it all again was
//! about half of an upsert's CPU). When the stored text is canonical (`scan`: exactly what
//! serde_json writes for the object it holds), each member the merge leaves alone is copied as
//! its text; only the patch's values, `updatedAt` and the route fields §2.4 rewrites are
//! written anew. The text made is byte for byte the one [`entry::merge`] followed by
//! serialisation makes from the parsed entry (`tests.rs` checks it over generated entries and
//! patches).
//!
//! It owns that shortcut and nothing else: the rule itself stays in `entry` (this module calls
//! its pieces, [`entry::delivery_rewrite`] and [`entry::as_ms`]), and anything it does not
//! handle (a text not canonical, a new entry, a patch naming `sessionId` or a legacy field, a
//! stored entry without a string `sessionId` or without `updatedAt`) answers `None`, for the
//! caller to take the parsing path. No SQL.

use std::borrow::Cow;

use serde_json::Value;

use crate::entry::{self, Entry};

mod scan;

/// Fields the parsing path moves or renames (§2.3): a text holding one is not merged here.
const LEGACY: [&str; 3] = ["provider", "lastProvider", "room"];

/// An entry merged on its text.
#[derive(Debug)]
pub struct Merged {
    /// the merged entry's JSON text, as stored and answered
    pub text: String,
    /// the merged entry's `updatedAt`, as [`entry::updated_at`] reads it
    pub updated_at: i64,
    /// the fields the caller asked for (`merge_text`'s `wanted`), parsed from the merged entry;
    /// `None` when neither the patch nor the route rewrite (§2.4) set one of them, so that they
    /// are the stored entry's, unchanged (an upsert then leaves the columns made of them alone)
    pub fields: Option<Entry>,
}

/// A member's value: its stored text, or a value to write.
enum Slot<'a> {
    Text(&'a str),
    Value(Cow<'a, Value>),
}

impl Slot<'_> {
    fn parsed(&self) -> Option<Value> {
        match self {
            Slot::Text(t) => serde_json::from_str(t).ok(),
            Slot::Value(v) => Some(v.as_ref().clone()),
        }
    }
}

/// `entry::merge(Some(stored), patch, now)` serialised, made on the stored text; with the fields
/// named in `wanted` of the merged entry when the merge set one of them (`wanted` holds no
/// `updatedAt`: that one is [`Merged::updated_at`]). `None` when the text or the patch is not
/// one this path handles (module header).
pub fn merge_text(stored: &str, patch: &Entry, now: i64, wanted: &[&str]) -> Option<Merged> {
    if patch.contains_key("sessionId") || LEGACY.iter().any(|f| patch.contains_key(*f)) {
        return None;
    }
    let members = scan::canonical_members(stored)?;
    let mut names: Vec<Cow<'_, str>> = Vec::with_capacity(members.len() + patch.len() + 4);
    let mut slots: Vec<Slot<'_>> = Vec::with_capacity(members.len() + patch.len() + 4);
    let mut existing_updated = None;
    let mut has_session_id = false;
    for m in &members {
        match m.name {
            "sessionId" => has_session_id = m.value.starts_with('"'),
            "updatedAt" => existing_updated = Some(m.value),
            n if LEGACY.contains(&n) => return None,
            _ => {}
        }
        names.push(Cow::Borrowed(m.name));
        slots.push(Slot::Text(m.value));
    }
    let existing_updated = existing_updated?;
    if !has_session_id {
        return None;
    }
    let mut changed_wanted = patch.keys().any(|k| wanted.contains(&k.as_str()));
    // the overlay: a patch field replaces the stored one in its place, a new one goes last
    for (k, v) in patch {
        set(&mut names, &mut slots, escaped(k)?, Some(Slot::Value(Cow::Borrowed(v))));
    }
    // `sessionId` stays the stored string; `updatedAt` = max(stored, patch, now), in its place
    let stored_ms = serde_json::from_str::<Value>(existing_updated).ok()?;
    let updated =
        [entry::as_ms(&stored_ms).unwrap_or(0), patch.get("updatedAt").and_then(entry::as_ms).unwrap_or(0), now]
            .into_iter()
            .max()
            .unwrap_or(now);
    set(&mut names, &mut slots, Cow::Borrowed("updatedAt"), Some(Slot::Value(Cow::Owned(Value::from(updated)))));
    // §2.4, decided on the route fields alone
    let route = Few::pick(
        &names,
        &slots,
        &["channel", "deliveryContext", "lastChannel", "lastTo", "lastAccountId", "lastThreadId"],
    )?;
    if let Some(rewrite) = entry::delivery_rewrite(&route) {
        for (name, value) in rewrite {
            changed_wanted |= wanted.contains(&name);
            set(&mut names, &mut slots, Cow::Borrowed(name), value.map(|v| Slot::Value(Cow::Owned(v))));
        }
    }
    let fields = if changed_wanted { Some(pick(&names, &slots, wanted)?) } else { None };
    let mut out = Vec::with_capacity(stored.len() + 64);
    out.push(b'{');
    for (i, (name, slot)) in names.iter().zip(&slots).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        match slot {
            Slot::Text(t) => out.extend_from_slice(t.as_bytes()),
            Slot::Value(v) => serde_json::to_writer(&mut out, v.as_ref()).ok()?,
        }
    }
    out.push(b'}');
    // as the column is read from any entry (`entry::updated_at`: through a float)
    let updated_at = entry::as_ms(&Value::from(updated)).unwrap_or(0);
    Some(Merged { text: String::from_utf8(out).ok()?, updated_at, fields })
}

/// `name` as serde_json writes it between the quotes.
fn escaped(name: &str) -> Option<Cow<'_, str>> {
    if name.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\') {
        return Some(Cow::Borrowed(name));
    }
    let quoted = serde_json::to_string(name).ok()?;
    Some(Cow::Owned(quoted.get(1..quoted.len().checked_sub(1)?)?.to_owned()))
}

/// As `Map::insert` (`Some`: in place, or last) and `Map::shift_remove` (`None`) on the members.
fn set<'a>(names: &mut Vec<Cow<'a, str>>, slots: &mut Vec<Slot<'a>>, name: Cow<'a, str>, slot: Option<Slot<'a>>) {
    let at = names.iter().position(|n| *n == name);
    match (at, slot) {
        (Some(i), Some(s)) => slots[i] = s,
        (None, Some(s)) => {
            names.push(name);
            slots.push(s);
        }
        (Some(i), None) => {
            names.remove(i);
            slots.remove(i);
        }
        (None, None) => {}
    }
}

/// The members named in `wanted` (names written without escapes), parsed, as an entry.
fn pick(names: &[Cow<'_, str>], slots: &[Slot<'_>], wanted: &[&str]) -> Option<Entry> {
    Some(Few::pick(names, slots, wanted)?.0.into_iter().map(|(name, v)| (name.to_owned(), v)).collect())
}

/// A few members, parsed, found by name with a linear search: what §2.4's rewrite reads (six
/// names at most, read a few times each), without the hashing of a map.
struct Few<'a>(Vec<(&'a str, Value)>);

impl<'a> Few<'a> {
    /// The members named in `wanted` (names written without escapes), parsed.
    fn pick(names: &[Cow<'_, str>], slots: &[Slot<'_>], wanted: &[&'a str]) -> Option<Few<'a>> {
        let mut out = Vec::with_capacity(wanted.len());
        for w in wanted {
            if let Some(i) = names.iter().position(|n| n == w) {
                out.push((*w, slots[i].parsed()?));
            }
        }
        Some(Few(out))
    }
}

impl entry::Fields for Few<'_> {
    fn field(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests;
