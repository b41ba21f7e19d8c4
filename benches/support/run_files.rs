//! A run folder's files as the benchmarks read them: its JSON documents, its raw JSON-lines
//! and its steady window (shared by the benches that summarize runs they started).

use serde_json::Value;
use std::path::Path;

/// A JSON document of the run (`report.json`, `manifest.json`); `None` when absent or unreadable.
pub fn read_json(path: &Path) -> Option<Value> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}

/// The lines of a raw JSON-lines file that parse; none when it is absent.
pub fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The steady window `(from, to)` in seconds from the run's start, as its manifest planned
/// it; the whole run without a manifest.
pub fn steady_window(run: &Path) -> (f64, f64) {
    read_json(&run.join("manifest.json"))
        .map(|m| {
            let at = m["plan"]["measure_at_s"].as_f64().unwrap_or(0.0);
            (
                at - m["plan"]["steady_window_s"].as_f64().unwrap_or(0.0),
                at,
            )
        })
        .unwrap_or((0.0, f64::INFINITY))
}
