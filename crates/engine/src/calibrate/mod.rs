//! `viewerfleet calibrate`: what one viewer costs on this machine, per browser profile, and
//! whether a cheaper profile still behaves like the default one.
//!
//! K viewers play the scenario's target (refsite's live 240p stream and its VOD with 720p
//! on top by default) on this machine, once per profile (and per round with `--repeat`,
//! round robin). Each measurement is one run of the engine — the scenario runner of `run`
//! — into its own run folder (`OUT/runs/<video>-<profile>-r<round>/`), with the profile's
//! browser set-up on the plan (`measure`); its figures are computed from that run's raw
//! data (`from_run`, with the browsers' cost from `cost`), so every measurement can be
//! re-reported and audited. Per-viewer PSS, CPU and the bytes, segments and renditions the
//! players fetched are written to `calibration.json` (after each profile, so an
//! interrupted calibration keeps what it measured) and `calibration.md`; each profile is
//! judged against the `default` profile of the same video and round (`fidelity`).
//! `plan --calibration FILE` sizes fleets with the figures of the viewerfleet profiles
//! (`budget`).
//!
//! `viewerfleet fidelity` judges light peers the same way (`light_fidelity`): one swarm
//! size, all real viewers against real viewers plus light peers, through the engine.

mod budget;
pub(crate) mod fidelity;
pub mod from_run;
pub mod light_fidelity;
mod measure;
mod profiles;
mod render;

pub use budget::CalibratedBudget;
pub use fidelity::{Fidelity, FidelityVerdict};
pub use measure::{plan_for, BytesBasis, ProfileFigures, TimePoint, Timing};
pub use profiles::{
    resolve as resolve_profiles, BrowserProfile, DEFAULT_FLAGS, PACKED_PER_BROWSER,
};
pub use render::markdown;

use crate::fleet::chromedriver;
use crate::model::kinds::{FleetKind, VideoKind};
use crate::model::scenario::fleet::{FleetPlan, LocalFleetPlan};
use crate::model::scenario::{self, Overrides, Plan};
use crate::sys::shutdown::Shutdown;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The folder under `--out` that holds one run folder per measurement.
pub(crate) const RUNS_DIR: &str = "runs";

/// The file `calibrate` writes and `plan --calibration` reads.
pub const CALIBRATION_JSON: &str = "calibration.json";

/// The scenario measured when none is given: the PeerTube test's viewer (2000/300 kbit/s
/// and 500 ms through CDP, P2P on) on refsite's live 240p stream or its 2-minute VOD.
fn built_in_scenario(video: VideoKind) -> String {
    let target = match video {
        VideoKind::Live => "  video: live\n  latency: normal\n",
        VideoKind::Vod => "  video: vod\n  vod_length: 2m\n",
    };
    format!(
        "name: calibrate-{video}\ntarget:\n  kind: refsite\n{target}viewers:\n  count: 4\n  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\nduration: 120s\nfleet:\n  kind: local\n"
    )
}

fn one() -> u32 {
    1
}

/// Everything one calibration measured, with what is needed to read and repeat it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    pub created: String,
    pub host: crate::model::rawdata::HostInfo,
    pub chromium: String,
    pub scenario: String,
    /// The videos measured, in order (older files: live only).
    #[serde(default)]
    pub videos: Vec<VideoKind>,
    pub viewers: u32,
    /// Rounds of `--repeat`.
    #[serde(default = "one")]
    pub repeat: u32,
    pub warmup_s: f64,
    pub window_s: f64,
    pub command: String,
    /// One row per profile, video and round, in the order measured.
    pub profiles: Vec<ProfileFigures>,
}

impl Calibration {
    /// Reads a `calibration.json` (or the folder holding one).
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let file = if path.is_dir() {
            path.join(CALIBRATION_JSON)
        } else {
            path.to_path_buf()
        };
        let bytes =
            crate::model::rawdata::read_regular_file(&file, 64 << 20).with_context(|| {
                format!(
                    "reading {}; run `viewerfleet calibrate --out DIR` to make one",
                    file.display()
                )
            })?;
        serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a calibration written by `viewerfleet calibrate`",
                file.display()
            )
        })
    }

    /// Figures of one profile (its first row), when at least one viewer played.
    pub fn profile(&self, name: &str) -> Option<&ProfileFigures> {
        self.profiles
            .iter()
            .find(|p| p.profile.name == name && p.viewers_measured > 0)
    }

    /// The rows of one video, in the order measured.
    pub fn rows(&self, video: VideoKind) -> impl Iterator<Item = &ProfileFigures> {
        self.profiles.iter().filter(move |p| p.video == video)
    }
}

/// What `calibrate` is asked to measure.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Scenario whose target, video and network profile the viewers play; `None`: the
    /// built-in scenario for each of `videos`.
    pub scenario: Option<PathBuf>,
    /// The built-in scenario's videos; empty: live and VOD.
    pub videos: Vec<VideoKind>,
    pub viewers: u32,
    pub repeat: u32,
    pub warmup: Duration,
    pub window: Duration,
    /// Folder for `calibration.json` and `calibration.md`.
    pub out: PathBuf,
    pub profiles: Vec<BrowserProfile>,
}

/// One video to calibrate: its plan and how to name it.
struct Case {
    /// The scenario as the calibration plays it (its viewers, on the local fleet); each
    /// profile's measurement adds its timing and browsers (`measure::plan_for`).
    plan: Plan,
    video: VideoKind,
    name: String,
    /// How the re-run command names it: the scenario file, or `--video` of the built-in.
    source: CaseSource,
}

enum CaseSource {
    File(PathBuf),
    BuiltIn(VideoKind),
}

/// Measures every profile in turn, for every video; `calibration.json` is rewritten after
/// each. Every measurement is an engine run, which releases browsers, driver, target and
/// profiles on every path; stops early when `shutdown` fires.
pub async fn run(options: &CalibrateOptions, shutdown: &Shutdown) -> anyhow::Result<Calibration> {
    let cases = cases(options)?;
    let profiles = with_reference(&options.profiles);
    let binaries = local_binaries(&cases[0].plan);
    chromedriver::preflight(&binaries.chromedriver, &binaries.chromium)?;
    check_runs_folder(options, &cases, &profiles)?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating output folder {}", options.out.display()))?;
    let chromium = binaries.chromium.display().to_string();
    let versions = crate::sys::hostinfo::tool_versions(&[("chromium", &chromium, &["--version"])]);
    let mut calibration = Calibration {
        created: chrono::Utc::now().to_rfc3339(),
        host: crate::sys::hostinfo::host_info(),
        chromium: versions.get("chromium").cloned().unwrap_or_default(),
        scenario: cases
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        videos: cases.iter().map(|c| c.video).collect(),
        viewers: options.viewers,
        repeat: options.repeat,
        warmup_s: options.warmup.as_secs_f64(),
        window_s: options.window.as_secs_f64(),
        command: crate::report::honesty::rerun_command(&std::env::args().collect::<Vec<_>>()),
        profiles: Vec::new(),
    };
    for case in &cases {
        if shutdown.is_triggered() {
            break;
        }
        measure_rounds(options, case, &profiles, &mut calibration, shutdown).await?;
    }
    Ok(calibration)
}

/// The videos to measure and their plans.
fn cases(options: &CalibrateOptions) -> anyhow::Result<Vec<Case>> {
    if options.viewers == 0 {
        anyhow::bail!("--viewers must be at least 1");
    }
    if options.repeat == 0 {
        anyhow::bail!("--repeat must be at least 1");
    }
    if options.window < Duration::from_secs(2) {
        anyhow::bail!("--window must be at least 2s (it holds samples taken every second or two)");
    }
    let overrides = Overrides {
        viewers: crate::model::scenario::ViewersOverride::Fixed(options.viewers),
        ..Default::default()
    };
    if let Some(path) = &options.scenario {
        if !options.videos.is_empty() {
            anyhow::bail!(
                "--video chooses the built-in scenario's videos; with a scenario file its target.video ({}) is measured: remove --video",
                path.display()
            );
        }
        let mut plan = scenario::load(path, &overrides)?;
        if !matches!(plan.fleet, FleetPlan::Local(_)) {
            // Calibration runs on this machine: the scenario's network profiles are applied
            // as on the local fleet.
            let local = Overrides {
                fleet: Some(FleetKind::Local),
                ..overrides.clone()
            };
            plan = scenario::load(path, &local)?;
        }
        return Ok(vec![Case {
            video: plan.target.video,
            plan,
            name: path.display().to_string(),
            source: CaseSource::File(path.clone()),
        }]);
    }
    let videos = if options.videos.is_empty() {
        vec![VideoKind::Live, VideoKind::Vod]
    } else {
        options.videos.clone()
    };
    videos
        .into_iter()
        .map(|video| {
            let plan = scenario::parse(
                &built_in_scenario(video),
                "built-in calibration scenario",
                &overrides,
            )?;
            let name = match video {
                VideoKind::Live => "built-in live (refsite 240p, 2000/300 kbit/s, 500 ms)",
                VideoKind::Vod => {
                    "built-in VOD (refsite, 2 min, 240p–720p, 2000/300 kbit/s, 500 ms)"
                }
            };
            Ok(Case {
                plan,
                video,
                name: name.into(),
                source: CaseSource::BuiltIn(video),
            })
        })
        .collect()
}

/// The profiles in the order asked for, with `default` first when it was not asked for:
/// every profile is judged against it.
fn with_reference(profiles: &[BrowserProfile]) -> Vec<BrowserProfile> {
    let mut out = profiles.to_vec();
    if !out.iter().any(|p| p.name == "default") {
        out.insert(0, BrowserProfile::default_chromedriver());
    }
    out
}

/// The run folder of one measurement: `OUT/runs/<video>-<profile>-r<round>` (round from 1).
fn run_dir(out: &Path, video: VideoKind, profile: &BrowserProfile, round: u32) -> PathBuf {
    out.join(RUNS_DIR)
        .join(format!("{video}-{}-r{}", profile.name, round + 1))
}

/// Refuses before anything starts when a measurement's run folder already holds files
/// (runs never overwrite data).
fn check_runs_folder(
    options: &CalibrateOptions,
    cases: &[Case],
    profiles: &[BrowserProfile],
) -> anyhow::Result<()> {
    for case in cases {
        for round in 0..options.repeat {
            for profile in profiles {
                let dir = run_dir(&options.out, case.video, profile, round);
                if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
                    anyhow::bail!(
                        "{} already holds a measurement of an earlier calibration; give --out a new or empty folder (runs never overwrite data)",
                        dir.display()
                    );
                }
            }
        }
    }
    Ok(())
}

/// The command that makes one measurement again: this video (or scenario file), this
/// profile (and `default`, which every profile is judged against), one round, the same
/// viewers and timing, into a new folder beside the run.
fn rerun_words(
    options: &CalibrateOptions,
    case: &Case,
    profile: &BrowserProfile,
    dir: &Path,
) -> Vec<String> {
    let mut words = vec!["viewerfleet".to_string(), "calibrate".to_string()];
    match &case.source {
        CaseSource::File(path) => words.push(path.display().to_string()),
        CaseSource::BuiltIn(video) => words.extend(["--video".to_string(), video.to_string()]),
    }
    let human = |d: Duration| humantime::format_duration(d).to_string();
    words.extend([
        "--viewers".to_string(),
        options.viewers.to_string(),
        "--warmup".to_string(),
        human(options.warmup),
        "--window".to_string(),
        human(options.window),
    ]);
    words.extend(profile.cli_args());
    words.extend(["--out".to_string(), format!("{}-rerun", dir.display())]);
    words
}

/// One video: every round of every profile, each one engine run.
async fn measure_rounds(
    options: &CalibrateOptions,
    case: &Case,
    profiles: &[BrowserProfile],
    calibration: &mut Calibration,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let timing = Timing {
        warmup: options.warmup,
        window: options.window,
    };
    let out = options.out.join(CALIBRATION_JSON);
    for round in 0..options.repeat {
        for profile in profiles {
            if shutdown.is_triggered() {
                return Ok(());
            }
            let dir = run_dir(&options.out, case.video, profile, round);
            tracing::info!(
                "profile {} ({}, {}), round {}/{}: {} viewers, {}s warm-up, {}s window → {}",
                profile.name,
                case.video,
                profile.levers(),
                round + 1,
                options.repeat,
                options.viewers,
                options.warmup.as_secs(),
                options.window.as_secs(),
                dir.display()
            );
            let rerun = rerun_words(options, case, profile, &dir);
            let measured =
                measure::measure_profile(&case.plan, profile, timing, &dir, rerun, shutdown)
                    .await
                    .with_context(|| {
                        format!(
                            "measuring profile {} ({}, round {})",
                            profile.name,
                            case.video,
                            round + 1
                        )
                    })?;
            let Some(mut figures) = measured else {
                return Ok(());
            };
            figures.round = round;
            figures.fidelity = calibration
                .rows(case.video)
                .find(|r| r.profile.name == "default" && r.round == round)
                .filter(|_| profile.name != "default")
                .map(|reference| fidelity::judge(&figures, reference));
            tracing::info!(
                "profile {}: {:.0} MB PSS and {:.3} cores per viewer, {:.0} kbit/s fetched{}",
                profile.name,
                figures.pss_mb_per_viewer,
                figures.cpu_cores_per_viewer,
                figures.download_kbps_per_viewer(),
                figures
                    .fidelity
                    .as_ref()
                    .map(|f| format!(", fidelity {}", f.verdict.as_str()))
                    .unwrap_or_default()
            );
            calibration.profiles.push(figures);
            // Written after every profile: an interrupted calibration keeps what it measured.
            std::fs::write(&out, serde_json::to_string_pretty(&calibration)?)
                .with_context(|| format!("writing {}", out.display()))?;
        }
    }
    Ok(())
}

/// The chromedriver and Chromium the scenario's local fleet names, or the defaults.
fn local_binaries(plan: &Plan) -> LocalFleetPlan {
    match &plan.fleet {
        FleetPlan::Local(local) => local.clone(),
        _ => LocalFleetPlan::default(),
    }
}
