//! `viewerfleet fidelity`: do light peers offload like real viewers? Measured, not assumed,
//! the way `calibrate` judges a browser profile against the default one: the same scenario
//! at the same swarm size, run as an all-real swarm (A: `--swarm` viewers, no light peers)
//! and as real viewers plus light peers (B: `--real` viewers and `swarm − real` light
//! peers), `--repeat` times each, interleaved (A B A B …) so a drift of the machine hits both
//! arms. Every run is an engine run of its own (`suite::ScenarioRunner`, the engine in
//! production) into its own folder, and the figures compared come from each run's report:
//!
//! - **P2P savings at T** (the swarm's, `players.p2p_savings`): the mean of B's runs within
//!   ±`P2P_SHARE_TOLERANCE_POINTS` (the tolerance `calibrate` allows a profile) of A's.
//! - **P2P upload per swarm member**: every member's upload over the run, pooled over the
//!   repeats (A: its viewers; B: its viewers and its light peers); B's median and B's p90
//!   each within a factor `UPLOAD_FACTOR` of A's. Why a factor and why 2: in
//!   p2p-media-loader swarms upload is very skewed — a few members (the first to hold a
//!   segment, those with the best links) serve most of it, and which ones changes from run
//!   to run — so in a swarm of 8 the median and the p90 are each decided by one or two
//!   members and move by tens of percent between identical runs. A factor of 2 tolerates
//!   that order-statistics noise and still catches light peers that do not serve their
//!   share (a light peer that never announces segments, or serves half as often, moves the
//!   pooled median by more than 2×). Values under `UPLOAD_FLOOR_BYTES` count as that
//!   floor, so two members who uploaded almost nothing are not a ratio of noise.
//! - **The real viewers' QoE**: B's viewers stall no more per viewer-minute than A's plus
//!   `STALLS_TOLERANCE_PER_VIEWER_MINUTE`, every real viewer of B played, and every light
//!   peer B planned started its playhead (a missing one makes B's swarm smaller than A's).
//!   Stalls are few and random (a Poisson count): on links that stall often (VOD on 2000/300
//!   kbit/s, about one stall per viewer-minute) one stall of B's few viewer-minutes is more
//!   than the tolerance, so two equal swarms would cross it about half the time. B stalling
//!   more than allowed convicts light peers only when chance rarely splits the stalls that
//!   unevenly (`STALLS_CHANCE_LEVEL`, one-sided); otherwise the stalls rule is undecided and
//!   the verdict `inconclusive` (a FAIL on another rule still wins).
//!
//! A run that is not a finding (its report's headroom verdict says `not-a-finding`, a
//! machine was saturated in the steady window, pages of light peers were starved, the run
//! was cut short or failed, or an all-real viewer never played) makes the verdict
//! `inconclusive`, never `pass`, and wins over `FAIL`: a starved run biases P2P towards HTTP
//! and adds stalls, so it can neither vouch for light peers nor convict them. The verdict,
//! every rule with its figures and every run's folder and figures go into `fidelity.json`
//! (rewritten after each run, so an interrupted measurement keeps what it measured), which a
//! scenario's `swarm.fidelity` names so its runs say which verdict they relied on.

use crate::model::kinds::Throttling;
use crate::model::scenario::light::{FIDELITY_DOCUMENT, FIDELITY_SCHEMA_VERSION};
use crate::model::scenario::{self, Overrides, Plan, ScenarioError};
use crate::report::format::{bytes, NONE};
use crate::report::light::{spread, Spread};
use crate::report::stats::percentile;
use crate::report::text_table::Table;
use crate::report::{HeadroomVerdict, RunReport};
use crate::suite::{ScenarioRunner, SuiteRun};
use crate::sys::shutdown::Shutdown;
use crate::RunOutcome;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) use super::fidelity::{FidelityVerdict, P2P_SHARE_TOLERANCE_POINTS};

/// The file `fidelity` writes into `--out` and `swarm.fidelity` names.
pub const FIDELITY_JSON: &str = "fidelity.json";
/// Runs of each arm unless `--repeat` says otherwise.
pub const DEFAULT_REPEAT: u32 = 3;
/// B's pooled median and p90 of P2P upload per member may be this many times A's, or this
/// many times smaller.
pub(crate) const UPLOAD_FACTOR: f64 = 2.0;
/// Uploads below this count as this much in the upload ratios (about half a 240p live
/// segment): below it, a ratio is noise.
pub(crate) const UPLOAD_FLOOR_BYTES: f64 = 100_000.0;
/// B's real viewers may stall this much more per viewer-minute than A's viewers: one stall
/// in 20 viewer-minutes, under one stall per real viewer over three repeats of a few minutes.
pub(crate) const STALLS_TOLERANCE_PER_VIEWER_MINUTE: f64 = 0.05;
/// B's stalls above the tolerance convict light peers when two swarms that stall at one
/// rate would split the arms' stalls at least as unevenly less often than this (one-sided).
pub(crate) const STALLS_CHANCE_LEVEL: f64 = 0.05;

/// The two ways the swarm is made up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arm {
    /// A: every member a real viewer.
    AllReal,
    /// B: `real` viewers and `swarm − real` light peers.
    WithLight,
}

impl Arm {
    /// `A` or `B`.
    pub fn letter(self) -> &'static str {
        match self {
            Arm::AllReal => "A",
            Arm::WithLight => "B",
        }
    }

    /// The run folders' stem: `OUT/<stem>-<round>`.
    pub fn stem(self) -> &'static str {
        match self {
            Arm::AllReal => "all-real",
            Arm::WithLight => "with-light",
        }
    }
}

/// What `fidelity` is asked to measure.
#[derive(Debug, Clone)]
pub struct FidelityOptions {
    pub scenario: PathBuf,
    /// Swarm members in both arms.
    pub swarm: u32,
    /// Real viewers in B.
    pub real: u32,
    pub repeat: u32,
    pub out: PathBuf,
    /// Applied to both arms besides the viewer and light-peer counts (`--apply`, `--fleet`,
    /// `--duration`).
    pub overrides: Overrides,
}

/// One run of the measurement.
#[derive(Debug, Clone)]
pub struct FidelityRun {
    pub arm: Arm,
    /// From 1.
    pub round: u32,
    /// The plan and folder, as the runner takes them.
    pub run: SuiteRun,
}

/// A measurement, checked before anything runs.
#[derive(Debug, Clone)]
pub struct FidelityPlan {
    pub options: FidelityOptions,
    /// The scenario's `name`.
    pub scenario_name: String,
    /// How its network profiles are applied (`http-only`, `tc`, …), in words.
    pub throttling: String,
    pub fleet: String,
    /// In run order: A1, B1, A2, B2, …
    pub runs: Vec<FidelityRun>,
}

/// A plain refusal of what the user asked.
fn refuse(message: String) -> anyhow::Error {
    crate::model::exit::bad_input(anyhow::anyhow!(message))
}

impl FidelityPlan {
    /// Checks the sizes, loads the scenario for both arms (with `swarm.fidelity` left out:
    /// a new verdict must not rest on an earlier one), and refuses output folders that hold
    /// an earlier run.
    pub fn new(options: FidelityOptions) -> anyhow::Result<Self> {
        let FidelityOptions {
            swarm,
            real,
            repeat,
            ..
        } = options;
        if repeat == 0 {
            return Err(refuse("--repeat must be at least 1".into()));
        }
        if real == 0 || real >= swarm {
            return Err(refuse(format!(
                "--real {real} with --swarm {swarm}: give at least 1 real viewer and fewer than the swarm, so B has real viewers to judge and light peers to judge them by (e.g. --swarm 8 --real 2)"
            )));
        }
        let arm_overrides = |viewers: u32, light: u32| Overrides {
            viewers: crate::model::scenario::ViewersOverride::Fixed(viewers),
            light_peers: Some(light),
            ..options.overrides.clone()
        };
        let overrides_a = arm_overrides(swarm, 0);
        let overrides_b = arm_overrides(real, swarm - real);
        let plan_a = load(&options.scenario, &overrides_a)?;
        let plan_b = load(&options.scenario, &overrides_b)?;
        if plan_b.p2p_off_share > 0.0 {
            return Err(refuse(format!(
                "{}: viewers.p2p_off gives some viewers no P2P; fidelity compares whole swarms with P2P on: remove it for this measurement",
                options.scenario.display()
            )));
        }
        if plan_b.churn.is_some() {
            return Err(refuse(format!(
                "{}: viewers.churn replaces real viewers but never light peers, so the two swarms would churn differently; fidelity compares steady swarms: remove it for this measurement",
                options.scenario.display()
            )));
        }
        let mut runs = Vec::new();
        for round in 1..=repeat {
            for (arm, plan, overrides) in [
                (Arm::AllReal, &plan_a, &overrides_a),
                (Arm::WithLight, &plan_b, &overrides_b),
            ] {
                let dir = options.out.join(format!("{}-{round}", arm.stem()));
                if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
                    return Err(refuse(format!(
                        "{} already holds files; give `fidelity --out` a new or empty folder (runs never overwrite data)",
                        dir.display()
                    )));
                }
                runs.push(FidelityRun {
                    arm,
                    round,
                    run: SuiteRun {
                        name: arm.stem().to_string(),
                        path: options.scenario.clone(),
                        overrides: overrides.clone(),
                        plan: plan.clone(),
                        dir,
                    },
                });
            }
        }
        Ok(Self {
            scenario_name: plan_a.name.clone(),
            throttling: throttling_words(&plan_b),
            fleet: plan_b.fleet.kind().to_string(),
            options,
            runs,
        })
    }
}

/// Loads the scenario with its `swarm.fidelity` line commented out (a fidelity measurement
/// rests on no earlier verdict, and the file it names may be the one being made).
fn load(path: &Path, overrides: &Overrides) -> Result<Plan, ScenarioError> {
    let text = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => std::fs::read_to_string(path).ok(),
        _ => None,
    };
    let Some(text) = text else {
        return scenario::load(path, overrides);
    };
    let Some(line) = scenario::locate(&text, "swarm.fidelity") else {
        return scenario::load(path, overrides);
    };
    // The key's line and, for a verdict per throttling mode, the lines indented under it.
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let key_indent = text.lines().nth(line - 1).map_or(0, indent_of);
    let mut inside = false;
    let without: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let n = i + 1;
            inside = n == line || (inside && (l.trim().is_empty() || indent_of(l) > key_indent));
            if inside && !l.trim().is_empty() {
                let indent = indent_of(l);
                format!(
                    "{}# left out by `viewerfleet fidelity`, which measures a new verdict: {}",
                    &l[..indent],
                    l.trim_start()
                )
            } else {
                l.to_string()
            }
        })
        .collect();
    scenario::parse(
        &(without.join("\n") + "\n"),
        &path.display().to_string(),
        overrides,
    )
}

/// The throttling modes of the plan's network profiles, in words.
fn throttling_words(plan: &Plan) -> String {
    let mut modes: Vec<String> = Vec::new();
    // The classes carry the fleet's default throttling filled in; `viewers.network` alone
    // only when there are none.
    let mut profiles: Vec<_> = plan.networks.iter().filter_map(|c| c.profile).collect();
    if profiles.is_empty() {
        profiles.extend(plan.network);
    }
    for p in profiles {
        let mode = match p.apply {
            Some(mode) => mode.to_string(),
            None => format!(
                "per slot ({} where a slot shapes, else {})",
                Throttling::Tc,
                Throttling::HttpOnly
            ),
        };
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    if modes.is_empty() {
        "none (no network profile)".into()
    } else {
        modes.join(", ")
    }
}

/// One run's figures, from its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    pub arm: Arm,
    pub round: u32,
    pub dir: String,
    /// Why the run has no figures: it failed, or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Real viewers asked for, and those that played a first frame.
    pub viewers: u32,
    pub played: u32,
    /// Light peers asked for, and those whose playhead started.
    pub light_planned: u32,
    pub light_started: u32,
    /// The swarm's P2P savings at T (players' figures, light peers included), 0..1.
    pub p2p_savings: Option<f64>,
    pub http_share: Option<f64>,
    /// The real viewers' stalls and viewer-minutes (QoE counts no light peer).
    pub stalls: u64,
    pub viewer_minutes: f64,
    pub ttff_median_ms: Option<f64>,
    /// How far behind the live edge the real viewers and the light peers played, seconds
    /// (median of the steady window's reads; live runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewers_latency_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_latency_s: Option<f64>,
    /// P2P upload over the run of each real viewer with P2P on that played, in bytes.
    pub viewer_upload_bytes: Vec<u64>,
    /// The same for each light peer that reported.
    pub light_upload_bytes: Vec<u64>,
    /// The report's headroom verdict (`finding`, `not-a-finding`, `unknown`).
    pub headroom: Option<String>,
    /// Why the run is not a finding (empty: it is).
    pub not_a_finding: Vec<String>,
}

impl RunFigures {
    /// A run that left no figures.
    pub fn failed(arm: Arm, round: u32, dir: &Path, error: String) -> Self {
        Self {
            arm,
            round,
            dir: dir.display().to_string(),
            error: Some(error),
            viewers: 0,
            played: 0,
            light_planned: 0,
            light_started: 0,
            p2p_savings: None,
            http_share: None,
            stalls: 0,
            viewer_minutes: 0.0,
            ttff_median_ms: None,
            viewers_latency_s: None,
            light_latency_s: None,
            viewer_upload_bytes: Vec::new(),
            light_upload_bytes: Vec::new(),
            headroom: None,
            not_a_finding: Vec::new(),
        }
    }

    /// The figures of a run's report; `light_uploads`: each light peer's P2P upload
    /// (`report::light::upload_per_peer`).
    pub(crate) fn of_report(
        arm: Arm,
        round: u32,
        dir: &Path,
        report: &RunReport,
        data: &crate::report::RunData,
    ) -> Self {
        let light_uploads = crate::report::light::upload_per_peer(data);
        let s = &report.summary;
        let players = s.players.as_ref();
        let mut not_a_finding = Vec::new();
        if s.partial {
            not_a_finding.push(format!(
                "the run was cut short{}",
                s.partial_reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(h) = &s.headroom {
            if h.verdict == HeadroomVerdict::NotAFinding {
                if h.not_a_finding_because.is_empty() {
                    not_a_finding.push("its headroom verdict is not-a-finding".into());
                } else {
                    not_a_finding.extend(h.not_a_finding_because.iter().cloned());
                }
            } else {
                for m in h.host.iter().chain(&h.nodes) {
                    if m.saturated_in_steady {
                        not_a_finding
                            .push(format!("{} was saturated in the steady window", m.name));
                    }
                }
            }
        }
        if let Some(l) = &s.light {
            if !l.starved_groups.is_empty() {
                not_a_finding.push(format!(
                    "{} of its pages of light peers were starved of CPU",
                    l.starved_groups.len()
                ));
            }
        }
        let w = &s.windows;
        let latency = crate::report::light::live_latency(data, w.steady_from_s, w.steady_to_s);
        let p2p_savings = players.and_then(|p| p.p2p_savings);
        if p2p_savings.is_none() {
            not_a_finding.push("the players' table has no P2P savings at T".into());
        }
        Self {
            arm,
            round,
            dir: dir.display().to_string(),
            error: None,
            viewers: s.viewers.requested,
            played: s.viewers.started,
            light_planned: s.light.as_ref().and_then(|l| l.planned).unwrap_or(0),
            light_started: s.light.as_ref().map_or(0, |l| l.started),
            p2p_savings,
            http_share: players.and_then(|p| p.http_share),
            stalls: s.qoe.stalls,
            viewer_minutes: s.qoe.viewer_minutes,
            ttff_median_ms: s.qoe.ttff_median_ms,
            viewers_latency_s: latency.as_ref().and_then(|l| l.viewers_median_s),
            light_latency_s: latency.as_ref().and_then(|l| l.light_median_s),
            viewer_upload_bytes: report
                .viewers
                .iter()
                .filter(|v| v.p2p && (v.ttff_ms.is_some() || v.playing_s.is_some()))
                .map(|v| v.p2p_up_bytes)
                .collect(),
            light_upload_bytes: light_uploads,
            headroom: s.headroom.as_ref().map(|h| h.verdict.to_string()),
            not_a_finding,
        }
    }

    /// Every swarm member's P2P upload: viewers, then light peers.
    fn member_uploads(&self) -> impl Iterator<Item = u64> + '_ {
        self.viewer_upload_bytes
            .iter()
            .chain(&self.light_upload_bytes)
            .copied()
    }

    fn label(&self) -> String {
        format!("{}{}", self.arm.letter(), self.round)
    }
}

/// One rule, with both arms' figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// `p2p_savings`, `upload_median`, `upload_p90`, `stalls`, `played`, `light_joined`.
    pub rule: String,
    /// What is compared, in words.
    pub what: String,
    /// A's figure and B's, as printed.
    pub all_real: String,
    pub with_light: String,
    pub allowed: String,
    /// `None`: not judged (a figure is missing).
    pub ok: Option<bool>,
    /// The outcome in a sentence.
    pub text: String,
}

/// The P2P savings at T, both arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavingsFigures {
    /// Means over the arm's runs, in percent.
    pub all_real_pct: Option<f64>,
    pub with_light_pct: Option<f64>,
    /// B − A, in percentage points.
    pub difference_points: Option<f64>,
    pub tolerance_points: f64,
}

/// P2P upload per swarm member, pooled over each arm's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadFigures {
    pub all_real: Option<Spread>,
    /// B's members: its viewers and its light peers.
    pub with_light: Option<Spread>,
    /// B's light peers alone, and B's viewers alone (shown, not judged).
    pub light_peers: Option<Spread>,
    pub with_light_viewers: Option<Spread>,
    /// B's over A's, each figure floored at `floor_bytes`.
    pub median_ratio: Option<f64>,
    pub p90_ratio: Option<f64>,
    pub factor: f64,
    pub floor_bytes: u64,
}

/// The real viewers' QoE, both arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QoeFigures {
    /// Stalls per viewer-minute, pooled over the arm's runs.
    pub all_real_stalls_per_viewer_minute: Option<f64>,
    pub with_light_stalls_per_viewer_minute: Option<f64>,
    pub tolerance_per_viewer_minute: f64,
    /// How often two swarms stalling at one rate would give B at least its share of the
    /// arms' stalls (`stalls_chance`); absent in documents written before it was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls_chance: Option<f64>,
    pub all_real_played: u32,
    pub all_real_viewers: u32,
    pub with_light_played: u32,
    pub with_light_viewers: u32,
    pub light_started: u32,
    pub light_planned: u32,
}

/// `fidelity.json`: the verdict, its rules and every run behind them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LightFidelity {
    /// `viewerfleet-light-fidelity`.
    pub document: String,
    pub schema_version: u32,
    pub verdict: FidelityVerdict,
    pub tool_version: String,
    /// When the measurement ended (RFC 3339, UTC).
    pub created: String,
    /// The scenario file, its name, how its profiles are applied and its fleet.
    pub scenario: String,
    pub scenario_name: String,
    pub throttling: String,
    pub fleet: String,
    pub swarm: u32,
    pub real: u32,
    pub light: u32,
    pub repeat: u32,
    /// A stop came: not every run was made.
    pub interrupted: bool,
    pub rules: Vec<Rule>,
    /// Why the verdict is `inconclusive` (empty otherwise).
    pub inconclusive_because: Vec<String>,
    pub p2p_savings: SavingsFigures,
    pub upload: UploadFigures,
    pub qoe: QoeFigures,
    /// In run order.
    pub runs: Vec<RunFigures>,
    /// The command that made it.
    pub command: String,
}

/// What both arms' runs say, judged.
struct Judged {
    verdict: FidelityVerdict,
    rules: Vec<Rule>,
    inconclusive_because: Vec<String>,
    p2p_savings: SavingsFigures,
    upload: UploadFigures,
    qoe: QoeFigures,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// B's figure over A's, each floored at `UPLOAD_FLOOR_BYTES`.
fn upload_ratio(a: u64, b: u64) -> f64 {
    (b as f64).max(UPLOAD_FLOOR_BYTES) / (a as f64).max(UPLOAD_FLOOR_BYTES)
}

fn pct(v: Option<f64>) -> String {
    v.map_or(NONE.to_string(), |v| format!("{v:.1}%"))
}

/// How likely two swarms that stall at one rate split `a + b` stalls at least as unevenly
/// towards B, given each arm's viewer-minutes: the one-sided p-value of the conditional
/// binomial test of two Poisson counts (B's stalls against B's share of the minutes), summed
/// in log space so long measurements do not underflow.
fn stalls_chance(a: u64, minutes_a: f64, b: u64, minutes_b: f64) -> f64 {
    let share = minutes_b / (minutes_a + minutes_b);
    if b == 0 || !(share > 0.0 && share < 1.0) {
        return 1.0;
    }
    let n = a + b;
    let (ln_p, ln_q) = (share.ln(), (1.0 - share).ln());
    let mut ln_choose = 0.0;
    let mut tail = 0.0;
    for k in 0..=n {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        if k >= b {
            tail += (ln_choose + k as f64 * ln_p + (n - k) as f64 * ln_q).exp();
        }
    }
    tail.min(1.0)
}

fn per_minute(v: Option<f64>) -> String {
    v.map_or(NONE.to_string(), |v| format!("{v:.3}"))
}

/// Judges the runs of a measurement of `swarm` members, `real` of them real in B, each arm
/// asked `repeat` times.
fn judge(runs: &[RunFigures], swarm: u32, real: u32, repeat: u32) -> Judged {
    let measured = |arm: Arm| -> Vec<&RunFigures> {
        runs.iter()
            .filter(|r| r.arm == arm && r.error.is_none())
            .collect()
    };
    let (a, b) = (measured(Arm::AllReal), measured(Arm::WithLight));
    let mut inconclusive = Vec::new();
    for r in runs {
        if let Some(error) = &r.error {
            inconclusive.push(format!(
                "{} ({}) left no figures: {error}",
                r.label(),
                r.dir
            ));
        } else if !r.not_a_finding.is_empty() {
            inconclusive.push(format!(
                "{} ({}) is not a finding: {}",
                r.label(),
                r.dir,
                r.not_a_finding.join("; ")
            ));
        }
    }
    if a.len() < repeat as usize || b.len() < repeat as usize {
        inconclusive.push(format!(
            "{} of {repeat} all-real runs and {} of {repeat} runs with light peers were measured",
            a.len(),
            b.len()
        ));
    }
    for r in &a {
        if r.played < r.viewers || r.viewers != swarm {
            inconclusive.push(format!(
                "{} ({}): {} of {} viewers played, so it is no all-real swarm of {swarm}",
                r.label(),
                r.dir,
                r.played,
                r.viewers
            ));
        }
    }

    // (a) The swarm's P2P savings at T.
    let savings = |runs: &[&RunFigures]| {
        let values: Vec<f64> = runs.iter().filter_map(|r| r.p2p_savings).collect();
        mean(&values).map(|m| m * 100.0)
    };
    let (sa, sb) = (savings(&a), savings(&b));
    let difference = sa.zip(sb).map(|(a, b)| b - a);
    let p2p_ok = difference.map(|d| d.abs() <= P2P_SHARE_TOLERANCE_POINTS);
    let mut rules = vec![Rule {
        rule: "p2p_savings".into(),
        what: "swarm's P2P savings at T (mean of runs)".into(),
        all_real: pct(sa),
        with_light: pct(sb),
        allowed: format!("±{P2P_SHARE_TOLERANCE_POINTS} points"),
        ok: p2p_ok,
        text: match difference {
            Some(d) => format!(
                "P2P savings at T {} with light peers against {} all real ({d:+.1} points, allowed ±{P2P_SHARE_TOLERANCE_POINTS})",
                pct(sb),
                pct(sa)
            ),
            None => "no P2P savings at T to compare".into(),
        },
    }];

    // (b) P2P upload per member, pooled over the repeats.
    let pooled = |runs: &[&RunFigures], f: &dyn Fn(&RunFigures) -> Vec<u64>| -> Vec<f64> {
        runs.iter().flat_map(|r| f(r)).map(|b| b as f64).collect()
    };
    let members_a = pooled(&a, &|r| r.member_uploads().collect());
    let members_b = pooled(&b, &|r| r.member_uploads().collect());
    let (up_a, up_b) = (spread(&members_a), spread(&members_b));
    let at = |values: &[f64], p: f64| percentile(values, p).map(|v| v.round().max(0.0) as u64);
    let mut upload = UploadFigures {
        all_real: up_a,
        with_light: up_b,
        light_peers: spread(&pooled(&b, &|r| r.light_upload_bytes.clone())),
        with_light_viewers: spread(&pooled(&b, &|r| r.viewer_upload_bytes.clone())),
        median_ratio: None,
        p90_ratio: None,
        factor: UPLOAD_FACTOR,
        floor_bytes: UPLOAD_FLOOR_BYTES as u64,
    };
    for (rule, name, p) in [
        ("upload_median", "median", 50.0),
        ("upload_p90", "p90", 90.0),
    ] {
        let (va, vb) = (at(&members_a, p), at(&members_b, p));
        let ratio = va.zip(vb).map(|(a, b)| upload_ratio(a, b));
        let ok = ratio.map(|r| (1.0 / UPLOAD_FACTOR..=UPLOAD_FACTOR).contains(&r));
        if p == 50.0 {
            upload.median_ratio = ratio;
        } else {
            upload.p90_ratio = ratio;
        }
        rules.push(Rule {
            rule: rule.into(),
            what: format!("P2P upload per swarm member, {name} (pooled)"),
            all_real: bytes(va),
            with_light: bytes(vb),
            allowed: format!("×{:.1} to ×{UPLOAD_FACTOR:.0}", 1.0 / UPLOAD_FACTOR),
            ok,
            text: match ratio {
                Some(r) => format!(
                    "{name} P2P upload per member {} with light peers against {} all real (×{r:.2}, allowed ×{:.1} to ×{UPLOAD_FACTOR:.0})",
                    bytes(vb),
                    bytes(va),
                    1.0 / UPLOAD_FACTOR
                ),
                None => "no P2P upload per member to compare".into(),
            },
        });
    }

    // (c) The real viewers' QoE.
    let stall_count = |runs: &[&RunFigures]| {
        let minutes: f64 = runs.iter().map(|r| r.viewer_minutes).sum();
        let stalls: u64 = runs.iter().map(|r| r.stalls).sum();
        (stalls, minutes)
    };
    let ((stalls_a, minutes_a), (stalls_b, minutes_b)) = (stall_count(&a), stall_count(&b));
    let rate = |stalls: u64, minutes: f64| (minutes > 0.0).then(|| stalls as f64 / minutes);
    let (qa, qb) = (rate(stalls_a, minutes_a), rate(stalls_b, minutes_b));
    let chance = qa
        .zip(qb)
        .map(|_| stalls_chance(stalls_a, minutes_a, stalls_b, minutes_b));
    let sum = |runs: &[&RunFigures], f: fn(&RunFigures) -> u32| -> u32 {
        runs.iter().map(|r| f(r)).sum()
    };
    let qoe = QoeFigures {
        all_real_stalls_per_viewer_minute: qa,
        with_light_stalls_per_viewer_minute: qb,
        tolerance_per_viewer_minute: STALLS_TOLERANCE_PER_VIEWER_MINUTE,
        stalls_chance: chance,
        all_real_played: sum(&a, |r| r.played),
        all_real_viewers: sum(&a, |r| r.viewers),
        with_light_played: sum(&b, |r| r.played),
        with_light_viewers: sum(&b, |r| r.viewers),
        light_started: sum(&b, |r| r.light_started),
        light_planned: sum(&b, |r| r.light_planned),
    };
    let within_tolerance = qa
        .zip(qb)
        .map(|(a, b)| b <= a + STALLS_TOLERANCE_PER_VIEWER_MINUTE + 1e-12);
    let by_chance =
        within_tolerance == Some(false) && chance.is_some_and(|p| p >= STALLS_CHANCE_LEVEL);
    let stalls_text = match (qa.zip(qb), chance) {
        (Some((qa, qb)), Some(p)) => {
            let rates = format!(
                "the real viewers stalled {qb:.3} times per viewer-minute with light peers against {qa:.3} all real (allowed {STALLS_TOLERANCE_PER_VIEWER_MINUTE} more)"
            );
            let split = format!(
                "{stalls_b} of the {} stalls in B's {:.0}% of the viewer-minutes",
                stalls_a + stalls_b,
                100.0 * minutes_b / (minutes_a + minutes_b)
            );
            match within_tolerance {
                Some(true) => rates,
                _ if by_chance => format!(
                    "{rates}: more, but within what chance gives two equal swarms ({split}: as uneven or more {:.1}% of the time, under {:.0}% would convict); more repeats would tell",
                    p * 100.0,
                    STALLS_CHANCE_LEVEL * 100.0
                ),
                _ => format!(
                    "{rates}: more than chance gives two equal swarms ({split}: as uneven or more {:.1}% of the time)",
                    p * 100.0
                ),
            }
        }
        _ => "no viewer-minutes to compare stalls over".into(),
    };
    rules.push(Rule {
        rule: "stalls".into(),
        what: "real viewers' stalls per viewer-minute (pooled)".into(),
        all_real: per_minute(qa),
        with_light: per_minute(qb),
        allowed: format!("at most A + {STALLS_TOLERANCE_PER_VIEWER_MINUTE}, or more by chance"),
        ok: if by_chance { None } else { within_tolerance },
        text: stalls_text,
    });
    let light = swarm - real;
    let played_ok =
        (!b.is_empty()).then(|| b.iter().all(|r| r.viewers == real && r.played == r.viewers));
    rules.push(Rule {
        rule: "played".into(),
        what: "every real viewer played".into(),
        all_real: format!("{} of {}", qoe.all_real_played, qoe.all_real_viewers),
        with_light: format!("{} of {}", qoe.with_light_played, qoe.with_light_viewers),
        allowed: "all".into(),
        ok: played_ok,
        text: format!(
            "{} of {} real viewers played with light peers ({real} per run)",
            qoe.with_light_played, qoe.with_light_viewers
        ),
    });
    let joined_ok = (!b.is_empty()).then(|| {
        b.iter()
            .all(|r| r.light_planned == light && r.light_started == light)
    });
    rules.push(Rule {
        rule: "light_joined".into(),
        what: "every light peer joined (started its playhead)".into(),
        all_real: NONE.into(),
        with_light: format!("{} of {}", qoe.light_started, qoe.light_planned),
        allowed: "all".into(),
        ok: joined_ok,
        text: format!(
            "{} of {} light peers started their playhead ({light} per run); a missing one makes the swarm smaller than the all-real one",
            qoe.light_started, qoe.light_planned
        ),
    });

    // A run that is not a finding wins over FAIL (it can neither vouch nor convict); stalls
    // within chance do not: a rule that failed on clear figures still fails.
    let runs_undecided = !inconclusive.is_empty()
        || rules
            .iter()
            .any(|r| r.ok.is_none() && !(r.rule == "stalls" && by_chance));
    for rule in rules.iter().filter(|r| r.ok.is_none()) {
        inconclusive.push(format!("{}: {}", rule.what, rule.text));
    }
    let verdict = if runs_undecided {
        FidelityVerdict::Inconclusive
    } else if rules.iter().any(|r| r.ok == Some(false)) {
        FidelityVerdict::Fail
    } else if by_chance {
        FidelityVerdict::Inconclusive
    } else {
        FidelityVerdict::Pass
    };
    Judged {
        verdict,
        rules,
        inconclusive_because: inconclusive,
        p2p_savings: SavingsFigures {
            all_real_pct: sa,
            with_light_pct: sb,
            difference_points: difference,
            tolerance_points: P2P_SHARE_TOLERANCE_POINTS,
        },
        upload,
        qoe,
    }
}

impl LightFidelity {
    /// The document of a measurement from its runs so far.
    pub(crate) fn of_runs(
        plan: &FidelityPlan,
        runs: Vec<RunFigures>,
        interrupted: bool,
        command: String,
    ) -> Self {
        let o = &plan.options;
        let judged = judge(&runs, o.swarm, o.real, o.repeat);
        Self {
            document: FIDELITY_DOCUMENT.to_string(),
            schema_version: FIDELITY_SCHEMA_VERSION,
            verdict: judged.verdict,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            scenario: o.scenario.display().to_string(),
            scenario_name: plan.scenario_name.clone(),
            throttling: plan.throttling.clone(),
            fleet: plan.fleet.clone(),
            swarm: o.swarm,
            real: o.real,
            light: o.swarm - o.real,
            repeat: o.repeat,
            interrupted,
            rules: judged.rules,
            inconclusive_because: judged.inconclusive_because,
            p2p_savings: judged.p2p_savings,
            upload: judged.upload,
            qoe: judged.qoe,
            runs,
            command,
        }
    }

    /// Reads a `fidelity.json` (or the folder holding one).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let file = if path.is_dir() {
            path.join(FIDELITY_JSON)
        } else {
            path.to_path_buf()
        };
        let bytes = crate::model::rawdata::read_regular_file(&file, 16 << 20)
            .with_context(|| format!("reading {}", file.display()))?;
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a fidelity.json written by `viewerfleet fidelity`",
                file.display()
            )
        })
    }
}

/// What a measurement did.
pub struct FidelityResult {
    pub fidelity: LightFidelity,
    /// Where `fidelity.json` is.
    pub file: PathBuf,
}

/// Runs the plan's runs in order (A1 B1 A2 B2 …) through `runner`, until the last or until
/// `stop` fires (no run starts after that; the engine ends the current one), and writes
/// `fidelity.json` after each.
pub async fn run(
    plan: &FidelityPlan,
    runner: &dyn ScenarioRunner,
    stop: &Shutdown,
    progress: &mut (dyn Write + Send),
) -> anyhow::Result<FidelityResult> {
    let out = &plan.options.out;
    std::fs::create_dir_all(out)
        .with_context(|| format!("creating output folder {}", out.display()))?;
    let file = out.join(FIDELITY_JSON);
    let command = crate::report::honesty::rerun_command(&std::env::args().collect::<Vec<_>>());
    let total = plan.runs.len();
    let mut figures = Vec::new();
    let mut interrupted = false;
    let mut fidelity = LightFidelity::of_runs(plan, Vec::new(), false, command.clone());
    for (i, run) in plan.runs.iter().enumerate() {
        if stop.is_triggered() {
            interrupted = true;
            break;
        }
        let tag = format!(
            "[{}/{total}] {}{} ({})",
            i + 1,
            run.arm.letter(),
            run.round,
            match run.arm {
                Arm::AllReal => format!("{} real viewers", plan.options.swarm),
                Arm::WithLight => format!(
                    "{} real viewers + {} light peers",
                    plan.options.real,
                    plan.options.swarm - plan.options.real
                ),
            }
        );
        let _ = writeln!(progress, "{tag}: running → {}", run.run.dir.display());
        let result = runner.run(&run.run).await;
        let (measured, stopped) = measured(run, result);
        let _ = writeln!(
            progress,
            "{tag}: {}",
            match (&measured.error, measured.p2p_savings) {
                (Some(error), _) => format!("no figures: {error}"),
                (None, savings) => format!("P2P savings at T {}", pct(savings.map(|s| s * 100.0))),
            }
        );
        figures.push(measured);
        interrupted |= stopped;
        fidelity = LightFidelity::of_runs(plan, figures.clone(), interrupted, command.clone());
        write(&fidelity, &file)?;
        if stopped {
            break;
        }
    }
    if interrupted {
        let _ = writeln!(
            progress,
            "interrupted: no further runs started; judging what finished"
        );
        fidelity = LightFidelity::of_runs(plan, figures, true, command);
    }
    write(&fidelity, &file)?;
    Ok(FidelityResult { fidelity, file })
}

fn write(fidelity: &LightFidelity, file: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(fidelity)? + "\n";
    std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))
}

/// One run's figures from how it ended, and whether it was stopped.
fn measured(run: &FidelityRun, result: anyhow::Result<RunOutcome>) -> (RunFigures, bool) {
    let dir = &run.run.dir;
    let failed = |error: String| RunFigures::failed(run.arm, run.round, dir, error);
    match result {
        Err(err) => (failed(format!("{err:#}")), false),
        Ok(outcome) if outcome.interrupted => (failed("interrupted".into()), true),
        Ok(_) => match figures_of(run.arm, run.round, dir) {
            Ok(f) => (f, false),
            Err(err) => (failed(format!("report: {err:#}")), false),
        },
    }
}

/// A finished run's figures, from its raw data (its report, and each light peer's upload).
pub(crate) fn figures_of(arm: Arm, round: u32, dir: &Path) -> anyhow::Result<RunFigures> {
    let report = crate::report::build(dir)?;
    let data = crate::report::RunData::load(dir)?;
    Ok(RunFigures::of_report(arm, round, dir, &report, &data))
}

/// "14.2 s / 13.9 s": the run's real viewers' and light peers' median live latency.
fn latency_cell(r: &RunFigures) -> String {
    let s = |v: Option<f64>| v.map_or(NONE.to_string(), |v| format!("{v:.1} s"));
    match (r.viewers_latency_s, r.light_latency_s) {
        (None, None) => NONE.into(),
        (real, None) => s(real),
        (real, light) => format!("{} / {}", s(real), s(light)),
    }
}

/// The printed table: each run, then each rule, then the verdict.
pub fn markdown(f: &LightFidelity) -> String {
    let mut s = String::new();
    let light = f.light;
    s.push_str(&format!("# Light-peer fidelity: {}\n\n", f.scenario_name));
    s.push_str(&format!(
        "Scenario {} ({}), throttling {}, fleet {}. A: {} real viewers; B: {} real viewers + {light} light peers; {} repeat(s) each, interleaved (A B A B …). viewerfleet {}, {}.\n\n",
        f.scenario,
        f.scenario_name,
        f.throttling,
        f.fleet,
        f.swarm,
        f.real,
        f.repeat,
        f.tool_version,
        f.created
    ));
    let mut runs = Table::new(&[
        "run",
        "folder",
        "P2P savings at T",
        "viewers played",
        "light peers started",
        "stalls / viewer-min",
        "P2P upload / member: median",
        "p90",
        "behind live edge: real / light",
        "finding",
    ])
    .with_left(2)
    .with_last_left();
    for r in &f.runs {
        let members: Vec<f64> = r.member_uploads().map(|b| b as f64).collect();
        let at = |p: f64| percentile(&members, p).map(|v| v.round().max(0.0) as u64);
        runs.row(vec![
            r.label(),
            r.dir.clone(),
            pct(r.p2p_savings.map(|s| s * 100.0)),
            format!("{}/{}", r.played, r.viewers),
            match r.arm {
                Arm::AllReal => NONE.into(),
                Arm::WithLight => format!("{}/{}", r.light_started, r.light_planned),
            },
            per_minute((r.viewer_minutes > 0.0).then(|| r.stalls as f64 / r.viewer_minutes)),
            bytes(at(50.0)),
            bytes(at(90.0)),
            latency_cell(r),
            match (&r.error, r.not_a_finding.is_empty()) {
                (Some(e), _) => format!("no figures: {e}"),
                (None, true) => "yes".into(),
                (None, false) => format!("no: {}", r.not_a_finding.join("; ")),
            },
        ]);
    }
    s.push_str(&runs.markdown());
    s.push('\n');
    let a = format!("A: {} real", f.swarm);
    let b = format!("B: {} real + {light} light", f.real);
    let mut rules = Table::new(&["rule", &a, &b, "allowed", "result"])
        .with_left(1)
        .with_last_left();
    for r in &f.rules {
        rules.row(vec![
            r.what.clone(),
            r.all_real.clone(),
            r.with_light.clone(),
            r.allowed.clone(),
            match r.ok {
                Some(true) => "pass".into(),
                Some(false) => "FAIL".into(),
                // The stalls rule judged, found more stalls in B, and found them within chance.
                None if r.rule == "stalls" && f.qoe.stalls_chance.is_some() => {
                    "within chance".into()
                }
                None => "not judged".into(),
            },
        ]);
    }
    s.push_str(&rules.markdown());
    s.push('\n');
    let failed: Vec<&str> = f
        .rules
        .iter()
        .filter(|r| r.ok == Some(false))
        .map(|r| r.text.as_str())
        .collect();
    s.push_str(&format!("Verdict: **{}**", f.verdict.as_str()));
    match f.verdict {
        FidelityVerdict::Pass => s.push_str(&format!(
            " — {} real viewers + {light} light peers offload like {} real viewers here.\n",
            f.real, f.swarm
        )),
        FidelityVerdict::Fail => s.push_str(&format!(" — {}.\n", failed.join("; "))),
        FidelityVerdict::Inconclusive => {
            s.push_str(" — no run may vouch for or against these light peers:\n\n");
            for why in &f.inconclusive_because {
                s.push_str(&format!("- {why}\n"));
            }
            if !failed.is_empty() {
                s.push_str(&format!(
                    "\nRules that failed on these figures: {}.\n",
                    failed.join("; ")
                ));
            }
        }
    }
    s.push_str(&format!(
        "\nHow to read it: A and B are the same scenario at a swarm of {}, B with {light} of its members light peers. P2P savings at T are the swarm's (light peers included), within ±{P2P_SHARE_TOLERANCE_POINTS} points; P2P upload per member is pooled over each arm's runs, its median and p90 each within ×{UPLOAD_FACTOR:.0} (per-member upload is very skewed in p2p-media-loader swarms; uploads under {} count as that much); the real viewers may stall {STALLS_TOLERANCE_PER_VIEWER_MINUTE} times per viewer-minute more (more only by chance: undecided) and every one must play. A run that is not a finding makes the verdict inconclusive.\n",
        f.swarm,
        bytes(Some(UPLOAD_FLOOR_BYTES as u64))
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `arm` with `p2p` savings at T, each viewer uploading `viewer_up` bytes,
    /// each light peer `light_up`, and `stalls` over 10 viewer-minutes.
    fn run(
        arm: Arm,
        round: u32,
        p2p: f64,
        viewer_up: &[u64],
        light_up: &[u64],
        stalls: u64,
    ) -> RunFigures {
        let mut r = RunFigures::failed(arm, round, Path::new("out/x"), String::new());
        r.error = None;
        r.dir = format!("out/{}-{round}", arm.stem());
        r.viewers = viewer_up.len() as u32;
        r.played = r.viewers;
        r.light_planned = light_up.len() as u32;
        r.light_started = r.light_planned;
        r.p2p_savings = Some(p2p);
        r.http_share = Some(1.0 - p2p);
        r.stalls = stalls;
        r.viewer_minutes = 10.0;
        r.viewer_upload_bytes = viewer_up.to_vec();
        r.light_upload_bytes = light_up.to_vec();
        r.headroom = Some("finding".into());
        r
    }

    const MB: u64 = 1_000_000;

    /// Eight uploads per run, skewed as p2p-media-loader swarms are.
    fn skewed(scale: f64) -> Vec<u64> {
        [0.2, 0.5, 1.0, 1.5, 2.0, 3.0, 6.0, 12.0]
            .iter()
            .map(|m| (m * scale * MB as f64) as u64)
            .collect()
    }

    /// Three rounds, A then B, B's first two members real viewers.
    fn rounds(a: impl Fn(u32) -> RunFigures, b: impl Fn(u32) -> RunFigures) -> Vec<RunFigures> {
        (1..=3).flat_map(|k| [a(k), b(k)]).collect()
    }

    fn all_real(k: u32, p2p: f64) -> RunFigures {
        run(Arm::AllReal, k, p2p, &skewed(1.0), &[], 0)
    }

    fn with_light(k: u32, p2p: f64, scale: f64, stalls: u64) -> RunFigures {
        let members = skewed(scale);
        run(Arm::WithLight, k, p2p, &members[..2], &members[2..], stalls)
    }

    fn rule<'a>(j: &'a Judged, name: &str) -> &'a Rule {
        j.rules.iter().find(|r| r.rule == name).unwrap()
    }

    fn failing(j: &Judged) -> Vec<&str> {
        j.rules
            .iter()
            .filter(|r| r.ok == Some(false))
            .map(|r| r.rule.as_str())
            .collect()
    }

    #[test]
    fn a_swarm_whose_light_peers_behave_like_viewers_passes() {
        let runs = rounds(
            |k| all_real(k, [0.70, 0.68, 0.663][k as usize - 1]),
            |k| with_light(k, [0.66, 0.67, 0.65][k as usize - 1], 0.8, 0),
        );
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            j.verdict,
            FidelityVerdict::Pass,
            "{:?}",
            j.inconclusive_because
        );
        assert!(j.inconclusive_because.is_empty());
        let s = &j.p2p_savings;
        assert!((s.all_real_pct.unwrap() - 68.1).abs() < 1e-9, "{s:?}");
        assert!((s.with_light_pct.unwrap() - 66.0).abs() < 1e-9, "{s:?}");
        assert!((s.difference_points.unwrap() + 2.1).abs() < 1e-9, "{s:?}");
        // 24 members each: the pooled median sits between 1.5 and 2 MB (×0.8 in B).
        let up = &j.upload;
        assert_eq!(up.all_real.unwrap().members, 24);
        assert_eq!(up.all_real.unwrap().p50_bytes, 1_750_000);
        assert_eq!(up.with_light.unwrap().p50_bytes, 1_400_000);
        assert!((up.median_ratio.unwrap() - 0.8).abs() < 1e-9);
        assert!((up.p90_ratio.unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(up.light_peers.unwrap().members, 18);
        assert_eq!(up.with_light_viewers.unwrap().members, 6);
        assert_eq!(j.qoe.with_light_stalls_per_viewer_minute, Some(0.0));
        assert_eq!((j.qoe.with_light_played, j.qoe.with_light_viewers), (6, 6));
        assert_eq!((j.qoe.light_started, j.qoe.light_planned), (18, 18));
        assert!(j.rules.iter().all(|r| r.ok == Some(true)), "{:?}", j.rules);
        assert_eq!(
            rule(&j, "p2p_savings").text,
            "P2P savings at T 66.0% with light peers against 68.1% all real (-2.1 points, allowed ±5)"
        );
    }

    #[test]
    fn light_peers_that_take_more_from_the_origin_fail_on_p2p_savings() {
        // 6 points less P2P with light peers.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.64, 1.0, 0));
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            (j.verdict, failing(&j)),
            (FidelityVerdict::Fail, vec!["p2p_savings"])
        );
        assert!((j.p2p_savings.difference_points.unwrap() + 6.0).abs() < 1e-9);
        assert_eq!(rule(&j, "p2p_savings").with_light, "64.0%");
    }

    #[test]
    fn light_peers_that_serve_too_little_fail_on_the_upload_spread() {
        // Same P2P savings, but B's members upload 0.4× what A's do.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 0.4, 0));
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(j.verdict, FidelityVerdict::Fail);
        assert_eq!(failing(&j), ["upload_median", "upload_p90"]);
        assert!((j.upload.median_ratio.unwrap() - 0.4).abs() < 1e-9);
        assert_eq!(rule(&j, "upload_median").all_real, "1.8 MB");
        assert_eq!(rule(&j, "upload_median").with_light, "700.0 kB");
        // 2.5× more is as far outside as 0.4×.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 2.5, 0));
        assert_eq!(
            failing(&judge(&runs, 8, 2, 3)),
            ["upload_median", "upload_p90"]
        );
        // Members that uploaded almost nothing are not a ratio of noise.
        assert!((upload_ratio(1_000, 90_000) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn real_viewers_stalling_more_beside_light_peers_fail_on_qoe() {
        // Three stalls in each B run, none in A: 9 stalls over 30 viewer-minutes = 0.3 per
        // minute; two equal swarms split 9 of 9 stalls to B 0.2% of the time.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 1.0, 3));
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            (j.verdict, failing(&j)),
            (FidelityVerdict::Fail, vec!["stalls"])
        );
        assert_eq!(j.qoe.all_real_stalls_per_viewer_minute, Some(0.0));
        assert!((j.qoe.with_light_stalls_per_viewer_minute.unwrap() - 0.3).abs() < 1e-12);
        assert!((j.qoe.stalls_chance.unwrap() - 0.5f64.powi(9)).abs() < 1e-12);
        assert!(
            rule(&j, "stalls").text.ends_with(
                "more than chance gives two equal swarms (9 of the 9 stalls in B's 50% of the viewer-minutes: as uneven or more 0.2% of the time)"
            ),
            "{}",
            rule(&j, "stalls").text
        );
        // Within the tolerance: 1 stall over 30 viewer-minutes.
        let runs = rounds(
            |k| all_real(k, 0.70),
            |k| with_light(k, 0.69, 1.0, u64::from(k == 2)),
        );
        assert_eq!(judge(&runs, 8, 2, 3).verdict, FidelityVerdict::Pass);
        // A real viewer that never played.
        let runs = rounds(
            |k| all_real(k, 0.70),
            |k| {
                let mut r = with_light(k, 0.69, 1.0, 0);
                r.played = if k == 3 { 1 } else { 2 };
                r
            },
        );
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(failing(&j), ["played"]);
        assert_eq!(rule(&j, "played").with_light, "5 of 6");
    }

    #[test]
    fn stalls_above_the_tolerance_by_chance_leave_the_verdict_undecided() {
        // One stall in each B run, none in A: 0.1 per minute against 0.0, above the 0.05
        // allowed, but two equal swarms put 3 of 3 stalls in B 12.5% of the time.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 1.0, 1));
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(j.verdict, FidelityVerdict::Inconclusive);
        assert!(failing(&j).is_empty());
        assert_eq!(rule(&j, "stalls").ok, None);
        assert!((j.qoe.stalls_chance.unwrap() - 0.125).abs() < 1e-12);
        assert_eq!(
            j.inconclusive_because.len(),
            1,
            "{:?}",
            j.inconclusive_because
        );
        assert!(
            j.inconclusive_because[0].contains("within what chance gives two equal swarms (3 of the 3 stalls in B's 50% of the viewer-minutes: as uneven or more 12.5% of the time, under 5% would convict); more repeats would tell"),
            "{:?}",
            j.inconclusive_because
        );
        // The printed rule says so, not "not judged".
        let plan = FidelityPlan {
            options: FidelityOptions {
                scenario: PathBuf::from("live.yaml"),
                swarm: 8,
                real: 2,
                repeat: 3,
                out: PathBuf::from("out"),
                overrides: Overrides::default(),
            },
            scenario_name: "live".into(),
            throttling: "http-only".into(),
            fleet: "local".into(),
            runs: Vec::new(),
        };
        let doc = LightFidelity::of_runs(&plan, runs, false, "viewerfleet fidelity".into());
        assert!(
            markdown(&doc).contains(
                "| 0.000 | 0.100 | at most A + 0.05, or more by chance | within chance |"
            ),
            "{}",
            markdown(&doc)
        );
        // A rule that failed on clear figures still fails beside undecided stalls.
        let runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.62, 1.0, 1));
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            (j.verdict, failing(&j)),
            (FidelityVerdict::Fail, vec!["p2p_savings"])
        );
    }

    #[test]
    fn the_chance_of_a_stall_split_follows_the_binomial_tail() {
        // B's share of the minutes is the chance of each stall landing in B.
        assert!((stalls_chance(0, 30.0, 3, 30.0) - 0.125).abs() < 1e-12);
        assert!((stalls_chance(5, 30.0, 9, 30.0) - 0.211_975_097_656_25).abs() < 1e-12);
        // VOD under tc, swarm of 5 (RESULTS.md): A 18 stalls in 22.5 viewer-minutes, B 9 in
        // 9.0: B's rate is 1.004 against 0.802, within chance.
        assert!((stalls_chance(18, 22.5, 9, 9.0) - 0.359).abs() < 1e-3);
        // No stall in B, or no minutes on one side: nothing to convict.
        assert_eq!(stalls_chance(7, 30.0, 0, 30.0), 1.0);
        assert_eq!(stalls_chance(0, 0.0, 4, 30.0), 1.0);
        // Thousands of stalls neither underflow nor pass 1.
        let even = stalls_chance(2_000, 1_000.0, 2_000, 1_000.0);
        assert!((0.5..0.52).contains(&even), "{even}");
        assert!(stalls_chance(2_000, 1_000.0, 2_400, 1_000.0) < 1e-9);
    }

    #[test]
    fn a_saturated_run_makes_the_verdict_inconclusive_never_pass() {
        let runs = rounds(
            |k| {
                let mut r = all_real(k, 0.70);
                if k == 2 {
                    r.headroom = Some("not-a-finding".into());
                    r.not_a_finding =
                        vec!["this machine was saturated in the steady window".into()];
                }
                r
            },
            |k| with_light(k, 0.69, 1.0, 0),
        );
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(j.verdict, FidelityVerdict::Inconclusive);
        assert_eq!(
            j.inconclusive_because,
            ["A2 (out/all-real-2) is not a finding: this machine was saturated in the steady window"]
        );
        // Every rule held: without that run it would have passed.
        assert!(j.rules.iter().all(|r| r.ok == Some(true)));
        // …and a failing rule does not win over it either.
        let mut runs = runs;
        for r in runs.iter_mut().filter(|r| r.arm == Arm::WithLight) {
            r.p2p_savings = Some(0.5);
        }
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            (j.verdict, failing(&j)),
            (FidelityVerdict::Inconclusive, vec!["p2p_savings"])
        );
    }

    #[test]
    fn missing_runs_and_an_incomplete_reference_are_inconclusive() {
        let mut runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 1.0, 0));
        runs.truncate(3);
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(j.verdict, FidelityVerdict::Inconclusive);
        assert!(j.inconclusive_because.contains(
            &"2 of 3 all-real runs and 1 of 3 runs with light peers were measured".to_string()
        ));
        let mut runs = rounds(|k| all_real(k, 0.70), |k| with_light(k, 0.69, 1.0, 0));
        runs[2].played = 7;
        let j = judge(&runs, 8, 2, 3);
        assert_eq!(
            j.inconclusive_because,
            ["A2 (out/all-real-2): 7 of 8 viewers played, so it is no all-real swarm of 8"]
        );
        // No runs at all: nothing is judged.
        let j = judge(&[], 8, 2, 3);
        assert_eq!(j.verdict, FidelityVerdict::Inconclusive);
        assert!(j.rules.iter().all(|r| r.ok.is_none()));
    }
}
