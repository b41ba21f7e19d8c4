//! The dead man's switch: while a controller drives a run, it refreshes the label
//! `viewerfleet-heartbeat=<unix time>` on the run's hub, one API request per
//! `fleet.heartbeat_interval` (1 minute by default). If the controller dies (`kill -9`, a
//! power cut), the heartbeat stops and `gc` deletes the run once it is older than the grace
//! (10 minutes by default), without waiting for the run's TTL.
//!
//! Every resource is created with the label set to its creation time; only the hub's is
//! refreshed. A controller that leaves the fleet running on purpose (`viewerfleet up`,
//! `run --keep`) hands it over: the hub's heartbeat label is removed, and the run's TTL
//! (`viewerfleet-expires`) alone decides when `gc` may delete it.

use super::api::HcloudApi;
use super::provision::{self, ServerInfo, LABEL_HEARTBEAT};
use super::CloudError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A running heartbeat; stops when dropped.
pub(crate) struct Heartbeat {
    api: HcloudApi,
    server: i64,
    labels: HashMap<String, String>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    beats: Arc<AtomicU64>,
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("server", &self.server)
            .field("beats", &self.beats())
            .finish()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Heartbeat {
    /// Refreshes the heartbeat label on `hub` every `interval`, keeping its other labels.
    pub fn start(api: &HcloudApi, hub: &ServerInfo, interval: Duration) -> Heartbeat {
        let stop = CancellationToken::new();
        let beats = Arc::new(AtomicU64::new(0));
        let task = {
            let (api, stop, beats) = (api.clone(), stop.clone(), beats.clone());
            let (id, name, mut labels) = (hub.id, hub.name.clone(), hub.labels.clone());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(interval) => {}
                    }
                    labels.insert(
                        LABEL_HEARTBEAT.into(),
                        chrono::Utc::now().timestamp().to_string(),
                    );
                    match provision::set_labels(&api, id, &labels).await {
                        Ok(()) => {
                            beats.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => tracing::warn!(
                            "heartbeat on {name} not refreshed ({e}); `gc` treats a run whose heartbeat is older than its grace (10 minutes by default) as dead"
                        ),
                    }
                }
            })
        };
        Heartbeat {
            api: api.clone(),
            server: hub.id,
            labels: hub.labels.clone(),
            stop,
            task: Some(task),
            beats,
        }
    }

    /// Heartbeats sent so far.
    pub fn beats(&self) -> u64 {
        self.beats.load(Ordering::SeqCst)
    }

    async fn halt(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops the heartbeat (the run is about to be deleted).
    pub async fn stop(mut self) {
        self.halt().await;
    }

    /// Stops the heartbeat and removes its label: the run now lives until its TTL.
    pub async fn hand_over(mut self) -> Result<(), CloudError> {
        self.halt().await;
        let mut labels = self.labels.clone();
        labels.remove(LABEL_HEARTBEAT);
        provision::set_labels(&self.api, self.server, &labels).await
    }
}
