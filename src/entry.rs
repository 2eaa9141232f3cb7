//! The session entry: the JSON object stored per session key, and the rules every write applies
//! to it (REFERENCE.md §2.2–§2.5).
//!
//! An entry is kept as the JSON object the gateway would have written, unknown fields and all;
//! this module owns the merge rule, the legacy field migration, the delivery-context
//! normalization, the reset carry-over and the derived display name. Pure JSON logic: no SQL,
//! no config beyond what is handed in.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::keys::parse_group_key;

/// A session entry (`SessionEntry`, §2.2), field order as written.
pub type Entry = Map<String, Value>;

/// Longest `sessionId` accepted from a caller.
pub const MAX_SESSION_ID_LEN: usize = 256;
/// Longest label (§2.7).
pub const MAX_LABEL_LEN: usize = 64;

pub fn now_ms() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Read access to an entry's fields by name: the whole entry, or an entry of which only some
/// fields were parsed (a listing's rows, `store::listing::SparseEntry`).
pub trait Fields {
    fn field(&self, name: &str) -> Option<&Value>;
}

impl Fields for Entry {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

impl<T: Fields + ?Sized> Fields for &T {
    fn field(&self, name: &str) -> Option<&Value> {
        (**self).field(name)
    }
}

/// A JSON value as a row reads it: its type and, for a scalar, the value (borrowed); objects
/// and arrays only as such.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    Str(&'a str),
    Num(&'a serde_json::Number),
    Bool(bool),
    Null,
    /// an object or an array
    Composite,
}

impl<'a> Scalar<'a> {
    pub fn of(v: &'a Value) -> Scalar<'a> {
        match v {
            Value::String(s) => Scalar::Str(s),
            Value::Number(n) => Scalar::Num(n),
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Null => Scalar::Null,
            Value::Array(_) | Value::Object(_) => Scalar::Composite,
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The reads a list row makes of an entry (a whole entry, a [`Fields`] one, or a list row's
/// entry borrowed from its stored text, `tools::list_row::RowEntry`): a field's scalar, and a
/// scalar member of an object field.
pub trait RowFields {
    fn scalar(&self, name: &str) -> Option<Scalar<'_>>;
    /// `name` of the field `object`, when that field is an object with that member.
    fn member(&self, object: &str, name: &str) -> Option<Scalar<'_>>;

    /// The field when it is a string.
    fn text(&self, name: &str) -> Option<&str> {
        self.scalar(name).and_then(Scalar::as_str)
    }

    /// The field when it is a number.
    fn number(&self, name: &str) -> Option<&serde_json::Number> {
        match self.scalar(name) {
            Some(Scalar::Num(n)) => Some(n),
            _ => None,
        }
    }

    /// The field when it is a boolean.
    fn flag(&self, name: &str) -> Option<bool> {
        match self.scalar(name) {
            Some(Scalar::Bool(b)) => Some(b),
            _ => None,
        }
    }
}

impl<T: Fields + ?Sized> RowFields for T {
    fn scalar(&self, name: &str) -> Option<Scalar<'_>> {
        self.field(name).map(Scalar::of)
    }

    fn member(&self, object: &str, name: &str) -> Option<Scalar<'_>> {
        self.field(object).and_then(Value::as_object).and_then(|o| o.get(name)).map(Scalar::of)
    }
}

/// A string field, when it is a string.
pub fn str_field<'a, E: RowFields + ?Sized>(entry: &'a E, name: &str) -> Option<&'a str> {
    entry.text(name)
}

/// A string field, trimmed, when non-empty.
pub fn text_field<'a>(entry: &'a Entry, name: &str) -> Option<&'a str> {
    str_field(entry, name).map(str::trim).filter(|s| !s.is_empty())
}

/// `updatedAt` as stored (0 when missing or not a finite number).
pub fn updated_at(entry: &Entry) -> i64 {
    entry.get("updatedAt").and_then(as_ms).unwrap_or(0)
}

/// A timestamp field as milliseconds: a finite number, floored.
pub fn as_ms(v: &Value) -> Option<i64> {
    let f = v.as_f64()?;
    f.is_finite().then(|| f.floor() as i64)
}

/// Checks the fields of a patch that the store indexes or that later logic relies on; any other
/// field is kept verbatim. `sessionId`: non-empty string (≤ 256 bytes, no control characters);
/// `updatedAt`: finite number; `spawnedBy`, `label`, `chatType`, `sendPolicy`, `channel`,
/// `lastChannel`: string (or null).
pub fn check_patch(patch: &Entry) -> Result<()> {
    if let Some(v) = patch.get("sessionId") {
        match v.as_str() {
            Some(s) if !s.trim().is_empty() && s.len() <= MAX_SESSION_ID_LEN && !s.chars().any(char::is_control) => {}
            Some(s) if s.trim().is_empty() => return Err(Error::invalid_request("invalid sessionId: empty")),
            Some(s) if s.len() > MAX_SESSION_ID_LEN => {
                return Err(Error::invalid_request(format!("invalid sessionId: too long (max {MAX_SESSION_ID_LEN})")))
            }
            Some(_) => return Err(Error::invalid_request("invalid sessionId: contains a control character")),
            None => return Err(Error::invalid_request("invalid sessionId: must be a string")),
        }
    }
    if let Some(v) = patch.get("updatedAt") {
        if !v.is_null() && as_ms(v).is_none() {
            return Err(Error::invalid_request("invalid updatedAt: must be a finite number"));
        }
    }
    for name in ["spawnedBy", "label", "chatType", "sendPolicy", "channel", "lastChannel"] {
        if let Some(v) = patch.get(name) {
            if !(v.is_null() || v.is_string()) {
                return Err(Error::invalid_request(format!("invalid {name}: must be a string")));
            }
        }
    }
    Ok(())
}

/// §2.5 mergeSessionEntry: `sessionId` = patch ?? existing ?? new; `updatedAt` = max(existing,
/// patch, now); every other field a shallow overlay (patch wins). Then the write-time
/// normalizations of §2.3 and §2.4.
pub fn merge(existing: Option<&Entry>, patch: &Entry, now: i64) -> Entry {
    let mut out = existing.cloned().unwrap_or_default();
    for (k, v) in patch {
        out.insert(k.clone(), v.clone());
    }
    let session_id = patch
        .get("sessionId")
        .and_then(Value::as_str)
        .or_else(|| existing.and_then(|e| str_field(e, "sessionId")))
        .map(str::to_owned)
        .unwrap_or_else(new_session_id);
    let updated = [existing.map(updated_at).unwrap_or(0), patch.get("updatedAt").and_then(as_ms).unwrap_or(0), now]
        .into_iter()
        .max()
        .unwrap_or(now);
    set_front(&mut out, session_id, updated);
    normalize(&mut out);
    out
}

/// Puts `sessionId` and `updatedAt` in place, first for a new entry, keeping the position of
/// fields that were already there.
fn set_front(entry: &mut Entry, session_id: String, updated: i64) {
    if entry.contains_key("sessionId") && entry.contains_key("updatedAt") {
        entry.insert("sessionId".into(), Value::String(session_id));
        entry.insert("updatedAt".into(), Value::from(updated));
        return;
    }
    let mut front = Map::new();
    front.insert("sessionId".into(), Value::String(session_id));
    front.insert("updatedAt".into(), Value::from(updated));
    for (k, v) in std::mem::take(entry) {
        if k != "sessionId" && k != "updatedAt" {
            front.insert(k, v);
        }
    }
    *entry = front;
}

/// The normalizations applied before every write: legacy field names (§2.3) and the delivery
/// context (§2.4).
pub fn normalize(entry: &mut Entry) {
    migrate_legacy_fields(entry);
    normalize_delivery(entry);
}

/// §2.3: `provider` → `channel`, `lastProvider` → `lastChannel` (each only when the new field is
/// not a string; the old field is removed), `room` → `groupChannel` when that is not a string; a
/// leftover `room` is removed in every case.
pub fn migrate_legacy_fields(entry: &mut Entry) {
    for (old, new) in [("provider", "channel"), ("lastProvider", "lastChannel"), ("room", "groupChannel")] {
        if let Some(v) = entry.remove(old) {
            let already = entry.get(new).map(Value::is_string).unwrap_or(false);
            if !already && (v.is_string() || old != "room") {
                entry.insert(new.into(), v);
            }
        }
    }
}

/// Core channel aliases (REFERENCE.md §5.6 step 4).
pub fn normalize_channel(raw: &str) -> Option<String> {
    let c = raw.trim().to_lowercase();
    let c = match c.as_str() {
        "" => return None,
        "imsg" => "imessage".to_string(),
        "google-chat" | "gchat" => "googlechat".to_string(),
        _ => c,
    };
    Some(c)
}

/// A normalized delivery route (`deliveryContext`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeliveryContext {
    pub channel: Option<String>,
    pub to: Option<String>,
    pub account_id: Option<String>,
    pub thread_id: Option<Value>,
}

impl DeliveryContext {
    pub fn is_empty(&self) -> bool {
        self.channel.is_none() && self.to.is_none() && self.account_id.is_none() && self.thread_id.is_none()
    }

    /// Reads a raw context (each field normalized: channel via [`normalize_channel`], `to` and
    /// `accountId` trimmed, numeric thread id truncated, string thread id trimmed).
    pub fn from_parts(
        channel: Option<&Value>,
        to: Option<&Value>,
        account: Option<&Value>,
        thread: Option<&Value>,
    ) -> Self {
        Self::from_scalars(
            channel.and_then(Value::as_str),
            to.and_then(Value::as_str),
            account.and_then(Value::as_str),
            thread.map(Scalar::of),
        )
    }

    /// As [`from_parts`](Self::from_parts), given the string parts and the thread's scalar.
    pub fn from_scalars(
        channel: Option<&str>,
        to: Option<&str>,
        account: Option<&str>,
        thread: Option<Scalar<'_>>,
    ) -> Self {
        let text = |v: Option<&str>| v.map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
        let thread_id = match thread {
            Some(Scalar::Num(n)) => n.as_f64().filter(|f| f.is_finite()).map(|f| Value::from(f.trunc() as i64)),
            Some(Scalar::Str(s)) if !s.trim().is_empty() => Some(Value::String(s.trim().to_owned())),
            _ => None,
        };
        DeliveryContext {
            channel: channel.and_then(normalize_channel),
            to: text(to),
            account_id: text(account),
            thread_id,
        }
    }

    pub fn of_object(v: Option<&Value>) -> Self {
        match v.and_then(Value::as_object) {
            Some(o) => Self::from_parts(o.get("channel"), o.get("to"), o.get("accountId"), o.get("threadId")),
            None => Self::default(),
        }
    }

    /// Field by field, `self` wins.
    pub fn overlay(self, fallback: DeliveryContext) -> DeliveryContext {
        DeliveryContext {
            channel: self.channel.or(fallback.channel),
            to: self.to.or(fallback.to),
            account_id: self.account_id.or(fallback.account_id),
            thread_id: self.thread_id.or(fallback.thread_id),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(c) = &self.channel {
            m.insert("channel".into(), Value::String(c.clone()));
        }
        if let Some(t) = &self.to {
            m.insert("to".into(), Value::String(t.clone()));
        }
        if let Some(a) = &self.account_id {
            m.insert("accountId".into(), Value::String(a.clone()));
        }
        if let Some(t) = &self.thread_id {
            m.insert("threadId".into(), t.clone());
        }
        Value::Object(m)
    }
}

/// The entry's merged route: `{lastChannel ?? channel, lastTo, lastAccountId, lastThreadId}`
/// over the stored `deliveryContext` (§2.4).
pub fn delivery_context<E: RowFields + ?Sized>(entry: &E) -> DeliveryContext {
    let primary = DeliveryContext::from_scalars(
        entry.text("lastChannel").or_else(|| entry.text("channel")),
        entry.text("lastTo"),
        entry.text("lastAccountId"),
        entry.scalar("lastThreadId"),
    );
    let stored = |name: &str| entry.member("deliveryContext", name);
    let text = |name: &str| stored(name).and_then(Scalar::as_str);
    let stored = DeliveryContext::from_scalars(text("channel"), text("to"), text("accountId"), stored("threadId"));
    primary.overlay(stored)
}

/// §2.4: rewrites `deliveryContext` and `last*` from the merged route when they differ from it.
pub fn normalize_delivery(entry: &mut Entry) {
    let Some(fields) = delivery_rewrite(entry) else { return };
    for (name, value) in fields {
        match value {
            Some(v) => {
                entry.insert(name.into(), v);
            }
            None => {
                entry.shift_remove(name);
            }
        }
    }
}

/// The route fields of an entry, in the order [`normalize_delivery`] writes them.
pub const DELIVERY_FIELDS: [&str; 5] = ["deliveryContext", "lastChannel", "lastTo", "lastAccountId", "lastThreadId"];

/// What [`normalize_delivery`] does to `entry`: each of [`DELIVERY_FIELDS`] set to its value or
/// removed (`None`), in that order; `None` when the entry already holds the merged route. Reads
/// only those fields and `channel`.
pub fn delivery_rewrite<E: Fields + ?Sized>(entry: &E) -> Option<[(&'static str, Option<Value>); 5]> {
    let merged = delivery_context(entry);
    let s = |o: &Option<String>| o.clone().map(Value::String);
    let wanted = [
        (!merged.is_empty()).then(|| merged.to_json()),
        s(&merged.channel),
        s(&merged.to),
        s(&merged.account_id),
        merged.thread_id.clone(),
    ];
    if DELIVERY_FIELDS.iter().zip(&wanted).all(|(name, w)| entry.field(name) == w.as_ref()) {
        return None;
    }
    let [a, b, c, d, e] = wanted;
    let [n0, n1, n2, n3, n4] = DELIVERY_FIELDS;
    Some([(n0, a), (n1, b), (n2, c), (n3, d), (n4, e)])
}

/// §2.7 `sessions.reset`: a fresh entry carrying over only the listed fields.
pub fn reset(old: Option<&Entry>, now: i64) -> Entry {
    let mut e = Map::new();
    e.insert("sessionId".into(), Value::String(new_session_id()));
    e.insert("updatedAt".into(), Value::from(now));
    e.insert("systemSent".into(), Value::Bool(false));
    e.insert("abortedLastRun".into(), Value::Bool(false));
    e.insert("inputTokens".into(), Value::from(0));
    e.insert("outputTokens".into(), Value::from(0));
    e.insert("totalTokens".into(), Value::from(0));
    if let Some(old) = old {
        for name in [
            "thinkingLevel",
            "verboseLevel",
            "reasoningLevel",
            "responseUsage",
            "model",
            "contextTokens",
            "sendPolicy",
            "label",
            "origin",
            "lastChannel",
            "lastTo",
            "skillsSnapshot",
        ] {
            if let Some(v) = old.get(name) {
                e.insert(name.into(), v.clone());
            }
        }
    }
    normalize(&mut e);
    e
}

/// `channel` of a list row: the entry's channel, else the channel of a group key.
pub fn row_channel<E: RowFields + ?Sized>(key: &str, entry: &E) -> Option<String> {
    str_field(entry, "channel").map(str::to_owned).or_else(|| parse_group_key(key).map(|g| g.channel))
}

/// The `displayName` of a list row (§2.7): entry displayName → group display name (when the
/// row has a channel) → label → origin.label.
pub fn display_name<E: RowFields + ?Sized>(key: &str, entry: &E) -> Option<String> {
    if let Some(d) = str_field(entry, "displayName") {
        return Some(d.to_owned());
    }
    if let Some(channel) = row_channel(key, entry) {
        let id = parse_group_key(key).map(|g| g.id);
        return Some(group_display_name(
            Some(&channel),
            str_field(entry, "subject"),
            str_field(entry, "groupChannel"),
            str_field(entry, "space"),
            id.as_deref(),
            key,
        ));
    }
    if let Some(l) = str_field(entry, "label") {
        return Some(l.to_owned());
    }
    entry.member("origin", "label").and_then(Scalar::as_str).map(str::to_owned)
}

fn slug(raw: &str) -> String {
    let lowered = raw.trim().to_lowercase();
    let mut out = String::with_capacity(lowered.len());
    let mut last_dash = false;
    for ch in lowered.chars() {
        let keep = ch.is_ascii_lowercase() || ch.is_ascii_digit() || "#@._+-".contains(ch);
        let c = if keep { ch } else { '-' };
        if c == '-' {
            if last_dash {
                continue;
            }
            last_dash = true;
        } else {
            last_dash = false;
        }
        out.push(c);
    }
    out.trim_matches(|c| c == '-' || c == '.').to_owned()
}

fn shorten_id(raw: &str) -> String {
    let t = raw.trim();
    let chars: Vec<char> = t.chars().collect();
    if chars.len() <= 14 {
        return t.to_owned();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}...{tail}")
}

/// The gateway's group display name: `<provider or "group">:<token>` (§2.7).
pub fn group_display_name(
    provider: Option<&str>,
    subject: Option<&str>,
    group_channel: Option<&str>,
    space: Option<&str>,
    id: Option<&str>,
    key: &str,
) -> String {
    fn nonempty(s: Option<&str>) -> Option<&str> {
        s.map(str::trim).filter(|s| !s.is_empty())
    }
    let provider = nonempty(provider).map(str::to_lowercase).unwrap_or_else(|| "group".into());
    let gc = nonempty(group_channel);
    let space_t = nonempty(space);
    let detail = match (gc, space_t) {
        (Some(gc), Some(sp)) => format!("{sp}{}{gc}", if gc.starts_with('#') { "" } else { "#" }),
        _ => gc.or(nonempty(subject)).or(space_t).unwrap_or("").to_owned(),
    };
    let raw = if detail.is_empty() { nonempty(id).unwrap_or(key).to_owned() } else { detail };
    let mut token = slug(&raw);
    if token.is_empty() {
        token = slug(&shorten_id(&raw));
    }
    if group_channel.is_none() && token.starts_with('#') {
        token = token.trim_start_matches('#').to_owned();
    }
    if !token.is_empty() && !token.starts_with(['@', '#']) && !token.starts_with("g-") && !token.contains('#') {
        token = format!("g-{token}");
    }
    if token.is_empty() {
        provider
    } else {
        format!("{provider}:{token}")
    }
}

/// `totalTokens` of a row: the entry's, else input + output (always a number).
pub fn total_tokens<E: RowFields + ?Sized>(entry: &E) -> Value {
    if let Some(t) = entry.number("totalTokens") {
        return Value::Number(t.clone());
    }
    let n = |name: &str| entry.number(name).and_then(serde_json::Number::as_f64).unwrap_or(0.0);
    let sum = n("inputTokens") + n("outputTokens");
    if sum.fract() == 0.0 && sum.abs() < 9.0e15 {
        Value::from(sum as i64)
    } else {
        serde_json::Number::from_f64(sum).map(Value::Number).unwrap_or(Value::from(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Entry {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn merge_keeps_unknown_fields_and_takes_the_latest_updated_at() {
        let existing = obj(json!({"sessionId": "s1", "updatedAt": 100, "reasoningLevel": "on", "x-custom": {"a": 1}}));
        let out = merge(Some(&existing), &obj(json!({"updatedAt": 200, "thinkingLevel": "low"})), 150);
        assert_eq!(out["sessionId"], "s1");
        assert_eq!(out["updatedAt"], 200);
        assert_eq!(out["reasoningLevel"], "on");
        assert_eq!(out["x-custom"], json!({"a": 1}));
        assert_eq!(out["thinkingLevel"], "low");
    }

    #[test]
    fn merge_of_a_new_entry_mints_a_uuid_and_uses_now() {
        let out = merge(None, &Map::new(), 1234);
        assert_eq!(out["updatedAt"], 1234);
        assert_eq!(out["sessionId"].as_str().map(str::len), Some(36));
        let keys: Vec<_> = out.keys().cloned().collect();
        assert_eq!(keys, ["sessionId", "updatedAt"]);
    }

    #[test]
    fn legacy_fields_are_renamed_on_write_s3_s4() {
        let mut e = obj(
            json!({"sessionId": "s", "updatedAt": 1, "provider": "slack", "lastProvider": "telegram", "room": "#ops"}),
        );
        normalize(&mut e);
        assert_eq!(e["channel"], "slack");
        assert_eq!(e["lastChannel"], "telegram");
        assert_eq!(e["groupChannel"], "#ops");
        assert!(!e.contains_key("provider") && !e.contains_key("lastProvider") && !e.contains_key("room"));
    }

    #[test]
    fn a_leftover_room_is_dropped_when_group_channel_exists() {
        let mut e = obj(json!({"groupChannel": "#a", "room": "#b"}));
        migrate_legacy_fields(&mut e);
        assert_eq!(e["groupChannel"], "#a");
        assert!(!e.contains_key("room"));
    }

    #[test]
    fn delivery_fields_are_trimmed_and_mirrored_s5() {
        let mut e = obj(json!({"lastChannel": " WhatsApp ", "lastTo": " +1555 ", "lastAccountId": " acct-1 "}));
        normalize(&mut e);
        assert_eq!(e["lastChannel"], "whatsapp");
        assert_eq!(e["lastTo"], "+1555");
        assert_eq!(e["lastAccountId"], "acct-1");
        assert_eq!(e["deliveryContext"], json!({"channel": "whatsapp", "to": "+1555", "accountId": "acct-1"}));
    }

    #[test]
    fn an_entry_with_channel_only_acquires_last_channel() {
        let mut e = obj(json!({"channel": "discord"}));
        normalize(&mut e);
        assert_eq!(e["lastChannel"], "discord");
        assert_eq!(e["deliveryContext"], json!({"channel": "discord"}));
    }

    #[test]
    fn numeric_thread_ids_are_truncated() {
        let mut e = obj(json!({"lastChannel": "telegram", "lastTo": "x", "lastThreadId": 42.9}));
        normalize(&mut e);
        assert_eq!(e["lastThreadId"], 42);
    }

    #[test]
    fn reset_carries_only_the_listed_fields_s30() {
        let old = obj(
            json!({"sessionId": "old", "updatedAt": 5, "label": "L", "spawnedBy": "x", "inputTokens": 9, "modelOverride": "m", "thinkingLevel": "low"}),
        );
        let e = reset(Some(&old), 10);
        assert_ne!(e["sessionId"], "old");
        assert_eq!(e["inputTokens"], 0);
        assert_eq!(e["label"], "L");
        assert_eq!(e["thinkingLevel"], "low");
        assert!(!e.contains_key("spawnedBy") && !e.contains_key("modelOverride"));
    }

    #[test]
    fn group_display_name_uses_space_and_channel() {
        assert_eq!(
            group_display_name(Some("Discord"), None, Some("#general"), Some("friends-of-clawd"), None, "k"),
            "discord:friends-of-clawd#general"
        );
        assert_eq!(
            group_display_name(Some("whatsapp"), Some("Family Chat"), None, None, None, "k"),
            "whatsapp:g-family-chat"
        );
        assert_eq!(group_display_name(None, None, None, None, Some("dev"), "k"), "group:g-dev");
        // an id of only non-ASCII letters slugs to nothing: the provider alone, no panic
        assert_eq!(
            group_display_name(Some("slack"), None, None, None, Some("日本語のチャンネル名です長い"), "k"),
            "slack"
        );
    }

    #[test]
    fn display_name_prefers_the_entry_then_group_then_label() {
        assert_eq!(display_name("k", &obj(json!({"displayName": "D", "label": "L"}))).as_deref(), Some("D"));
        assert_eq!(
            display_name("agent:main:discord:group:dev", &obj(json!({"label": "L"}))).as_deref(),
            Some("discord:g-dev")
        );
        assert_eq!(display_name("agent:main:x", &obj(json!({"label": "L"}))).as_deref(), Some("L"));
        assert_eq!(display_name("agent:main:x", &obj(json!({"origin": {"label": "O"}}))).as_deref(), Some("O"));
        assert_eq!(display_name("agent:main:x", &Map::new()), None);
    }

    #[test]
    fn total_tokens_falls_back_to_the_sum() {
        assert_eq!(total_tokens(&obj(json!({"inputTokens": 10, "outputTokens": 20}))), 30);
        assert_eq!(total_tokens(&obj(json!({"totalTokens": 7, "inputTokens": 10}))), 7);
        assert_eq!(total_tokens(&Map::new()), 0);
    }

    #[test]
    fn check_patch_refuses_bad_indexed_fields() {
        assert!(check_patch(&obj(json!({"sessionId": 5}))).is_err());
        assert!(check_patch(&obj(json!({"sessionId": "  "}))).is_err());
        assert!(check_patch(&obj(json!({"sessionId": "a\u{0}b"}))).is_err());
        assert!(check_patch(&obj(json!({"updatedAt": "soon"}))).is_err());
        assert!(check_patch(&obj(json!({"label": 3}))).is_err());
        assert!(check_patch(&obj(json!({"label": null, "anything": [1, {"deep": true}]}))).is_ok());
    }
}
