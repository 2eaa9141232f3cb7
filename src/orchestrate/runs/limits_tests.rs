//! The run limits that are read-check-write in one store write hold across processes: stores
//! on one database racing from threads never admit more runs than the limit, on SQLite (one
//! file) and on PostgreSQL (one schema, under the write lock). Both the chain budget and the
//! cap on a requester's running children (`maxActive`, 2026.9 `maxChildrenPerAgent`) are tried.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::config::Config;
use crate::host::testing::FakeHost;
use crate::store::pg::testdb;
use crate::store::Store;

const LIMIT: u32 = 5;
const RACERS: usize = 4;
const TRIES: usize = 6;
const REQUESTER: &str = "agent:main:main";

fn places() -> [String; 2] {
    let file = crate::scratch::path("limits").join("l.db");
    [file.to_string_lossy().into_owned(), testdb::fresh_url()]
}

fn spec(session_key: String, lane: crate::host::Lane, chain: &str, chain_limit: Option<u32>) -> RunSpec {
    RunSpec {
        session_key,
        message: "go".into(),
        provenance: Provenance { kind: "inter_session", source_session_key: None },
        options: RunOptions::new(lane, 30_000, chain),
        chain_limit,
    }
}

/// One try of racer `i` (its try `t`) to start a run: whether it was admitted.
type Attempt = fn(&Arc<Engine>, &Arc<Runs>, Arc<dyn Host>, usize, usize) -> bool;

/// `RACERS` stores on `place`, each on its own thread, each trying `TRIES` times to start a run
/// with `start`; the runs admitted in all, and what `check` then reads from the store.
async fn race<C>(place: &str, start: Attempt, check: C) -> (u32, u64)
where
    C: FnOnce(&Engine) -> u64 + Send + 'static,
{
    // the runs never end: they stay counted, and nothing else writes meanwhile
    let host: Arc<dyn Host> = Arc::new(FakeHost::new(|_| Box::pin(std::future::pending())));
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            let (place, host) = (place.to_owned(), host.clone());
            tokio::task::spawn_blocking(move || {
                let engine = Arc::new(Engine::new(Store::open(&place).unwrap(), Config::default(), None));
                let runs = Arc::new(Runs::new(format!("owner-{i}")));
                let started = (0..TRIES).filter(|&t| start(&engine, &runs, host.clone(), i, t)).count() as u32;
                (started, engine)
            })
        })
        .collect();
    let mut started = 0;
    let mut engines = Vec::new();
    for r in racers {
        let (n, engine) = r.await.unwrap();
        started += n;
        engines.push(engine);
    }
    let recorded = tokio::task::spawn_blocking(move || {
        let n = check(&engines[0]);
        drop(engines);
        n
    })
    .await
    .unwrap();
    (started, recorded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_racing_on_one_database_never_start_more_runs_than_the_chain_budget() {
    for place in places() {
        let (started, recorded) = race(
            &place,
            |engine, runs, host, i, _| {
                let s = spec(format!("agent:main:racer-{i}"), crate::host::Lane::Nested, "shared-chain", Some(LIMIT));
                runs.start(engine.clone(), host, s).unwrap().is_some()
            },
            |e| e.store().read(|db| db.chain_run_count("shared-chain")).unwrap(),
        )
        .await;
        assert_eq!(started, LIMIT, "{place}: runs admitted");
        assert_eq!(recorded, u64::from(LIMIT), "{place}: runs recorded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_racing_on_one_database_never_start_more_children_than_the_cap() {
    for place in places() {
        let (started, running) = race(
            &place,
            |engine, runs, host, i, t| {
                let child = format!("agent:main:subagent:r{i}-{t}");
                let entry = json!({"sessionId": child, "updatedAt": 1, "spawnedBy": REQUESTER});
                let entry = serde_json::from_value(entry).unwrap();
                engine.store().write(|db| db.put_session(&child, &entry)).unwrap();
                let cap = ChildCap { requester_key: REQUESTER.into(), max_active: LIMIT };
                let s = spec(child, crate::host::Lane::Subagent, &format!("chain-{i}-{t}"), None);
                matches!(runs.start_capped(engine.clone(), host, s, &cap).unwrap(), Admission::Started(_))
            },
            |e| e.store().read(|db| db.running_subagent_count(REQUESTER)).unwrap(),
        )
        .await;
        assert_eq!(started, LIMIT, "{place}: children admitted");
        assert_eq!(running, u64::from(LIMIT), "{place}: children running");
    }
}
