//! Counters refsite exposes on `/metrics`: the players' playback metrics under PeerTube's
//! Prometheus names and labels, and the ground truth the origin measured itself (bytes it
//! really wrote, requests, tracker peers, viewers). Rendered by hand in the Prometheus text
//! format so names and label values are exactly what PeerTube's exporter prints.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What an HTTP response carried, for `refsite_origin_sent_bytes_total{kind}` and
/// `refsite_http_requests_total{kind}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ServedKind {
    /// A media segment (`.ts`).
    Segment,
    /// An HLS playlist (`.m3u8`).
    Playlist,
    /// An HTML page (embed page, index).
    Page,
    /// Front-end files (JavaScript).
    Static,
    /// `/api/...` requests.
    Api,
    /// `/metrics` scrapes.
    Metrics,
    /// `/tracker/socket` upgrades.
    Tracker,
    /// Anything else (404s included).
    Other,
}

impl ServedKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ServedKind::Segment => "segment",
            ServedKind::Playlist => "playlist",
            ServedKind::Page => "page",
            ServedKind::Static => "static",
            ServedKind::Api => "api",
            ServedKind::Metrics => "metrics",
            ServedKind::Tracker => "tracker",
            ServedKind::Other => "other",
        }
    }
}

/// Label set of PeerTube's playback counters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PlaybackLabels {
    pub video_origin: String,
    pub player_mode: String,
    pub resolution: String,
    pub fps: String,
    pub p2p_enabled: String,
    pub video_uuid: String,
}

/// Values of PeerTube's playback counters for one label set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PlaybackValues {
    pub http_downloaded: u64,
    pub p2p_downloaded: u64,
    pub p2p_uploaded: u64,
    pub errors: u64,
    pub resolution_changes: u64,
    /// `None` until a first stall is reported (PeerTube's series appears only then).
    pub buffer_stalled: Option<u64>,
    /// Last reported peer count; `None` when the last report had 0 peers.
    pub peers: Option<u64>,
}

/// One validated playback report (deltas since the player's previous report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlaybackReport {
    pub labels: PlaybackLabels,
    pub http_downloaded: u64,
    pub p2p_downloaded: u64,
    pub p2p_uploaded: u64,
    pub errors: u64,
    pub resolution_changes: u64,
    pub buffer_stalled: Option<u64>,
    pub peers: Option<u64>,
}

/// All counters of one refsite instance. Cheap to update from any task.
#[derive(Debug, Default)]
pub struct SiteStats {
    sent: Mutex<BTreeMap<(String, ServedKind), u64>>,
    requests: Mutex<BTreeMap<ServedKind, u64>>,
    aborted: Mutex<BTreeMap<ServedKind, u64>>,
    /// Bytes of responses cut short, by video and kind (already in `sent`).
    aborted_bytes: Mutex<BTreeMap<(String, ServedKind), u64>>,
    playback: Mutex<BTreeMap<PlaybackLabels, PlaybackValues>>,
    viewers: Mutex<HashSet<IpAddr>>,
    /// Valid announce messages received by the tracker.
    pub tracker_announces: AtomicU64,
    /// Peers currently in some swarm.
    pub tracker_peers: AtomicU64,
    /// Swarms with at least one peer.
    pub tracker_swarms: AtomicU64,
    playback_reports: AtomicU64,
    playback_rejected: AtomicU64,
    /// The STUN Binding server's figures (when refsite runs one).
    pub stun: Arc<crate::stun::server::StunStats>,
}

/// Label sets the playback counters keep: a run has a few per video (resolution, fps, P2P
/// on or off); beyond this a report with a new set is refused, so made-up labels cannot grow
/// `/metrics` without end.
pub(crate) const MAX_PLAYBACK_LABEL_SETS: usize = 1024;
/// Distinct client addresses remembered (a run's viewers); later ones are not counted.
pub(crate) const MAX_CLIENTS: usize = 65_536;

/// A playback report with a label set beyond [`MAX_PLAYBACK_LABEL_SETS`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("too many label sets ({MAX_PLAYBACK_LABEL_SETS}): a report with new labels is refused")]
pub(crate) struct TooManyLabelSets;

/// Label value used for bytes that belong to no video (front-end files, index page).
pub(crate) const NO_VIDEO: &str = "none";

impl SiteStats {
    /// Adds bytes written to a client's connection.
    pub(crate) fn add_sent(&self, video: &str, kind: ServedKind, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut sent = lock(&self.sent);
        *sent.entry((video.to_string(), kind)).or_default() += bytes;
    }

    /// Counts one request.
    pub(crate) fn add_request(&self, kind: ServedKind) {
        let mut requests = lock(&self.requests);
        *requests.entry(kind).or_default() += 1;
    }

    /// Counts a response whose client went away before its last byte, after `bytes` of it
    /// had been taken by the connection.
    pub(crate) fn add_aborted(&self, video: &str, kind: ServedKind, bytes: u64) {
        let mut aborted = lock(&self.aborted);
        *aborted.entry(kind).or_default() += 1;
        drop(aborted);
        if bytes > 0 {
            let mut cut = lock(&self.aborted_bytes);
            *cut.entry((video.to_string(), kind)).or_default() += bytes;
        }
    }

    /// Remembers a client address (distinct addresses = viewers seen).
    pub(crate) fn saw_client(&self, ip: IpAddr) {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let mut viewers = lock(&self.viewers);
        if viewers.len() < MAX_CLIENTS {
            viewers.insert(ip);
        }
    }

    /// Applies one validated playback report, unless its labels would be one set too many.
    pub(crate) fn add_playback(&self, report: PlaybackReport) -> Result<(), TooManyLabelSets> {
        let mut playback = lock(&self.playback);
        if !playback.contains_key(&report.labels) && playback.len() >= MAX_PLAYBACK_LABEL_SETS {
            return Err(TooManyLabelSets);
        }
        self.playback_reports.fetch_add(1, Ordering::Relaxed);
        let values = playback.entry(report.labels).or_default();
        values.http_downloaded = values
            .http_downloaded
            .saturating_add(report.http_downloaded);
        values.p2p_downloaded = values.p2p_downloaded.saturating_add(report.p2p_downloaded);
        values.p2p_uploaded = values.p2p_uploaded.saturating_add(report.p2p_uploaded);
        values.errors = values.errors.saturating_add(report.errors);
        values.resolution_changes = values
            .resolution_changes
            .saturating_add(report.resolution_changes);
        if let Some(stalled) = report.buffer_stalled.filter(|s| *s > 0) {
            values.buffer_stalled =
                Some(values.buffer_stalled.unwrap_or(0).saturating_add(stalled));
        }
        values.peers = report.peers.filter(|p| *p > 0);
        Ok(())
    }

    /// Counts a rejected playback report.
    pub(crate) fn add_rejected_playback(&self) {
        self.playback_rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Segment bytes sent for one video (ground truth the players' HTTP figure must match).
    pub fn segment_bytes(&self, video: &str) -> u64 {
        let sent = lock(&self.sent);
        sent.get(&(video.to_string(), ServedKind::Segment))
            .copied()
            .unwrap_or(0)
    }

    /// A copy of the playback counters.
    pub(crate) fn playback_snapshot(&self) -> BTreeMap<PlaybackLabels, PlaybackValues> {
        lock(&self.playback).clone()
    }

    /// Renders everything in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.render_playback(&mut out);
        self.render_origin(&mut out);
        self.render_scalars(&mut out);
        out
    }

    /// The players' reports, under PeerTube's names and labels.
    fn render_playback(&self, out: &mut String) {
        let playback = self.playback_snapshot();
        type Getter = fn(&PlaybackValues) -> Option<u64>;
        let families: [(&str, &str, &str, Getter); 7] = [
            (
                "peertube_playback_http_downloaded_bytes_total",
                "counter",
                "Bytes the players downloaded over HTTP (their own report).",
                |v| Some(v.http_downloaded),
            ),
            (
                "peertube_playback_p2p_downloaded_bytes_total",
                "counter",
                "Bytes the players downloaded from other peers (their own report).",
                |v| Some(v.p2p_downloaded),
            ),
            (
                "peertube_playback_p2p_uploaded_bytes_total",
                "counter",
                "Bytes the players uploaded to other peers (their own report).",
                |v| Some(v.p2p_uploaded),
            ),
            (
                "peertube_playback_errors_count_total",
                "counter",
                "Player errors reported.",
                |v| Some(v.errors),
            ),
            (
                "peertube_playback_resolution_changes_count_total",
                "counter",
                "Resolution changes reported.",
                |v| Some(v.resolution_changes),
            ),
            (
                "peertube_playback_buffer_stalled_count_total",
                "counter",
                "Buffer stalls reported (series appears after a first stall).",
                |v| v.buffer_stalled,
            ),
            (
                "peertube_playback_p2p_peers",
                "gauge",
                "Peers in the last report of each label set (absent when 0).",
                |v| v.peers,
            ),
        ];
        for (name, kind, help, get) in families {
            header(out, name, kind, help);
            for (labels, values) in &playback {
                if let Some(value) = get(values) {
                    let _ = writeln!(
                        out,
                        "{name}{{videoOrigin=\"{}\",playerMode=\"{}\",resolution=\"{}\",fps=\"{}\",p2pEnabled=\"{}\",videoUUID=\"{}\",otel_scope_name=\"refsite\"}} {value}",
                        escape(&labels.video_origin),
                        escape(&labels.player_mode),
                        escape(&labels.resolution),
                        escape(&labels.fps),
                        escape(&labels.p2p_enabled),
                        escape(&labels.video_uuid),
                    );
                }
            }
        }
    }

    /// What the origin itself sent: by video and kind, segments split by whether the
    /// response reached its last byte, and requests.
    fn render_origin(&self, out: &mut String) {
        let sent = lock(&self.sent).clone();
        let cut = lock(&self.aborted_bytes).clone();
        header(
            out,
            "refsite_origin_sent_bytes_total",
            "counter",
            "Bytes the origin wrote to client connections, by video and kind (segment, playlist, page, static).",
        );
        for ((video, kind), bytes) in &sent {
            let _ = writeln!(
                out,
                "refsite_origin_sent_bytes_total{{video=\"{}\",kind=\"{}\"}} {bytes}",
                escape(video),
                kind.as_str()
            );
        }
        let segment = |k: &ServedKind| *k == ServedKind::Segment;
        per_video(
            out,
            "refsite_origin_segment_bytes_total",
            "Media segment bytes the origin wrote, by video (what the players' HTTP figure must match).",
            &segment,
            &sent,
        );
        per_video(
            out,
            "refsite_origin_segment_aborted_bytes_total",
            "Of those, bytes of segment responses the client left before their last byte.",
            &segment,
            &cut,
        );
        per_video(
            out,
            "refsite_origin_playlist_bytes_total",
            "HLS playlist bytes the origin wrote, by video.",
            &|k| *k == ServedKind::Playlist,
            &sent,
        );
        per_video(
            out,
            "refsite_origin_other_bytes_total",
            "Bytes of everything else the origin wrote (pages, front-end files, API answers), by video.",
            &|k| !matches!(k, ServedKind::Segment | ServedKind::Playlist),
            &sent,
        );
        by_kind(
            out,
            "refsite_http_requests_total",
            "HTTP requests received, by kind.",
            &self.requests,
        );
        by_kind(
            out,
            "refsite_origin_aborted_responses_total",
            "Responses cut short because the client closed the request before the last byte, by kind.",
            &self.aborted,
        );
    }

    /// Tracker, viewers and playback-report counts.
    fn render_scalars(&self, out: &mut String) {
        let scalars: [(&str, &str, &str, u64); 7] = [
            (
                "refsite_tracker_peers",
                "gauge",
                "Peers currently registered in a tracker swarm.",
                self.tracker_peers.load(Ordering::Relaxed),
            ),
            (
                "refsite_tracker_swarms",
                "gauge",
                "Tracker swarms with at least one peer.",
                self.tracker_swarms.load(Ordering::Relaxed),
            ),
            (
                "refsite_tracker_announces_total",
                "counter",
                "Valid announce messages received by the tracker.",
                self.tracker_announces.load(Ordering::Relaxed),
            ),
            (
                "refsite_viewers_seen_total",
                "counter",
                "Distinct client addresses that requested a page, playlist or segment.",
                lock(&self.viewers).len() as u64,
            ),
            (
                "refsite_playback_reports_total",
                "counter",
                "Playback-metrics reports accepted.",
                self.playback_reports.load(Ordering::Relaxed),
            ),
            (
                "refsite_playback_reports_rejected_total",
                "counter",
                "Playback-metrics reports rejected with a 400.",
                self.playback_rejected.load(Ordering::Relaxed),
            ),
            (
                "refsite_stun_binding_responses_total",
                "counter",
                "STUN Binding requests answered with the client's reflexive address.",
                self.stun.answered.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, value) in scalars {
            header(out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
    }
}

/// The counters behind a lock, taken even when a panic elsewhere poisoned it: the counts
/// stay usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A counter family by video: the bytes of the kinds `pick` selects, summed per video.
fn per_video(
    out: &mut String,
    name: &str,
    help: &str,
    pick: &dyn Fn(&ServedKind) -> bool,
    from: &BTreeMap<(String, ServedKind), u64>,
) {
    header(out, name, "counter", help);
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    for ((video, kind), bytes) in from {
        if pick(kind) {
            *sums.entry(video).or_default() += bytes;
        }
    }
    for (video, bytes) in sums {
        let _ = writeln!(out, "{name}{{video=\"{}\"}} {bytes}", escape(video));
    }
}

/// A counter family by kind of response.
fn by_kind(out: &mut String, name: &str, help: &str, counts: &Mutex<BTreeMap<ServedKind, u64>>) {
    header(out, name, "counter", help);
    let counts = lock(counts).clone();
    for (kind, count) in &counts {
        let _ = writeln!(out, "{name}{{kind=\"{}\"}} {count}", kind.as_str());
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value (backslash, double quote, newline).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> PlaybackLabels {
        PlaybackLabels {
            video_origin: "local".into(),
            player_mode: "p2p-media-loader".into(),
            resolution: "720".into(),
            fps: "25".into(),
            p2p_enabled: "true".into(),
            video_uuid: "u\"1".into(),
        }
    }

    #[test]
    fn playback_deltas_add_up_and_render_with_peertube_names() {
        let stats = SiteStats::default();
        for _ in 0..2 {
            stats
                .add_playback(PlaybackReport {
                    labels: labels(),
                    http_downloaded: 10,
                    p2p_downloaded: 5,
                    p2p_uploaded: 4,
                    errors: 0,
                    resolution_changes: 1,
                    buffer_stalled: None,
                    peers: Some(2),
                })
                .unwrap();
        }
        let text = stats.render();
        assert!(text.contains(
            "peertube_playback_http_downloaded_bytes_total{videoOrigin=\"local\",playerMode=\"p2p-media-loader\",resolution=\"720\",fps=\"25\",p2pEnabled=\"true\",videoUUID=\"u\\\"1\",otel_scope_name=\"refsite\"} 20"
        ));
        assert!(text.contains("peertube_playback_p2p_peers{"));
        assert!(!text.contains("peertube_playback_buffer_stalled_count_total{"));
    }

    #[test]
    fn playback_label_sets_are_bounded() {
        let stats = SiteStats::default();
        let report = |resolution: usize| PlaybackReport {
            labels: PlaybackLabels {
                resolution: resolution.to_string(),
                ..labels()
            },
            http_downloaded: 1,
            p2p_downloaded: 0,
            p2p_uploaded: 0,
            errors: 0,
            resolution_changes: 0,
            buffer_stalled: None,
            peers: None,
        };
        for r in 0..MAX_PLAYBACK_LABEL_SETS {
            stats.add_playback(report(r)).unwrap();
        }
        assert_eq!(
            stats.add_playback(report(MAX_PLAYBACK_LABEL_SETS)),
            Err(TooManyLabelSets)
        );
        // A known set still counts.
        stats.add_playback(report(0)).unwrap();
        assert_eq!(stats.playback_snapshot().len(), MAX_PLAYBACK_LABEL_SETS);
    }

    #[test]
    fn ground_truth_splits_segments_from_other_bytes() {
        let stats = SiteStats::default();
        stats.add_sent("v", ServedKind::Segment, 100);
        stats.add_sent("v", ServedKind::Playlist, 7);
        stats.add_sent("v", ServedKind::Segment, 1);
        stats.add_request(ServedKind::Segment);
        stats.saw_client("127.0.0.1".parse().unwrap());
        stats.saw_client("::ffff:127.0.0.1".parse().unwrap());
        let text = stats.render();
        assert!(text.contains("refsite_origin_segment_bytes_total{video=\"v\"} 101"));
        assert!(text.contains("refsite_origin_sent_bytes_total{video=\"v\",kind=\"playlist\"} 7"));
        assert!(text.contains("refsite_http_requests_total{kind=\"segment\"} 1"));
        assert!(text.contains("refsite_viewers_seen_total 1"));
        assert!(text.contains("refsite_origin_playlist_bytes_total{video=\"v\"} 7"));
        assert_eq!(stats.segment_bytes("v"), 101);
        stats.add_aborted("v", ServedKind::Segment, 40);
        let text = stats.render();
        assert!(text.contains("refsite_origin_segment_aborted_bytes_total{video=\"v\"} 40"));
        assert!(text.contains("refsite_origin_aborted_responses_total{kind=\"segment\"} 1"));
    }
}
