//! The gateway contract the engine answers to, and every difference between the two in one
//! table.
//!
//! `'2026.1'` is the gateway of 2026-01-29 (REFERENCE.md, SESSION_TOOLS.md); `'2026.9'` is
//! OpenClaw 2026.9.6 (OPENCLAW-2026.9.md). The contract is chosen once, when the config is read
//! (`open({contract})`, `setConfig(config, {contract})`), and travels inside the
//! [`Config`](crate::config::Config). Code that behaves differently reads a field of
//! [`Rules`] (a default, a cap, a shape) instead of testing the contract itself; the two
//! tables below are the whole list of differences that are numbers or switches. Where a tool's
//! result *shape* differs, the tool dispatch ([`crate::tools`]) picks the module once from
//! [`Rules::tool_shape`]. This module never reads the store or the config.

use crate::error::{Error, Result};

/// Which gateway the engine behaves as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Contract {
    /// OpenClaw as of 2026-01-29 (the default).
    #[default]
    V2026_1,
    /// OpenClaw 2026.9.6.
    V2026_9,
}

impl Contract {
    /// `'2026.1'` or `'2026.9'` (surrounding blanks ignored); anything else is `INVALID_CONFIG`.
    pub fn parse(raw: &str) -> Result<Contract> {
        match raw.trim() {
            "2026.1" => Ok(Contract::V2026_1),
            "2026.9" => Ok(Contract::V2026_9),
            _ => Err(Error::invalid_config(format!(
                "invalid contract: {} (use '2026.1' or '2026.9')",
                crate::error::clip(raw)
            ))),
        }
    }

    /// The `contract` option as JS passed it: absent/`null` → None; a string → [`parse`];
    /// anything else refused naming `what`.
    ///
    /// [`parse`]: Contract::parse
    pub fn from_option(v: &serde_json::Value, what: &str) -> Result<Option<Contract>> {
        match v {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(s) => Contract::parse(s).map(Some),
            _ => Err(Error::invalid_config(format!("invalid {what}: must be '2026.1' or '2026.9'"))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Contract::V2026_1 => "2026.1",
            Contract::V2026_9 => "2026.9",
        }
    }

    /// The table of this contract.
    pub fn rules(self) -> &'static Rules {
        match self {
            Contract::V2026_1 => &RULES_2026_1,
            Contract::V2026_9 => &RULES_2026_9,
        }
    }
}

/// Which implementation of a tool's surface a contract uses (its parameters and result shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolShape {
    /// REFERENCE.md: `{count, sessions}` rows with routing fields, `{sessionKey, messages}`, …
    Reference2026_1,
    /// OPENCLAW-2026.9.md §1: closed rows, offsets, budgets, redaction.
    Openclaw2026_9,
}

/// Every default, cap and switch that differs between the contracts.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub contract: Contract,
    pub tool_shape: ToolShape,

    // ---- config ------------------------------------------------------------------------
    /// `tools.agentToAgent.enabled` when absent: 2026.1 on only for a literal `true`;
    /// 2026.9 on unless literally `false`.
    pub a2a_enabled_by_default: bool,
    /// `tools.sessions.visibility` when absent. 2026.1 has no such key: `all` reproduces its
    /// behaviour (cross-agent access decided by the a2a policy alone).
    pub default_session_visibility: crate::config::SessionVisibility,
    /// `session.agentToAgent.maxPingPongTurns` is read (2026.1) or ignored for the constant
    /// [`Rules::ping_pong_turns`] (2026.9: no such key).
    pub ping_pong_turns_configurable: bool,
    /// the ping-pong turns when not configurable (0 for a cron requester under 2026.9)
    pub ping_pong_turns: u32,
    /// `agents.defaults.subagents.maxSpawnDepth` when absent, and its range
    pub max_spawn_depth_default: u32,
    pub max_spawn_depth_range: (u32, u32),
    /// `…subagents.maxChildrenPerAgent` when absent, and its range
    pub max_children_default: u32,
    pub max_children_range: (u32, u32),
    /// `…subagents.maxConcurrent` when absent (a run lane)
    pub max_concurrent_default: u32,
    /// `agents.entries.<id>` is read beside `agents.list[]`
    pub agents_entries: bool,

    // ---- visibility --------------------------------------------------------------------
    /// a sandboxed caller whose sandbox visibility is `spawned` gets `tree` at most
    pub sandbox_clamps_to_tree: bool,
    /// `agent:<id>:(dashboard|subagent|internal-session-effects):incognito-…` keys are never
    /// visible to the tools
    pub incognito_hidden: bool,

    // ---- sessions_list -------------------------------------------------------------------
    pub list_default_limit: u32,
    pub list_max_limit: u32,
    /// rows read per store page, and pages per call before `truncationReason: "scan-limit"`
    /// (None: one query, no scan budget)
    pub list_scan: Option<(u32, u32)>,
    /// byte budget of the pretty-printed result (None: none)
    pub list_max_result_bytes: Option<usize>,
    pub list_max_message_limit: u32,

    // ---- sessions_history ----------------------------------------------------------------
    pub history_default_limit: u32,
    pub history_max_limit: u32,
    /// byte cap on the JSON of the message array
    pub history_max_bytes: usize,
    /// cap on one text (UTF-16 units), marker appended; None: no per-text cap
    pub history_text_cap: Option<usize>,
    /// credential-like text is masked
    pub history_redacts: bool,
    /// `details`, `usage` and `cost` are deleted from every message
    pub history_strips_usage: bool,

    // ---- tool definitions -----------------------------------------------------------------
    /// JSON Schema type of integer parameters
    pub integer_type: &'static str,
}

/// The 2026-01-29 gateway (REFERENCE.md).
pub const RULES_2026_1: Rules = Rules {
    contract: Contract::V2026_1,
    tool_shape: ToolShape::Reference2026_1,
    a2a_enabled_by_default: false,
    default_session_visibility: crate::config::SessionVisibility::All,
    ping_pong_turns_configurable: true,
    ping_pong_turns: 5,
    max_spawn_depth_default: 1,
    max_spawn_depth_range: (1, 1),
    max_children_default: 8,
    max_children_range: (0, u32::MAX),
    max_concurrent_default: 8,
    agents_entries: false,
    sandbox_clamps_to_tree: false,
    incognito_hidden: false,
    list_default_limit: 200,
    list_max_limit: 1000,
    list_scan: None,
    list_max_result_bytes: None,
    list_max_message_limit: 20,
    history_default_limit: 200,
    history_max_limit: 1000,
    history_max_bytes: 6 * 1024 * 1024,
    history_text_cap: None,
    history_redacts: false,
    history_strips_usage: false,
    integer_type: "number",
};

/// OpenClaw 2026.9.6 (OPENCLAW-2026.9.md §1, §2).
pub const RULES_2026_9: Rules = Rules {
    contract: Contract::V2026_9,
    tool_shape: ToolShape::Openclaw2026_9,
    a2a_enabled_by_default: true,
    default_session_visibility: crate::config::SessionVisibility::All,
    ping_pong_turns_configurable: false,
    ping_pong_turns: 5,
    max_spawn_depth_default: 5,
    max_spawn_depth_range: (1, 5),
    max_children_default: 5,
    max_children_range: (1, 20),
    max_concurrent_default: 8,
    agents_entries: true,
    sandbox_clamps_to_tree: true,
    incognito_hidden: true,
    list_default_limit: 100,
    list_max_limit: 200,
    list_scan: Some((200, 5)),
    list_max_result_bytes: Some(65_536),
    list_max_message_limit: 20,
    history_default_limit: 200,
    history_max_limit: 1000,
    history_max_bytes: 81_920,
    history_text_cap: Some(4_000),
    history_redacts: true,
    history_strips_usage: true,
    integer_type: "integer",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_names_parse_and_anything_else_is_refused() {
        assert_eq!(Contract::parse("2026.1").unwrap(), Contract::V2026_1);
        assert_eq!(Contract::parse(" 2026.9 ").unwrap(), Contract::V2026_9);
        let e = Contract::parse("2026.5").unwrap_err();
        assert_eq!(e.code(), crate::error::ErrorCode::InvalidConfig);
        assert!(e.message().contains("2026.5"));
        assert_eq!(Contract::default(), Contract::V2026_1);
    }

    #[test]
    fn each_table_names_its_own_contract() {
        for c in [Contract::V2026_1, Contract::V2026_9] {
            assert_eq!(c.rules().contract, c);
            assert_eq!(Contract::parse(c.as_str()).unwrap(), c);
        }
    }
}
