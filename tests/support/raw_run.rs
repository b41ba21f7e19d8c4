//! A finished run's raw data as the real-tier tests read it back: what the viewers said
//! (events, samples) and what the target's exporter said (scrapes).

use std::path::Path;
use viewerfleet::model::rawdata::{
    read_jsonl, ExporterSample, ViewerEvent, ViewerEventKind, ViewerSample, EXPORTER_SAMPLES,
    VIEWER_EVENTS, VIEWER_SAMPLES,
};

pub struct RawRun {
    pub events: Vec<ViewerEvent>,
    pub samples: Vec<ViewerSample>,
    pub scrapes: Vec<ExporterSample>,
}

impl RawRun {
    /// Reads the run folder `out`; a run without exporter scrapes has none.
    pub fn read(out: &Path) -> Self {
        let scrapes = out.join(EXPORTER_SAMPLES);
        Self {
            events: read_jsonl(&out.join(VIEWER_EVENTS)).unwrap().records,
            samples: read_jsonl(&out.join(VIEWER_SAMPLES)).unwrap().records,
            scrapes: if scrapes.exists() {
                read_jsonl(&scrapes).unwrap().records
            } else {
                Vec::new()
            },
        }
    }

    /// How many `playing` events the viewers wrote.
    pub fn playing(&self) -> usize {
        self.events
            .iter()
            .filter(|e| e.event == ViewerEventKind::Playing)
            .count()
    }

    /// The highest value of an exporter metric (summed over its series) in any good scrape.
    pub fn exporter_max(&self, metric: &str) -> f64 {
        self.scrapes
            .iter()
            .filter(|s| s.ok)
            .filter_map(|s| s.sums.get(metric).copied())
            .fold(0.0, f64::max)
    }

    /// Bytes viewers `0..viewers` received over P2P: each one's last (highest) count.
    pub fn p2p_down_bytes(&self, viewers: u32) -> u64 {
        (0..viewers)
            .filter_map(|v| {
                self.samples
                    .iter()
                    .filter(|s| s.viewer == v)
                    .map(|s| s.p2p_down_bytes)
                    .max()
            })
            .sum()
    }
}
