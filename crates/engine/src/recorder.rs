//! The raw-data recorder: one task owns every output file and appends records as they
//! arrive over a channel, so viewers never block on disk and no record is interleaved.
//!
//! A run that cannot record stops: the first record that cannot be written (a full disk, an
//! I/O error) ends the run rather than letting it go on, and bill, with nothing kept. The
//! recorder keeps [`RESERVE_BYTES`] of the disk in a file of its own from the start and
//! frees it then, so the `record_lost` event, the stamped manifest and the report still fit.
//! At the end every file is put on disk (fsync).

use crate::model::rawdata::{
    self, ExporterSample, HostSample, JsonlWriter, LightSample, NodeSample, RunEvent, RunEventKind,
    ViewerEvent, ViewerNetwork, ViewerSample,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Disk space held back for the end of a run that lost a record: the `record_lost` event,
/// the manifest and the report (a few hundred kB for a short run).
pub(crate) const RESERVE_BYTES: usize = 2 * 1024 * 1024;
/// The reserve's file, in the run folder's `raw/`.
const RESERVE_FILE: &str = "raw/.space-reserve";

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
pub(crate) struct RecorderHandle {
    tx: mpsc::UnboundedSender<Record>,
    started: Instant,
    lost: CancellationToken,
}

impl RecorderHandle {
    /// Fires when a record could not be written: the run should stop.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

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

    pub(crate) fn run_event(&self, event: RunEventKind, detail: Option<String>) {
        self.send(Record::Run(RunEvent {
            t: self.now(),
            event,
            detail,
            viewers: None,
            cpu_busy: None,
        }));
    }
}

pub(crate) struct Recorder {
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    lost_reason: Arc<Mutex<Option<String>>>,
    reserve: PathBuf,
}

/// Holds [`RESERVE_BYTES`] of the disk (written out, not sparse) so they are there to free.
fn hold_reserve(path: &Path) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::File::create(path)?;
    file.write_all(&vec![0u8; RESERVE_BYTES])?;
    file.sync_all()
}

impl Recorder {
    /// Opens the raw files (failing fast if the folder is not writable, or has not the
    /// reserve's room) and starts the task.
    pub fn start(run_dir: &Path, started: Instant) -> std::io::Result<(Self, RecorderHandle)> {
        let reserve = run_dir.join(RESERVE_FILE);
        hold_reserve(&reserve).map_err(|err| {
            let _ = std::fs::remove_file(&reserve);
            std::io::Error::new(
                err.kind(),
                format!(
                    "cannot keep {} MiB free for the end of the run ({err}); free some space or choose another --out",
                    RESERVE_BYTES / (1024 * 1024)
                ),
            )
        })?;
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
        let lost = CancellationToken::new();
        let lost_reason = Arc::new(Mutex::new(None));
        let (task_lost, task_reason, task_reserve) =
            (lost.clone(), lost_reason.clone(), reserve.clone());
        let task = tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                if task_lost.is_cancelled() {
                    continue; // the run is stopping; nothing more is kept
                }
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
                    let reason = format!("a record could not be written: {err}");
                    tracing::error!("raw data: {reason}; the run stops");
                    let _ = std::fs::remove_file(&task_reserve);
                    let event = RunEvent {
                        t: started.elapsed().as_secs_f64(),
                        event: RunEventKind::RecordLost,
                        detail: Some(err.to_string()),
                        viewers: None,
                        cpu_busy: None,
                    };
                    if let Err(again) = run.write(&event) {
                        tracing::error!("raw data: the record_lost event was lost too: {again}");
                    }
                    *task_reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
                    task_lost.cancel();
                }
            }
            let mut writers = vec![
                &mut run,
                &mut viewer_events,
                &mut viewer_samples,
                &mut exporter,
                &mut host,
                &mut node,
                &mut networks,
            ];
            writers.extend(light.as_mut());
            for writer in writers {
                writer.sync()?;
            }
            Ok(())
        });
        let handle = RecorderHandle { tx, started, lost };
        Ok((
            Self {
                task,
                lost_reason,
                reserve,
            },
            handle,
        ))
    }

    /// Waits until every record sent before all handles were dropped is on disk; says why
    /// a record was lost, if one was.
    pub async fn finish(self) -> std::io::Result<Option<String>> {
        let synced = match self.task.await {
            Ok(result) => result,
            Err(err) => Err(std::io::Error::other(err.to_string())),
        };
        let _ = std::fs::remove_file(&self.reserve);
        let lost = self
            .lost_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match (synced, lost) {
            (_, Some(reason)) => Ok(Some(reason)),
            (Err(err), None) => Err(err),
            (Ok(()), None) => Ok(None),
        }
    }
}
