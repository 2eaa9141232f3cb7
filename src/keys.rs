//! The key model: what a session key is, how the many spellings callers use map to the one
//! canonical key a session is stored under, and how a key is shown back to an agent.
//!
//! Owns REFERENCE.md §1 as amended by DECISIONS.md (requester-relative `main`, bare keys belong
//! to the configured default agent, kinds recognised inside canonical keys). Pure string logic:
//! it never touches the store or the config object (it is handed a [`KeyModel`]).

use crate::error::{Error, Result};
pub use crate::js::js_trim;

pub const DEFAULT_AGENT_ID: &str = "main";
/// The main key when `session.mainKey` is unset, and the literal every caller may use for "my
/// main session".
pub const DEFAULT_MAIN_KEY: &str = "main";
/// Longest session key (in bytes) the engine accepts.
pub const MAX_KEY_LEN: usize = 512;
/// Longest agent id `normalize_agent_id` produces (in chars; ids are ASCII, so also in bytes).
const MAX_AGENT_ID_LEN: usize = 64;

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `normalizeAgentId` (§1.3): trim; empty → `main`; `^[a-z0-9][a-z0-9_-]{0,63}$` (any case) →
/// lower-cased; else lower-case, runs outside `[a-z0-9_-]` → `-`, strip `-` at both ends, cut to
/// 64 chars, empty → `main`.
pub fn normalize_agent_id(raw: &str) -> String {
    let trimmed = js_trim(raw);
    if trimmed.is_empty() {
        return DEFAULT_AGENT_ID.to_string();
    }
    let mut chars = trimmed.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if first_ok && trimmed.len() <= MAX_AGENT_ID_LEN && chars.all(is_id_char) {
        return trimmed.to_ascii_lowercase();
    }
    // Lower-case first (as JS does: a Kelvin sign becomes `k`), then collapse every run of
    // characters outside the id alphabet into one `-`.
    let mut collapsed = String::with_capacity(trimmed.len());
    let mut in_run = false;
    for c in trimmed.to_lowercase().chars() {
        if is_id_char(c) {
            collapsed.push(c);
            in_run = false;
        } else if !in_run {
            collapsed.push('-');
            in_run = true;
        }
    }
    // Only ASCII is left, but cut by chars anyway so no byte offset is ever guessed.
    let cut: String = collapsed.trim_matches('-').chars().take(MAX_AGENT_ID_LEN).collect();
    if cut.is_empty() {
        DEFAULT_AGENT_ID.to_string()
    } else {
        cut
    }
}

/// An `agent:<id>:<rest>` key taken apart (§1.3 parseAgentSessionKey).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKey {
    /// normalized agent id
    pub agent_id: String,
    /// the segments after the agent id, re-joined with `:` (empty segments dropped)
    pub rest: String,
}

/// §1.3 parseAgentSessionKey: trim, split on `:` dropping empty segments, ≥ 3 segments, first is
/// exactly `agent` (case-sensitive).
pub fn parse_agent_key(key: &str) -> Option<AgentKey> {
    let mut parts = js_trim(key).split(':').filter(|p| !p.is_empty());
    if parts.next()? != "agent" {
        return None;
    }
    let agent = js_trim(parts.next()?);
    let rest = parts.collect::<Vec<_>>().join(":");
    if agent.is_empty() || rest.is_empty() {
        return None;
    }
    Some(AgentKey { agent_id: normalize_agent_id(agent), rest })
}

/// The `rest` of [`parse_agent_key`] without the parse's copies: borrowed from the key when it
/// has no empty segment (the usual key), else made as the parse makes it (coldlist: a listing
/// parsed each row's key three times, two allocations each, to read only this part).
pub fn agent_key_rest(key: &str) -> Option<std::borrow::Cow<'_, str>> {
    let t = js_trim(key);
    if t.contains("::") || t.starts_with(':') || t.ends_with(':') {
        return parse_agent_key(t).map(|k| std::borrow::Cow::Owned(k.rest));
    }
    let mut parts = t.splitn(3, ':');
    if parts.next()? != "agent" || js_trim(parts.next()?).is_empty() {
        return None;
    }
    parts.next().map(std::borrow::Cow::Borrowed)
}

/// Whether the trimmed key, or the rest of a canonical key, starts with `prefix` (ASCII,
/// compared case-insensitively).
fn has_kind_prefix(key: &str, prefix: &str) -> bool {
    let starts = |s: &str| s.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix));
    let trimmed = js_trim(key);
    !trimmed.is_empty() && (starts(trimmed) || parse_agent_key(trimmed).is_some_and(|k| starts(&k.rest)))
}

/// §1.3 isSubagentKey.
pub fn is_subagent_key(key: &str) -> bool {
    has_kind_prefix(key, "subagent:")
}

/// §1.3 isAcpKey.
pub fn is_acp_key(key: &str) -> bool {
    has_kind_prefix(key, "acp:")
}

/// §1.6 looksLikeSessionId: trimmed value is 8-4-4-4-12 hex, any case.
pub fn looks_like_session_id(v: &str) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let parts: Vec<&str> = js_trim(v).split('-').collect();
    parts.len() == GROUPS.len()
        && parts.iter().zip(GROUPS).all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// §1.6 looksLikeSessionKey.
pub fn looks_like_session_key(v: &str) -> bool {
    let raw = js_trim(v);
    if raw.is_empty() {
        return false;
    }
    matches!(raw, "main" | "global" | "unknown")
        || is_acp_key(raw)
        || ["agent:", "cron:", "hook:", "node-", "node:"].iter().any(|p| raw.starts_with(p))
        || names_group(raw)
}

/// The key contains `:group:` or `:channel:` somewhere.
fn names_group(key: &str) -> bool {
    key.contains(":group:") || key.contains(":channel:")
}

/// §1.6 shouldResolveAsSessionId.
pub fn should_resolve_as_session_id(v: &str) -> bool {
    looks_like_session_id(v) || !looks_like_session_key(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    Group,
    Channel,
}

/// A group or channel chat key taken apart (§1.7 parseGroupKey).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupKey {
    pub channel: String,
    pub kind: GroupKind,
    pub id: String,
}

/// §1.7 parseGroupKey: strip an `agent:<id>:` prefix when it parses, split dropping empties, ≥ 3
/// parts with part 2 `group` or `channel`.
pub fn parse_group_key(key: &str) -> Option<GroupKey> {
    let raw = js_trim(key);
    if raw.is_empty() {
        return None;
    }
    let rest = agent_key_rest(raw);
    let body = rest.as_deref().unwrap_or(raw);
    let parts: Vec<&str> = body.split(':').filter(|p| !p.is_empty()).collect();
    let (channel, kind, rest) = match parts.as_slice() {
        [channel, kind, rest @ ..] if !rest.is_empty() => (*channel, *kind, rest),
        _ => return None,
    };
    let kind = match kind {
        "group" => GroupKind::Group,
        "channel" => GroupKind::Channel,
        _ => return None,
    };
    Some(GroupKey { channel: channel.to_string(), kind, id: rest.join(":") })
}

/// The tool-layer kind of a session (SESSION_TOOLS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionKind {
    Main,
    Group,
    Cron,
    Hook,
    Node,
    Other,
}

impl SessionKind {
    pub const ALL: [SessionKind; 6] = [
        SessionKind::Main,
        SessionKind::Group,
        SessionKind::Cron,
        SessionKind::Hook,
        SessionKind::Node,
        SessionKind::Other,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Main => "main",
            SessionKind::Group => "group",
            SessionKind::Cron => "cron",
            SessionKind::Hook => "hook",
            SessionKind::Node => "node",
            SessionKind::Other => "other",
        }
    }
    /// Trimmed, lower-cased name → kind.
    pub fn parse(s: &str) -> Option<SessionKind> {
        let wanted = js_trim(s).to_lowercase();
        SessionKind::ALL.into_iter().find(|k| k.as_str() == wanted)
    }
}

/// The gateway-side kind (`classifySessionKey`, §1.7): `global`, `unknown`, `group` (entry
/// chatType group/channel, or the key contains `:group:`/`:channel:`), else `direct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayKind {
    Direct,
    Group,
    Global,
    Unknown,
}

impl GatewayKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayKind::Direct => "direct",
            GatewayKind::Group => "group",
            GatewayKind::Global => "global",
            GatewayKind::Unknown => "unknown",
        }
    }
}

pub fn gateway_kind(key: &str, chat_type: Option<&str>) -> GatewayKind {
    match key {
        "global" => return GatewayKind::Global,
        "unknown" => return GatewayKind::Unknown,
        _ => {}
    }
    let group_chat = chat_type.is_some_and(|t| matches!(t, "group" | "channel"));
    if group_chat || names_group(key) {
        GatewayKind::Group
    } else {
        GatewayKind::Direct
    }
}

/// The kind a key has on its own, whatever the config: `cron`/`hook`/`node` (bare prefixes
/// `cron:`, `hook:`, `node-`, `node:`, or the same at the start of the rest of a canonical
/// `agent:<id>:` key, DECISIONS.md), `group` (contains `:group:`/`:channel:`), else `other`.
/// `main` is never returned: whether a key is a main session depends on the config
/// ([`KeyModel::classify_kind`]).
pub fn key_kind(key: &str) -> SessionKind {
    fn internal_kind(s: &str) -> Option<SessionKind> {
        if s.starts_with("cron:") {
            Some(SessionKind::Cron)
        } else if s.starts_with("hook:") {
            Some(SessionKind::Hook)
        } else if s.starts_with("node-") || s.starts_with("node:") {
            Some(SessionKind::Node)
        } else {
            None
        }
    }
    let raw = js_trim(key);
    if let Some(kind) = internal_kind(raw) {
        return kind;
    }
    if let Some(kind) = agent_key_rest(raw).and_then(|rest| internal_kind(&rest)) {
        return kind;
    }
    if names_group(raw) {
        SessionKind::Group
    } else {
        SessionKind::Other
    }
}

/// The config-derived part of the key model (REFERENCE.md §1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyModel {
    global_scope: bool,
    main_key: String,
    default_agent: String,
}

impl KeyModel {
    /// `main_key` is trimmed and lower-cased (empty → `main`); `default_agent` normalized.
    pub fn new(global_scope: bool, main_key: &str, default_agent: &str) -> Self {
        let main_key = js_trim(main_key).to_lowercase();
        KeyModel {
            global_scope,
            main_key: if main_key.is_empty() { DEFAULT_MAIN_KEY.to_string() } else { main_key },
            default_agent: normalize_agent_id(default_agent),
        }
    }
    pub fn is_global_scope(&self) -> bool {
        self.global_scope
    }
    pub fn main_key(&self) -> &str {
        &self.main_key
    }
    pub fn default_agent(&self) -> &str {
        &self.default_agent
    }
    /// `global` under global scope, else the main key (§1.1 alias).
    pub fn alias(&self) -> &str {
        if self.global_scope {
            "global"
        } else {
            &self.main_key
        }
    }

    /// The main session key of an agent: `global` under global scope, else
    /// `agent:<normalized id>:<mainKey>`.
    pub fn main_session_key_of(&self, agent_id: &str) -> String {
        if self.global_scope {
            "global".to_string()
        } else {
            format!("agent:{}:{}", normalize_agent_id(agent_id), self.main_key)
        }
    }
    /// The configured main session: the main session key of the default agent.
    pub fn main_session_key(&self) -> String {
        self.main_session_key_of(&self.default_agent)
    }

    /// Checks a raw key a caller passed: `Err(INVALID_REQUEST)` when it is empty after trimming
    /// (`<what> required`), longer than [`MAX_KEY_LEN`] bytes (`invalid <what>: too long (max 512)`)
    /// or contains a NUL or other control character (`invalid <what>: contains a control
    /// character`). Returns the trimmed key.
    pub fn check_raw<'a>(&self, raw: &'a str, what: &str) -> Result<&'a str> {
        let trimmed = js_trim(raw);
        if trimmed.is_empty() {
            return Err(Error::invalid_request(format!("{what} required")));
        }
        if trimmed.len() > MAX_KEY_LEN {
            return Err(too_long(what));
        }
        if trimmed.chars().any(char::is_control) {
            return Err(Error::invalid_request(format!("invalid {what}: contains a control character")));
        }
        Ok(trimmed)
    }

    /// The canonical store key (§1.5): `global`/`unknown` unchanged; agent keys get their id
    /// normalized and main aliases (`main`, mainKey, `agent:<id>:<mainKey>`, `agent:<id>:main`)
    /// mapped to that agent's main session key; bare `main`/mainKey → the default agent's main
    /// session; any other bare key → `agent:<defaultAgent>:<raw>` (case kept). Errors as
    /// [`KeyModel::check_raw`] with what = `key`; a canonical key that would exceed
    /// [`MAX_KEY_LEN`] (a long bare key plus its prefix) is refused as too long as well.
    pub fn canonical(&self, raw: &str) -> Result<String> {
        let key = self.check_raw(raw, "key")?;
        // Iterated to its fixed point (a trailing blank inside a bare key is trimmed once it is
        // the end of a canonical key), so the canonical form of a canonical key is itself.
        let no_name = || Error::invalid_request("invalid key: it has no name between its colons");
        let mut canonical = js_trim(&self.canonical_of_checked(key).ok_or_else(no_name)?).to_string();
        for _ in 0..4 {
            let next = js_trim(&self.canonical_of_checked(&canonical).ok_or_else(no_name)?).to_string();
            if next == canonical {
                break;
            }
            canonical = next;
        }
        // A bare key grows by its `agent:<id>:` prefix; what comes out must still be a key the
        // engine accepts when it is handed back.
        if canonical.len() > MAX_KEY_LEN {
            return Err(too_long("key"));
        }
        Ok(canonical)
    }

    /// The canonical form of a checked key; `None` for a key with no name in it (only colons).
    /// Always a fixed point: the canonical form of a canonical key is itself (empty segments
    /// are dropped from bare keys as from agent keys, so `a::b` and `agent:main:a::b` are one
    /// session).
    fn canonical_of_checked(&self, key: &str) -> Option<String> {
        if key == "global" || key == "unknown" {
            return Some(key.to_string());
        }
        if let Some(AgentKey { agent_id, rest }) = parse_agent_key(key) {
            return Some(if rest == DEFAULT_MAIN_KEY || rest == self.main_key {
                self.main_session_key_of(&agent_id)
            } else {
                format!("agent:{agent_id}:{rest}")
            });
        }
        if key == DEFAULT_MAIN_KEY || key == self.main_key {
            return Some(self.main_session_key());
        }
        let prefixed = format!("agent:{}:{key}", self.default_agent);
        parse_agent_key(&prefixed)?;
        self.canonical_of_checked(&prefixed)
    }

    /// The key a stored entry of agent `agent_id`'s store gets when a gateway state folder is
    /// imported (REFERENCE.md §2.8 step 4): the legacy forms are rewritten as the reference's
    /// one-shot migration does — `subagent:<rest>` → `agent:<id>:subagent:<rest>`; `group:<gid>`
    /// → `agent:<id>:whatsapp:group:<gid>` for a `@g.us` id, else `agent:<id>:unknown:group:<gid>`;
    /// a bare `<jid>@g.us` → `agent:<id>:whatsapp:group:<jid>`; `whatsapp:<…@g.us>` without
    /// `:group:` → `agent:<id>:whatsapp:group:<rest>` (each form recognised whatever its case) —
    /// and then the key is canonical by the one case rule of every path (DECISIONS.md): the
    /// agent id is lower-case, the rest of the key keeps its case, exactly as
    /// [`KeyModel::canonical`] does at run time, so an imported entry is found under the key
    /// the gateway finds it under. A bare key is one of agent `agent_id` (not of the default
    /// agent). Errors as [`KeyModel::canonical`].
    pub fn import_canonical(&self, raw: &str, agent_id: &str) -> Result<String> {
        let key = self.check_raw(raw, "key")?;
        let id = normalize_agent_id(agent_id);
        let lower = key.to_lowercase();
        let after = |prefix: &str| {
            key.get(..prefix.len()).filter(|p| p.eq_ignore_ascii_case(prefix)).map(|_| &key[prefix.len()..])
        };
        let out = if key == "global" || key == "unknown" || parse_agent_key(key).is_some() {
            key.to_owned()
        } else if key == DEFAULT_MAIN_KEY || key == self.main_key {
            self.main_session_key_of(&id)
        } else if let Some(rest) = after("subagent:") {
            format!("agent:{id}:subagent:{rest}")
        } else if let Some(gid) = after("group:") {
            let channel = if lower.contains("@g.us") { "whatsapp" } else { "unknown" };
            format!("agent:{id}:{channel}:group:{gid}")
        } else if let Some(rest) = after("whatsapp:").filter(|_| lower.contains("@g.us") && !lower.contains(":group:"))
        {
            let rest = rest.get(..6).filter(|p| p.eq_ignore_ascii_case("group:")).map_or(rest, |_| &rest[6..]);
            format!("agent:{id}:whatsapp:group:{rest}")
        } else if lower.ends_with("@g.us") && !key.contains(':') {
            format!("agent:{id}:whatsapp:group:{key}")
        } else {
            format!("agent:{id}:{key}")
        };
        // the same fixed point as every other key (main aliases, empty segments, length)
        self.canonical(&out)
    }

    /// Tool-level resolution of a key-like input for a requester of agent `requester_agent`
    /// (SESSION_TOOLS.md: `main` is the current agent's main session): the literal `main`, the
    /// main key and the alias map to `main_session_key_of(requester_agent)`; everything else is
    /// [`KeyModel::canonical`].
    pub fn resolve_for(&self, raw: &str, requester_agent: &str) -> Result<String> {
        let key = self.check_raw(raw, "key")?;
        if key == DEFAULT_MAIN_KEY || key == self.main_key || key == self.alias() {
            return Ok(self.main_session_key_of(requester_agent));
        }
        self.canonical(key)
    }

    /// §1.5 storeKeys: lookup candidates, canonical first, then the trimmed raw key when it
    /// differs.
    pub fn store_keys(&self, raw: &str) -> Result<Vec<String>> {
        let canonical = self.canonical(raw)?;
        let trimmed = js_trim(raw);
        let mut keys = vec![canonical];
        if keys.iter().all(|k| k != trimmed) {
            keys.push(trimmed.to_string());
        }
        Ok(keys)
    }

    /// The agent a key belongs to (DECISIONS.md: bare keys, `global` and `unknown` belong to the
    /// configured default agent; agent keys to their normalized id).
    pub fn agent_id_of(&self, key: &str) -> String {
        parse_agent_key(key).map_or_else(|| self.default_agent.clone(), |k| k.agent_id)
    }

    /// Whether `key` (canonical or literal) is the main session of some agent: the alias, the
    /// main key, the literal `main`, `global` under global scope, or `agent:<id>:<mainKey>` (and
    /// `agent:<id>:main`, which [`KeyModel::canonical`] maps to it): exactly the keys whose
    /// canonical form is some agent's main session key.
    pub fn is_main_session(&self, key: &str) -> bool {
        let key = js_trim(key);
        if let Some(rest) = agent_key_rest(key) {
            return rest == self.main_key || rest == DEFAULT_MAIN_KEY;
        }
        key == self.alias() || key == self.main_key || key == DEFAULT_MAIN_KEY
    }

    /// How a canonical key is shown to a requester of agent `requester_agent` (DECISIONS.md):
    /// the requester agent's own main session (or `global` under global scope) → `main`; so are
    /// the literal alias and main key (§1.4 display, K2/K3); everything else unchanged. Whatever
    /// shows as `main` resolves back to the same session through [`KeyModel::resolve_for`].
    pub fn display(&self, key: &str, requester_agent: &str) -> String {
        self.display_beside(key, &self.main_session_key_of(requester_agent)).to_string()
    }

    /// As [`KeyModel::display`], given the requester agent's main session key (worked out once
    /// for the many keys of a listing).
    pub fn display_beside<'k>(&self, key: &'k str, requester_main: &str) -> &'k str {
        let trimmed = js_trim(key);
        if trimmed == self.alias() || trimmed == self.main_key || trimmed == requester_main {
            DEFAULT_MAIN_KEY
        } else {
            key
        }
    }

    /// §1.7 classifyKind as amended by DECISIONS.md: a main session → `main`; else
    /// [`key_kind`] for cron/hook/node; else `group` when `gateway_group` (entry chatType
    /// group/channel) or the key names a group/channel; else `other`.
    pub fn classify_kind(&self, key: &str, gateway_group: bool) -> SessionKind {
        if self.is_main_session(key) {
            return SessionKind::Main;
        }
        match key_kind(key) {
            SessionKind::Other if gateway_group => SessionKind::Group,
            kind => kind,
        }
    }

    /// §1.7 deriveChannel as amended: cron/hook/node → `internal`; trimmed `channel`; trimmed
    /// `last_channel`; the channel of a group key (bare or canonical, via [`parse_group_key`]);
    /// else `unknown`.
    pub fn derive_channel(
        &self,
        key: &str,
        kind: SessionKind,
        channel: Option<&str>,
        last_channel: Option<&str>,
    ) -> String {
        if matches!(kind, SessionKind::Cron | SessionKind::Hook | SessionKind::Node) {
            return "internal".to_string();
        }
        [channel, last_channel]
            .into_iter()
            .flatten()
            .map(js_trim)
            .find(|c| !c.is_empty())
            .map(str::to_string)
            .or_else(|| parse_group_key(key).map(|g| g.channel))
            .unwrap_or_else(|| "unknown".to_string())
    }
}

/// §1.3 threadParent: the part before the last `:thread:` or `:topic:` marker (case-insensitive),
/// none when there is no marker or it stands at position 0.
pub fn thread_parent(key: &str) -> Option<&str> {
    let raw = js_trim(key);
    let idx = [":thread:", ":topic:"].iter().filter_map(|m| rfind_ascii_ci(raw, m)).max()?;
    if idx == 0 {
        return None;
    }
    // `idx` is where an ASCII `:` starts, so it is a char boundary.
    let parent = js_trim(raw.get(..idx)?);
    (!parent.is_empty()).then_some(parent)
}

/// Byte offset of the last ASCII-case-insensitive occurrence of the ASCII `needle`. Works on
/// bytes of the original string, so offsets are never shifted by Unicode lower-casing.
fn rfind_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (0..=h.len() - n.len()).rev().find(|&i| h.get(i..i + n.len()).is_some_and(|w| w.eq_ignore_ascii_case(n)))
}

fn too_long(what: &str) -> Error {
    Error::invalid_request(format!("invalid {what}: too long (max {MAX_KEY_LEN})"))
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
