//! The store called from every kind of thread a caller may be on (`blocking`): a multi-thread
//! runtime's task, a current-thread runtime's task, a runtime's blocking thread; each opens,
//! writes, reads and drops a PostgreSQL store without a panic.

use crate::store::pg::testdb;
use crate::store::Store;

fn round_trip(s: &Store) -> u64 {
    let e = serde_json::json!({"sessionId": "s1", "updatedAt": 1});
    s.write(|db| db.put_session("agent:main:a", &serde_json::from_value(e.clone()).expect("entry"))).expect("write");
    s.read(|db| db.session_count()).expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_used_and_dropped_on_a_multi_thread_runtimes_task_works() {
    let s = Store::open(&testdb::fresh_url()).expect("open");
    assert_eq!(round_trip(&s), 1);
    drop(s);
}

#[tokio::test]
async fn a_store_opened_used_and_dropped_on_a_current_thread_runtimes_task_works() {
    let s = Store::open(&testdb::fresh_url()).expect("open");
    assert_eq!(round_trip(&s), 1);
    drop(s);
}

#[test]
fn a_store_used_from_a_blocking_thread_of_a_runtime_works() {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let url = testdb::fresh_url();
    let n = rt.block_on(async move {
        tokio::task::spawn_blocking(move || round_trip(&Store::open(&url).expect("open"))).await.expect("join")
    });
    assert_eq!(n, 1);
}
