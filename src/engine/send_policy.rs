//! The send policy as the gateway's methods expose it (REFERENCE.md §7): `resolveSendPolicy`,
//! the `/send` command, and the decision for a stored entry.

use super::*;

use serde_json::{json, Map, Value};

use crate::config::{Config, PolicyAction};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::policy::send::{parse_send_command, resolve_send_policy, PolicySubject, SendCommand, SendOverride};

impl Engine {
    /// `resolveSendPolicy({sessionKey, channel?, chatType?})` (§7.1). A store that cannot be read
    /// denies (DECISIONS.md #6).
    pub fn resolve_send_policy(&self, params: &Value) -> Result<PolicyAction> {
        let mut p = Params::new("resolveSendPolicy", params, &["sessionKey", "channel", "chatType"])?;
        let raw = p.string("sessionKey", 1, usize::MAX);
        let channel = p.string("channel", 0, usize::MAX).map(str::to_owned);
        let chat_type = p.string("chatType", 0, usize::MAX).map(str::to_owned);
        p.finish()?;
        let raw = raw.ok_or_else(|| Error::invalid_request("sessionKey required"))?;
        let cfg = self.config();
        let key = cfg.key_model().canonical(raw)?;
        let entry = match self.store.read(|db| db.session(&key)) {
            Ok(e) => e,
            Err(e) if e.code() == crate::error::ErrorCode::Closed => return Err(e),
            Err(_) => return Ok(PolicyAction::Deny),
        };
        Ok(decide(&cfg, entry.as_ref(), raw.trim(), &key, channel.as_deref(), chat_type.as_deref()))
    }

    /// `handleSendCommand({sessionKey, text, isOwner})` (§7.3).
    pub fn handle_send_command(&self, params: &Value) -> Result<Value> {
        let mut p = Params::new("handleSendCommand", params, &["sessionKey", "text", "isOwner"])?;
        let raw = p.string("sessionKey", 1, usize::MAX);
        let text = p.string("text", 0, usize::MAX).unwrap_or("");
        let is_owner = p.bool("isOwner").unwrap_or(false);
        p.finish()?;
        let Some(cmd) = parse_send_command(text) else {
            return Ok(json!({"handled": false}));
        };
        if !is_owner {
            return Ok(json!({"handled": true}));
        }
        let mode = match cmd {
            SendCommand::Usage => return Ok(json!({"handled": true, "reply": "⚙️ Usage: /send on|off|inherit"})),
            SendCommand::Set(m) => m,
        };
        let raw = raw.ok_or_else(|| Error::invalid_request("sessionKey required"))?;
        let key = self.canonical(raw)?;
        let now = entry::now_ms();
        self.store.write(|db| {
            let mut e = db.session(&key)?.unwrap_or_else(|| entry::merge(None, &Map::new(), now));
            match mode {
                SendOverride::Inherit => {
                    e.shift_remove("sendPolicy");
                }
                SendOverride::Allow => {
                    e.insert("sendPolicy".into(), Value::from("allow"));
                }
                SendOverride::Deny => {
                    e.insert("sendPolicy".into(), Value::from("deny"));
                }
            }
            e.insert("updatedAt".into(), Value::from(now.max(entry::updated_at(&e))));
            let e = entry::merge(Some(&e), &Map::new(), now);
            db.put_session(&key, &e)
        })?;
        Ok(json!({"handled": true, "reply": format!("⚙️ Send policy set to {}.", mode.reply_word())}))
    }
}

/// The send-policy decision for a stored entry (or none).
pub fn decide(
    cfg: &Config,
    entry: Option<&Entry>,
    key_as_given: &str,
    canonical: &str,
    channel: Option<&str>,
    chat_type: Option<&str>,
) -> PolicyAction {
    let subject = match entry {
        Some(e) => PolicySubject {
            send_policy: entry::str_field(e, "sendPolicy"),
            channel: entry::str_field(e, "channel"),
            last_channel: entry::str_field(e, "lastChannel"),
            chat_type: entry::str_field(e, "chatType"),
        },
        None => PolicySubject::default(),
    };
    resolve_send_policy(cfg.send_policy.as_ref(), subject, key_as_given, canonical, channel, chat_type)
}
