//! The send policy: may a message be delivered to (or a run be started in) a session?
//! REFERENCE.md §7 with DECISIONS.md's `keyPrefix` fix, plus the `/send` command parser.

use crate::config::{ChatType, PolicyAction, SendPolicyConfig, SendPolicyRule};
use crate::keys::{js_trim, parse_agent_key, parse_group_key, GroupKind};

/// The parts of a session entry the decision reads (all raw, as stored).
#[derive(Debug, Clone, Copy, Default)]
pub struct PolicySubject<'a> {
    pub send_policy: Option<&'a str>,
    pub channel: Option<&'a str>,
    pub last_channel: Option<&'a str>,
    pub chat_type: Option<&'a str>,
}

/// §7.1 resolveSendPolicy. `key_as_given` is the key the caller passed, `canonical_key` its
/// canonical form; per DECISIONS.md a `keyPrefix` matches either of them, or the rest of the
/// canonical key after `agent:<id>:`, case-insensitively. The key-derived channel/chatType
/// fallbacks (steps 3–4) use [`crate::keys::parse_group_key`] on the canonical key (so canonical
/// group keys also yield their channel and chat type).
pub fn resolve_send_policy(
    cfg: Option<&SendPolicyConfig>,
    entry: PolicySubject<'_>,
    key_as_given: &str,
    canonical_key: &str,
    channel: Option<&str>,
    chat_type: Option<&str>,
) -> PolicyAction {
    // 1. the session's own override
    match entry.send_policy.map(|p| js_trim(p).to_lowercase()).as_deref() {
        Some("allow") => return PolicyAction::Allow,
        Some("deny") => return PolicyAction::Deny,
        _ => {}
    }
    // 2. no policy configured
    let Some(cfg) = cfg else {
        return PolicyAction::Allow;
    };
    let group = parse_group_key(canonical_key).or_else(|| parse_group_key(key_as_given));
    // 3. effective channel
    let effective_channel = [channel, entry.channel, entry.last_channel]
        .into_iter()
        .flatten()
        .map(|c| js_trim(c).to_lowercase())
        .find(|c| !c.is_empty())
        .or_else(|| group.as_ref().map(|g| g.channel.to_lowercase()));
    // 4. effective chat type
    let effective_chat_type = chat_type
        .or(entry.chat_type)
        .and_then(ChatType::normalize)
        .or_else(|| group.as_ref().map(|g| chat_type_of(g.kind)))
        .or_else(|| chat_type_named_in(canonical_key))
        .or_else(|| chat_type_named_in(key_as_given));
    // 5. the forms of the key a prefix may match (DECISIONS.md), lower-cased
    let prefix_candidates = prefix_candidates(key_as_given, canonical_key);
    // 6–7. rules in order; a matching deny wins at once
    let mut allowed = false;
    for rule in &cfg.rules {
        if rule_applies(rule, effective_channel.as_deref(), effective_chat_type, &prefix_candidates) {
            match rule.action {
                PolicyAction::Deny => return PolicyAction::Deny,
                PolicyAction::Allow => allowed = true,
            }
        }
    }
    if allowed {
        PolicyAction::Allow
    } else {
        cfg.default
    }
}

fn chat_type_of(kind: GroupKind) -> ChatType {
    match kind {
        GroupKind::Group => ChatType::Group,
        GroupKind::Channel => ChatType::Channel,
    }
}

/// The reference's key fallback: `:group:` anywhere → group, else `:channel:` → channel.
fn chat_type_named_in(key: &str) -> Option<ChatType> {
    if key.contains(":group:") {
        Some(ChatType::Group)
    } else if key.contains(":channel:") {
        Some(ChatType::Channel)
    } else {
        None
    }
}

fn prefix_candidates(key_as_given: &str, canonical_key: &str) -> Vec<String> {
    let mut forms = vec![js_trim(key_as_given).to_lowercase(), js_trim(canonical_key).to_lowercase()];
    if let Some(parsed) = parse_agent_key(canonical_key) {
        forms.push(parsed.rest.to_lowercase());
    }
    forms.retain(|f| !f.is_empty());
    forms.dedup();
    forms
}

fn rule_applies(
    rule: &SendPolicyRule,
    channel: Option<&str>,
    chat_type: Option<ChatType>,
    key_forms: &[String],
) -> bool {
    let channel_ok = rule.channel.as_deref().is_none_or(|want| channel == Some(want));
    let chat_type_ok = rule.chat_type.is_none_or(|want| chat_type == Some(want));
    let prefix_ok = rule.key_prefix.as_deref().is_none_or(|prefix| key_forms.iter().any(|k| k.starts_with(prefix)));
    channel_ok && chat_type_ok && prefix_ok
}

/// What a `/send` argument asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOverride {
    Inherit,
    Allow,
    Deny,
}

impl SendOverride {
    /// The word used in the reply `⚙️ Send policy set to <word>.`: inherit, on, off.
    pub fn reply_word(self) -> &'static str {
        match self {
            SendOverride::Inherit => "inherit",
            SendOverride::Allow => "on",
            SendOverride::Deny => "off",
        }
    }
}

/// A parsed `/send` command (§7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendCommand {
    /// `/send` alone or with a word that is no mode → reply with the usage line
    Usage,
    Set(SendOverride),
}

/// §7.3 parsing: trim; `/send: x` → `/send x`; a trailing bot mention (`@name`) on the command
/// word removed (`/send@bot off`); then `/send` optionally followed by whitespace and one
/// alphabetic word, nothing else, case-insensitive. None when the text is not a `/send` command
/// at all (e.g. `/sender`, `/send on now`, `hello`).
pub fn parse_send_command(text: &str) -> Option<SendCommand> {
    let text = js_trim(text);
    let body = text.strip_prefix('/')?;
    let body = strip_bot_mention(&colon_to_space(body));
    // `/send`, case-insensitive, then either nothing or whitespace + one ASCII word
    let rest = body.get(..4).filter(|w| w.eq_ignore_ascii_case("send")).and(body.get(4..))?;
    let word = js_trim(rest);
    if word.is_empty() {
        return Some(SendCommand::Usage);
    }
    if !rest.starts_with(|c: char| c.is_whitespace()) || !word.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    Some(match word.to_ascii_lowercase().as_str() {
        "on" | "allow" => SendCommand::Set(SendOverride::Allow),
        "off" | "deny" => SendCommand::Set(SendOverride::Deny),
        "inherit" | "default" | "reset" => SendCommand::Set(SendOverride::Inherit),
        _ => SendCommand::Usage,
    })
}

/// `send: x` → `send x`; `send:` → `send` (the body after the leading `/`).
fn colon_to_space(body: &str) -> String {
    let end = body.find(|c: char| c.is_whitespace() || c == ':').unwrap_or(body.len());
    let (command, after) = body.split_at(end);
    match after.trim_start().strip_prefix(':') {
        Some(rest) if !command.is_empty() => {
            let rest = rest.trim_start();
            if rest.is_empty() {
                command.to_string()
            } else {
                format!("{command} {rest}")
            }
        }
        _ => body.to_string(),
    }
}

/// `send@bot off` → `send off` (a mention glued to the command word).
fn strip_bot_mention(body: &str) -> String {
    let end = body.find(char::is_whitespace).unwrap_or(body.len());
    let (word, rest) = body.split_at(end);
    match word.split_once('@') {
        Some((command, bot)) if !command.is_empty() && !bot.is_empty() => {
            format!("{command}{rest}")
        }
        _ => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use serde_json::{json, Value};

    fn policy(v: Value) -> SendPolicyConfig {
        Config::from_json(&json!({"session": {"sendPolicy": v}}))
            .expect("valid config")
            .send_policy
            .expect("configured")
    }
    fn decide(p: Option<&SendPolicyConfig>, entry: PolicySubject<'_>, given: &str, canonical: &str) -> PolicyAction {
        resolve_send_policy(p, entry, given, canonical, None, None)
    }
    const NONE: PolicySubject<'static> =
        PolicySubject { send_policy: None, channel: None, last_channel: None, chat_type: None };

    // ---- Y1–Y2: no config, entry override --------------------------------------------------

    #[test]
    fn y1_without_a_send_policy_everything_is_allowed() {
        assert_eq!(decide(None, NONE, "main", "agent:main:main"), PolicyAction::Allow);
    }

    #[test]
    fn y2_an_entry_deny_wins_over_default_allow() {
        let p = policy(json!({"default": "allow"}));
        let entry = PolicySubject { send_policy: Some("deny"), ..NONE };
        assert_eq!(decide(Some(&p), entry, "main", "agent:main:main"), PolicyAction::Deny);
        assert_eq!(decide(None, entry, "main", "agent:main:main"), PolicyAction::Deny);
    }

    #[test]
    fn an_entry_allow_wins_over_a_matching_deny_rule() {
        let p = policy(json!({"default": "deny", "rules": [{"action": "deny"}]}));
        let entry = PolicySubject { send_policy: Some(" ALLOW "), ..NONE };
        assert_eq!(decide(Some(&p), entry, "x", "agent:main:x"), PolicyAction::Allow);
    }

    #[test]
    fn an_invalid_entry_override_is_ignored() {
        let p = policy(json!({"default": "deny"}));
        let entry = PolicySubject { send_policy: Some("maybe"), ..NONE };
        assert_eq!(decide(Some(&p), entry, "x", "agent:main:x"), PolicyAction::Deny);
    }

    // ---- Y3: channel + chat type -----------------------------------------------------------

    #[test]
    fn y3_a_deny_rule_on_channel_and_chat_type_matches_the_entry() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"channel": "discord", "chatType": "group"}}]}));
        let entry = PolicySubject { channel: Some("Discord"), chat_type: Some("group"), ..NONE };
        assert_eq!(decide(Some(&p), entry, "discord:group:dev", "agent:main:discord:group:dev"), PolicyAction::Deny);
    }

    #[test]
    fn y3_amended_a_canonical_group_key_yields_channel_and_chat_type() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"channel": "discord", "chatType": "group"}}]}));
        let key = "agent:main:discord:group:dev";
        assert_eq!(decide(Some(&p), NONE, key, key), PolicyAction::Deny);
        assert_eq!(
            decide(Some(&p), NONE, "agent:main:slack:group:dev", "agent:main:slack:group:dev"),
            PolicyAction::Allow
        );
    }

    #[test]
    fn the_channel_argument_wins_over_entry_and_key() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"channel": "telegram"}}]}));
        let entry = PolicySubject { channel: Some("discord"), ..NONE };
        let key = "agent:main:discord:group:1";
        assert_eq!(resolve_send_policy(Some(&p), entry, key, key, Some(" Telegram "), None), PolicyAction::Deny);
        assert_eq!(resolve_send_policy(Some(&p), entry, key, key, None, None), PolicyAction::Allow);
    }

    #[test]
    fn last_channel_is_used_when_the_entry_has_no_channel() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"channel": "whatsapp"}}]}));
        let entry = PolicySubject { channel: Some("  "), last_channel: Some("WhatsApp"), ..NONE };
        assert_eq!(decide(Some(&p), entry, "main", "agent:main:main"), PolicyAction::Deny);
    }

    #[test]
    fn the_chat_type_argument_wins_and_dm_means_direct() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"chatType": "direct"}}]}));
        let entry = PolicySubject { chat_type: Some("group"), ..NONE };
        assert_eq!(resolve_send_policy(Some(&p), entry, "x", "agent:main:x", None, Some("dm")), PolicyAction::Deny);
        assert_eq!(resolve_send_policy(Some(&p), entry, "x", "agent:main:x", None, None), PolicyAction::Allow);
    }

    #[test]
    fn a_chat_type_rule_does_not_match_an_unknown_chat_type() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"chatType": "direct"}}]}));
        assert_eq!(decide(Some(&p), NONE, "x", "agent:main:x"), PolicyAction::Allow);
    }

    // ---- Y4 and the keyPrefix fix ----------------------------------------------------------

    #[test]
    fn y4_amended_a_cron_prefix_matches_bare_and_canonical_cron_keys() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"keyPrefix": "cron:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "cron:job-1", "agent:main:cron:job-1"), PolicyAction::Deny);
        assert_eq!(decide(Some(&p), NONE, "agent:main:cron:job-1", "agent:main:cron:job-1"), PolicyAction::Deny);
        assert_eq!(decide(Some(&p), NONE, "main", "agent:main:main"), PolicyAction::Allow);
    }

    #[test]
    fn a_key_prefix_matches_the_canonical_form() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"keyPrefix": "agent:ops:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "x", "agent:ops:x"), PolicyAction::Deny);
        assert_eq!(decide(Some(&p), NONE, "x", "agent:main:x"), PolicyAction::Allow);
    }

    #[test]
    fn key_prefix_matching_is_case_insensitive() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"keyPrefix": "Cron:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "CRON:x", "agent:main:CRON:x"), PolicyAction::Deny);
    }

    #[test]
    fn a_key_prefix_must_match_at_the_start_of_some_form() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"keyPrefix": "group:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "discord:group:1", "agent:main:discord:group:1"), PolicyAction::Allow);
    }

    #[test]
    fn key_prefixes_work_with_unicode_keys() {
        let p = policy(json!({"rules": [{"action": "deny", "match": {"keyPrefix": "ÄRGER:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "ärger:1", "agent:main:ärger:1"), PolicyAction::Deny);
        assert_eq!(decide(Some(&p), NONE, "日本", "agent:main:日本"), PolicyAction::Allow);
    }

    // ---- Y5–Y6: rule order and defaults ----------------------------------------------------

    #[test]
    fn y5_a_later_matching_deny_beats_an_earlier_allow() {
        let p = policy(json!({"rules": [{"action": "allow"}, {"action": "deny"}]}));
        assert_eq!(decide(Some(&p), NONE, "x", "agent:main:x"), PolicyAction::Deny);
    }

    #[test]
    fn y5_a_matching_allow_beats_default_deny() {
        let p = policy(json!({"default": "deny", "rules": [
            {"action": "deny", "match": {"channel": "slack"}},
            {"action": "allow", "match": {"channel": "discord"}}
        ]}));
        let entry = PolicySubject { channel: Some("discord"), ..NONE };
        assert_eq!(decide(Some(&p), entry, "x", "agent:main:x"), PolicyAction::Allow);
    }

    #[test]
    fn y5_when_no_rule_applies_the_default_decides() {
        let p = policy(json!({"default": "deny", "rules": [{"action": "allow", "match": {"channel": "slack"}}]}));
        assert_eq!(decide(Some(&p), NONE, "x", "agent:main:x"), PolicyAction::Deny);
    }

    #[test]
    fn a_matching_allow_rule_beats_a_deny_default() {
        // (a rule without `action`, Y6, is refused by the config as by the gateway's schema)
        let p = policy(json!({"default": "deny", "rules": [{"action": "allow", "match": {"keyPrefix": "cron:"}}]}));
        assert_eq!(decide(Some(&p), NONE, "cron:1", "agent:main:cron:1"), PolicyAction::Allow);
    }

    #[test]
    fn a_rule_with_every_matcher_needs_all_of_them() {
        let p = policy(
            json!({"rules": [{"action": "deny", "match": {"channel": "discord", "chatType": "group", "keyPrefix": "discord:"}}]}),
        );
        let key = "agent:main:discord:group:1";
        assert_eq!(decide(Some(&p), NONE, key, key), PolicyAction::Deny);
        assert_eq!(
            decide(Some(&p), NONE, "agent:main:discord:channel:1", "agent:main:discord:channel:1"),
            PolicyAction::Allow
        );
    }

    // ---- Y7: /send parsing -----------------------------------------------------------------

    #[test]
    fn y7_send_words_map_to_overrides() {
        for (text, want) in [
            ("/send on", SendOverride::Allow),
            ("/send allow", SendOverride::Allow),
            ("/send off", SendOverride::Deny),
            ("/send deny", SendOverride::Deny),
            ("/send inherit", SendOverride::Inherit),
            ("/send default", SendOverride::Inherit),
            ("/send reset", SendOverride::Inherit),
        ] {
            assert_eq!(parse_send_command(text), Some(SendCommand::Set(want)), "{text}");
        }
    }

    #[test]
    fn y7_an_unknown_word_or_no_word_asks_for_usage() {
        assert_eq!(parse_send_command("/send maybe"), Some(SendCommand::Usage));
        assert_eq!(parse_send_command("/send"), Some(SendCommand::Usage));
        assert_eq!(parse_send_command("  /send   "), Some(SendCommand::Usage));
    }

    #[test]
    fn y7_reply_words_are_inherit_on_off() {
        assert_eq!(SendOverride::Inherit.reply_word(), "inherit");
        assert_eq!(SendOverride::Allow.reply_word(), "on");
        assert_eq!(SendOverride::Deny.reply_word(), "off");
    }

    #[test]
    fn send_command_is_case_insensitive() {
        assert_eq!(parse_send_command("/SEND OFF"), Some(SendCommand::Set(SendOverride::Deny)));
        assert_eq!(parse_send_command("/Send\tOn"), Some(SendCommand::Set(SendOverride::Allow)));
    }

    #[test]
    fn the_colon_form_is_accepted() {
        assert_eq!(parse_send_command("/send: off"), Some(SendCommand::Set(SendOverride::Deny)));
        assert_eq!(parse_send_command("/send :on"), Some(SendCommand::Set(SendOverride::Allow)));
        assert_eq!(parse_send_command("/send:"), Some(SendCommand::Usage));
    }

    #[test]
    fn a_bot_mention_on_the_command_word_is_removed() {
        assert_eq!(parse_send_command("/send@my_bot off"), Some(SendCommand::Set(SendOverride::Deny)));
        assert_eq!(parse_send_command("/send@bot"), Some(SendCommand::Usage));
        assert_eq!(parse_send_command("/send@bot: on"), Some(SendCommand::Set(SendOverride::Allow)));
    }

    #[test]
    fn texts_that_are_not_a_send_command_are_not_handled() {
        for text in [
            "/sender",
            "/send on now",
            "hello",
            "",
            "send off",
            "/send 123",
            "/send o-n",
            "/sendoff",
            "/",
            "/se",
            "/send@ off",
            "/send off\nthanks",
            "/sénd off",
            "/send ön",
        ] {
            assert_eq!(parse_send_command(text), None, "{text:?}");
        }
    }
}
