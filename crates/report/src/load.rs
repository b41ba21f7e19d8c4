//! Reads one run folder (the contract in `crate::model::rawdata`) into memory for the report.
//!
//! Nothing here interprets the data; it only loads it, tolerating a last line cut short by a
//! killed run (counted, so the report can say so) and naming the file and the fix otherwise.

use crate::model::rawdata::{
    self, ExporterSample, HostSample, LightSample, Manifest, NodeSample, RunEvent, ViewerEvent,
    ViewerSample,
};
use std::path::{Path, PathBuf};

/// Why a folder cannot be reported on.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{dir}: not a folder; give the run folder written by `viewerfleet run --out DIR`")]
    NotAFolder { dir: PathBuf },
    #[error(
        "{dir}: no manifest.json; is this a run folder written by `viewerfleet run`? \
         (a run killed before it started writes none and cannot be reported on)"
    )]
    NoManifest { dir: PathBuf },
    #[error(
        "{path}: manifest.json is not valid: {source}; restore it from a copy of the run folder"
    )]
    BadManifest {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A manifest and no record in `raw/`: nothing was measured that a report could show,
    /// and a report of "0 viewers started" would read like a measured result.
    #[error(
        "{dir}: {what}: the raw data of this run is missing, so there is nothing to report on. \
         Either the run was killed before it wrote any record, or the folder was copied \
         without its raw/ folder (copy raw/ along with manifest.json, or run the scenario again)"
    )]
    NoRawData { dir: PathBuf, what: &'static str },
    #[error("{0:#}")]
    Raw(anyhow::Error),
}

/// Everything a run folder holds, sorted by time.
#[derive(Debug, Clone)]
pub struct RunData {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub run_events: Vec<RunEvent>,
    pub viewer_events: Vec<ViewerEvent>,
    pub viewer_samples: Vec<ViewerSample>,
    pub exporter_samples: Vec<ExporterSample>,
    pub host_samples: Vec<HostSample>,
    /// Reads of the viewer nodes' load endpoints (absent in runs of older versions and on
    /// fleets without such endpoints).
    pub node_samples: Vec<NodeSample>,
    /// Reads of the light peers (`swarm.light_peers`; absent in runs without them and in
    /// runs of older versions).
    pub light_samples: Vec<LightSample>,
    /// Raw files whose last line was cut short (the writer was killed mid-line).
    pub truncated_files: Vec<String>,
}

impl RunData {
    /// Loads `dir`; errors name the file and what to do.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        if !dir.is_dir() {
            return Err(LoadError::NotAFolder {
                dir: dir.to_path_buf(),
            });
        }
        let manifest_path = dir.join(rawdata::MANIFEST);
        let text = match rawdata::read_manifest_text(&manifest_path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(LoadError::NoManifest {
                    dir: dir.to_path_buf(),
                })
            }
            Err(err) => {
                return Err(LoadError::Raw(anyhow::anyhow!(
                    "{}: cannot read: {err}",
                    manifest_path.display()
                )))
            }
        };
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|source| LoadError::BadManifest {
                path: manifest_path.clone(),
                source,
            })?;
        let mut truncated_files = Vec::new();
        let run_events = read(dir, rawdata::RUN_EVENTS, &mut truncated_files)?;
        let viewer_events = read(dir, rawdata::VIEWER_EVENTS, &mut truncated_files)?;
        let mut viewer_samples: Vec<ViewerSample> =
            read(dir, rawdata::VIEWER_SAMPLES, &mut truncated_files)?;
        let mut exporter_samples: Vec<ExporterSample> =
            read(dir, rawdata::EXPORTER_SAMPLES, &mut truncated_files)?;
        let mut host_samples: Vec<HostSample> =
            read(dir, rawdata::HOST_SAMPLES, &mut truncated_files)?;
        let mut node_samples: Vec<NodeSample> =
            read(dir, rawdata::NODE_SAMPLES, &mut truncated_files)?;
        let mut light_samples: Vec<LightSample> =
            read(dir, rawdata::LIGHT_SAMPLES, &mut truncated_files)?;
        let records = run_events.len()
            + viewer_events.len()
            + viewer_samples.len()
            + exporter_samples.len()
            + host_samples.len()
            + node_samples.len()
            + light_samples.len();
        if records == 0 {
            return Err(LoadError::NoRawData {
                dir: dir.to_path_buf(),
                what: if dir.join("raw").exists() {
                    "raw/ holds no record"
                } else {
                    "no raw/ folder"
                },
            });
        }
        // Writers append in time order, but several tasks write viewer samples: sort (stable).
        viewer_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        exporter_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        host_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        node_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        light_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        Ok(Self {
            dir: dir.to_path_buf(),
            manifest,
            run_events,
            viewer_events,
            viewer_samples,
            exporter_samples,
            host_samples,
            node_samples,
            light_samples,
            truncated_files,
        })
    }

    /// Last time any record was written: how far the raw data goes.
    pub(crate) fn last_t(&self) -> f64 {
        let mut last: f64 = 0.0;
        for t in self
            .run_events
            .iter()
            .map(|e| e.t)
            .chain(self.viewer_events.iter().map(|e| e.t))
            .chain(self.viewer_samples.iter().map(|s| s.t))
            .chain(self.exporter_samples.iter().map(|s| s.t))
            .chain(self.host_samples.iter().map(|s| s.t))
            .chain(self.node_samples.iter().map(|s| s.t))
            .chain(self.light_samples.iter().map(|s| s.t))
        {
            if t.is_finite() {
                last = last.max(t);
            }
        }
        last
    }
}

fn read<T: for<'de> serde::Deserialize<'de>>(
    dir: &Path,
    name: &str,
    truncated: &mut Vec<String>,
) -> Result<Vec<T>, LoadError> {
    let contents = rawdata::read_jsonl::<T>(&dir.join(name)).map_err(LoadError::Raw)?;
    if contents.truncated_last_line {
        truncated.push(name.to_string());
    }
    Ok(contents.records)
}
