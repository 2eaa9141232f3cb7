//! Reading a gateway transcript (REFERENCE.md §2.6): versions 1, 2 and 3. Every line whose
//! object has a truthy `message` contributes that message, in file order, whatever its `type`,
//! its place in the entry tree or a compaction; the header and other entries are ignored. The
//! v2 role `hookMessage` reads as its v3 name `custom`, as the transcript library's upgrade does.

use serde_json::Value;

/// A transcript as read: its messages (role, JSON text) in file order, and its bad lines
/// (1-based line number, reason).
#[derive(Debug, Default)]
pub struct Transcript {
    pub messages: Vec<(Option<String>, String)>,
    pub bad_lines: Vec<(usize, String)>,
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

/// Reads the bytes of a transcript file (a line that is not UTF-8 is a bad line, not a bad
/// file).
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
        let mut v: Value = match serde_json::from_str(line) {
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
        match message_of(&mut v, version.unwrap_or(1)) {
            Some(Ok(m)) => out.messages.push(m),
            Some(Err(reason)) => out.bad_lines.push((i + 1, reason)),
            None => {}
        }
    }
    out
}

/// The message one transcript entry contributes (role, JSON text), by the rule above: `None`
/// for an entry without a truthy `message`, `Err` for one whose message is not an object.
/// `version` is the transcript's (1 when it has no header).
pub fn message_of(entry: &mut Value, version: i64) -> Option<Result<(Option<String>, String), String>> {
    let message = entry.as_object_mut()?.get_mut("message")?;
    if !truthy(message) {
        return None;
    }
    let Some(m) = message.as_object_mut() else {
        return Some(Err("its message is not an object".into()));
    };
    if version < 3 && m.get("role").and_then(Value::as_str) == Some("hookMessage") {
        m.insert("role".into(), Value::from("custom"));
    }
    let role = m.get("role").and_then(Value::as_str).map(str::to_owned);
    Some(Ok((role, message.to_string())))
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
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[1].0.as_deref(), Some("custom"));

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
        assert_eq!(t.messages.len(), 2);
        assert!(t.messages[0].1.contains("\"x\""));
        assert_eq!(t.messages[1].0.as_deref(), Some("hookMessage"));
        assert_eq!(t.bad_lines.iter().map(|b| b.0).collect::<Vec<_>>(), [5, 8]);
    }

    #[test]
    fn a_line_that_is_not_utf8_is_one_bad_line() {
        let mut bytes = b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"a\"}}\n".to_vec();
        bytes.extend_from_slice(b"{\"x\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(b"{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"b\"}}");
        let t = read(&bytes);
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.bad_lines, [(2, "not UTF-8 text".to_string())]);
    }
}
