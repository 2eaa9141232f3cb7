//! The PostgreSQL backend on a real server (see `testdb`): opening, the schema guard, and the
//! statement API's round trips.

use serde_json::json;

use super::testdb;
use crate::store::{ListFilter, Store};

fn entry(v: serde_json::Value) -> crate::entry::Entry {
    serde_json::from_value(v).expect("test entry")
}

#[test]
fn a_postgres_url_opens_a_store_that_keeps_sessions() {
    let url = testdb::fresh_url();
    let s = Store::open(&url).expect("open");
    assert_eq!(s.dialect(), crate::store::Dialect::Postgres);
    assert!(!s.path().contains("password"));
    s.write(|db| db.put_session("agent:main:a", &entry(json!({"sessionId": "s1", "updatedAt": 10, "label": "x"}))))
        .expect("put");
    s.write(|db| db.put_session("agent:main:b", &entry(json!({"sessionId": "s2", "updatedAt": 20})))).expect("put");
    let got = s.read(|db| db.session("agent:main:a")).expect("read").expect("stored");
    assert_eq!(got.get("label"), Some(&json!("x")));
    assert_eq!(s.read(|db| db.session_count()).expect("count"), 2);
    let base = ListFilter { main_key: "main".into(), default_agent: "main".into(), ..ListFilter::default() };
    let keys: Vec<String> = s.read(|db| db.list(&base)).expect("list").into_iter().map(|r| r.key).collect();
    assert_eq!(keys, ["agent:main:b", "agent:main:a"]);
    let one = ListFilter { limit: Some(1), search: Some("s1".into()), ..base.clone() };
    let keys: Vec<String> = s.read(|db| db.list(&one)).expect("list").into_iter().map(|r| r.key).collect();
    assert_eq!(keys, ["agent:main:a"]);
    assert_eq!(
        s.read(|db| db.label_holder("x", Some("main"), "agent:main:b")).expect("label"),
        Some("agent:main:a".into())
    );
    // reopening finds the schema in place and migrates nothing
    s.close();
    let again = Store::open(&url).expect("reopen");
    assert_eq!(again.read(|db| db.session_count()).expect("count"), 2);
}

#[test]
fn a_schema_holding_foreign_tables_of_our_names_is_refused() {
    let url = testdb::fresh_url();
    let schema = url.rsplit("schema=").next().expect("schema").to_owned();
    testdb::exec(&format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.sessions (x int);"));
    let err = Store::open(&url).err().expect("refused");
    assert_eq!(err.code(), crate::error::ErrorCode::StoreError);
    assert!(err.message().contains("not a session-tools store"), "{}", err.message());
}

#[test]
fn a_bad_url_is_a_store_error_naming_the_problem() {
    let err = Store::open("postgres://u@localhost/db?pool_max_size=0").err().expect("refused");
    assert!(err.message().contains("pool_max_size"), "{}", err.message());
    let err = Store::open("postgres://u@localhost/db?schema=Bad-Name").err().expect("refused");
    assert!(err.message().contains("schema"), "{}", err.message());
    let err = Store::open("postgres://u@127.0.0.1:1/db?connect_timeout=1").err().expect("refused");
    assert_eq!(err.code(), crate::error::ErrorCode::StoreError);
    assert!(err.message().contains("127.0.0.1"), "{}", err.message());
}
