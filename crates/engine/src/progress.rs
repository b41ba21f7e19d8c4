//! What the terminal shows during and after a run: a progress bar on a TTY, a plain line
//! every 10 s otherwise (CI logs), nothing with `--quiet`; and the closing summary.

use super::shared::{LiveState, Shared};
use crate::model::rawdata::ViewerEventKind;
use crate::model::scenario::Plan;
use crate::report::ReportSummary;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn show_progress(shared: Arc<Shared>, plan_viewers: u32, duration: Duration) {
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let bar = indicatif::ProgressBar::new(duration.as_secs());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar
    });
    let mut ticker = tokio::time::interval(Duration::from_secs(if tty { 1 } else { 10 }));
    ticker.tick().await;
    let mut previous: Option<(f64, u64, u64)> = None;
    let mut rates = String::new();
    let mut last_rate_at = 0.0;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => break,
        }
        let now = shared.rec.now();
        let (line, http, p2p) = {
            let live = shared.live();
            let http: u64 = live.latest.values().map(|v| v.http_down_bytes).sum();
            let p2p: u64 = live.latest.values().map(|v| v.p2p_down_bytes).sum();
            (viewer_line(&live, plan_viewers), http, p2p)
        };
        // Rates over at least 5 s, so one sample's jitter does not dominate.
        if now - last_rate_at >= 5.0 {
            if let Some((t0, h0, p0)) = previous {
                let secs = now - t0;
                rates = format!(
                    " | players: HTTP {:.2} Mbit/s, P2P {:.2} Mbit/s",
                    http.saturating_sub(h0) as f64 * 8.0 / secs / 1e6,
                    p2p.saturating_sub(p0) as f64 * 8.0 / secs / 1e6
                );
            }
            previous = Some((now, http, p2p));
            last_rate_at = now;
        }
        match &bar {
            Some(bar) => {
                bar.set_position(now as u64);
                bar.set_message(format!("{line}{rates}"));
            }
            None => eprintln!("[{now:>5.0}s] {line}{rates}"),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

fn viewer_line(live: &LiveState, requested: u32) -> String {
    format!(
        "viewers: {} playing, {} failed/lost of {requested}",
        live.count(ViewerEventKind::Playing),
        live.ended_badly()
    )
}

/// The closing summary: viewers, HTTP and P2P totals and the HTTP share, warnings. Built
/// from the live state; when the run's report is written, its totals and viewer counts
/// (from raw data) replace the live ones, so the terminal and the report say the same.
pub(super) struct Summary {
    requested: u32,
    started: usize,
    /// Failed (those that never started included) or lost.
    failed: usize,
    /// Requested viewers that never played a first frame.
    not_started: usize,
    /// Players' HTTP and P2P bytes.
    players: (u64, u64),
    /// The exporter's HTTP and P2P bytes since the run's first scrape.
    exporter: Option<(f64, f64)>,
    /// Where a governed ramp settled, and why.
    settled: Option<String>,
    settled_viewers: Option<u32>,
    /// The most viewers the governed ramp measured below its limit.
    fitting_viewers: Option<u32>,
    notes: Vec<String>,
    /// The report's headroom line: which viewers were starved, whether the P2P figure is
    /// a finding, the figures of those with headroom.
    headroom: Option<String>,
    report: Option<String>,
    /// Why a threshold with `abort_on_fail` ended the run early.
    aborted: Option<String>,
}

pub(super) fn summarize(plan: &Plan, live: &LiveState) -> Summary {
    // Started = played a first frame (as in the report); only those have samples.
    let started = live.latest.len();
    let http: u64 = live.latest.values().map(|v| v.http_down_bytes).sum();
    let p2p: u64 = live.latest.values().map(|v| v.p2p_down_bytes).sum();
    // A platform's counters run since it started (and count other players too): only the
    // difference to the run's first scrape belongs to this run.
    let exporter = live.last_exporter.as_ref().map(|last| {
        let since_first = |k: &str| {
            let first = live
                .first_exporter
                .as_ref()
                .and_then(|f| f.sums.get(k).copied())
                .unwrap_or(0.0);
            (last.sums.get(k).copied().unwrap_or(0.0) - first).max(0.0)
        };
        (
            since_first("peertube_playback_http_downloaded_bytes_total"),
            since_first("peertube_playback_p2p_downloaded_bytes_total"),
        )
    });
    let mut notes = Vec::new();
    let p2p_viewers = plan.viewer_plans().iter().filter(|v| v.p2p).count();
    if p2p_viewers >= 2 && started >= 2 && live.max_peers == 0 {
        if !plan.emulates_internet() {
            notes.push("warning: no P2P peer ever connected, so this run's P2P share is not a finding (check ICE candidates, the tracker, the fleet's network)".to_string());
        } else {
            // Behind emulated NATs, peers that cannot reach each other are what is measured.
            notes.push("no P2P peer ever connected: the report's connectivity section says whether the viewers' NATs kept them apart (answered connections that failed ICE) or something else did (no answered connection: the tracker or the fleet)".to_string());
        }
    }
    notes.extend(failure_notes(&live.failures));
    // A governed ramp asked for what it released.
    let requested = live.requested(plan.viewers);
    let settled = live.settled.as_ref().map(|s| {
        format!(
            "viewers: auto, settled on {} of at most {}: {}",
            s.viewers, plan.viewers, s.reason
        )
    });
    Summary {
        requested,
        settled,
        settled_viewers: live.settled.as_ref().map(|s| s.viewers),
        fitting_viewers: live.settled.as_ref().map(|s| s.fits),
        started,
        failed: live.failed_or_lost(requested),
        not_started: (requested as usize).saturating_sub(started),
        players: (http, p2p),
        exporter,
        notes,
        headroom: None,
        report: None,
        aborted: None,
    }
}

/// The failures by reason, most frequent first (a thousand viewers the Grid never started
/// share one reason), with the first viewer of each.
fn failure_notes(failures: &[(u32, String)]) -> Vec<String> {
    let mut by_reason: Vec<(&str, u32, usize)> = Vec::new();
    for (viewer, reason) in failures {
        match by_reason.iter_mut().find(|(r, _, _)| *r == reason.as_str()) {
            Some(entry) => entry.2 += 1,
            None => by_reason.push((reason, *viewer, 1)),
        }
    }
    by_reason.sort_by_key(|e| std::cmp::Reverse(e.2));
    let mut notes: Vec<String> = by_reason
        .iter()
        .take(5)
        .map(|(reason, first, n)| match n {
            1 => format!("viewer {first}: {reason}"),
            n => format!("{n} viewers (first: {first}): {reason}"),
        })
        .collect();
    if by_reason.len() > 5 {
        let more: usize = by_reason[5..].iter().map(|e| e.2).sum();
        notes.push(format!(
            "… and {more} more failures for other reasons in raw/viewer_events.jsonl"
        ));
    }
    notes
}

impl Summary {
    /// Records why a threshold with `abort_on_fail` ended the run early.
    pub(super) fn with_aborted(mut self, aborted: Option<String>) -> Self {
        self.aborted = aborted;
        self
    }

    /// Why the run was ended early by a threshold with `abort_on_fail`, if it was.
    pub(super) fn aborted(&self) -> Option<&str> {
        self.aborted.as_deref()
    }

    /// Where a governed ramp settled.
    pub(super) fn settled_viewers(&self) -> Option<u32> {
        self.settled_viewers
    }

    /// The most viewers the governed ramp measured below its limit.
    pub(super) fn fitting_viewers(&self) -> Option<u32> {
        self.fitting_viewers
    }

    /// Takes the report's counts and totals (whole run, from raw data).
    pub(super) fn use_report(&mut self, s: &ReportSummary, html: &std::path::Path) {
        self.requested = s.viewers.requested;
        self.started = s.viewers.started as usize;
        self.failed = (s.viewers.failed + s.viewers.lost) as usize;
        self.not_started = s.viewers.not_started as usize;
        if let Some(p) = &s.players {
            self.players = (p.http_bytes, p.p2p_bytes);
        }
        self.exporter = s
            .exporter
            .as_ref()
            .map(|e| (e.http_bytes as f64, e.p2p_bytes as f64));
        self.headroom = s.headroom.as_ref().map(|h| h.headline.clone());
        self.report = Some(html.display().to_string());
    }

    pub(super) fn text(&self) -> String {
        let share = |h: f64, p: f64| {
            if h + p > 0.0 {
                format!("{:.1}%", h * 100.0 / (h + p))
            } else {
                "n/a".into()
            }
        };
        let (http, p2p) = (self.players.0 as f64, self.players.1 as f64);
        let never = match self.not_started {
            0 => String::new(),
            n => format!(" ({n} never started)"),
        };
        let mut lines = vec![format!(
            "viewers: {} requested, {} started, {} failed or lost{never}",
            self.requested, self.started, self.failed
        )];
        lines.extend(self.settled.clone());
        lines.push(format!(
            "players:  HTTP {:.1} MB, P2P {:.1} MB, HTTP share {}",
            http / 1e6,
            p2p / 1e6,
            share(http, p2p)
        ));
        if let Some((eh, ep)) = self.exporter {
            lines.push(format!(
                "exporter: HTTP {:.1} MB, P2P {:.1} MB, HTTP share {} (since the run's first scrape)",
                eh / 1e6,
                ep / 1e6,
                share(eh, ep)
            ));
        }
        lines.extend(self.headroom.iter().cloned());
        lines.extend(self.notes.iter().cloned());
        if let Some(path) = &self.report {
            lines.push(format!("report: {path}"));
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end-of-run summary repeats the report's headroom line, so a starved run says at
    /// once that its P2P figure is not a finding (the starved fixture's report.json).
    #[test]
    fn the_summary_says_when_the_p2p_figure_is_not_a_finding() {
        let report: ReportSummary = serde_json::from_str(include_str!(
            "../../../tests/fixtures/golden/run-starved.report.json"
        ))
        .unwrap();
        let mut summary = Summary {
            requested: 12,
            started: 0,
            failed: 0,
            not_started: 0,
            players: (0, 0),
            exporter: None,
            settled: None,
            settled_viewers: None,
            fitting_viewers: None,
            notes: Vec::new(),
            headroom: None,
            report: None,
            aborted: None,
        };
        summary.use_report(&report, std::path::Path::new("runs/x/report.html"));
        let text = summary.text();
        assert!(
            text.contains(
                "\nHEADROOM: 5 of 12 viewers starved in the steady window (node \
                 http://10.0.0.12:5555 saturated 100% of it, 5 pages lagging): the P2P figure \
                 is not a finding; with headroom only: P2P savings 80.0% (7 viewers) vs 63.3% \
                 for all 12 (players' stats)\nreport: runs/x/report.html"
            ),
            "{text}"
        );
    }
}
