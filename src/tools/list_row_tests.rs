//! The borrowed row parse against the whole-entry parse, and listings of varied stored entry
//! texts against the answers the code gave before the borrowed parse (golden digests).

use serde_json::{json, Value};

use super::RowEntry;
use crate::config::Config;
use crate::contract::Contract;
use crate::engine::Engine;
use crate::entry::{Entry, RowFields};
use crate::store::Store;
use crate::tools::list::{write_row, RowShared, ROW_FIELDS};
use crate::tools::{Requester, Tool, ToolContext};

/// A small deterministic generator (the cases must be the same on every run and every build:
/// the golden digests are of listings of them).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// Field names: every row field, fields a row does not show, names written with escapes.
const EXTRA_NAMES: &[&str] = &[
    "spawnedBy",
    "groupId",
    "x-custom",
    "reasoningLevel",
    "modelProvider",
    "responseUsage",
    "status",
    "\\u006cabel",
    "display\\u004eame",
    "\\u00e9",
    "origin ",
    "deliveryContext\\u0000",
];

/// Values as stored text: strings with escapes, control and non-ASCII characters, numbers past
/// i64 and in every float form, the other types, and objects with the members a row reads.
const VALUES: &[&str] = &[
    r#""plain""#,
    r#"" Spaced Out ""#,
    r#""""#,
    r#""   ""#,
    r#""WhatsApp""#,
    r#""TELEGRAM ""#,
    r#""imsg""#,
    r#""gchat""#,
    r##""#room""##,
    r#""\u00e9t\u00e9""#,
    r#""été""#,
    r#""q\"uote \\ back\/slash""#,
    r#""ctl\u0001\t\n\r\b\f""#,
    r#""\ud83d\ude00 😀""#,
    r#""\u2028\u2029""#,
    r#""Family Chat""#,
    r#""a:b:c""#,
    r#""<script>&""#,
    "0",
    "-0",
    "1",
    "-1",
    "1.5",
    "1e21",
    "1E+2",
    "1.0",
    "-0.0",
    "123456789012345678901234567890",
    "18446744073709551615",
    "-9223372036854775808",
    "9007199254740993",
    "0.1",
    "5e-324",
    "1.7976931348623157e308",
    "42.9",
    "-7.25e-3",
    "1700000000000",
    "true",
    "false",
    "null",
    "[]",
    r#"[1,"a",{"b":null}]"#,
    "{}",
    r#"{"label":"O","channel":" Slack ","to":" u1 ","accountId":"a1","threadId":7.9}"#,
    r#"{"label":5,"to":[1],"channel":{"x":1}}"#,
    r#"{"threadId":" t ","channel":"imsg","label":"\u00e9"}"#,
    r#"{"to":"a","to":"b","label":"x","label":"y"}"#,
    r#"{"\u0074o":"esc","chan\u006eel":"gchat","accountId":null}"#,
    r#"{"nested":{"label":"deep"},"label":"\"q\""}"#,
    r#"{"accountId":"  ","threadId":-0.0,"channel":""}"#,
    r#"{"threadId":1e300,"to":"\ud83d\ude00"}"#,
    r#"{ "label" : "spaced" , "channel" : "discord" }"#,
];

/// Session ids: safe file names and ones that cannot name a mirror file.
const SESSION_IDS: &[&str] = &[r#""s-{i}""#, r#""a/b{i}""#, r#"".hidden{i}""#, r#""\u0073-esc{i}""#, r#""sess:{i}""#];

/// One stored entry text: a few fields (some repeated) in any order and spacing, a `sessionId`.
fn entry_text(rng: &mut Lcg, i: usize) -> String {
    let mut names: Vec<&str> = ROW_FIELDS.iter().copied().filter(|n| *n != "sessionId").collect();
    names.extend_from_slice(EXTRA_NAMES);
    let n = rng.below(14);
    let mut pairs: Vec<String> = Vec::new();
    for _ in 0..n {
        let name = rng.pick(&names);
        // objects where a row reads members, more often
        let value = if matches!(name, "origin" | "deliveryContext") && rng.below(3) > 0 {
            VALUES[VALUES.len() - 1 - rng.below(10)]
        } else {
            rng.pick(VALUES)
        };
        pairs.push(format!("\"{name}\":{value}"));
    }
    let sid = rng.pick(SESSION_IDS).replace("{i}", &i.to_string());
    let at = rng.below(pairs.len() + 1);
    pairs.insert(at, format!("\"sessionId\":{sid}"));
    let (open, sep, close) = match rng.below(4) {
        0 => ("{ ", " ,\n  ", " }"),
        1 => ("{\n\t", ",\t", "\n}"),
        _ => ("{", ",", "}"),
    };
    format!("{open}{}{close}", pairs.join(sep))
}

/// Keys of every kind a row tells apart (groups, channels, cron, hooks, other agents, bare
/// keys, quotes and non-ASCII characters).
const KEYS: &[&str] = &[
    "agent:main:discord:group:g{i}",
    "agent:main:telegram:dm:u{i}",
    "agent:main:cron:job-{i}",
    "agent:main:x{i}",
    "agent:ops:work{i}",
    "agent:main:slack:channel:c{i}",
    "agent:main:whatsapp:group:Grp {i}",
    "agent:main:q\"\u{e9}{i}",
    "discord:group:bare{i}",
    "agent:main:hook:h{i}",
    "agent:main:node:n{i}",
];

fn render(engine: &Engine, key: &str, entry: &dyn RowFields, ctx: &ToolContext) -> String {
    let cfg = engine.config();
    let requester = Requester::of(&cfg, ctx).expect("requester");
    let mut out = Vec::new();
    write_row(&RowShared::new(engine, &cfg, &requester), key, entry, &mut out).expect("row");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn varied_entry_texts_give_the_same_rows_read_borrowed_as_read_whole() {
    let engines = [
        Engine::new(Store::open(":memory:").expect("store"), Config::default(), None),
        Engine::new(
            Store::open(":memory:").expect("store"),
            Config::from_json(&json!({"session": {"mainKey": "work"}})).expect("config"),
            Some("/srv/mirror".into()),
        ),
    ];
    let ctx = ToolContext { agent_session_key: Some("agent:main:main".into()), ..ToolContext::default() };
    let mut rng = Lcg(17);
    let mut members: Vec<(&str, &str)> = Vec::new();
    for o in super::OBJECTS {
        for m in super::MEMBERS {
            members.push((o, m));
        }
    }
    for i in 0..3000 {
        let text = entry_text(&mut rng, i);
        let whole: Entry = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let borrowed = RowEntry::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        for name in ROW_FIELDS {
            assert_eq!(whole.scalar(name), borrowed.scalar(name), "{name} of {text}");
        }
        for (o, m) in &members {
            assert_eq!(whole.member(o, m), borrowed.member(o, m), "{o}.{m} of {text}");
        }
        let key = rng.pick(KEYS).replace("{i}", &i.to_string());
        for engine in &engines {
            assert_eq!(render(engine, &key, &whole, &ctx), render(engine, &key, &borrowed, &ctx), "{key}: {text}");
        }
        // a text cut short, or not an object, is refused by both
        let mut cut = text.len() / 2;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let short = &text[..cut];
        assert!(serde_json::from_str::<Entry>(short).is_err() && RowEntry::parse(short).is_err(), "{short}");
    }
    for bad in ["[]", "1", "\"s\"", "null", "{\"a\":1}x", "{\"a\":}", "{\"a\":\"\u{1}\"}", ""] {
        assert!(serde_json::from_str::<Entry>(bad).is_err(), "{bad}");
        assert!(RowEntry::parse(bad).is_err(), "{bad}");
    }
}

/// Listings of `SESSIONS` varied stored texts, in every shape a listing takes: the 2026.1 tool
/// (rows remembered and not, `limit`, `kinds`, messages, another requester, a mirror folder,
/// another main key), the 2026.9 tool (two pages) and the gateway's `sessions.list`. Each
/// answer's SHA-256 was taken from the code before the borrowed parse (main 353c41c):
/// `LIST_GOLDEN_WRITE=1` writes them again (only ever from a build whose answers are trusted).
#[test]
fn listings_of_varied_entry_texts_are_the_answers_of_before() {
    const SESSIONS: usize = 160;
    let golden_path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tools/list_rows_golden.json");
    let write = std::env::var_os("LIST_GOLDEN_WRITE").is_some();
    let golden: Value = if write {
        Value::Null
    } else {
        serde_json::from_str(&std::fs::read_to_string(golden_path).expect("golden file")).expect("golden json")
    };
    let mut found = serde_json::Map::new();
    for store in crate::store::pg::testdb::stores() {
        let d = store.dialect();
        let engine = Engine::new(store, Config::default(), None);
        let mut rng = Lcg(2026);
        let mut keys = vec!["agent:main:main".to_owned(), "global".to_owned()];
        for i in 0..SESSIONS {
            keys.push(rng.pick(KEYS).replace("{i}", &i.to_string()));
        }
        for (i, key) in keys.iter().enumerate() {
            let text = entry_text(&mut rng, i);
            let e: Entry = serde_json::from_str(&text).expect("text");
            // the columns as a write projects them; the text is then stored as it is
            engine.store().write(|db| db.put_session(key, &e)).expect("put");
            engine.store().write(|db| db.set_entry_text(key, &text)).expect("raw text");
        }
        let main = json!({"agentSessionKey": "agent:main:main"});
        let ops = json!({"agentSessionKey": "agent:ops:main"});
        let a2a = json!({"tools": {"agentToAgent": {"enabled": true}}});
        let work = json!({"session": {"mainKey": "work"}, "tools": {"agentToAgent": {"enabled": true}}});
        let variants: Vec<(&str, Value, Contract, Value, Value)> = vec![
            ("2026.1 list", Value::Null, Contract::V2026_1, json!({"limit": 1000}), main.clone()),
            ("2026.1 list limit 7", Value::Null, Contract::V2026_1, json!({"limit": 7}), main.clone()),
            ("2026.1 list a2a", a2a.clone(), Contract::V2026_1, json!({"limit": 1000}), main.clone()),
            ("2026.1 list a2a ops", a2a.clone(), Contract::V2026_1, json!({"limit": 1000}), ops.clone()),
            ("2026.1 list mainKey", work.clone(), Contract::V2026_1, json!({"limit": 1000}), main.clone()),
            (
                "2026.1 list kinds",
                a2a.clone(),
                Contract::V2026_1,
                json!({"limit": 1000, "kinds": ["group", "cron", "other"]}),
                main.clone(),
            ),
            (
                "2026.1 list messages",
                a2a.clone(),
                Contract::V2026_1,
                json!({"limit": 1000, "messageLimit": 1}),
                main.clone(),
            ),
            ("2026.9 list", Value::Null, Contract::V2026_9, json!({"limit": 200}), main.clone()),
            ("2026.9 list page 2", Value::Null, Contract::V2026_9, json!({"limit": 200, "offset": 100}), main.clone()),
        ];
        for (name, cfg, contract, params, ctx) in variants {
            engine.set_config(Config::from_json_for(&cfg, contract).expect("config"));
            let first = crate::tools::run_text(&engine, Tool::SessionsList, &params, &ctx).expect("list");
            let again = crate::tools::run_text(&engine, Tool::SessionsList, &params, &ctx).expect("list");
            assert_eq!(first, again, "{d:?} {name}: a listing again");
            found.insert(name.into(), digest(&first));
        }
        engine.set_config(Config::default());
        let mut gateway = engine.list_sessions(&json!({"includeGlobal": true, "includeUnknown": true})).expect("list");
        gateway["ts"] = json!(0); // the time of the call
        found.insert("gateway sessions.list".into(), digest(&gateway.to_string()));
        if write {
            std::fs::write(golden_path, serde_json::to_string_pretty(&found).expect("json") + "\n").expect("write");
            return;
        }
        for (name, want) in golden.as_object().expect("golden object") {
            assert_eq!(found.get(name), Some(want), "{d:?} {name}");
        }
        assert_eq!(found.len(), golden.as_object().map_or(0, |g| g.len()), "{d:?}");
    }
}

fn digest(text: &str) -> Value {
    json!({"bytes": text.len(), "sha256": crate::tools::bytes9::sha256_hex(text.as_bytes())})
}

#[test]
fn a_listing_shows_the_transcript_path_the_engine_gives() {
    use std::os::unix::ffi::OsStringExt;
    let dirs: Vec<Option<std::path::PathBuf>> = vec![
        None,
        Some("/srv/mirror".into()),
        Some("/srv/mirror/".into()),
        Some("rel/dir".into()),
        Some("".into()),
        Some("/t\u{e9}/x y".into()),
        Some(std::ffi::OsString::from_vec(b"/tmp/\xff\xfe".to_vec()).into()),
    ];
    let sids =
        ["s-1", "a/b", ".x", "", "a:b", "\u{e9}t\u{e9}", "x\u{1}", "a\\b", "0f9a1c2e-1111-4222-8333-444455556666"];
    for dir in dirs {
        let engine = Engine::new(Store::open(":memory:").expect("store"), Config::default(), dir.clone());
        let cfg = engine.config();
        let requester = Requester::of(&cfg, &ToolContext::default()).expect("requester");
        let shared = RowShared::new(&engine, &cfg, &requester);
        for sid in sids {
            for file in [None, Some("/f.jsonl")] {
                let mut e = Entry::new();
                e.insert("sessionId".into(), json!(sid));
                if let Some(f) = file {
                    e.insert("sessionFile".into(), json!(f));
                }
                assert_eq!(shared.transcript_path(&e), engine.transcript_path(&e), "{dir:?} {sid:?} {file:?}");
            }
        }
    }
}
