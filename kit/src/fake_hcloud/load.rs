//! The load endpoints of the simulated nodes (`FakeConfig::node_load`): what
//! `grid/node-load.py` serves on a real node, computed from a model of the node — its
//! cores, what it uses idle, what each session running on it adds, the hypervisor's steal —
//! and the sessions the simulated hub placed on it. Counters accumulate between reads as
//! a real machine's do, so the controller's meter turns them into the same busy shares.
//! Served at `/load/{server id}/metrics`; the hub names that URL in each node's stereotype.

use super::FakeState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::time::Instant;

/// A simulated node's CPU and memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLoadModel {
    /// The server type's cores.
    pub cores: f64,
    /// Busy cores with no session (OS, Selenium node).
    pub idle_cores: f64,
    /// Cores each session adds (a browser with one viewer).
    pub cores_per_session: f64,
    /// Share of the cores the hypervisor takes, busy or not.
    pub steal: f64,
    /// Browsers' PSS per session, MB.
    pub pss_mb_per_session: f64,
}

/// What a node's counters hold so far.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeCounters {
    at: Instant,
    busy_s: f64,
    idle_s: f64,
    steal_s: f64,
}

pub(super) fn routes() -> Router<FakeState> {
    Router::new().route("/load/{server}/metrics", get(metrics))
}

/// The URL the hub names in a node's stereotype (`host`: the fake's own, as asked for).
pub(super) fn url(host: &str, server: i64) -> String {
    format!("http://{host}/load/{server}/metrics")
}

async fn metrics(State(state): State<FakeState>, Path(server): Path<i64>) -> Response {
    let Some(model) = state.config().node_load else {
        return (StatusCode::NOT_FOUND, "no node load model").into_response();
    };
    let mut inner = state.lock();
    if !inner.servers.contains_key(&server) {
        return (StatusCode::NOT_FOUND, "no such server").into_response();
    }
    let sessions = inner.sessions.values().filter(|s| s.node == server).count() as f64;
    let now = Instant::now();
    let c = inner.node_load.entry(server).or_insert(NodeCounters {
        at: now,
        busy_s: 0.0,
        idle_s: 0.0,
        steal_s: 0.0,
    });
    let dt = now.duration_since(c.at).as_secs_f64();
    let steal = model.steal * model.cores;
    let wanted = model.idle_cores + sessions * model.cores_per_session;
    let busy = (wanted + steal).min(model.cores);
    c.busy_s += busy * dt;
    c.steal_s += steal * dt;
    c.idle_s += (model.cores - busy) * dt;
    c.at = now;
    let total_mb = 16384.0 * model.cores;
    let pss = sessions * model.pss_mb_per_session * 1e6;
    let mut text = format!(
        "# HELP viewerfleet_node_cpu_seconds_total CPU seconds of the node's machine by mode.\n\
         # TYPE viewerfleet_node_cpu_seconds_total counter\n\
         viewerfleet_node_cpu_seconds_total{{mode=\"busy\"}} {busy_s}\n\
         viewerfleet_node_cpu_seconds_total{{mode=\"steal\"}} {steal_s}\n\
         viewerfleet_node_cpu_seconds_total{{mode=\"idle\"}} {idle_s}\n\
         # TYPE viewerfleet_node_cpus gauge\nviewerfleet_node_cpus {cores}\n\
         # TYPE viewerfleet_node_memory_total_bytes gauge\nviewerfleet_node_memory_total_bytes {mem_total}\n\
         # TYPE viewerfleet_node_memory_available_bytes gauge\nviewerfleet_node_memory_available_bytes {mem_free}\n\
         # TYPE viewerfleet_node_load1 gauge\nviewerfleet_node_load1 {load1}\n\
         # TYPE viewerfleet_node_browsers_pss_bytes gauge\nviewerfleet_node_browsers_pss_bytes {pss}\n\
         # TYPE viewerfleet_node_browser_processes gauge\nviewerfleet_node_browser_processes {procs}\n",
        busy_s = c.busy_s,
        steal_s = c.steal_s,
        idle_s = c.idle_s,
        cores = model.cores,
        mem_total = total_mb * 1e6,
        mem_free = (total_mb * 1e6 - pss - 1.5e9).max(0.0),
        load1 = busy,
        procs = sessions * 5.0,
    );
    // Each session's browser, as the node's slots run it.
    if sessions > 0.0 {
        text.push_str(&format!(
            "# TYPE viewerfleet_node_browsers gauge\n\
             viewerfleet_node_browsers{{user=\"viewerfleet-browser\",sandbox=\"on\"}} {sessions}\n"
        ));
    }
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}
