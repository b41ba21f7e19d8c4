//! Turns a loaded run folder into a `RunReport`: windows, the table per source, origin
//! ground truth, QoE, the honesty section and the time series. Pure: same data in, same
//! numbers out.

use super::arrival;
use super::headroom;
use super::honesty::{self, Findings};
use super::load::RunData;
use super::qoe;
use super::rates::{mbps, Bins};
use super::reconcile;
use super::summary::*;
use super::table::{self, Steady};
use super::traffic;
use crate::model::kinds::RateSource;
use crate::model::rawdata::{ExporterSample, PlanSummary, RunEventKind};

/// Width of the bins counter deltas are spread into.
pub(crate) const BIN_S: f64 = 1.0;

pub fn build(run: &RunData) -> RunReport {
    let super::plausibility::Screened { run, warnings } = super::plausibility::screen(run);
    let (run, implausible) = (run.as_ref(), warnings);
    let plan = &run.manifest.plan;
    let sampling_s = sampling_interval_s(plan);
    let last_t = run.last_t();
    let end_s = (last_t + BIN_S).ceil();

    let exp = traffic::exporter(run, BIN_S, end_s, sampling_s);
    let ply = traffic::players(run, BIN_S, end_s, sampling_s);
    let data_end = common_data_end(&exp, &ply, last_t);
    let windows = table::windows(
        plan.measure_at_s,
        measure_point(run),
        plan.steady_window_s,
        sampling_s,
        run.manifest.target.playback_metrics_interval_s,
        data_end,
        BIN_S,
    );
    let steady = steady(&windows);
    let tables = source_tables(&exp, &ply, &windows, data_end);
    let reconciliations = reconciliations(run, &exp, &ply, &tables);
    let arrivals = arrival::per_viewer(&run.viewer_events);
    let mut q = qoe::compute(run, &ply.per_viewer, &arrivals, data_end);
    // Arrivals run to the last record: the ramp may outlast the players' data.
    let arrival = arrival::analyse(&arrivals, last_t, BIN_S);
    let headroom = headroom::analyse(
        run,
        &headroom::Inputs {
            steady,
            sampling_s,
            bin_s: BIN_S,
            end_s,
            rate_window_s: windows.rate_window_s,
            viewers: &q.rows,
            watching: &q.watching_by_viewer,
            started: q.counts.started,
            players: tables.players.as_ref(),
        },
    );
    for row in &mut q.rows {
        if let Some(v) = headroom.per_viewer.get(&row.viewer) {
            row.headroom = Some(v.status);
            row.headroom_reasons.clone_from(&v.reasons);
            row.page = v.page;
        }
    }
    let mut warnings = implausible;
    warnings.extend(analysis_warnings(
        run,
        &windows,
        &tables,
        &ply,
        &q,
        &reconciliations,
    ));
    let honesty = honesty::build(
        run,
        Findings {
            gaps: exp.gaps.clone(),
            exporter_status: exporter_status(run, &exp),
            warnings,
            cpu: honesty::cpu_check(run, (steady.from_s, steady.to_s), sampling_s),
        },
    );
    let mut series = time_series(
        run,
        &exp,
        &ply,
        &q.watching,
        windows.rate_window_s,
        data_end,
    );
    series.extend(headroom.page_late);
    let arrival = arrival.map(|(summary, curves)| {
        series.extend(curves);
        summary
    });
    let mut summary = summary(
        run,
        tables,
        reconciliations,
        q.counts,
        q.qoe,
        windows,
        honesty,
    );
    summary.headroom = Some(headroom.headroom);
    summary.arrival = arrival;
    // Judged last, from the figures above: what `report.json` says is what was judged.
    summary.thresholds = super::thresholds::evaluate(&plan.thresholds, &summary);
    if let Some(detail) = run
        .run_events
        .iter()
        .find(|e| e.event == RunEventKind::Aborted)
        .and_then(|e| e.detail.as_deref())
    {
        super::thresholds::mark_aborted(&mut summary.thresholds, detail);
    }
    summary.connectivity = super::connectivity::analyse(run);
    summary.churn = super::churn::analyse(run);
    summary.light = super::light::analyse(run, &ply, steady);
    RunReport {
        summary,
        name: run_name(run),
        series,
        host_cpu: run
            .host_samples
            .iter()
            .map(|s| HostCpu {
                t: s.t,
                busy: s.cpu_busy,
                steal: s.cpu_steal,
                pressure: s.cpu_pressure,
            })
            .collect(),
        node_busy: headroom.node_busy,
        viewers: q.rows,
    }
}

/// The plan's sampling interval, 2 s when the manifest has none.
fn sampling_interval_s(plan: &PlanSummary) -> f64 {
    if plan.sampling_interval_s > 0.0 {
        plan.sampling_interval_s
    } else {
        2.0
    }
}

/// The run folder's name, else the scenario's.
fn run_name(run: &RunData) -> String {
    run.dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.manifest.scenario_name.clone())
}

/// Common data end: the earlier of the two sources' ends, so both are measured on one
/// window; the last record's time when neither has traffic.
fn common_data_end(
    exp: &traffic::ExporterTraffic,
    ply: &traffic::PlayerTraffic,
    last_t: f64,
) -> f64 {
    let data_end = [exp.traffic.as_ref(), ply.traffic.as_ref()]
        .into_iter()
        .flatten()
        .map(|t| t.data_to_s)
        .fold(f64::INFINITY, f64::min);
    if data_end.is_finite() {
        data_end
    } else {
        last_t
    }
}

/// The steady window of the players' figures (and the origin's).
fn steady(windows: &Windows) -> Steady {
    Steady {
        from_s: windows.steady_from_s,
        to_s: windows.steady_to_s,
    }
}

/// The table of each source over its steady window: the exporter's starts later (its
/// counters move once per playback-metrics interval).
fn source_tables(
    exp: &traffic::ExporterTraffic,
    ply: &traffic::PlayerTraffic,
    windows: &Windows,
    data_end: f64,
) -> Tables {
    let exporter_steady = Steady {
        from_s: windows.exporter_steady_from_s,
        to_s: windows.steady_to_s,
    };
    Tables {
        exporter: exp
            .traffic
            .as_ref()
            .map(|t| table::source_table(t, exporter_steady, windows.rate_window_s)),
        players: ply
            .traffic
            .as_ref()
            .map(|t| table::source_table(t, steady(windows), windows.rate_window_s)),
        origin: origin_table(exp, windows, steady(windows), data_end),
    }
}

/// Where the players' HTTP and P2P bytes went, when there are players' figures.
fn reconciliations(
    run: &RunData,
    exp: &traffic::ExporterTraffic,
    ply: &traffic::PlayerTraffic,
    tables: &Tables,
) -> Reconciliations {
    let players = tables.players.as_ref();
    let light = ply.light.as_ref();
    let light_p2p = light.map(|l| l.p2p_total.round().max(0.0) as u64);
    Reconciliations {
        http: players.and_then(|p| reconcile::http(run, exp, p.http_bytes, light)),
        p2p: players
            .and_then(|p| reconcile::p2p(run, p.p2p_uploaded_bytes, p.p2p_bytes, light_p2p)),
    }
}

/// The warnings the analysis itself finds, in the order the report lists them.
fn analysis_warnings(
    run: &RunData,
    windows: &Windows,
    tables: &Tables,
    ply: &traffic::PlayerTraffic,
    q: &qoe::QoeResult,
    reconciliations: &Reconciliations,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(note) = &windows.steady_note {
        warnings.push(format!("Steady window moved: {note}."));
    }
    warnings.extend(source_warnings(tables, ply, q));
    warnings.extend(reconcile::warnings(
        reconciliations.http.as_ref(),
        reconciliations.p2p.as_ref(),
    ));
    warnings.extend(steady_warnings(q, steady(windows)));
    if !run.truncated_files.is_empty() {
        warnings.push(format!(
            "Last line cut short (writer killed) in: {}.",
            run.truncated_files.join(", ")
        ));
    }
    warnings
}

/// The three sources of a run's rates and totals.
struct Tables {
    exporter: Option<SourceTable>,
    players: Option<SourceTable>,
    origin: Option<OriginTable>,
}

struct Reconciliations {
    http: Option<HttpReconciliation>,
    p2p: Option<P2pReconciliation>,
}

/// T on the data's clock: the engine records when it reached it; a run killed before then
/// has T = target ready + measure_at (the plan's clock starts when the target is).
fn measure_point(run: &RunData) -> (f64, String) {
    let plan = &run.manifest.plan;
    let event_t = |kind: RunEventKind| run.run_events.iter().find(|e| e.event == kind).map(|e| e.t);
    match (
        event_t(RunEventKind::MeasurePoint),
        event_t(RunEventKind::TargetReady),
    ) {
        (Some(t), _) => (t, "the engine's measure_point event".to_string()),
        (None, Some(ready)) => (
            ready + plan.measure_at_s,
            format!("target ready ({ready:.0} s) + measure_at; the run never reached it"),
        ),
        (None, None) => (
            plan.measure_at_s,
            "measure_at (no run events recorded)".to_string(),
        ),
    }
}

/// The origin's ground truth (refsite only): peak, rate at T, totals.
fn origin_table(
    exp: &traffic::ExporterTraffic,
    windows: &Windows,
    steady: Steady,
    data_end: f64,
) -> Option<OriginTable> {
    exp.origin_segments.as_ref().map(|(bins, total)| {
        let peak = bins
            .trailing_rates(windows.rate_window_s, 0.0, data_end)
            .into_iter()
            .map(|(_, r)| r)
            .fold(None::<f64>, |a, r| Some(a.map_or(r, |a| a.max(r))));
        OriginTable {
            peak_mbps: peak.map(mbps),
            at_mbps: bins.rate_between(steady.from_s, steady.to_s).map(mbps),
            segment_bytes: total.round() as u64,
            sent_bytes: exp.origin_sent.map(|v| v.round() as u64),
        }
    })
}

/// Why a report covers less than the planned run, if it does.
fn partial_reason(run: &RunData) -> Option<String> {
    let last_t = run.last_t();
    let interrupted = run
        .run_events
        .iter()
        .find(|e| e.event == RunEventKind::Interrupted)
        .map(|e| e.t);
    let lost = run
        .run_events
        .iter()
        .find(|e| e.event == RunEventKind::RecordLost);
    if let Some(e) = lost {
        return Some(format!(
            "the run stopped at {:.0} s because a record could not be written ({}); the report covers what was recorded before",
            e.t,
            e.detail.as_deref().unwrap_or("no detail recorded")
        ));
    }
    if run.manifest.ended_at.is_none() {
        Some(format!(
            "the run did not finish (manifest.json has no end time: killed or still running); \
             the report covers the {last_t:.0} s recorded"
        ))
    } else if let Some(t) = interrupted {
        Some(format!("the run was interrupted at {t:.0} s"))
    } else if let Some(e) = run
        .run_events
        .iter()
        .find(|e| e.event == RunEventKind::Aborted)
    {
        Some(format!(
            "the run was ended early at {:.0} s: {}",
            e.t,
            e.detail
                .as_deref()
                .unwrap_or("a threshold with abort_on_fail failed")
        ))
    } else {
        run.run_events
            .iter()
            .find(|e| e.event == RunEventKind::Error)
            .map(|e| {
                format!(
                    "the run stopped on an error at {:.0} s: {}",
                    e.t,
                    e.detail.as_deref().unwrap_or("(no detail recorded)")
                )
            })
    }
}

/// Where the sources disagree, reset, or show no P2P at all.
fn source_warnings(
    tables: &Tables,
    ply: &traffic::PlayerTraffic,
    q: &qoe::QoeResult,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let p2p_viewers = q.rows.iter().filter(|r| r.p2p).count();
    if let Some(p) = &tables.players {
        let max_peers = ply
            .per_viewer
            .values()
            .map(|v| v.max_peers)
            .max()
            .unwrap_or(0);
        if p2p_viewers > 1 && p.p2p_bytes == 0 && max_peers == 0 {
            warnings.push(format!(
                "No P2P traffic at all although {p2p_viewers} viewers had P2P on and no peer \
                 ever connected: a setup problem (ICE candidates, tracker), not a finding."
            ));
        }
        if p.counter_resets > 0 {
            warnings.push(format!(
                "{} player counter resets (page reloads) were counted as new values.",
                p.counter_resets
            ));
        }
    }
    if let Some(e) = &tables.exporter {
        if e.counter_resets > 0 {
            warnings.push(format!(
                "The exporter's counters went down {} times (target restarted?): counted as \
                 resets, like Prometheus rate().",
                e.counter_resets
            ));
        }
    }
    if let (Some(e), Some(p)) = (&tables.exporter, &tables.players) {
        if let (Some(es), Some(ps)) = (e.http_share, p.http_share) {
            if (es - ps).abs() > 0.15 {
                warnings.push(format!(
                    "The exporter and the players disagree on the HTTP share at T ({:.1}% vs \
                     {:.1}%): check the players' playback-metrics POSTs (rate limits, errors) \
                     before quoting either.",
                    es * 100.0,
                    ps * 100.0
                ));
            }
        }
        if p.http_bytes > 0 {
            let dev = (e.http_bytes as f64 - p.http_bytes as f64) / p.http_bytes as f64 * 100.0;
            if dev.abs() > 10.0 {
                warnings.push(format!(
                    "The exporter's HTTP bytes differ from the players' own stats by {dev:+.1}% \
                     (the exporter lags up to one playback-metrics interval and misses POSTs \
                     that were rejected or lost)."
                ));
            }
        }
    }
    if let (Some(o), Some(p)) = (&tables.origin, &tables.players) {
        if o.segment_bytes > 0 {
            let dev =
                (p.http_bytes as f64 - o.segment_bytes as f64) / o.segment_bytes as f64 * 100.0;
            if dev.abs() > 10.0 {
                warnings.push(format!(
                    "The players' HTTP bytes are {dev:+.1}% off what the origin really sent \
                     (the HTTP reconciliation below says where the difference went)."
                ));
            }
        }
    }
    warnings
}

/// Whether the steady window was steady: the same viewers watching from start to end.
fn steady_warnings(q: &qoe::QoeResult, steady: Steady) -> Vec<String> {
    let mut warnings = Vec::new();
    if !q.watching.is_empty() {
        let active_in = |t: f64| {
            q.watching
                .iter()
                .filter(|(s, e)| *s <= t && t <= *e)
                .count()
        };
        let (a, b) = (active_in(steady.from_s), active_in(steady.to_s));
        if a != b {
            warnings.push(format!(
                "Viewers watching went from {a} to {b} during the steady window ({:.0}–{:.0} s): \
                 it is not steady; a later measurement point or a shorter ramp gives a fairer \
                 number.",
                steady.from_s, steady.to_s
            ));
        }
    }
    warnings
}

/// What became of the exporter's scrapes, in words.
fn exporter_status(run: &RunData, exp: &traffic::ExporterTraffic) -> String {
    if run.exporter_samples.is_empty() {
        match &run.manifest.target.exporter_url {
            Some(url) => format!("configured ({url}) but never scraped"),
            None => "no exporter configured: rates come from the players only".to_string(),
        }
    } else if exp.ok_scrapes == 0 {
        format!("all {} scrapes failed", exp.failed_scrapes)
    } else if exp.traffic.is_none() {
        format!(
            "{} scrapes ok, {} failed, but no `{}` counter: the players never POSTed playback \
             metrics",
            exp.ok_scrapes,
            exp.failed_scrapes,
            traffic::HTTP_DOWN
        )
    } else {
        format!(
            "{} scrapes ok, {} failed",
            exp.ok_scrapes, exp.failed_scrapes
        )
    }
}

/// The report's summary: the top-level source (the exporter when it has data, as in the
/// PeerTube post, else the players), its figures, and everything computed above.
fn summary(
    run: &RunData,
    tables: Tables,
    reconciliations: Reconciliations,
    viewers: ViewerCounts,
    qoe: Qoe,
    windows: Windows,
    honesty: Honesty,
) -> ReportSummary {
    let m = &run.manifest;
    let partial_reason = partial_reason(run);
    let Tables {
        exporter: exporter_table,
        players: players_table,
        origin,
    } = tables;
    let deviation = |http: u64| {
        origin
            .as_ref()
            .filter(|o| o.segment_bytes > 0)
            .map(|o| (http as f64 - o.segment_bytes as f64) / o.segment_bytes as f64 * 100.0)
    };
    let (source, top) = match (&exporter_table, &players_table) {
        (Some(e), _) => (RateSource::Exporter, Some(e.clone())),
        (None, Some(p)) => (RateSource::Players, Some(p.clone())),
        (None, None) => (RateSource::None, None),
    };
    let top_ref = top.as_ref();
    ReportSummary {
        schema_version: SCHEMA_VERSION,
        scenario: m.scenario_name.clone(),
        started_at: m.started_at.clone(),
        partial: partial_reason.is_some(),
        partial_reason,
        target: TargetLine {
            kind: m.target.kind,
            video: m.target.video,
            latency: m.target.latency,
            fleet: m.fleet.kind,
        },
        measured_on: MeasuredOn {
            host: m.host.clone(),
            tool_version: m.tool_version.clone(),
            git_commit: m.git_commit.clone(),
            versions: m.versions.clone(),
        },
        viewers,
        source,
        http_peak_mbps: top_ref.and_then(|t| t.http_peak_mbps),
        http_peak_at_s: top_ref.and_then(|t| t.http_peak_at_s),
        http_at_mbps: top_ref.and_then(|t| t.http_at_mbps),
        p2p_at_mbps: top_ref.and_then(|t| t.p2p_at_mbps),
        p2p_up_at_mbps: top_ref.and_then(|t| t.p2p_up_at_mbps),
        http_share: top_ref.and_then(|t| t.http_share),
        p2p_savings: top_ref.and_then(|t| t.p2p_savings),
        http_to_p2p_ratio: top_ref.and_then(|t| t.http_to_p2p_ratio),
        http_bytes: top_ref.map(|t| t.http_bytes),
        p2p_bytes: top_ref.map(|t| t.p2p_bytes),
        p2p_uploaded_bytes: top_ref.map(|t| t.p2p_uploaded_bytes),
        origin_bytes: origin.as_ref().map(|o| o.segment_bytes),
        origin_deviation_pct: players_table.as_ref().and_then(|p| deviation(p.http_bytes)),
        exporter_origin_deviation_pct: exporter_table
            .as_ref()
            .and_then(|e| deviation(e.http_bytes)),
        http_reconciliation: reconciliations.http,
        p2p_reconciliation: reconciliations.p2p,
        exporter: exporter_table,
        players: players_table,
        origin,
        windows,
        qoe,
        headroom: None,
        arrival: None,
        honesty,
        thresholds: Vec::new(),
        connectivity: None,
        churn: None,
        light: None,
    }
}

/// Rate series of every source, stalls and the viewers watching, for the plots and CSV.
fn time_series(
    run: &RunData,
    exp: &traffic::ExporterTraffic,
    ply: &traffic::PlayerTraffic,
    watching: &[(f64, f64)],
    w: f64,
    data_end: f64,
) -> Vec<Series> {
    let rate = |name, bins: &Bins, from: f64, to: f64| rate_series(name, bins, w, from, to);
    let mut series = Vec::new();
    if let Some(t) = &exp.traffic {
        series.extend([
            rate(names::EXPORTER_HTTP, &t.http, t.data_from_s, t.data_to_s),
            rate(names::EXPORTER_P2P, &t.p2p, t.data_from_s, t.data_to_s),
            rate(names::EXPORTER_UP, &t.up, t.data_from_s, t.data_to_s),
        ]);
    }
    if let Some((bins, _)) = &exp.origin_segments {
        // The origin's counters are only known between the first and last good scrape.
        let ok_scrape = |s: &&ExporterSample| s.ok;
        let from = run
            .exporter_samples
            .iter()
            .find(ok_scrape)
            .map_or(0.0, |s| s.t);
        let to = run
            .exporter_samples
            .iter()
            .rev()
            .find(ok_scrape)
            .map_or(0.0, |s| s.t);
        series.push(rate(names::ORIGIN, bins, from, to));
    }
    if let Some(t) = &ply.traffic {
        series.extend([
            rate(names::PLAYERS_HTTP, &t.http, 0.0, t.data_to_s),
            rate(names::PLAYERS_P2P, &t.p2p, 0.0, t.data_to_s),
            rate(names::PLAYERS_UP, &t.up, 0.0, t.data_to_s),
        ]);
    }
    let active = qoe::active_series(watching, BIN_S, data_end.max(0.0));
    if ply.traffic.is_some() {
        series.push(Series {
            name: names::STALLS_PER_MIN,
            unit: "stalls/min",
            points: ply
                .stalls
                .trailing_rates(w, 0.0, data_end)
                .into_iter()
                .map(|(t, r)| (t, r * 60.0))
                .collect(),
        });
        series.push(Series {
            name: names::STALLED_SHARE,
            unit: "share",
            points: stalled_share(ply, &active, w, data_end),
        });
    }
    series.push(Series {
        name: names::ACTIVE,
        unit: "viewers",
        points: active,
    });
    series
}

/// A trailing-window rate in Mbit/s between `from` and `to`.
fn rate_series(name: &'static str, bins: &Bins, w: f64, from: f64, to: f64) -> Series {
    Series {
        name,
        unit: "Mbit/s",
        points: bins
            .trailing_rates(w, from, to)
            .into_iter()
            .map(|(t, r)| (t, mbps(r)))
            .collect(),
    }
}

/// Share of the watching time spent stalled, over the trailing window: stalled ms per
/// second divided by the viewers watching then (`active`, one value per bin).
fn stalled_share(
    ply: &traffic::PlayerTraffic,
    active: &[(f64, f64)],
    w: f64,
    data_end: f64,
) -> Vec<(f64, f64)> {
    ply.stalled_ms
        .trailing_rates(w, 0.0, data_end)
        .into_iter()
        .map(|(t, ms_per_s)| {
            let watchers = active
                .iter()
                .filter(|(ta, _)| *ta > t - w && *ta <= t)
                .map(|(_, a)| *a)
                .sum::<f64>()
                / w.max(1.0);
            let share = if watchers > 0.0 {
                ms_per_s / 1000.0 / watchers
            } else {
                0.0
            };
            (t, share.min(1.0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rawdata::{ExporterSample, Manifest, PlanSummary, ViewerSample};

    fn run_data(exporter: Vec<ExporterSample>, viewers: Vec<ViewerSample>) -> RunData {
        RunData {
            dir: "/nowhere/run".into(),
            manifest: {
                let mut m = Manifest::example();
                m.ended_at = Some("end".into());
                m.plan = PlanSummary {
                    viewers: 3,
                    sampling_interval_s: 2.0,
                    measure_at_s: 60.0,
                    steady_window_s: 20.0,
                    ..Default::default()
                };
                m.target.playback_metrics_interval_s = Some(2.0);
                m
            },
            run_events: vec![],
            viewer_events: vec![],
            viewer_samples: viewers,
            exporter_samples: exporter,
            host_samples: vec![],
            node_samples: vec![],
            light_samples: vec![],
            truncated_files: vec![],
        }
    }

    fn scrape(t: f64, http: f64, p2p: f64) -> ExporterSample {
        ExporterSample {
            t,
            ok: true,
            sums: [
                (traffic::HTTP_DOWN.to_string(), http),
                (traffic::P2P_DOWN.to_string(), p2p),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn target_restart_mid_run_is_a_reset_not_a_negative_rate() {
        // 125 000 B/s HTTP (1 Mbit/s) and 375 000 B/s P2P; the target restarts at 30 s.
        let samples = (0..=40)
            .map(|i| {
                let t = i as f64 * 2.0;
                let since = if t < 30.0 { t + 100.0 } else { t - 30.0 };
                scrape(t, 125_000.0 * since, 375_000.0 * since)
            })
            .collect();
        let report = build(&run_data(samples, vec![]));
        let s = &report.summary;
        let e = s.exporter.as_ref().unwrap();
        assert_eq!(e.counter_resets, 2, "HTTP and P2P each reset once");
        assert!((s.http_at_mbps.unwrap() - 1.0).abs() < 1e-9);
        assert!((s.http_share.unwrap() - 0.25).abs() < 1e-9);
        assert!(s.honesty.warnings.iter().any(|w| w.contains("went down")));
        for series in &report.series {
            assert!(
                series.points.iter().all(|(_, v)| *v >= 0.0),
                "{}",
                series.name
            );
        }
    }

    #[test]
    fn vanishing_viewer_never_makes_rates_negative() {
        // Viewer 1 plays 0–20 s then vanishes (no more samples, no event); viewer 2 goes on.
        let mut samples = Vec::new();
        for i in 1..=40 {
            let t = i as f64 * 2.0;
            for viewer in [1u32, 2] {
                if viewer == 1 && t > 20.0 {
                    continue;
                }
                samples.push(ViewerSample {
                    t,
                    viewer,
                    http_down_bytes: (10_000.0 * t) as u64,
                    p2p_down_bytes: (30_000.0 * t) as u64,
                    playing: true,
                    ..Default::default()
                });
            }
        }
        let report = build(&run_data(vec![], samples));
        let s = &report.summary;
        assert_eq!(s.source, RateSource::Players);
        // Steady window 40–60 s: only viewer 2.
        assert!((s.http_at_mbps.unwrap() - 0.08).abs() < 1e-9);
        let http = report.series(names::PLAYERS_HTTP).unwrap();
        assert!(http.points.iter().all(|(_, v)| *v >= 0.0));
        assert_eq!(
            s.players.as_ref().unwrap().http_bytes,
            10_000 * 20 + 10_000 * 80
        );
        assert!(s.honesty.exporter_status.contains("no exporter"));
    }

    /// Two viewers over 60 s; viewer 0 uploads 10 MB and its peer receives 6 MB; the origin
    /// sent 31 MB of segments, the players counted 24 MB, aborted 4 MB, had 1 MB in flight
    /// and two requests (≈ 0.6 MB) waiting at their last sample: 1.4 MB unexplained.
    fn lossy_run() -> RunData {
        use crate::model::rawdata::{EngineEvents, HttpOutcomes, RtcCounts};
        let mut viewers = Vec::new();
        for i in 0..=30 {
            let t = i as f64 * 2.0;
            let f = i as f64 / 30.0;
            let last = i == 30;
            for v in 0..2u32 {
                let http = HttpOutcomes {
                    completed_bytes: (12e6 * f) as u64,
                    responses: (40.0 * f) as u32,
                    aborted_announced_bytes: (2e6 * f) as u64,
                    aborted_delivered_bytes: (0.5e6 * f) as u64,
                    in_flight_bytes: if last { 500_000 } else { 300_000 },
                    waiting_requests: if last { 1 } else { 0 },
                    aborts: (4.0 * f) as u32,
                    aborted_waiting: 0,
                };
                viewers.push(ViewerSample {
                    t,
                    viewer: v,
                    http_down_bytes: (12e6 * f) as u64,
                    p2p_down_bytes: if v == 1 { (6e6 * f) as u64 } else { 0 },
                    p2p_up_bytes: if v == 0 { (10e6 * f) as u64 } else { 0 },
                    peers: 1,
                    playing: true,
                    http: Some(http),
                    rtc: Some(RtcCounts {
                        received_bytes: if v == 1 { (6.1e6 * f) as u64 } else { 0 },
                        sent_bytes: if v == 0 { (10e6 * f) as u64 } else { 0 },
                        connections: 1,
                    }),
                    engine: Some(EngineEvents {
                        peer_closes: if v == 1 { (3.0 * f) as u32 } else { 0 },
                        peer_errors: 0,
                        p2p_timeouts: if v == 1 { (9.0 * f) as u32 } else { 0 },
                        p2p_failures: if v == 1 { (9.0 * f) as u32 } else { 0 },
                    }),
                    ..Default::default()
                });
            }
        }
        let exporter = (0..=30)
            .map(|i| {
                let t = i as f64 * 2.0;
                let f = i as f64 / 30.0;
                let mut sample = scrape(t, 24e6 * f, 6e6 * f);
                for (name, value) in [
                    (traffic::ORIGIN_SEGMENTS, 31e6 * f),
                    (traffic::ORIGIN_PLAYLISTS, 0.2e6 * f),
                    (traffic::ORIGIN_OTHER, 0.1e6 * f),
                ] {
                    sample.sums.insert(name.to_string(), value);
                }
                sample
            })
            .collect();
        run_data(exporter, viewers)
    }

    #[test]
    fn p2p_sent_but_never_delivered_is_reconciled_and_reported() {
        let report = build(&lossy_run());
        let s = &report.summary;
        let r = s.p2p_reconciliation.as_ref().unwrap();
        assert_eq!(r.uploaded_bytes, 10_000_000);
        assert_eq!(r.downloaded_bytes, 6_000_000);
        assert_eq!(r.undelivered_bytes, 4_000_000);
        assert!((r.undelivered_share.unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(r.rtc_received_bytes, Some(6_100_000));
        assert_eq!(r.p2p_timeouts, Some(9));
        assert_eq!(r.peer_closes, Some(3));
        // The P2P figure of the report is the receivers' bytes.
        assert_eq!(s.players.as_ref().unwrap().p2p_bytes, 6_000_000);
        assert!(s
            .honesty
            .warnings
            .iter()
            .any(|w| w.contains("P2P uploads exceed what the swarm received by 4.00 MB (40%")));
    }

    #[test]
    fn the_origins_segment_bytes_are_explained_by_outcome() {
        let report = build(&lossy_run());
        let r = report.summary.http_reconciliation.clone().unwrap();
        assert_eq!(r.at_s, 60.0);
        assert_eq!(r.origin_segment_bytes, 31_000_000);
        assert_eq!(r.players_bytes, 24_000_000);
        assert_eq!(r.aborted_bytes, 4_000_000);
        assert_eq!(r.in_flight_bytes, 1_000_000);
        assert_eq!(r.completed_bytes, 24_000_000);
        assert_eq!(r.waiting_requests, 2);
        // Two requests without headers, at the mean response (12 MB / 40) each.
        assert_eq!(r.waiting_estimate_bytes, 600_000);
        assert_eq!(r.rest_bytes, 1_400_000);
        assert!((r.rest_share.unwrap() - 1.4 / 31.0).abs() < 1e-9);
        assert_eq!(r.playlist_bytes, Some(200_000));
        // A rest above 2% is a warning; one within is not.
        let warned = |report: &RunReport| {
            report
                .summary
                .honesty
                .warnings
                .iter()
                .any(|w| w.contains("of the origin's segment bytes are not explained"))
        };
        assert!(warned(&report));
        let mut run = lossy_run();
        for sample in &mut run.exporter_samples {
            let origin = sample.sums[traffic::ORIGIN_SEGMENTS];
            sample
                .sums
                .insert(traffic::ORIGIN_SEGMENTS.to_string(), origin * 30.0 / 31.0);
        }
        let report = build(&run);
        let r = report.summary.http_reconciliation.as_ref().unwrap();
        assert!(r.rest_share.unwrap().abs() <= 0.02, "{r:?}");
        assert!(!warned(&report));
    }

    #[test]
    fn without_the_pages_request_figures_there_is_no_http_reconciliation() {
        let mut run = lossy_run();
        for sample in &mut run.viewer_samples {
            sample.http = None;
        }
        assert!(build(&run).summary.http_reconciliation.is_none());
    }
}
