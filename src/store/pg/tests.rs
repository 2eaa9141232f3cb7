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

fn filled(n: usize) -> Store {
    let s = Store::open(&testdb::fresh_url()).expect("open");
    s.write(|db| {
        for i in 0..n {
            db.put_session(
                &format!("agent:main:k{i:04}"),
                &entry(json!({"sessionId": format!("s{i}"), "updatedAt": i})),
            )?;
        }
        Ok(())
    })
    .expect("fill");
    s
}

#[test]
fn a_large_result_is_read_in_chunks_all_of_it_in_order() {
    let s = filled(1000);
    let keys = s
        .read(|db| {
            let mut keys = Vec::new();
            db.all_sessions(|k, _| {
                keys.push(k);
                Ok(())
            })?;
            Ok(keys)
        })
        .expect("read");
    let want: Vec<String> = (0..1000).map(|i| format!("agent:main:k{i:04}")).collect();
    assert_eq!(keys, want);
}

#[test]
fn a_streamed_read_stops_early_and_refuses_a_statement_in_the_middle_of_it() {
    let s = filled(600);
    s.read(|db| {
        let mut n = 0;
        db.each("SELECT key FROM sessions ORDER BY key", crate::args![], |_| {
            n += 1;
            Ok(n < 300)
        })?;
        assert_eq!(n, 300);
        // the rest of the rows were let go: the transaction goes on
        assert_eq!(db.session_count()?, 600);
        let err = db
            .each("SELECT key FROM sessions ORDER BY key", crate::args![], |_| db.session_count().map(|_| true))
            .expect_err("a statement while rows stream is refused, not a hang");
        assert!(err.message().contains("internal error"), "{}", err.message());
        assert_eq!(db.session_count()?, 600);
        // a small result is all in before the rows are read: statements may run among them
        let mut counts = Vec::new();
        db.each("SELECT key FROM sessions ORDER BY key LIMIT 3", crate::args![], |_| {
            counts.push(db.session_count()?);
            Ok(true)
        })?;
        assert_eq!(counts, [600, 600, 600]);
        Ok(())
    })
    .expect("read");
}

#[test]
fn a_transactions_clock_is_the_servers_never_ahead_of_it_and_never_going_back() {
    let s = Store::open(&testdb::fresh_url()).expect("open");
    let server = "SELECT CAST(floor(extract(epoch from clock_timestamp()) * 1000) AS BIGINT)";
    let mut last = 0;
    for _ in 0..3 {
        let (a, b, on_server) = s
            .write(|db| {
                let a = db.now_ms()?;
                std::thread::sleep(std::time::Duration::from_millis(5));
                let b = db.now_ms()?;
                let on_server = db.row(server, crate::args![], |r| r.get::<i64>(0))?.expect("a row");
                Ok((a, b, on_server))
            })
            .expect("write");
        assert!(last <= a && a + 5 <= b && b <= on_server, "{last} {a} {b} {on_server}");
        last = b;
    }
    let read = s.read(|db| db.now_ms()).expect("read");
    assert!(last <= read && (read - crate::entry::now_ms()).abs() < 60_000, "{last} {read}");
}

#[test]
fn a_write_that_swallows_a_failed_statement_is_not_reported_committed() {
    let s = Store::open(&testdb::fresh_url()).expect("open");
    let err = s
        .write(|db| {
            db.put_session("agent:main:a", &entry(json!({"sessionId": "s1", "updatedAt": 1})))?;
            let _ = db.exec("INSERT INTO no_such_table (x) VALUES (?1)", crate::args![1i64]);
            Ok(())
        })
        .expect_err("the server aborted the transaction");
    assert!(err.message().contains("no_such_table"), "{}", err.message());
    assert_eq!(s.read(|db| db.session_count()).expect("count"), 0);
    // the connection is clean for the next call
    s.write(|db| db.put_session("agent:main:b", &entry(json!({"sessionId": "s2", "updatedAt": 2})))).expect("put");
    assert_eq!(s.read(|db| db.session_count()).expect("count"), 1);
}
