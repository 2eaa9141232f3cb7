//! The outbox listener on a real server: a store hears of the items another store records in
//! its schema, not of those recorded under another schema, and hears again after the server
//! dropped its listening connection.

use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::APPLICATION_NAME;
use crate::store::pg::testdb;
use crate::store::Store;

/// The outbox worker's poll interval: a wake must come sooner than the poll would.
const WITHIN: Duration = Duration::from_secs(5);
/// How long a wake that must not come is waited for.
const QUIET: Duration = Duration::from_millis(500);

fn waker(s: &Store) -> Receiver<()> {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    s.on_outbox_notify(Box::new(move || {
        let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send(());
    }));
    rx
}

fn record(s: &Store, key: &str) -> bool {
    s.write(|db| db.insert_outbox(key, "a2a_announce", None, &json!({}), 0)).unwrap()
}

fn drain(rx: &Receiver<()>) {
    while rx.try_recv().is_ok() {}
}

#[test]
fn an_item_recorded_by_one_store_wakes_the_others_on_its_schema_only_and_after_a_reconnect() {
    let url = testdb::fresh_url();
    let (a, b) = (Store::open(&url).unwrap(), Store::open(&url).unwrap());
    let elsewhere = Store::open(&testdb::fresh_url()).unwrap();
    let (heard, heard_elsewhere) = (waker(&b), waker(&elsewhere));
    heard.recv_timeout(WITHIN).expect("a wake once listening (for what came before)");
    heard_elsewhere.recv_timeout(WITHIN).expect("a wake once listening");

    assert!(record(&a, "k1"));
    heard.recv_timeout(WITHIN).expect("b hears of a's item");
    assert!(!record(&a, "k1"), "a key recorded again adds nothing");
    let failed = a.write(|db| {
        db.insert_outbox("k2", "a2a_announce", None, &json!({}), 0)?;
        Err::<(), _>(crate::error::Error::store("rolled back"))
    });
    assert!(failed.is_err());
    assert!(record(&elsewhere, "k3"));
    heard_elsewhere.recv_timeout(WITHIN).expect("the other schema's store hears of its own item");
    assert!(heard.recv_timeout(QUIET).is_err(), "no wake for a duplicate, a rollback or another schema's item");

    // the server drops the listening connections (the call returns once they are gone): they
    // come back, and hear again
    drain(&heard);
    testdb::exec(&format!(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = '{APPLICATION_NAME}'"
    ));
    heard.recv_timeout(WITHIN * 2).expect("a wake once listening again");
    assert!(record(&a, "k4"));
    heard.recv_timeout(WITHIN).expect("b hears of a's item after the reconnect");

    // a closed store stops listening
    b.close();
    assert!(record(&a, "k5"));
    assert!(heard.recv_timeout(QUIET).is_err(), "a closed store hears nothing");
}
