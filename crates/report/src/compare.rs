//! Several runs side by side: one column group per run (or per scenario when grouping
//! repeats), with mean and 95% confidence interval when a group holds repeats.

use super::format::{self, NONE};
use super::sections;
use super::stats::{mean_ci, MeanCi};
use super::summary::{FiguresAtT, HeadroomFigures, HeadroomVerdict, ReportSummary, RunReport};
use super::swarm_curve::{SwarmCurve, SwarmPoint};
use super::text_table::Table;
use crate::model::kinds::RateSource;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Runs to compare, grouped.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub groups: Vec<Group>,
    /// Runs that produced no report (failed to start, crashed, unreadable folder).
    pub failed: Vec<FailedRun>,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub runs: Vec<RunReport>,
    pub stats: GroupStats,
    /// Where the group sits in a swarm-size sweep (`suite --swarm-sizes`), for the curve
    /// of P2P offload against swarm size (`report::swarm_curve`).
    pub swarm: Option<SwarmPoint>,
}

/// Means (with 95% CI across repeats) of the headline numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupStats {
    pub n: usize,
    pub http_peak_mbps: Option<MeanCi>,
    pub http_at_mbps: Option<MeanCi>,
    pub p2p_at_mbps: Option<MeanCi>,
    pub p2p_up_at_mbps: Option<MeanCi>,
    pub http_share: Option<MeanCi>,
    pub p2p_savings: Option<MeanCi>,
    pub ttff_median_ms: Option<MeanCi>,
    pub stalls_per_viewer_minute: Option<MeanCi>,
    /// P2P bytes uploaders counted that no receiver got, as a share of the uploads.
    pub p2p_undelivered: Option<MeanCi>,
    pub viewers_started: Option<MeanCi>,
    /// The players' P2P savings at T over all viewers and over the viewers with headroom
    /// (see the run reports' headroom section).
    pub players_p2p_savings: Option<MeanCi>,
    pub headroom_p2p_savings: Option<MeanCi>,
    pub partial_runs: usize,
    /// Runs whose P2P figure is not a finding: their steady window was starved (a machine
    /// carrying enough viewers saturated, or enough viewers without headroom). Reports of
    /// schema 1, without a headroom section, count when their host CPU was saturated.
    pub cpu_saturated_runs: usize,
    /// Runs whose headroom nothing measured.
    pub headroom_unknown_runs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedRun {
    pub name: String,
    pub dir: String,
    pub error: String,
}

impl GroupStats {
    pub fn of(runs: &[RunReport]) -> Self {
        let pick = |f: &dyn Fn(&ReportSummary) -> Option<f64>| -> Option<MeanCi> {
            let v: Vec<f64> = runs.iter().filter_map(|r| f(&r.summary)).collect();
            mean_ci(&v)
        };
        Self {
            n: runs.len(),
            http_peak_mbps: pick(&|s| s.http_peak_mbps),
            http_at_mbps: pick(&|s| s.http_at_mbps),
            p2p_at_mbps: pick(&|s| s.p2p_at_mbps),
            p2p_up_at_mbps: pick(&|s| s.p2p_up_at_mbps),
            http_share: pick(&|s| s.http_share),
            p2p_savings: pick(&|s| s.p2p_savings),
            ttff_median_ms: pick(&|s| s.qoe.ttff_median_ms),
            stalls_per_viewer_minute: pick(&|s| s.qoe.stalls_per_viewer_minute),
            p2p_undelivered: pick(&|s| {
                s.p2p_reconciliation
                    .as_ref()
                    .and_then(|r| r.undelivered_share)
            }),
            viewers_started: pick(&|s| Some(s.viewers.started as f64)),
            players_p2p_savings: pick(&|s| {
                figures(s, |f| f.all.as_ref()).and_then(|f| f.p2p_savings)
            }),
            headroom_p2p_savings: pick(&|s| {
                figures(s, |f| f.with_headroom.as_ref()).and_then(|f| f.p2p_savings)
            }),
            partial_runs: runs.iter().filter(|r| r.summary.partial).count(),
            cpu_saturated_runs: runs
                .iter()
                .filter(|r| match &r.summary.headroom {
                    Some(h) => h.verdict == HeadroomVerdict::NotAFinding,
                    None => r.summary.honesty.cpu.as_ref().is_some_and(|c| c.saturated),
                })
                .count(),
            headroom_unknown_runs: runs
                .iter()
                .filter(|r| {
                    r.summary
                        .headroom
                        .as_ref()
                        .is_none_or(|h| h.verdict == HeadroomVerdict::Unknown)
                })
                .count(),
        }
    }

    /// The headroom column: `ok`, `NOT A FINDING` (with the starved viewers) or `unknown`;
    /// for repeats, how many of them were not findings.
    pub(super) fn headroom_cell(&self, runs: &[RunReport]) -> String {
        if let [run] = runs {
            return match &run.summary.headroom {
                None => NONE.to_string(),
                Some(h) => {
                    let v = &h.viewers;
                    match h.verdict {
                        HeadroomVerdict::NotAFinding => {
                            format!("NOT A FINDING: {}/{} starved", v.starved, v.in_steady)
                        }
                        HeadroomVerdict::Finding if v.starved > 0 => {
                            format!("ok, {}/{} starved", v.starved, v.in_steady)
                        }
                        HeadroomVerdict::Finding => "ok".to_string(),
                        HeadroomVerdict::Unknown => "unknown".to_string(),
                    }
                }
            };
        }
        match (self.cpu_saturated_runs, self.headroom_unknown_runs) {
            (0, 0) => "ok".to_string(),
            (0, u) => format!("{u} of {} unknown", self.n),
            (k, _) => format!("{k} of {} NOT A FINDING", self.n),
        }
    }
}

/// One of a run's headroom figures.
fn figures(
    s: &ReportSummary,
    pick: impl Fn(&HeadroomFigures) -> Option<&FiguresAtT>,
) -> Option<&FiguresAtT> {
    s.headroom.as_ref().and_then(|h| pick(&h.figures))
}

impl GroupStats {
    /// `all / with headroom` P2P savings of the players.
    fn savings_cell(&self) -> String {
        format!(
            "{} / {}",
            format::mean_ci(self.players_p2p_savings, 100.0, 1, "%"),
            format::mean_ci(self.headroom_p2p_savings, 100.0, 1, "%")
        )
    }
}

impl Comparison {
    /// Every compared run one of whose thresholds failed, with the conditions that failed.
    pub fn thresholds_failed(&self) -> Vec<(&RunReport, Vec<&super::thresholds::ThresholdResult>)> {
        self.groups
            .iter()
            .flat_map(|g| &g.runs)
            .filter(|r| r.summary.thresholds_failed())
            .map(|r| (r, r.summary.thresholds.iter().filter(|t| !t.pass).collect()))
            .collect()
    }

    /// One group per run, in the given order.
    pub fn per_run(runs: Vec<RunReport>, failed: Vec<FailedRun>) -> Self {
        let groups = runs
            .into_iter()
            .map(|r| Group {
                name: r.name.clone(),
                stats: GroupStats::of(std::slice::from_ref(&r)),
                runs: vec![r],
                swarm: None,
            })
            .collect();
        Self { groups, failed }
    }

    /// Groups runs by a key (the scenario name for suites), keeping first-seen order.
    pub fn grouped(
        runs: Vec<RunReport>,
        key: impl Fn(&RunReport) -> String,
        failed: Vec<FailedRun>,
    ) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        for run in runs {
            let k = key(&run);
            match groups.iter_mut().find(|g| g.name == k) {
                Some(g) => g.runs.push(run),
                None => groups.push(Group {
                    name: k,
                    runs: vec![run],
                    stats: GroupStats::default(),
                    swarm: None,
                }),
            }
        }
        for g in &mut groups {
            g.stats = GroupStats::of(&g.runs);
        }
        Self { groups, failed }
    }

    /// Places each group in a swarm-size sweep by its name (`suite --swarm-sizes`): the
    /// comparison then has a part on P2P offload against swarm size.
    pub fn with_swarm_points(mut self, point: impl Fn(&str) -> Option<SwarmPoint>) -> Self {
        for g in &mut self.groups {
            g.swarm = point(&g.name);
        }
        self
    }

    /// P2P offload against swarm size, one curve per scenario@mode (empty unless the
    /// groups hold more than one swarm size).
    pub fn swarm_curves(&self) -> Vec<SwarmCurve> {
        super::swarm_curve::curves(self)
    }

    /// Any group with repeats (then columns show mean ± 95% CI).
    pub(crate) fn has_repeats(&self) -> bool {
        self.groups.iter().any(|g| g.runs.len() > 1)
    }

    /// The side-by-side table.
    pub fn table(&self) -> Table {
        let mut t = Table::new(&[
            "Run",
            "n",
            "Viewers",
            "HTTP peak",
            "HTTP at T",
            "P2P at T",
            "HTTP share",
            "P2P savings",
            "TTFF p50",
            "Stalls/v-min",
            "P2P undelivered",
            "Headroom",
            "Players' P2P savings: all / with headroom",
            "Notes",
        ])
        .with_last_left();
        for g in &self.groups {
            let s = &g.stats;
            let first = &g.runs[0].summary;
            let requested = first.viewers.requested;
            let viewers = match s.viewers_started {
                Some(MeanCi {
                    mean, ci95: None, ..
                }) => format!("{mean:.0}/{requested}"),
                Some(MeanCi { mean, .. }) => format!("{mean:.1}/{requested}"),
                None => format!("—/{requested}"),
            };
            // The swarm: "5/6 + 40 light peers" (the first run's light peers that started).
            let viewers = match &first.light {
                Some(l) => format!("{viewers} + {}", super::light::peers_phrase(l.started)),
                None => viewers,
            };
            let notes: Vec<String> = g
                .runs
                .iter()
                .map(|r| {
                    let flags = sections::flags(&r.summary);
                    match r.summary.source {
                        RateSource::Exporter => flags,
                        RateSource::Players => format!("from players' stats, {flags}"),
                        RateSource::None => format!("no traffic data, {flags}"),
                    }
                })
                .collect();
            let notes = if notes.iter().all(|n| n == "ok") {
                "ok".to_string()
            } else {
                notes.join("; ")
            };
            t.row(vec![
                g.name.clone(),
                s.n.to_string(),
                viewers,
                format::mean_ci(s.http_peak_mbps, 1.0, 1, ""),
                format::mean_ci(s.http_at_mbps, 1.0, 2, ""),
                format::mean_ci(s.p2p_at_mbps, 1.0, 2, ""),
                format::mean_ci(s.http_share, 100.0, 1, "%"),
                format::mean_ci(s.p2p_savings, 100.0, 1, "%"),
                format::mean_ci(s.ttff_median_ms, 1.0, 0, " ms"),
                format::mean_ci(s.stalls_per_viewer_minute, 1.0, 2, ""),
                undelivered_cell(s.p2p_undelivered),
                s.headroom_cell(&g.runs),
                s.savings_cell(),
                notes,
            ]);
        }
        t
    }

    /// The lines under the table naming the runs whose P2P figure is not a finding, each
    /// with its headroom line (what `viewerfleet run` printed).
    pub(crate) fn headroom_warnings(&self) -> Vec<String> {
        let runs: Vec<&RunReport> = self
            .groups
            .iter()
            .flat_map(|g| &g.runs)
            .filter(|r| r.summary.not_a_finding())
            .collect();
        if runs.is_empty() {
            return Vec::new();
        }
        let mut out = vec![format!(
            "NOT A FINDING: {} — the steady window was starved, so the P2P figures of {} are \
             biased towards HTTP; the players' P2P savings of the viewers with headroom are \
             beside them.",
            runs.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if runs.len() == 1 {
                "this run"
            } else {
                "these runs"
            }
        )];
        out.extend(runs.iter().filter_map(|r| {
            r.summary
                .headroom
                .as_ref()
                .map(|h| format!("{}: {}", r.name, h.headline))
        }));
        out
    }

    /// Plain-text table for the terminal, with failed runs listed under it.
    pub fn text(&self) -> String {
        let mut out = self.table().text();
        let warnings = self.headroom_warnings();
        for line in &warnings {
            out.push_str(&wrap(line, 100));
        }
        if !warnings.is_empty() {
            out.push('\n');
        }
        out.push_str(&wrap(LEGEND, 100));
        if self.has_repeats() {
            out.push_str(
                "values: mean ± 95% confidence interval (Student's t) over the n repeats\n",
            );
        }
        for f in &self.failed {
            out.push_str(&format!("FAILED {}: {}\n", f.name, f.error));
        }
        out.push_str(&super::swarm_curve::text(self));
        out
    }
}

/// Wraps text at `width` columns for the terminal.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.chars().count() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.chars().count();
    }
    out.push('\n');
    out
}

/// P2P bytes counted as uploaded but not received: only a positive share means something
/// (uploads cut short); a share at or below zero is the sampling moments of uploaders and
/// receivers differing, so it reads "within noise" rather than as a negative figure.
fn undelivered_cell(v: Option<MeanCi>) -> String {
    match v {
        Some(m) if m.mean * 100.0 < 0.05 => "within noise".into(),
        other => format::mean_ci(other, 100.0, 1, "%"),
    }
}

/// What the comparison table's columns mean, printed under it.
pub(crate) const LEGEND: &str =
    "Rates in Mbit/s. T = each run's measurement point; \"at T\" = mean over its \
steady window; peak = highest trailing-window mean; HTTP share = HTTP / (HTTP + P2P); P2P savings \
= 1 - HTTP share; TTFF = time to first frame; Stalls/v-min = stalls per viewer-minute; P2P \
undelivered = share of the P2P bytes uploaders counted that no receiver got (P2P figures are the \
receivers'; \"within noise\": zero or below, uploaders and receivers sampled at slightly \
different moments). Headroom = whether the viewers had CPU headroom in the steady window (NOT A FINDING: \
the window was starved, see each run's report); the players' P2P savings are given over all viewers \
and over the viewers with headroom. A name@mode run used that throttling mode (http-only: the 2023 conditions, HTTP \
throttled and P2P free; tc: real per-viewer links for both); a run named …@N (suite --swarm-sizes) \
ran a swarm of N, the scenario's viewers plus light peers. Rates come from the platform's exporter \
unless Notes say otherwise; each run's report.md says how.";

/// `compare.json`.
#[derive(Debug, Serialize)]
pub struct CompareJson<'a> {
    pub schema_version: u32,
    pub groups: Vec<GroupJson<'a>>,
    pub failed_runs: &'a [FailedRun],
    /// P2P offload against swarm size (suites with `--swarm-sizes` and more than one size).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub swarm_curves: Vec<SwarmCurve>,
}

#[derive(Debug, Serialize)]
pub struct GroupJson<'a> {
    pub name: &'a str,
    pub stats: &'a GroupStats,
    pub runs: Vec<RunJson<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RunJson<'a> {
    pub name: &'a str,
    #[serde(flatten)]
    pub summary: &'a ReportSummary,
}

impl Comparison {
    pub fn json(&self) -> CompareJson<'_> {
        CompareJson {
            schema_version: super::summary::SCHEMA_VERSION,
            groups: self
                .groups
                .iter()
                .map(|g| GroupJson {
                    name: &g.name,
                    stats: &g.stats,
                    runs: g
                        .runs
                        .iter()
                        .map(|r| RunJson {
                            name: &r.name,
                            summary: &r.summary,
                        })
                        .collect(),
                })
                .collect(),
            failed_runs: &self.failed,
            swarm_curves: self.swarm_curves(),
        }
    }
}

/// Builds every run's report (rewriting its files) and compares; unreadable folders are
/// listed as failed instead of stopping the comparison.
pub fn compare_dirs(dirs: &[PathBuf], group_by_scenario: bool) -> Comparison {
    compare_dirs_judged(dirs, group_by_scenario, None)
}

/// As [`compare_dirs`]; with `thresholds` (from the command line), every run is judged
/// against them instead of its manifest's, and the run folders are only read.
pub fn compare_dirs_judged(
    dirs: &[PathBuf],
    group_by_scenario: bool,
    thresholds: Option<&[crate::model::scenario::ThresholdText]>,
) -> Comparison {
    let mut runs = Vec::new();
    let mut failed = Vec::new();
    for dir in dirs {
        let built = match thresholds {
            None => super::build_and_write(dir),
            Some(t) => super::build(dir).map(|mut report| {
                super::rejudge(&mut report, t);
                report
            }),
        };
        match built {
            Ok(report) => runs.push(report),
            Err(err) => failed.push(FailedRun {
                name: dir_name(dir),
                dir: dir.display().to_string(),
                error: format!("{err:#}"),
            }),
        }
    }
    if group_by_scenario {
        Comparison::grouped(runs, |r| r.summary.scenario.clone(), failed)
    } else {
        Comparison::per_run(runs, failed)
    }
}

pub fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}
