//! `sessions_list` (REFERENCE.md §3, SESSION_TOOLS.md, DECISIONS.md): the sessions the caller
//! may see, newest first. Kind and cross-agent filters apply before the limit, so a listing
//! returns up to `limit` matching rows.

use serde_json::Value;

use super::indexed::RowIndex;
use super::{read_number, read_string, read_string_list, Requester, ToolContext};
use crate::config::Config;
use crate::engine::Engine;
use crate::entry;
use crate::entry::RowFields;
use crate::error::{Error, Result};
use crate::keys::SessionKind;
use crate::policy::{a2a, sandbox};
use crate::store::{Db, FieldSet, ListFilter};
use std::sync::Arc;

/// Rows returned when the model gives no `limit`.
pub const DEFAULT_LIMIT: u32 = 200;
/// Most rows one call returns.
pub const MAX_LIMIT: u32 = 1000;
/// Most messages per row.
pub const MAX_MESSAGE_LIMIT: u32 = 20;

/// Every entry field a row is built from ([`row`], with `entry::display_name`,
/// `entry::delivery_context`, `entry::total_tokens`, `Engine::transcript_path` and the kind):
/// the listing parses only these of each stored entry, into slots ([`ROW_SET`]; perf3: a whole
/// map per entry was 15% of a listing; listfast: a map of these fields still a fifth). A field
/// read by the row building and missing here would read as absent: the test
/// `list_rows_read_no_field_outside_row_fields` holds the two together.
pub const ROW_FIELDS: &[&str] = &[
    "abortedLastRun",
    "channel",
    "chatType",
    "contextTokens",
    "deliveryContext",
    "displayName",
    "groupChannel",
    "inputTokens",
    "label",
    "lastAccountId",
    "lastChannel",
    "lastThreadId",
    "lastTo",
    "model",
    "origin",
    "outputTokens",
    "sendPolicy",
    "sessionFile",
    "sessionId",
    "space",
    "subject",
    "systemSent",
    "thinkingLevel",
    "totalTokens",
    "updatedAt",
    "verboseLevel",
];

/// [`ROW_FIELDS`] with its lookup table.
pub static ROW_SET: std::sync::LazyLock<FieldSet> = std::sync::LazyLock::new(|| FieldSet::new(ROW_FIELDS));

fn floor_at_least_one(v: f64) -> u64 {
    v.floor().max(1.0).min(u32::MAX as f64) as u64
}

/// `sessions_list` as a value (for the tool envelope and the orchestrator).
pub fn run(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<Value> {
    let Listing(text, _) = run_text(engine, args, ctx)?;
    serde_json::from_str(&text).map_err(|e| crate::error::Error::store(format!("cannot read the listing back: {e}")))
}

/// `sessions_list` as JSON text, built straight from the stored entries: what the napi skin
/// hands to JS without a `serde_json::Value` in between.
pub fn run_text(engine: &Engine, args: &Value, ctx: &ToolContext) -> Result<Listing> {
    let cfg = engine.config();
    let km = cfg.key_model();
    let requester = Requester::of(&cfg, ctx)?;
    let restricted = sandbox::restrict_to_spawned(&cfg, ctx.sandboxed, requester.key.as_deref(), &requester.agent);
    let kinds: Option<Vec<SessionKind>> = read_string_list(args, "kinds")
        .map(|k| k.iter().filter_map(|s| SessionKind::parse(s)).collect::<Vec<_>>())
        .filter(|k| !k.is_empty());
    let limit =
        read_number(args, "limit").map(floor_at_least_one).unwrap_or(DEFAULT_LIMIT as u64).min(MAX_LIMIT as u64) as u32;
    let active = read_number(args, "activeMinutes").map(floor_at_least_one);
    let message_limit =
        read_number(args, "messageLimit").map(|v| v.floor().clamp(0.0, MAX_MESSAGE_LIMIT as f64) as u32).unwrap_or(0);

    let rows = engine.store().read(|db| {
        // Cross-agent rows the a2a policy does not admit are left out (§3.1 step 6b). The two
        // common configurations need no look at the store: disabled admits the requester's own
        // agent only; enabled with no allow list (or `*`) admits every agent.
        let a2a_cfg = &cfg.agent_to_agent;
        let open = a2a_cfg.enabled && a2a_cfg.allow.iter().all(|p| p.trim() == "*");
        let allowed: Option<Vec<String>> = if !a2a_cfg.enabled {
            Some(vec![requester.agent.clone()])
        } else if open {
            None
        } else {
            let mut agents: Vec<String> = db.stored_agents()?;
            agents.push(km.default_agent().to_owned());
            agents.sort();
            agents.dedup();
            Some(
                agents
                    .into_iter()
                    .filter(|a| a2a::check(a2a_cfg, &requester.agent, a) == a2a::A2aDecision::Allowed)
                    .collect(),
            )
        };
        // Only the agents the gateway lists at all (its `agents.list`, when there is one).
        let allowed = match (allowed, cfg.listed_agents()) {
            (Some(a), Some(listed)) => Some(a.into_iter().filter(|x| listed.contains(x)).collect()),
            (a, listed) => a.or(listed),
        };
        let filter = ListFilter {
            include_global: !restricted && km.is_global_scope(),
            include_unknown: false,
            spawned_by: if restricted { requester.key.clone() } else { None },
            active_since: active.map(|m| entry::now_ms().saturating_sub((m as i64).saturating_mul(60_000))),
            limit: Some(limit),
            kinds: kinds.clone(),
            agents: allowed,
            // added by 2026.9, offered under both contracts (API.md §10.4)
            label: read_string(args, "label"),
            agent_id: read_string(args, "agentId").map(|a| crate::keys::normalize_agent_id(&a)),
            search: read_string(args, "search").map(|s| s.to_lowercase()),
            main_key: km.main_key().to_owned(),
            global_scope: km.is_global_scope(),
            default_agent: km.default_agent().to_owned(),
        };
        if message_limit == 0 {
            return rows_text(engine, &cfg, &requester, db, &filter).map(Err);
        }
        let rows = db.list_sparse(&filter, &ROW_SET)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let messages = if message_limit > 0 {
                let sid = entry::str_field(&r.entry, "sessionId").unwrap_or_default();
                let page = db.history_page(sid, message_limit, None)?;
                let mut msgs = Vec::new();
                for m in page.messages.into_iter().filter(|m| m.role.as_deref() != Some("toolResult")) {
                    // Envelopes stripped as sessions_history strips them (the gateway reads both
                    // through chat.history).
                    if let Some(v) = super::history::shown(&m) {
                        msgs.push(v);
                    }
                }
                Some(msgs)
            } else {
                None
            };
            out.push((r, messages));
        }
        Ok(Ok(out))
    })?;
    let rows = match rows {
        Ok(rows) => rows,
        Err(text) => return Ok(text),
    };
    let shared = RowShared::new(engine, &cfg, &requester);
    let dcs: Vec<entry::DeliveryContext> = rows.iter().map(|(r, _)| entry::delivery_context(&r.entry)).collect();
    let out: Vec<Row<'_>> = rows
        .iter()
        .zip(&dcs)
        .map(|((r, messages), dc)| row(&shared, &r.key, &r.entry, dc, messages.as_deref()))
        .collect();
    render(&out)
}

/// The answer without messages, `{count, sessions}`, as JSON text with its rows indexed
/// (`indexed.rs`): each row's text is the one [`row`] renders, remembered by the stored entry
/// text it came from ([`RowMemo`](crate::engine::RowMemo)), so a row whose entry did not change
/// since it was last listed is not parsed nor built again, and keeps its stamp.
fn rows_text(
    engine: &Engine,
    cfg: &Arc<Config>,
    requester: &Requester,
    db: &Db<'_>,
    filter: &ListFilter,
) -> Result<Listing> {
    let memo = engine.list_rows();
    let agent = requester.agent.as_str();
    let shared = RowShared::new(engine, cfg, requester);
    // room for the rows of a short listing (about 600 bytes each) without growing
    let mut body: Vec<u8> = Vec::with_capacity(filter.limit.unwrap_or(64).min(64) as usize * 640);
    let mut index = RowIndex::default();
    db.list_texts(filter, |key, stored| {
        if !index.is_empty() {
            body.push(b',');
        }
        let start = body.len();
        let stamp = match memo.append(cfg, agent, key, stored, &mut body) {
            Some(stamp) => stamp,
            None => {
                let entry = super::list_row::RowEntry::parse(stored)
                    .map_err(|e| Error::store(format!("the stored entry of {key} is not valid JSON: {e}")))?;
                write_row(&shared, key, &entry, &mut body)?;
                memo.put(cfg, agent, key, stored, &body[start..])
            }
        };
        index.push(stamp, &body, start);
        Ok(())
    })?;
    Ok(Listing(answer(index.len(), &body)?, Some(index)))
}

/// Appends to `out` the row (without messages) of the session `key` with this entry, as JSON
/// text: what [`row`] gives, serialised.
pub(super) fn write_row<E: RowFields + ?Sized>(
    shared: &RowShared<'_>,
    key: &str,
    entry: &E,
    out: &mut Vec<u8>,
) -> Result<()> {
    let dc = entry::delivery_context(entry);
    row(shared, key, entry, &dc, None).write(out).map_err(|e| Error::store(format!("cannot encode the listing: {e}")))
}

/// The tool's answer, `{count, sessions}`, as JSON text.
fn render(rows: &[Row<'_>]) -> Result<Listing> {
    let mut body = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        r.write(&mut body).map_err(|e| Error::store(format!("cannot encode the listing: {e}")))?;
    }
    Ok(Listing(answer(rows.len(), &body)?, None))
}

/// `{"count":N,"sessions":[<body>]}`.
fn answer(count: usize, body: &[u8]) -> Result<String> {
    // and room for the index after it (`indexed.rs`)
    let mut out = Vec::with_capacity(body.len() + 32 + 24 * count);
    out.extend_from_slice(b"{\"count\":");
    out.extend_from_slice(count.to_string().as_bytes());
    out.extend_from_slice(b",\"sessions\":[");
    out.extend_from_slice(body);
    out.extend_from_slice(b"]}");
    String::from_utf8(out).map_err(|e| Error::store(format!("cannot encode the listing: {e}")))
}

/// `sessions_list`'s answer as JSON text ([`run`] parses it back for callers that need a
/// value), and where its rows lie in it when they were indexed.
pub struct Listing(pub String, pub Option<RowIndex>);

impl Listing {
    /// The text handed to JS: indexed when its rows were ([`super::indexed`]).
    pub fn into_wire(self) -> String {
        match self.1 {
            Some(index) if !index.is_empty() => {
                let prefix = self.0.find('[').map_or(0, |i| i + 1);
                index.wire(&["sessions"], prefix, self.0)
            }
            _ => self.0,
        }
    }
}

/// `deliveryContext` of a row: only the parts that are set.
struct RowDelivery<'a> {
    channel: Option<&'a str>,
    to: Option<&'a str>,
    account_id: Option<&'a str>,
}

/// One output row (§3.1): the fields in the reference's order, absent ones left out, only values
/// of the expected JSON type. Written straight to JSON text for the caller ([`Row::write`]: no
/// map is built).
struct Row<'a> {
    key: String,
    kind: &'static str,
    channel: String,
    label: Option<&'a str>,
    display_name: Option<String>,
    delivery_context: Option<RowDelivery<'a>>,
    updated_at: Option<&'a serde_json::Number>,
    session_id: Option<&'a str>,
    model: Option<&'a str>,
    context_tokens: Option<&'a serde_json::Number>,
    /// the gateway row's total: the stored one, else input + output (§2.7)
    total_tokens: Value,
    thinking_level: Option<&'a str>,
    verbose_level: Option<&'a str>,
    system_sent: Option<bool>,
    aborted_last_run: Option<bool>,
    send_policy: Option<&'a str>,
    last_channel: Option<&'a str>,
    last_to: Option<&'a str>,
    last_account_id: Option<&'a str>,
    transcript_path: Option<String>,
    messages: Option<&'a [Value]>,
}

impl Row<'_> {
    /// Appends the row as JSON: `{"key":…}`, the fields in order, absent ones left out; the
    /// bytes `serde_json` gives for the same fields (strings escaped as it escapes them).
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let mut w = JsonObject::open(out);
        w.str("key", &self.key)?;
        w.str("kind", self.kind)?;
        w.str("channel", &self.channel)?;
        w.opt_str("label", self.label)?;
        w.opt_str("displayName", self.display_name.as_deref())?;
        if let Some(dc) = &self.delivery_context {
            w.key("deliveryContext");
            let mut d = JsonObject::open(w.out);
            d.opt_str("channel", dc.channel)?;
            d.opt_str("to", dc.to)?;
            d.opt_str("accountId", dc.account_id)?;
            d.close();
        }
        w.opt_value("updatedAt", self.updated_at)?;
        w.opt_str("sessionId", self.session_id)?;
        w.opt_str("model", self.model)?;
        w.opt_value("contextTokens", self.context_tokens)?;
        w.opt_value("totalTokens", Some(&self.total_tokens))?;
        w.opt_str("thinkingLevel", self.thinking_level)?;
        w.opt_str("verboseLevel", self.verbose_level)?;
        w.opt_value("systemSent", self.system_sent.as_ref())?;
        w.opt_value("abortedLastRun", self.aborted_last_run.as_ref())?;
        w.opt_str("sendPolicy", self.send_policy)?;
        w.opt_str("lastChannel", self.last_channel)?;
        w.opt_str("lastTo", self.last_to)?;
        w.opt_str("lastAccountId", self.last_account_id)?;
        w.opt_str("transcriptPath", self.transcript_path.as_deref())?;
        w.opt_value("messages", self.messages)?;
        w.close();
        Ok(())
    }
}

/// A JSON object written member by member (names are ours, plain ASCII: written as they are).
struct JsonObject<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> JsonObject<'o> {
    fn open(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        JsonObject { out, first: true }
    }

    fn key(&mut self, name: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn str(&mut self, name: &str, v: &str) -> serde_json::Result<()> {
        self.key(name);
        // what needs no escape is copied (serde_json escapes `"`, `\\` and controls only)
        if v.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.out.push(b'"');
            self.out.extend_from_slice(v.as_bytes());
            self.out.push(b'"');
            Ok(())
        } else {
            serde_json::to_writer(&mut *self.out, v)
        }
    }

    fn opt_str(&mut self, name: &str, v: Option<&str>) -> serde_json::Result<()> {
        v.map_or(Ok(()), |v| self.str(name, v))
    }

    fn opt_value<T: serde::Serialize + ?Sized>(&mut self, name: &str, v: Option<&T>) -> serde_json::Result<()> {
        let Some(v) = v else { return Ok(()) };
        self.key(name);
        serde_json::to_writer(&mut *self.out, v)
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

/// What the rows of one listing share, worked out once per call (coldlist: a `format!` of the
/// requester's main key and a path join per row were a few % of a listing built row by row).
pub(super) struct RowShared<'c> {
    cfg: &'c Config,
    /// the requester agent's main session key (a row of it shows as `main`)
    requester_main: String,
    /// with a mirror folder: the text every mirrored transcript path starts with (`<dir>/`)
    mirror: Option<String>,
}

impl<'c> RowShared<'c> {
    pub(super) fn new(engine: &Engine, cfg: &'c Config, requester: &Requester) -> RowShared<'c> {
        // the folder joined with a file name, less that name: `Path::join`'s separator rule and
        // the lossy text of the folder, as `Engine::transcript_path` gives them
        let mirror = engine.mirror_dir().map(|dir| {
            let mut p = dir.join("_").to_string_lossy().into_owned();
            p.pop();
            p
        });
        RowShared { cfg, requester_main: cfg.key_model().main_session_key_of(&requester.agent), mirror }
    }

    /// [`Engine::transcript_path`] of an entry.
    pub(super) fn transcript_path<E: RowFields + ?Sized>(&self, entry: &E) -> Option<String> {
        let sid = entry.text("sessionId")?;
        match &self.mirror {
            Some(dir) => crate::mirror::is_safe_file_id(sid).then(|| {
                let mut p = String::with_capacity(dir.len() + sid.len() + 6);
                p.push_str(dir);
                p.push_str(sid);
                p.push_str(".jsonl");
                p
            }),
            None => entry.text("sessionFile").map(str::to_owned),
        }
    }
}

fn row<'a, E: RowFields + ?Sized>(
    shared: &RowShared<'_>,
    key: &str,
    e: &'a E,
    dc: &'a entry::DeliveryContext,
    messages: Option<&'a [Value]>,
) -> Row<'a> {
    let km = shared.cfg.key_model();
    let group = matches!(entry::str_field(e, "chatType").map(str::trim), Some("group") | Some("channel"));
    let kind = km.classify_kind(key, group);
    let channel = km.derive_channel(key, kind, entry::str_field(e, "channel"), entry::str_field(e, "lastChannel"));
    let any_dc = dc.channel.is_some() || dc.to.is_some() || dc.account_id.is_some();
    Row {
        key: km.display_beside(key, &shared.requester_main).to_owned(),
        kind: kind.as_str(),
        channel,
        label: entry::str_field(e, "label"),
        display_name: entry::display_name(key, e),
        delivery_context: any_dc.then_some(RowDelivery {
            channel: dc.channel.as_deref(),
            to: dc.to.as_deref(),
            account_id: dc.account_id.as_deref(),
        }),
        updated_at: e.number("updatedAt"),
        session_id: entry::str_field(e, "sessionId"),
        model: entry::str_field(e, "model"),
        context_tokens: e.number("contextTokens"),
        total_tokens: entry::total_tokens(e),
        thinking_level: entry::str_field(e, "thinkingLevel"),
        verbose_level: entry::str_field(e, "verboseLevel"),
        system_sent: e.flag("systemSent"),
        aborted_last_run: e.flag("abortedLastRun"),
        send_policy: entry::str_field(e, "sendPolicy"),
        last_channel: dc.channel.as_deref().or_else(|| entry::str_field(e, "lastChannel")),
        last_to: dc.to.as_deref().or_else(|| entry::str_field(e, "lastTo")),
        last_account_id: dc.account_id.as_deref().or_else(|| entry::str_field(e, "lastAccountId")),
        transcript_path: shared.transcript_path(e),
        messages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Entry;
    use crate::store::{SparseEntry, Store};
    use serde_json::json;

    /// Every field a stored entry may carry (types.d.ts `SessionEntry`, the 2026.9 inventory
    /// fields, custom ones), with values of every JSON type.
    fn rich(extra: Value) -> Entry {
        let mut e: Entry = serde_json::from_str(
            r##"{
            "sessionId": "s-1", "updatedAt": 1700000000000, "sessionFile": "/tmp/s-1.jsonl",
            "spawnedBy": "agent:main:main", "systemSent": true, "abortedLastRun": false, "chatType": "group",
            "thinkingLevel": "low", "verboseLevel": "on", "reasoningLevel": "on", "elevatedLevel": "on",
            "sendPolicy": "deny", "label": "L", "displayName": "D", "subject": "S", "groupId": "g1",
            "groupChannel": "#c", "space": "sp", "channel": "discord", "origin": {"label": "O", "provider": "x"},
            "deliveryContext": {"channel": "slack", "to": "u1", "accountId": "a1", "threadId": 7},
            "lastChannel": "telegram", "lastTo": "+1", "lastAccountId": "acc", "lastThreadId": "t",
            "inputTokens": 10, "outputTokens": 5.5, "totalTokens": 99, "contextTokens": 1000,
            "modelProvider": "p", "model": "m", "providerOverride": "po", "modelOverride": "mo",
            "archivedAt": 1, "pinnedAt": 2, "owner": {"id": "o"}, "projectId": "pr", "category": "c",
            "spawnDepth": 1, "x-custom": [1, {"a": null}]
            }"##,
        )
        .expect("fixture");
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            if v.is_null() {
                e.remove(&k);
            } else {
                e.insert(k, v);
            }
        }
        e
    }

    #[test]
    fn every_row_field_is_found_in_its_slot_and_no_other_name_is() {
        for (i, name) in ROW_FIELDS.iter().enumerate() {
            assert_eq!(ROW_SET.index(name), Some(i), "{name}");
        }
        for other in [
            "",
            "a",
            "sessionIdx",
            "sessionI",
            "Label",
            "labe",
            "spawnedBy",
            "\u{e9}",
            "updatedAt ",
            "x".repeat(300).as_str(),
        ] {
            assert_eq!(ROW_SET.index(other), None, "{other}");
        }
        // a set too large for the table is searched name by name
        let many: &'static [&'static str] = Box::leak(
            (0..300).map(|i| &*Box::leak(format!("f{i}").into_boxed_str())).collect::<Vec<_>>().into_boxed_slice(),
        );
        let big = FieldSet::new(many);
        assert_eq!(big.index("f299"), Some(299));
        assert_eq!(big.index("f300"), None);
    }

    #[test]
    fn list_rows_read_no_field_outside_row_fields() {
        let engine = Engine::new(Store::open(":memory:").expect("store"), Config::default(), None);
        let cfg = engine.config();
        let requester = Requester::of(&cfg, &ToolContext::default()).expect("requester");
        let cases = [
            ("agent:main:discord:group:g1", rich(json!({}))),
            ("agent:main:discord:group:g1", rich(json!({"displayName": null, "channel": null, "totalTokens": null}))),
            (
                "agent:main:x",
                rich(json!({"displayName": null, "chatType": null, "label": null, "deliveryContext": null})),
            ),
            ("agent:main:x", rich(json!({"lastChannel": 3, "model": 1, "updatedAt": "soon", "systemSent": "yes"}))),
        ];
        for (key, full) in cases {
            let text = serde_json::to_string(&full).expect("text");
            let sparse = SparseEntry::parse(&text, &ROW_SET).expect("sparse");
            let borrowed = super::super::list_row::RowEntry::parse(&text).expect("borrowed");
            let render = |entry: &dyn RowFields| {
                let mut out = Vec::new();
                write_row(&RowShared::new(&engine, &cfg, &requester), key, entry, &mut out).expect("row");
                String::from_utf8(out).expect("utf-8")
            };
            assert_eq!(render(&full), render(&sparse), "{key}");
            assert_eq!(render(&full), render(&borrowed), "{key}");
        }
    }

    /// The listing without messages, as the path that builds every row (the one `messageLimit`
    /// takes: its rows end in `"messages":[]` for sessions without a transcript) renders it.
    fn built(engine: &Engine, ctx: &ToolContext, args: Value) -> String {
        let mut args = args;
        args["messageLimit"] = json!(1);
        run_text(engine, &args, ctx).expect("list").0.replace(r#","messages":[]}"#, "}")
    }

    #[test]
    fn remembered_rows_are_the_rows_rendering_gives_and_a_changed_entry_is_rendered_again() {
        for store in crate::store::pg::testdb::stores() {
            let d = store.dialect();
            let engine = Engine::new(store, Config::default(), None);
            let ctx = ToolContext { agent_session_key: Some("agent:main:main".into()), ..ToolContext::default() };
            // text that tests the writer: escapes, control and non-ASCII characters, a repeated
            // key, numbers past i64 and in f64's exponent form, negative zero, nested values
            let entries = [
                (
                    "agent:main:main",
                    r#"{"sessionId":"s-m","updatedAt":500,"label":"\u00e9 \" \\ \u0001 \ud83d\ude00 \u2028","totalTokens":1e21,"contextTokens":-0.0}"#,
                ),
                (
                    "agent:main:discord:group:g1",
                    r#"{"sessionId":"s-g","updatedAt":400,"chatType":"group","subject":"\u00dcn\u00efcode","totalTokens":123456789012345678901234567890,"systemSent":true,"origin":{"label":"O"}}"#,
                ),
                (
                    "agent:main:old",
                    r#"{"sessionId":"s-o","updatedAt":300,"lastChannel":"telegram","lastTo":"+1","inputTokens":18446744073709551615,"outputTokens":-0,"x":[1,{"a":null}]}"#,
                ),
                (
                    "agent:main:x",
                    r#"{"sessionId":"s-x","updatedAt":300,"label":"first","label":"repeated","abortedLastRun":false,"updatedAt":200}"#,
                ),
                (
                    "agent:main:work",
                    r#"{"sessionId":"s-w","updatedAt":100,"deliveryContext":{"channel":"slack","to":"u1"}}"#,
                ),
            ];
            for (key, text) in entries {
                let e: Entry = serde_json::from_str(text).expect("fixture");
                engine.store().write(|db| db.put_session(key, &e)).expect("put");
            }
            let listed = |args: Value| run_text(&engine, &args, &ctx).expect("list").0;
            let first = listed(json!({}));
            assert_eq!(engine.list_rows().len(), entries.len(), "{d:?}");
            assert_eq!(first, built(&engine, &ctx, json!({})), "{d:?}");
            assert!(first.contains("\"label\":\"\u{e9} \\\" \\\\ \\u0001 \u{1f600} \u{2028}\""), "{d:?}: {first}");
            assert!(
                first.contains("\"totalTokens\":1e+21") && first.contains("\"contextTokens\":-0.0"),
                "{d:?}: {first}"
            );
            // the second listing comes from the memo: the same bytes
            assert_eq!(listed(json!({})), first, "{d:?}");
            assert_eq!(listed(json!({"limit": 2})), built(&engine, &ctx, json!({"limit": 2})), "{d:?}");

            // an entry rewritten by any writer (the memo hears of no write: it compares the text)
            let mut e: Entry = serde_json::from_str(entries[2].1).expect("fixture");
            e.insert("label".into(), json!("renamed"));
            engine.store().write(|db| db.put_session("agent:main:old", &e)).expect("put");
            let after = listed(json!({}));
            assert!(after.contains(r#""label":"renamed""#), "{d:?}: {after}");
            assert_eq!(after, built(&engine, &ctx, json!({})), "{d:?}");

            // another config: rows rendered under the old one are not used (`work` is now main)
            let cfg = json!({"session": {"mainKey": "work"}, "tools": {"agentToAgent": {"enabled": true}}});
            engine.set_config(Config::from_json(&cfg).expect("config"));
            let work = listed(json!({}));
            assert!(work.contains(r#"{"key":"main","kind":"main","#), "{d:?}: {work}");
            assert_eq!(work, built(&engine, &ctx, json!({})), "{d:?}");
            // another requester: the keys are shown from its side
            let ops = ToolContext { agent_session_key: Some("agent:ops:main".into()), ..ToolContext::default() };
            let theirs = run_text(&engine, &json!({}), &ops).expect("list").0;
            assert!(theirs.contains(r#""key":"agent:main:work""#), "{d:?}: {theirs}");
            assert_eq!(theirs, built(&engine, &ops, json!({})), "{d:?}");
            assert_eq!(listed(json!({})), work, "{d:?}");
        }
    }

    #[test]
    fn the_memo_answers_only_for_the_same_stored_text_config_and_agent_and_stays_bounded() {
        let engine = Engine::new(Store::open(":memory:").expect("store"), Config::default(), None);
        let memo = engine.list_rows();
        let cfg = engine.config();
        memo.put(&cfg, "main", "agent:main:a", "{}", br#"{"key":"a"}"#);
        let mut out = Vec::new();
        let stamp = memo.append(&cfg, "main", "agent:main:a", "{}", &mut out).expect("remembered");
        assert_eq!(out, br#"{"key":"a"}"#);
        // another stored text, another agent or another config: not remembered
        assert_eq!(memo.append(&cfg, "main", "agent:main:a", "{} ", &mut out), None);
        assert_eq!(memo.append(&cfg, "ops", "agent:main:a", "{}", &mut out), None);
        // each agent's rows are kept beside the others' (agents listing in turn)
        let theirs_stamp = memo.put(&cfg, "ops", "agent:main:a", "{}", br#"{"key":"agent:main:a"}"#);
        let mut theirs = Vec::new();
        assert_eq!(memo.append(&cfg, "ops", "agent:main:a", "{}", &mut theirs), Some(theirs_stamp));
        // a stamp names one rendered text: another text has another stamp
        assert_ne!(theirs_stamp, stamp);
        assert_eq!(theirs, br#"{"key":"agent:main:a"}"#);
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.append(&Arc::new(Config::default()), "main", "agent:main:a", "{}", &mut out), None);
        assert_eq!(out, br#"{"key":"a"}"#);
        // the bound: past it the memo starts over
        let mut stamps = std::collections::HashSet::new();
        for i in 0..5000 {
            assert!(stamps.insert(memo.put(&cfg, "main", &format!("k{i}"), "{}", b"{}")), "a stamp given twice");
        }
        // a text remembered again after it was forgotten is given a new stamp
        let again = memo.put(&cfg, "main", "agent:main:a", "{}", br#"{"key":"a"}"#);
        assert!(again != stamp && !stamps.contains(&again));
        assert!(memo.len() <= 2048, "{}", memo.len());
    }
}
