//! The viewer nodes' load, sampled during a run: each load endpoint the fleet names
//! (`Fleet::load_endpoints`, e.g. a Grid's nodes) is read every `sampling_interval` by a
//! task of its own — a slow or dead node never holds the others back — with a bounded
//! number of reads in flight, and one `NodeSample` per read goes to
//! `raw/node_samples.jsonl`. A node that does not answer is recorded (`ok: false`, with
//! the reason) and the run goes on.

use super::recorder::Record;
use super::shared::Shared;
use crate::grid::load::{self, LoadEndpoint, NodeLoadMeter};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Endpoints read at once.
const IN_FLIGHT: usize = 32;
/// Longest a read may take; a slower one delays that node's next read.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Samples the fleet's load endpoints until the run ends; returns at once without any.
pub(super) async fn sample_nodes(shared: Arc<Shared>) {
    let endpoints = shared.fleet.load_endpoints();
    if endpoints.is_empty() {
        return;
    }
    let client = load::client(READ_TIMEOUT);
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let clock = Instant::now();
    let mut nodes = tokio::task::JoinSet::new();
    for endpoint in endpoints {
        nodes.spawn(sample_node(
            shared.clone(),
            client.clone(),
            permits.clone(),
            endpoint,
            clock,
        ));
    }
    while nodes.join_next().await.is_some() {}
}

/// One node: a first read to compare with, then a sample per interval.
async fn sample_node(
    shared: Arc<Shared>,
    client: reqwest::Client,
    permits: Arc<Semaphore>,
    endpoint: LoadEndpoint,
    clock: Instant,
) {
    let mut meter = NodeLoadMeter::new(&endpoint.node);
    let mut last_error: Option<String> = None;
    let mut ticker = tokio::time::interval(shared.sampling_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 0u64.. {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => return,
        }
        let t = shared.rec.now();
        let read = async {
            let _permit = permits.acquire().await;
            let reading = load::read_endpoint(&client, &endpoint.url).await;
            (reading, clock.elapsed().as_secs_f64())
        };
        let (reading, at) = tokio::select! {
            r = read => r,
            _ = shared.run_end.cancelled() => return,
        };
        let sample = meter.sample(t, reading, at);
        if round == 0 && sample.ok {
            continue; // nothing to compare the first reading with
        }
        match &sample.error {
            // Said once per node, not at every interval.
            Some(err) if last_error.as_ref() != Some(err) => {
                tracing::warn!("node load of {}: {err}", endpoint.node);
            }
            _ => {}
        }
        last_error = sample.error.clone();
        if let Some(busy) = sample.cpu_busy {
            shared
                .metrics
                .node_cpu_busy_ratio
                .with_label_values(&[&sample.node])
                .set(busy);
        }
        shared.rec.send(Record::Node(sample));
    }
}
