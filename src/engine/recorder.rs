//! The raw-data recorder: one task owns every output file and appends records as they
//! arrive over a channel, so viewers never block on disk and no record is interleaved.

use crate::model::rawdata::{
    self, ExporterSample, HostSample, JsonlWriter, LightSample, NodeSample, RunEvent, RunEventKind,
    ViewerEvent, ViewerNetwork, ViewerSample,
};
use std::path::Path;
use std::time::Instant;
use tokio::sync::mpsc;

#[derive(Debug)]
pub enum Record {
    Run(RunEvent),
    ViewerEvent(ViewerEvent),
    ViewerSample(ViewerSample),
    Exporter(ExporterSample),
    Host(HostSample),
    Node(NodeSample),
    Network(ViewerNetwork),
    Light(LightSample),
}

/// Cheap handle for producers: stamps times relative to the run's start.
#[derive(Clone)]
pub struct RecorderHandle {
    tx: mpsc::UnboundedSender<Record>,
    started: Instant,
}

impl RecorderHandle {
    /// Seconds since the run started.
    pub fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub fn send(&self, record: Record) {
        // The recorder outlives every producer; a send after it stopped is a bug to log.
        if self.tx.send(record).is_err() {
            tracing::error!("raw data recorder already stopped; a record was dropped");
        }
    }

    pub fn run_event(&self, event: RunEventKind, detail: Option<String>) {
        self.send(Record::Run(RunEvent {
            t: self.now(),
            event,
            detail,
            viewers: None,
            cpu_busy: None,
        }));
    }
}

pub struct Recorder {
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Recorder {
    /// Opens the raw files (failing fast if the folder is not writable) and starts the task.
    pub fn start(run_dir: &Path, started: Instant) -> std::io::Result<(Self, RecorderHandle)> {
        let mut run = JsonlWriter::append(&run_dir.join(rawdata::RUN_EVENTS))?;
        let mut viewer_events = JsonlWriter::append(&run_dir.join(rawdata::VIEWER_EVENTS))?;
        let mut viewer_samples = JsonlWriter::append(&run_dir.join(rawdata::VIEWER_SAMPLES))?;
        let mut exporter = JsonlWriter::append(&run_dir.join(rawdata::EXPORTER_SAMPLES))?;
        let mut host = JsonlWriter::append(&run_dir.join(rawdata::HOST_SAMPLES))?;
        let mut node = JsonlWriter::append(&run_dir.join(rawdata::NODE_SAMPLES))?;
        let mut networks = JsonlWriter::append(&run_dir.join(rawdata::VIEWER_NETWORKS))?;
        // Only runs with light peers get their file.
        let light_path = run_dir.join(rawdata::LIGHT_SAMPLES);
        let mut light: Option<JsonlWriter> = None;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                let result = match &record {
                    Record::Run(r) => run.write(r),
                    Record::ViewerEvent(r) => viewer_events.write(r),
                    Record::ViewerSample(r) => viewer_samples.write(r),
                    Record::Exporter(r) => exporter.write(r),
                    Record::Host(r) => host.write(r),
                    Record::Node(r) => node.write(r),
                    Record::Network(r) => networks.write(r),
                    Record::Light(r) => match &mut light {
                        Some(w) => w.write(r),
                        None => JsonlWriter::append(&light_path).and_then(|mut w| {
                            let written = w.write(r);
                            light = Some(w);
                            written
                        }),
                    },
                };
                if let Err(err) = result {
                    tracing::error!("writing raw data: {err}");
                    return Err(err);
                }
            }
            Ok(())
        });
        Ok((Self { task }, RecorderHandle { tx, started }))
    }

    /// Waits until every record sent before all handles were dropped is on disk.
    pub async fn finish(self) -> std::io::Result<()> {
        match self.task.await {
            Ok(result) => result,
            Err(err) => Err(std::io::Error::other(err.to_string())),
        }
    }
}
