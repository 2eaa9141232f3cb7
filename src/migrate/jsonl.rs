//! Reading a gateway transcript (REFERENCE.md §2.6): versions 1, 2 and 3. Every line whose
//! object has a truthy `message` is a message entry, in file order, whatever its `type`, its place
//! in the entry tree or a compaction; every other object line (compaction, branch summary, model
//! change, custom entry, …) is kept as an entry that is not a message, so that an export can write
//! it back. Entry ids and parent links are kept as read. The header is not an entry. The v2 role
//! `hookMessage` reads as its v3 name `custom`, as the transcript library's upgrade does.

use serde_json::{Map, Value};

use crate::store::transcripts::{EntryBody, NewEntry};

/// A transcript as read: its entries in file order, and its bad lines (1-based line number,
/// reason).
#[derive(Debug, Default)]
pub struct Transcript {
    pub entries: Vec<NewEntry>,
    pub bad_lines: Vec<(usize, String)>,
}

impl Transcript {
    /// The messages (role, JSON text), in file order.
    pub fn messages(&self) -> Vec<(Option<String>, String)> {
        self.entries
            .iter()
            .filter_map(|e| match &e.body {
                EntryBody::Message { role, message, .. } => Some((role.clone(), message.clone())),
                EntryBody::Other { .. } => None,
            })
            .collect()
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn text_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

/// One transcript entry (a JSON object line other than the header) of a transcript of `version`
/// as it is stored; `Err` for an entry whose message is not an object.
pub fn entry_of(mut obj: Map<String, Value>, version: i64) -> std::result::Result<NewEntry, String> {
    let id = text_of(obj.get("id"));
    let parent_id = text_of(obj.get("parentId"));
    if !obj.get("message").is_some_and(truthy) {
        let kind = text_of(obj.get("type"));
        return Ok(NewEntry { id, parent_id, body: EntryBody::Other { kind, entry: Value::Object(obj).to_string() } });
    }
    let Some(Value::Object(mut m)) = obj.remove("message") else {
        return Err("its message is not an object".into());
    };
    if version < 3 && m.get("role").and_then(Value::as_str) == Some("hookMessage") {
        m.insert("role".into(), Value::from("custom"));
    }
    let role = text_of(m.get("role"));
    let message = Value::Object(m).to_string();
    Ok(NewEntry {
        id,
        parent_id,
        body: EntryBody::Message { role, message, envelope: Some(Value::Object(obj).to_string()) },
    })
}

/// Reads the bytes of a transcript file (a line that is not UTF-8 is a bad line, not a bad
/// file; a line that is JSON but not an object is left out).
pub fn read(bytes: &[u8]) -> Transcript {
    let mut out = Transcript::default();
    let mut version: Option<i64> = None;
    let mut first = true;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(line) = std::str::from_utf8(raw) else {
            out.bad_lines.push((i + 1, "not UTF-8 text".into()));
            first = false;
            continue;
        };
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.bad_lines.push((i + 1, format!("not valid JSON: {e}")));
                first = false;
                continue;
            }
        };
        if first {
            first = false;
            if v.get("type").and_then(Value::as_str) == Some("session") {
                version = Some(v.get("version").and_then(Value::as_i64).unwrap_or(1));
                continue;
            }
        }
        let Value::Object(obj) = v else { continue };
        match entry_of(obj, version.unwrap_or(1)) {
            Ok(e) => out.entries.push(e),
            Err(why) => out.bad_lines.push((i + 1, why)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_every_version_read_in_file_order_and_bad_lines_are_reported() {
        let v1 = "{\"type\":\"session\",\"id\":\"s\",\"timestamp\":\"t\"}\n\
                  {\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n\
                  {\"type\":\"message\",\"message\":{\"role\":\"hookMessage\",\"content\":\"h\"}}\n";
        let t = read(v1.as_bytes());
        assert_eq!(t.messages().len(), 2);
        assert_eq!(t.messages()[1].0.as_deref(), Some("custom"));

        let v3 = "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\r\n\
                  {\"type\":\"model_change\",\"id\":\"1\",\"parentId\":null,\"provider\":\"p\"}\n\
                  \n\
                  {\"type\":\"message\",\"id\":\"2\",\"parentId\":\"1\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n\
                  {not json\n\
                  {\"role\":\"user\",\"content\":\"bare, ignored\"}\n\
                  {\"type\":\"custom_message\",\"message\":{\"role\":\"hookMessage\",\"content\":\"kept as is\"}}\n\
                  {\"type\":\"message\",\"message\":\"text\"}\n\
                  {\"type\":\"message\",\"message\":null}\n";
        let t = read(v3.as_bytes());
        assert_eq!(t.messages().len(), 2);
        assert!(t.messages()[0].1.contains("\"x\""));
        assert_eq!(t.messages()[1].0.as_deref(), Some("hookMessage"));
        assert_eq!(t.bad_lines.iter().map(|b| b.0).collect::<Vec<_>>(), [5, 8]);
        // The other object lines are kept as entries that are not messages, ids and links too.
        let others: Vec<_> = t.entries.iter().filter(|e| !e.body.is_message()).collect();
        assert_eq!(others.len(), 3);
        assert_eq!(others[0].id.as_deref(), Some("1"));
        assert_eq!(
            others[0].body,
            EntryBody::Other {
                kind: Some("model_change".into()),
                entry: r#"{"type":"model_change","id":"1","parentId":null,"provider":"p"}"#.into()
            }
        );
        assert_eq!(t.entries[1].parent_id.as_deref(), Some("1"));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_one_bad_line() {
        let mut bytes = b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n".to_vec();
        bytes.extend_from_slice(b"{\"x\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"b\"}}");
        let t = read(&bytes);
        assert_eq!(t.messages().len(), 2);
        assert_eq!(t.bad_lines, [(2, "not UTF-8 text".to_string())]);
    }
}
