//! Draining the announce queues (§6.8): queueing an announce behind the requester's active
//! run, then, once that run has ended and the debounce passed, sending (collect: one combined
//! prompt when every item has the same route, else one by one).

use super::*;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::entry::DeliveryContext;
use crate::orchestrate::outbox::Attempt;
use crate::orchestrate::state::Orchestrator;
use crate::orchestrate::task::blocking;

/// Queues an announce behind the requester's active run and waits for its delivery. Over the
/// cap, `new` refuses this item and `old`/`summarize` drop the oldest; a dropped item fails
/// (the outbox records it with `delivery.failed`), and `summarize` sends a summary of the
/// dropped ones in addition to the next delivery.
pub(super) async fn enqueue_queued(
    orch: &Arc<Orchestrator>,
    requester: &str,
    settings: QueueSettings,
    mut item: QueueItem,
) -> Attempt {
    let (tx, rx) = oneshot::channel();
    item.done = Some(tx);
    let start_drain = {
        let mut queues = lock(&orch.subagents().queues);
        let fresh = !queues.contains_key(requester);
        let q = queues.entry(requester.to_owned()).or_insert_with(|| AnnounceQueue {
            settings: settings.clone(),
            items: VecDeque::new(),
            last_enqueued: Instant::now(),
            dropped: 0,
            summary_lines: Vec::new(),
        });
        q.settings = settings;
        let cap = q.settings.cap.max(1);
        if q.items.len() >= cap {
            let reason = format!("dropped: the announce queue of {requester} is full (cap {cap})");
            if q.settings.drop == DropPolicy::New {
                return Attempt::Failed(reason);
            }
            let excess = q.items.len() + 1 - cap;
            for mut old in q.items.drain(..excess).collect::<Vec<_>>() {
                if q.settings.drop == DropPolicy::Summarize {
                    q.dropped += 1;
                    q.summary_lines.push(summary_line(&old.summary_line));
                }
                old.finish(Attempt::Failed(reason.clone()));
            }
            let keep_from = q.summary_lines.len().saturating_sub(cap);
            q.summary_lines.drain(..keep_from);
        }
        q.items.push_back(item);
        q.last_enqueued = Instant::now();
        fresh
    };
    if start_drain {
        let (o, k) = (orch.clone(), requester.to_owned());
        orch.subagents().spawn_task(async move { drain(&o, &k).await });
    }
    rx.await.unwrap_or_else(|_| Attempt::Retry("the announce queue was closed".to_owned()))
}

/// One requester's queue: waits for its active run to end and the debounce to pass, then sends
/// (collect: one combined prompt when every item has the same route, else one by one).
pub(super) async fn drain(orch: &Arc<Orchestrator>, requester: &str) {
    loop {
        loop {
            let (e, r, k) = (orch.engine().clone(), orch.runs().clone(), requester.to_owned());
            match blocking(move || r.active_run(&e, &k)).await {
                Ok(Some(run)) => {
                    let _ = orch.runs().wait(orch.engine(), &run, WAIT_SLICE_MS).await;
                }
                Ok(None) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        loop {
            let left = {
                let queues = lock(&orch.subagents().queues);
                let Some(q) = queues.get(requester) else { return };
                let debounce = Duration::from_millis(q.settings.debounce_ms);
                debounce.saturating_sub(q.last_enqueued.elapsed())
            };
            if left.is_zero() {
                break;
            }
            tokio::time::sleep(left).await;
        }
        let (batch, summary, mode) = {
            let mut queues = lock(&orch.subagents().queues);
            let Some(q) = queues.get_mut(requester) else { return };
            if q.items.is_empty() {
                queues.remove(requester);
                return;
            }
            let summary = (q.dropped > 0).then(|| overflow_summary(q.dropped, &q.summary_lines));
            q.dropped = 0;
            q.summary_lines.clear();
            let batch: Vec<QueueItem> = if q.settings.mode == QueueMode::Collect {
                q.items.drain(..).collect()
            } else {
                q.items.pop_front().into_iter().collect()
            };
            (batch, summary, q.settings.mode)
        };
        send_batch(orch, requester, batch, summary, mode).await;
    }
}

pub(super) fn cross_origin(items: &[QueueItem]) -> bool {
    let keyed: Vec<&String> = items.iter().filter_map(|i| i.origin_key.as_ref()).collect();
    let unkeyed_with_origin = items.iter().any(|i| i.origin_key.is_none() && !i.origin.is_empty());
    let mut distinct = keyed.clone();
    distinct.sort();
    distinct.dedup();
    let mixed = !keyed.is_empty() && keyed.len() < items.len();
    unkeyed_with_origin || distinct.len() > 1 || mixed
}

pub(super) async fn send_batch(
    orch: &Arc<Orchestrator>,
    requester: &str,
    mut batch: Vec<QueueItem>,
    summary: Option<String>,
    mode: QueueMode,
) {
    if mode == QueueMode::Collect && !cross_origin(&batch) {
        let mut blocks = vec![QUEUED_TITLE.to_owned()];
        blocks.extend(summary);
        blocks.extend(batch.iter().enumerate().map(|(i, it)| format!("---\nQueued #{}\n{}", i + 1, it.prompt)));
        let Some(last) = batch.last() else { return };
        let (route, child, chain) = (last.origin.clone(), last.child_key.clone(), last.chain.clone());
        let keys: Vec<String> = batch.iter().map(|i| i.key.clone()).collect();
        let outcome = send_one(orch, requester, blocks.join("\n\n"), &route, &child, chain, &keys).await;
        for it in &mut batch {
            it.finish(outcome.clone());
        }
        return;
    }
    let mut summary = summary;
    for mut it in batch {
        if let Some(text) = summary.take() {
            // sent in addition to the item, never instead of it; its own delivery is best effort
            let _ = send_one(orch, requester, text, &it.origin, &it.child_key, it.chain.clone(), &[]).await;
        }
        let keys = [it.key.clone()];
        let outcome =
            send_one(orch, requester, it.prompt.clone(), &it.origin, &it.child_key, it.chain.clone(), &keys).await;
        it.finish(outcome);
    }
}

pub(super) async fn send_one(
    orch: &Arc<Orchestrator>,
    requester: &str,
    message: String,
    route: &DeliveryContext,
    child_key: &str,
    chain: String,
    keys: &[String],
) -> Attempt {
    let key = match keys {
        [one] => Some(one.clone()),
        _ => None,
    };
    match start_announce_run(orch, requester, message, route, child_key, chain, key) {
        Ok(run) => {
            {
                let mut map = lock(&orch.subagents().announce_runs);
                for k in keys {
                    map.insert(k.clone(), run.clone());
                }
            }
            await_announce_run(orch, keys, &run).await
        }
        Err(e) => Attempt::Retry(e.message().to_owned()),
    }
}
