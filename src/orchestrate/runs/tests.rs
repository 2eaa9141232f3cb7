//! The run registry over a fake host: lanes, order, failures, aborts, waits.

use super::*;
use crate::config::Config;
use crate::host::HostFuture;
use crate::store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};

type Behaviour = Box<dyn Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync>;

struct FakeHost {
    behaviour: Behaviour,
    events: Mutex<Vec<Event>>,
}

impl Host for FakeHost {
    fn run_agent(&self, req: AgentRunRequest) -> HostFuture<Value> {
        (self.behaviour)(req)
    }
    fn can_run(&self) -> bool {
        true
    }
    fn emit(&self, event: Event) {
        lock(&self.events).push(event);
    }
}

fn host(f: impl Fn(AgentRunRequest) -> HostFuture<Value> + Send + Sync + 'static) -> Arc<FakeHost> {
    Arc::new(FakeHost { behaviour: Box::new(f), events: Mutex::new(Vec::new()) })
}

fn engine() -> Arc<Engine> {
    Arc::new(Engine::new(Store::open(":memory:").unwrap(), Config::default(), None))
}

fn spec(key: &str, message: &str) -> RunSpec {
    RunSpec {
        session_key: key.into(),
        message: message.into(),
        provenance: Provenance { kind: "inter_session", source_session_key: Some("agent:main:req".into()) },
        options: RunOptions {
            channel: Some("webchat".into()),
            ..RunOptions::new(crate::host::Lane::Nested, 30_000, "chain-1")
        },
        chain_limit: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_appends_the_incoming_message_and_the_reply_and_records_usage() {
    let e = engine();
    let runs = Arc::new(Runs::new("test-owner".into()));
    let h = host(|req| {
        Box::pin(async move {
            Ok(json!({"reply": format!("pong:{}", req.message), "usage": {"input": 10, "output": 5}, "model": "m1"}))
        })
    });
    let id = runs.start(e.clone(), h.clone(), spec("agent:main:target", "ping")).unwrap().unwrap();
    let snap = runs.wait(&e, &id, 5_000).await.unwrap();
    assert_eq!(snap.status, RunStatus::Ok);
    let (_, _, page) = e.chat_history(&json!("agent:main:target"), &Value::Null).unwrap();
    let msgs: Vec<Value> = page.messages.iter().map(|m| serde_json::from_str(&m.json).unwrap()).collect();
    assert_eq!(msgs.len(), 2);
    assert_eq!(
        msgs[0]["provenance"],
        json!({"kind": "inter_session", "sourceSessionKey": "agent:main:req", "runId": id})
    );
    assert_eq!(msgs[1]["content"][0]["text"], "pong:ping");
    let entry = e.get_session(&json!("agent:main:target")).unwrap().unwrap();
    assert_eq!(
        (entry["inputTokens"].clone(), entry["totalTokens"].clone(), entry["model"].clone()),
        (json!(10), json!(15), json!("m1"))
    );
    let kinds: Vec<&str> = lock(&h.events).iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["run.start", "run.end"]);
    assert_eq!(snap.to_json()["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_on_one_session_go_one_at_a_time_in_arrival_order_and_sessions_overlap() {
    let e = engine();
    let runs = Arc::new(Runs::new("test-owner".into()));
    let active: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let max_same = Arc::new(AtomicUsize::new(0));
    let max_total = Arc::new(AtomicUsize::new(0));
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    // The first run of each session waits (up to 10 s) for the other's to start: two sessions'
    // runs overlap whatever the machine's load, and if lanes held one session's run back
    // behind the other's, the wait runs out and `max_total` stays 1.
    let firsts = Arc::new(tokio::sync::Barrier::new(2));
    let (a2, ms, mt, o2) = (active.clone(), max_same.clone(), max_total.clone(), order.clone());
    let h = host(move |req| {
        let (a, ms, mt, o, firsts) = (a2.clone(), ms.clone(), mt.clone(), o2.clone(), firsts.clone());
        Box::pin(async move {
            {
                let mut act = lock(&a);
                *act.entry(req.session_key.clone()).or_default() += 1;
                ms.fetch_max(act[&req.session_key], Ordering::SeqCst);
                mt.fetch_max(act.values().sum(), Ordering::SeqCst);
                lock(&o).push(req.message.clone());
            }
            if req.message.ends_with("-0") {
                let _ = tokio::time::timeout(Duration::from_secs(10), firsts.wait()).await;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            *lock(&a).entry(req.session_key.clone()).or_default() -= 1;
            Ok(json!({"reply": "ok"}))
        })
    });
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(runs.start(e.clone(), h.clone(), spec("agent:main:one", &format!("one-{i}"))).unwrap().unwrap());
        ids.push(runs.start(e.clone(), h.clone(), spec("agent:main:two", &format!("two-{i}"))).unwrap().unwrap());
    }
    for id in &ids {
        assert_eq!(runs.wait(&e, id, 10_000).await.unwrap().status, RunStatus::Ok);
    }
    assert_eq!(max_same.load(Ordering::SeqCst), 1, "two runs of one session overlapped");
    assert_eq!(max_total.load(Ordering::SeqCst), 2, "runs of different sessions did not overlap");
    let seen = lock(&order).clone();
    let ones: Vec<&String> = seen.iter().filter(|m| m.starts_with("one")).collect();
    assert_eq!(ones, ["one-0", "one-1", "one-2", "one-3", "one-4"]);
    // the lane is released just after the waiters hear of the last run
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if lock(&runs.lanes).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(lock(&runs.lanes).is_empty(), "idle lanes are dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_misbehaving_host_ends_the_run_with_error_and_its_message() {
    let e = engine();
    let runs = Arc::new(Runs::new("test-owner".into()));
    let cases: Vec<(Arc<FakeHost>, &str)> = vec![
        (host(|_| Box::pin(async { Err("model down".to_owned()) })), "model down"),
        (host(|_| Box::pin(async { Ok(json!(42)) })), "runAgent must resolve to an object"),
        (
            host(|_| Box::pin(async { Ok(json!({"messages": [{"no": "role"}]})) })),
            "messages[0] must be an object with a string role",
        ),
    ];
    for (h, text) in cases {
        let id = runs.start(e.clone(), h.clone(), spec("agent:main:t", "x")).unwrap().unwrap();
        let s = runs.wait(&e, &id, 5_000).await.unwrap();
        assert_eq!(s.status, RunStatus::Error);
        assert!(s.error.as_deref().unwrap_or_default().contains(text), "{:?}", s.error);
        assert_eq!(lock(&h.events).last().map(|e| e.kind), Some("run.error"));
    }
    // the session lane is free again: a good run still goes through
    let ok = runs
        .start(e.clone(), host(|_| Box::pin(async { Ok(json!({"reply": "fine"})) })), spec("agent:main:t", "y"))
        .unwrap()
        .unwrap();
    assert_eq!(runs.wait(&e, &ok, 5_000).await.unwrap().status, RunStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_run_ends_at_once_with_the_reason_and_frees_its_lane() {
    let e = engine();
    let runs = Arc::new(Runs::new("test-owner".into()));
    let h = host(|req| {
        Box::pin(async move {
            if req.message == "slow" {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Ok(json!({"reply": "done"}))
        })
    });
    let id = runs.start(e.clone(), h.clone(), spec("agent:main:a", "slow")).unwrap().unwrap();
    let next = runs.start(e.clone(), h.clone(), spec("agent:main:a", "fast")).unwrap().unwrap();
    assert!(runs.abort(&id, "stopped: requester session deleted"));
    let s = runs.wait(&e, &id, 5_000).await.unwrap();
    assert_eq!((s.status, s.error.as_deref()), (RunStatus::Error, Some("stopped: requester session deleted")));
    assert_eq!(runs.wait(&e, &next, 5_000).await.unwrap().status, RunStatus::Ok);
    assert!(!runs.abort(&id, "again"), "an ended run cannot be aborted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_times_out_ends_the_wait_not_the_run() {
    let e = engine();
    let runs = Arc::new(Runs::new("test-owner".into()));
    let h = host(|_| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(json!({"reply": "late"}))
        })
    });
    let id = runs.start(e.clone(), h, spec("agent:main:slow", "x")).unwrap().unwrap();
    let first = runs.wait(&e, &id, 20).await.unwrap();
    assert_eq!(first.status, RunStatus::Timeout);
    assert_eq!(first.to_json()["status"], "timeout");
    let later = runs.wait(&e, &id, 5_000).await.unwrap();
    assert_eq!(later.status, RunStatus::Ok);
    let (_, _, page) = e.chat_history(&json!("agent:main:slow"), &Value::Null).unwrap();
    assert!(page.messages.last().map(|m| m.json.contains("late")).unwrap_or(false));
    // a run that already ended answers at once, from memory or the store
    assert_eq!(runs.wait(&e, &id, 0).await.unwrap().status, RunStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_run_times_out_at_once_with_zero_and_earlier_runs_answer_from_the_store() {
    let dir = crate::scratch::path("runs");
    let path = dir.join("s.db");
    let e = Arc::new(Engine::new(Store::open(path.to_str().unwrap()).unwrap(), Config::default(), None));
    let runs = Arc::new(Runs::new("test-owner".into()));
    assert_eq!(runs.wait(&e, "nope", 0).await.unwrap().status, RunStatus::Timeout);
    let id = runs
        .start(e.clone(), host(|_| Box::pin(async { Err("boom".to_owned()) })), spec("agent:main:x", "x"))
        .unwrap()
        .unwrap();
    runs.wait(&e, &id, 5_000).await.unwrap();
    // a new process: a fresh engine and registry on the same file
    let e2 = Arc::new(Engine::new(Store::open(path.to_str().unwrap()).unwrap(), Config::default(), None));
    let s = Arc::new(Runs::new("test-owner".into())).wait(&e2, &id, 0).await.unwrap();
    assert_eq!((s.status, s.error.as_deref()), (RunStatus::Error, Some("boom")));
    assert!(s.started_at.is_some() && s.ended_at.is_some());
}
