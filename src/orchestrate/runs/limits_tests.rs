//! The run limits that are read-check-write in one store write (a chain's budget of runs) hold
//! across processes: stores on one database racing from threads never admit more runs than the
//! limit, on SQLite (one file) and on PostgreSQL (one schema, under the write lock).

use std::sync::Arc;

use super::*;
use crate::config::Config;
use crate::host::testing::FakeHost;
use crate::store::pg::testdb;
use crate::store::Store;

const LIMIT: u32 = 5;
const RACERS: usize = 4;
const TRIES: usize = 6;

fn chained(i: usize) -> RunSpec {
    RunSpec {
        session_key: format!("agent:main:racer-{i}"),
        message: "go".into(),
        provenance: Provenance { kind: "inter_session", source_session_key: None },
        options: RunOptions::new(crate::host::Lane::Nested, 30_000, "shared-chain"),
        chain_limit: Some(LIMIT),
    }
}

fn places() -> [String; 2] {
    let file = std::env::temp_dir().join(format!("st-limits-{}.db", uuid::Uuid::new_v4()));
    [file.to_string_lossy().into_owned(), testdb::fresh_url()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_racing_on_one_database_never_start_more_runs_than_the_chain_budget() {
    for place in places() {
        // the runs never end: they stay in the budget, and nothing else writes meanwhile
        let host: Arc<dyn Host> = Arc::new(FakeHost::new(|_| Box::pin(std::future::pending())));
        let racers: Vec<_> = (0..RACERS)
            .map(|i| {
                let (place, host) = (place.clone(), host.clone());
                tokio::task::spawn_blocking(move || {
                    let engine = Arc::new(Engine::new(Store::open(&place).unwrap(), Config::default(), None));
                    let runs = Arc::new(Runs::new(format!("owner-{i}")));
                    let mut started = 0;
                    for _ in 0..TRIES {
                        if runs.start(engine.clone(), host.clone(), chained(i)).unwrap().is_some() {
                            started += 1;
                        }
                    }
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
        assert_eq!(started, LIMIT, "{place}: runs admitted");
        // store calls block (and a PostgreSQL store's runtime must not be dropped on a task)
        let recorded = tokio::task::spawn_blocking(move || {
            let n = engines[0].store().read(|db| db.chain_run_count("shared-chain"));
            drop(engines);
            n
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(recorded, u64::from(LIMIT), "{place}: runs recorded");
    }
}
