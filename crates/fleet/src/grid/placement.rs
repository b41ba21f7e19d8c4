//! Which Grid node each new session landed on, from the hub's `/status`.
//!
//! A Grid's `/status` lists every slot and its session, so its size grows with the run;
//! asking it once per new session costs O(N²) over a ramp of N sessions. Instead, one
//! request answers every session created before that request started: callers queue on a
//! per-hub lock, and whoever finds a snapshot taken after its session existed reads it
//! without asking again. During a fast ramp this turns thousands of requests into a few
//! per second.

use super::{GridStatus, NodeSlots};
use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;
use tokio::sync::Mutex;

/// Session → node, as one `/status` answer saw it.
struct Snapshot {
    /// When the request that produced it was sent.
    asked_at: Instant,
    nodes: HashMap<String, String>,
    /// Node → what it reports about its viewer slots.
    slots: HashMap<String, Option<NodeSlots>>,
}

/// One cache per hub.
#[derive(Default)]
pub(crate) struct PlacementCache {
    hubs: HashMap<String, Mutex<Option<Snapshot>>>,
    /// `/status` requests made, for tests and benchmarks.
    requests: std::sync::atomic::AtomicU64,
}

impl PlacementCache {
    pub fn new(hubs: &[String]) -> Self {
        Self {
            hubs: hubs.iter().map(|h| (h.clone(), Mutex::new(None))).collect(),
            requests: Default::default(),
        }
    }

    /// The node running `session_id` (created on `hub` no later than `created`), fetching
    /// `/status` with `fetch` only when no snapshot taken after `created` exists.
    pub async fn node_of<F, Fut>(
        &self,
        hub: &str,
        session_id: &str,
        created: Instant,
        fetch: F,
    ) -> Option<String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = anyhow::Result<GridStatus>>,
    {
        let slot = self.hubs.get(hub)?;
        let mut snapshot = slot.lock().await;
        if let Some(s) = snapshot.as_ref().filter(|s| s.asked_at >= created) {
            return s.nodes.get(session_id).cloned();
        }
        let asked_at = Instant::now();
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let status = fetch().await.ok()?;
        let nodes: HashMap<String, String> = status
            .sessions_by_node()
            .into_iter()
            .flat_map(|(node, ids)| ids.into_iter().map(move |id| (id, node.clone())))
            .collect();
        let found = nodes.get(session_id).cloned();
        let slots = status.slots_by_node().into_iter().collect();
        *snapshot = Some(Snapshot {
            asked_at,
            nodes,
            slots,
        });
        found
    }

    /// What `node` of `hub` reported about its viewer slots in the latest snapshot: `None`
    /// when the node is not in it, `Some(None)` when it reports nothing.
    pub(crate) async fn slots_of(&self, hub: &str, node: &str) -> Option<Option<NodeSlots>> {
        let snapshot = self.hubs.get(hub)?.lock().await;
        snapshot.as_ref()?.slots.get(node).cloned()
    }

    /// `/status` requests made so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn status_with(sessions: &[(&str, &str)]) -> GridStatus {
        let mut by_node: HashMap<&str, Vec<serde_json::Value>> = HashMap::new();
        for (id, node) in sessions {
            by_node.entry(node).or_default().push(serde_json::json!({
                "session": {"sessionId": id, "capabilities": {}}
            }));
        }
        let nodes: Vec<serde_json::Value> = by_node
            .into_iter()
            .map(|(uri, slots)| {
                serde_json::json!({"uri": uri, "availability": "UP", "maxSessions": 8, "slots": slots})
            })
            .collect();
        serde_json::from_value(serde_json::json!({"ready": true, "nodes": nodes}))
            .expect("a /status shape")
    }

    #[tokio::test]
    async fn a_snapshot_taken_after_a_session_answers_it_without_a_new_request() {
        let hub = "http://hub:4444".to_string();
        let cache = PlacementCache::new(std::slice::from_ref(&hub));
        let created = Instant::now();
        let all = [("a", "http://n1"), ("b", "http://n2"), ("c", "http://n1")];
        let first = cache
            .node_of(&hub, "a", created, || async { Ok(status_with(&all)) })
            .await;
        assert_eq!(first.as_deref(), Some("http://n1"));
        assert_eq!(cache.slots_of(&hub, "http://n1").await, Some(None));
        assert_eq!(cache.slots_of(&hub, "http://n9").await, None);
        // Created before the first request: answered from its snapshot.
        let second = cache
            .node_of(&hub, "b", created, || async {
                anyhow::bail!("must not be asked again")
            })
            .await;
        assert_eq!(second.as_deref(), Some("http://n2"));
        assert_eq!(cache.requests(), 1);
        // Created after it: a new request.
        let later = Instant::now();
        let third = cache
            .node_of(&hub, "d", later, || async {
                Ok(status_with(&[("d", "http://n3")]))
            })
            .await;
        assert_eq!(third.as_deref(), Some("http://n3"));
        assert_eq!(cache.requests(), 2);
    }

    #[tokio::test]
    async fn concurrent_placements_share_one_request() {
        let hub = "http://hub:4444".to_string();
        let cache = Arc::new(PlacementCache::new(std::slice::from_ref(&hub)));
        let ids: Vec<String> = (0..200).map(|i| format!("s{i}")).collect();
        let pairs: Vec<(String, String)> = ids
            .iter()
            .map(|id| (id.clone(), format!("http://n{}", id.len())))
            .collect();
        let created = Instant::now();
        // The first request is held open until every caller is queued behind it.
        let (release, gate) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for id in &ids {
            let (cache, hub, id, pairs, mut gate) = (
                cache.clone(),
                hub.clone(),
                id.clone(),
                pairs.clone(),
                gate.clone(),
            );
            tasks.push(tokio::spawn(async move {
                cache
                    .node_of(&hub, &id, created, || async move {
                        let _ = gate.wait_for(|open| *open).await;
                        let refs: Vec<(&str, &str)> = pairs
                            .iter()
                            .map(|(a, b)| (a.as_str(), b.as_str()))
                            .collect();
                        Ok(status_with(&refs))
                    })
                    .await
            }));
        }
        tokio::task::yield_now().await;
        release.send(true).expect("callers are waiting");
        for (task, id) in tasks.into_iter().zip(&ids) {
            assert_eq!(
                task.await.expect("no panic"),
                Some(format!("http://n{}", id.len()))
            );
        }
        assert_eq!(cache.requests(), 1, "one /status answered 200 placements");
    }

    #[tokio::test]
    async fn unknown_hubs_and_failed_requests_place_nothing() {
        let hub = "http://hub:4444".to_string();
        let cache = PlacementCache::new(std::slice::from_ref(&hub));
        let now = Instant::now();
        assert_eq!(
            cache
                .node_of("http://other", "a", now, || async { anyhow::bail!("x") })
                .await,
            None
        );
        assert_eq!(
            cache
                .node_of(&hub, "a", now, || async { anyhow::bail!("hub down") })
                .await,
            None
        );
    }
}
