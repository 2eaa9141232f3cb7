//! `sessions_list` as OpenClaw 2026.9.6 answers it (OPENCLAW-2026.9.md §1.1): the inventory
//! filters, offset paging (`hasMore`, `nextOffset`, `limitApplied`), the scan budget (pages of
//! 200, at most 5, then `truncationReason: "scan-limit"`), the visibility rule of
//! `policy::visibility`, the closed row, and the 64 KiB budget of the pretty-printed result
//! (previews and inline messages dropped first, then rows, `truncationReason: "byte-limit"`).
//!
//! Every page is O(limit): the store reads at most 5 × 200 rows per call, each query driven by
//! an index (`store::inventory`), and titles, previews and messages are read only for the rows
//! that are returned.

use serde_json::{json, Map, Value};

use super::params;
use super::{display_key, requester_agent, ToolInput};
use crate::config::SessionVisibility;
use crate::engine::Engine;
use crate::entry;
use crate::error::{Error, Result};
use crate::keys::{self, SessionKind};
use crate::policy::visibility::{self, is_incognito_key, Target, Viewer};
use crate::store::inventory::InventoryFilter;
use crate::store::ListedRow;

const TOOL: &str = "sessions_list";
/// Most rows whose title/preview is read.
const TRANSCRIPT_FIELD_ROWS: usize = 100;

/// The row's run status, when one of the schema's values.
const STATUSES: &[&str] = &["queued", "running", "done", "failed", "killed", "timeout"];

struct Params {
    limit: u32,
    offset: u64,
    active_minutes: Option<u64>,
    message_limit: u32,
    titles: bool,
    last: bool,
    filter: InventoryFilter,
}

fn read_params(args: &Value, rules: &crate::contract::Rules) -> std::result::Result<Params, String> {
    if params::is_true(args, "activeOnly") {
        return Err("activeOnly requires a Gateway-backed inventory with live run state".into());
    }
    let kinds = params::string_list(args, "kinds")
        .map(|k| k.iter().filter_map(|s| SessionKind::parse(&s.to_lowercase())).collect::<Vec<_>>());
    let limit = params::positive_integer(args, "limit")?.unwrap_or(u64::from(rules.list_default_limit));
    let offset = params::non_negative_integer(args, "offset")?.unwrap_or(0);
    let active_minutes = params::positive_integer(args, "activeMinutes")?;
    let message_limit = params::non_negative_integer(args, "messageLimit")?.unwrap_or(0);
    let relationship = params::string_if_given(args, "relationship")?;
    if let Some(r) = relationship {
        if !matches!(r.as_str(), "owned" | "created" | "involving") {
            return Err("relationship must be owned, created, or involving".into());
        }
        return Err(
            "relationship requires an authenticated requesting user; use an explicit ownerId or creatorId instead"
                .into(),
        );
    }
    let archived = match params::raw(args, "archived") {
        Some(Value::String(s)) if s == "all" => None,
        Some(Value::Bool(true)) => Some(true),
        _ => Some(false),
    };
    let filter = InventoryFilter {
        agent_id: params::string(args, "agentId", false)?.map(|a| keys::normalize_agent_id(&a)),
        label: params::string(args, "label", false)?,
        search: params::string(args, "search", false)?.map(|s| s.to_lowercase()),
        archived,
        pinned: params::raw(args, "pinned").and_then(Value::as_bool),
        owner_id: params::string_if_given(args, "ownerId")?,
        creator_id: params::string_if_given(args, "creatorId")?,
        project_id: params::string_if_given(args, "projectId")?,
        workspace_dir: params::string_if_given(args, "workspaceDir")?,
        group: params::raw(args, "group").and_then(Value::as_str).map(str::to_string),
        exclude_subagents: params::is_true(args, "excludeSubagents"),
        kinds,
        ..InventoryFilter::default()
    };
    Ok(Params {
        limit: limit.min(u64::from(rules.list_max_limit)) as u32,
        offset,
        active_minutes,
        message_limit: message_limit.min(u64::from(rules.list_max_message_limit)) as u32,
        titles: params::is_true(args, "includeDerivedTitles"),
        last: params::is_true(args, "includeLastMessage"),
        filter,
    })
}

/// A row kept for the answer, with its inventory offset.
struct Kept {
    row: ListedRow,
    agent: String,
    offset: u64,
}

/// The visibility prefilter the store can apply (a superset of what the viewer admits).
fn scope_filter(f: &mut InventoryFilter, viewer: &Viewer, cfg: &crate::config::Config) {
    if viewer.restrict_to_spawned {
        f.spawned_by = Some(viewer.key.clone());
    }
    match viewer.mode {
        SessionVisibility::SelfOnly => f.only_key = Some(viewer.key.clone()),
        SessionVisibility::Agent => f.agents = Some(vec![viewer.agent.clone()]),
        SessionVisibility::Tree if viewer.is_main() => {
            f.agents = Some(vec![viewer.agent.clone()]);
            f.owned_by = Some(viewer.key.clone());
        }
        SessionVisibility::Tree => f.tree_of = Some(viewer.key.clone()),
        SessionVisibility::All => {
            let a2a = &cfg.agent_to_agent;
            if !a2a.enabled {
                f.agents = Some(vec![viewer.agent.clone()]);
                f.owned_by = Some(viewer.key.clone());
            }
        }
    }
}

/// `sessions_list` for the 2026.9 contract.
pub fn run(engine: &Engine, input: &ToolInput<'_>) -> Result<Value> {
    let cfg = engine.config();
    let rules = cfg.rules();
    let km = cfg.key_model();
    let mut p = match read_params(input.args, rules) {
        Ok(p) => p,
        Err(msg) => return Ok(super::super::thrown(TOOL, msg)),
    };
    let requester = input.requester(&cfg)?;
    let agent = requester_agent(&cfg, input.ctx, &requester);
    let viewer = Viewer::new(&cfg, input.ctx.sandboxed, requester.key.as_deref(), &agent);
    let f = &mut p.filter;
    scope_filter(f, &viewer, &cfg);
    f.include_global = !viewer.restrict_to_spawned && km.alias() == "global";
    f.active_since =
        p.active_minutes.map(|m| entry::now_ms().saturating_sub((m.min(i64::MAX as u64 / 60_000) as i64) * 60_000));
    f.main_key = km.main_key().to_string();
    f.global_scope = km.is_global_scope();
    f.default_agent = km.default_agent().to_string();

    let (page_rows, max_pages) = rules.list_scan.unwrap_or((200, 5));
    let mut kept: Vec<Kept> = Vec::new();
    let mut offset = p.offset;
    let mut has_more = false;
    let mut next_offset: Option<u64> = None;
    let mut truncation: Option<&str> = None;
    let out_limit = p.limit as usize;
    engine.store().read(|db| {
        for page_index in 0..max_pages {
            f.offset = offset;
            f.limit = page_rows;
            let rows = db.inventory_page(f)?;
            let full = rows.len() == page_rows as usize;
            let count = rows.len();
            for (index, row) in rows.into_iter().enumerate() {
                if is_incognito_key(&row.key) || malformed_agent_key(&row.key) {
                    continue;
                }
                let target_agent = visibility::target_agent(&cfg, &row.key);
                let e = &row.entry;
                let t = Target {
                    key: &row.key,
                    agent: &target_agent,
                    owner_session_key: entry::str_field(e, "ownerSessionKey"),
                    spawned_by: entry::str_field(e, "spawnedBy"),
                    parent_session_key: entry::str_field(e, "parentSessionKey"),
                };
                if viewer.check(&t).is_err() {
                    continue;
                }
                kept.push(Kept { row, agent: target_agent, offset: offset + index as u64 });
                if kept.len() == out_limit {
                    has_more = index + 1 < count || full;
                    next_offset = has_more.then_some(offset + index as u64 + 1);
                    return Ok(());
                }
            }
            if !full {
                has_more = false;
                next_offset = None;
                return Ok(());
            }
            has_more = true;
            offset += count as u64;
            next_offset = Some(offset);
            if page_index + 1 >= max_pages {
                truncation = Some("scan-limit");
            }
        }
        Ok(())
    })?;

    let mut rows: Vec<Map<String, Value>> = kept.iter().map(|k| row(&cfg, &viewer, k)).collect();
    if p.titles || p.last || p.message_limit > 0 {
        engine.store().read(|db| {
            for (i, (k, r)) in kept.iter().zip(rows.iter_mut()).enumerate() {
                let sid = entry::str_field(&k.row.entry, "sessionId").unwrap_or_default();
                if (p.titles || p.last) && !sid.is_empty() && i < TRANSCRIPT_FIELD_ROWS {
                    let want_title = p.titles && !r.contains_key("derivedTitle");
                    let (title, preview) = engine.title_and_preview(db, &k.row, want_title, p.last)?;
                    if let Some(t) = title {
                        r.insert("derivedTitle".into(), Value::from(t));
                    }
                    if let Some(pv) = preview {
                        r.insert("lastMessagePreview".into(), Value::from(pv));
                    }
                }
                if p.message_limit > 0 {
                    let page = db.history_page(sid, p.message_limit, None)?;
                    let msgs: Vec<Value> = page
                        .messages
                        .iter()
                        .filter(|m| !matches!(m.role.as_deref(), Some("toolResult") | Some("tool")))
                        .filter_map(|m| serde_json::from_str(&m.json).ok())
                        .collect();
                    r.insert("messages".into(), Value::Array(msgs));
                }
            }
            Ok(())
        })?;
    }
    let offsets: Vec<u64> = kept.iter().map(|k| k.offset).collect();
    let answer = Answer {
        rows,
        offsets,
        has_more,
        next_offset,
        limit_applied: p.limit,
        truncation,
        notice: viewer.list_notice(),
        enrichment_omitted: false,
    };
    answer.fit(rules.list_max_result_bytes.unwrap_or(usize::MAX))
}

/// `classifySessionKeyShape(key) === "malformed_agent"`: starts with `agent:` but does not
/// parse as `agent:<id>:<rest>`.
fn malformed_agent_key(key: &str) -> bool {
    crate::keys9::shape(key) == crate::keys9::KeyShape::MalformedAgent
}

/// An actor projected to `{type, id, label, identity}`.
fn actor(v: &Value) -> Value {
    let mut m = Map::new();
    for f in ["type", "id", "label", "identity"] {
        if let Some(x) = v.get(f).filter(|x| !x.is_null()) {
            m.insert(f.into(), x.clone());
        }
    }
    Value::Object(m)
}

/// A visible reference to another session, as shown; None when not visible.
fn visible_reference(cfg: &crate::config::Config, viewer: &Viewer, key: &str, parent: Option<&str>) -> Option<String> {
    if is_incognito_key(key) {
        return None;
    }
    let agent = visibility::target_agent(cfg, key);
    let t = Target { key, agent: &agent, parent_session_key: parent, ..Target::default() };
    viewer.check(&t).ok().map(|_| display_key(cfg, key))
}

/// The closed 2026.9 row.
fn row(cfg: &crate::config::Config, viewer: &Viewer, k: &Kept) -> Map<String, Value> {
    let km = cfg.key_model();
    let e = &k.row.entry;
    let key = k.row.key.as_str();
    // an imported 2026.9 session keeps its routing facts in its latest session window
    let window = e.get("sessionWindows").and_then(Value::as_array).and_then(|w| w.last());
    let window_field = |f: &str| window.and_then(|w| w.get(f)).and_then(Value::as_str);
    let chat_type = entry::str_field(e, "chatType").or_else(|| window_field("chatType"));
    let group_chat = matches!(chat_type.map(str::trim), Some("group") | Some("channel"));
    let kind = km.classify_kind(key, group_chat);
    let origin = e.get("origin").and_then(|o| o.get("provider")).and_then(Value::as_str);
    let dc = entry::delivery_context(e);
    let channel = km.derive_channel(
        key,
        kind,
        entry::str_field(e, "channel").or_else(|| window_field("channel")).or(origin),
        dc.channel.as_deref().or_else(|| entry::str_field(e, "lastChannel")),
    );
    let text = |f: &str| entry::str_field(e, f).filter(|s| !s.is_empty()).map(Value::from);
    let number = |f: &str| e.get(f).filter(|v| v.is_number()).cloned();
    let mut m = Map::new();
    m.insert("key".into(), Value::from(display_key(cfg, key)));
    if let Some(v) = text("sessionId") {
        m.insert("sessionId".into(), v);
    }
    m.insert("agentId".into(), Value::from(k.agent.clone()));
    m.insert("kind".into(), Value::from(kind.as_str()));
    m.insert("channel".into(), Value::from(channel));
    m.insert("archived".into(), Value::Bool(e.get("archivedAt").is_some_and(|v| !v.is_null())));
    m.insert("pinned".into(), Value::Bool(e.get("pinnedAt").is_some_and(|v| !v.is_null())));
    if let Some(v) = text("label") {
        m.insert("label".into(), v);
    }
    if let Some(a) = e.get("createdActor").filter(|v| v.is_object()) {
        m.insert("createdActor".into(), actor(a));
    }
    if let Some(a) = e.get("owner").and_then(|o| o.get("actor")).filter(|v| v.is_object()) {
        m.insert("owner".into(), json!({"actor": actor(a)}));
    }
    if let Some(w) = e.get("worktree").filter(|v| v.is_object()) {
        m.insert("worktree".into(), pick(w, &["id", "branch", "repoRoot"]));
    }
    if let Some(v) = text("repositoryWorkspaceId") {
        m.insert("repositoryWorkspaceId".into(), v);
    }
    if let Some(r) = e.get("repository").filter(|v| v.is_object()) {
        m.insert("repository".into(), pick(r, &["url", "ref", "branch"]));
    }
    for f in ["execCwd", "spawnedCwd", "spawnedWorkspaceDir", "projectId", "workspaceDir"] {
        if let Some(v) = text(f) {
            m.insert(f.into(), v);
        }
    }
    if let Some(v) = text("category") {
        m.insert("group".into(), v);
    }
    for f in ["displayName", "derivedTitle", "lastMessagePreview"] {
        if let Some(v) = text(f) {
            m.insert(f.into(), v);
        }
    }
    let parent = entry::str_field(e, "parentSessionKey").or_else(|| entry::str_field(e, "spawnedBy"));
    if let Some(p) = parent.and_then(|p| visible_reference(cfg, viewer, p, None)) {
        m.insert("parentSessionKey".into(), Value::from(p));
    }
    if let Some(v) = number("updatedAt") {
        m.insert("updatedAt".into(), v);
    }
    if let Some(v) = text("model") {
        m.insert("model".into(), v);
    }
    for f in ["contextTokens", "totalTokens"] {
        if let Some(v) = number(f) {
            m.insert(f.into(), v);
        }
    }
    if let Some(s) = entry::str_field(e, "status").filter(|s| STATUSES.contains(s)) {
        m.insert("status".into(), Value::from(s));
    }
    if let Some(b) = e.get("abortedLastRun").filter(|v| v.is_boolean()) {
        m.insert("abortedLastRun".into(), b.clone());
    }
    if let Some(children) = e.get("childSessions").and_then(Value::as_array) {
        let visible: Vec<Value> = children
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|c| visible_reference(cfg, viewer, c, Some(key)))
            .map(Value::from)
            .collect();
        m.insert("childSessions".into(), Value::Array(visible));
    }
    m
}

/// The named fields of an object, when present.
fn pick(v: &Value, fields: &[&str]) -> Value {
    let mut m = Map::new();
    for f in fields {
        if let Some(x) = v.get(*f).filter(|x| !x.is_null()) {
            m.insert((*f).into(), x.clone());
        }
    }
    Value::Object(m)
}

/// The answer before the byte budget.
struct Answer<'a> {
    rows: Vec<Map<String, Value>>,
    offsets: Vec<u64>,
    has_more: bool,
    next_offset: Option<u64>,
    limit_applied: u32,
    truncation: Option<&'a str>,
    notice: Option<Value>,
    enrichment_omitted: bool,
}

impl Answer<'_> {
    /// The result with the first `count` rows.
    fn result(&self, count: usize) -> Value {
        let cut = count < self.rows.len();
        let mut m = Map::new();
        m.insert("count".into(), Value::from(count));
        m.insert("sessions".into(), Value::Array(self.rows[..count].iter().cloned().map(Value::Object).collect()));
        m.insert("hasMore".into(), Value::Bool(cut || self.has_more));
        let next = if cut { self.offsets.get(count).copied() } else { self.next_offset };
        if let Some(n) = next {
            m.insert("nextOffset".into(), Value::from(n));
        }
        m.insert("limitApplied".into(), Value::from(self.limit_applied));
        if self.enrichment_omitted {
            m.insert("enrichmentOmitted".into(), Value::Bool(true));
        }
        if cut {
            m.insert("truncationReason".into(), Value::from("byte-limit"));
        } else if let Some(t) = self.truncation {
            m.insert("truncationReason".into(), Value::from(t));
        }
        if let Some(n) = &self.notice {
            m.insert("visibility".into(), n.clone());
        }
        Value::Object(m)
    }

    fn fits(&self, count: usize, max: usize) -> bool {
        serde_json::to_string_pretty(&self.result(count)).map(|s| s.len() <= max).unwrap_or(false)
    }

    /// Applies the byte budget: when even one row does not fit, previews and messages are
    /// dropped from every row; then the largest row count that fits is kept.
    fn fit(mut self, max: usize) -> Result<Value> {
        let whole = self.result(self.rows.len());
        if serde_json::to_string_pretty(&whole).map(|s| s.len() <= max).unwrap_or(false) {
            return Ok(whole);
        }
        if !self.rows.is_empty() && !self.fits(1, max) {
            for r in &mut self.rows {
                for f in ["messages", "derivedTitle", "lastMessagePreview"] {
                    self.enrichment_omitted |= r.remove(f).is_some();
                }
            }
        }
        let mut count = self.rows.len();
        if !self.fits(count, max) {
            let (mut lo, mut hi) = (0usize, count);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if self.fits(mid, max) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            count = lo;
            if count == 0 {
                return Err(Error::invalid_request(
                    "Session metadata exceeds the 64 KiB result budget even without previews; use a narrower inventory query",
                ));
            }
        }
        Ok(self.result(count))
    }
}
