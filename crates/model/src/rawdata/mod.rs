//! The run folder's raw data: its layout (here), its records (`records`), `manifest.json`
//! (`manifest`), how they are written as they arrive (`write`) and read back (`read`).
//!
//! Everything a report needs is written here as it arrives, one JSON object per line, so a
//! run killed with `kill -9` still leaves every sample up to the last one. Reports are built
//! from these files only (see `report`), never from in-memory state.
//!
//! Layout of a run folder:
//! ```text
//! RUN_DIR/
//!   scenario.yaml              the scenario as run (after CLI overrides)
//!   manifest.json              tool/host/versions/fleet/command; `ended_at` unset = cut short
//!   raw/run_events.jsonl       RunEvent
//!   raw/viewer_events.jsonl    ViewerEvent
//!   raw/viewer_samples.jsonl   ViewerSample (cumulative counters per viewer)
//!   raw/exporter_samples.jsonl ExporterSample (sums of the target's Prometheus counters)
//!   raw/host_samples.jsonl     HostSample (load generator and target processes)
//!   raw/light_samples.jsonl    LightSample (cumulative counters per light peer)
//! ```
//! Times (`t`) are seconds since the run's start (`manifest.started_at_unix_ms`).

mod manifest;
mod read;
mod records;
mod write;

pub use manifest::*;
pub use read::*;
pub use records::*;
pub use write::*;

pub const RUN_EVENTS: &str = "raw/run_events.jsonl";
pub const VIEWER_EVENTS: &str = "raw/viewer_events.jsonl";
pub const VIEWER_SAMPLES: &str = "raw/viewer_samples.jsonl";
pub const EXPORTER_SAMPLES: &str = "raw/exporter_samples.jsonl";
pub const HOST_SAMPLES: &str = "raw/host_samples.jsonl";
pub const NODE_SAMPLES: &str = "raw/node_samples.jsonl";
/// Light peers' reads (`swarm.light_peers`): one record per peer per read.
pub const LIGHT_SAMPLES: &str = "raw/light_samples.jsonl";
/// Where each viewer sits on the (emulated) internet: its class, NAT and addresses.
pub const VIEWER_NETWORKS: &str = "raw/viewer_networks.jsonl";
pub const MANIFEST: &str = "manifest.json";
pub const SCENARIO_COPY: &str = "scenario.yaml";

#[cfg(test)]
mod tests;
