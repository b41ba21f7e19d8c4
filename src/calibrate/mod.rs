//! `viewerfleet calibrate`: what one viewer costs on this machine, per browser profile.
//!
//! K viewers play the scenario's target (refsite by default) through one local
//! chromedriver, once per profile; per-viewer PSS, CPU and the bytes the players fetched
//! are written to `calibration.json` (after each profile, so an interrupted calibration
//! keeps what it measured) and `calibration.md`. `plan --calibration FILE` sizes fleets
//! with the `project` profile's figures.

mod measure;
mod profiles;
mod render;

pub use measure::ProfileFigures;
pub use profiles::{resolve as resolve_profiles, BrowserProfile, DEFAULT_FLAGS};
pub use render::markdown;

use crate::fleet::chromedriver::{self, ChromeDriver};
use crate::model::scenario::fleet::{FleetPlan, LocalFleetPlan};
use crate::model::scenario::{self, Overrides, Plan};
use crate::sys::shutdown::Shutdown;
use crate::target::start as target_process;
use crate::target::TargetPlacement;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file `calibrate` writes and `plan --calibration` reads.
pub const CALIBRATION_JSON: &str = "calibration.json";

/// The scenario measured when none is given: the PeerTube test's live viewer (240p,
/// 2000/300 kbit/s and 500 ms through CDP), P2P on.
const BUILT_IN_SCENARIO: &str = "name: calibrate\ntarget:\n  kind: refsite\n  video: live\n  latency: normal\nviewers:\n  count: 4\n  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\nduration: 120s\nfleet:\n  kind: local\n";

/// Everything one calibration measured, with what is needed to read and repeat it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    pub created: String,
    pub host: crate::model::rawdata::HostInfo,
    pub chromium: String,
    pub scenario: String,
    pub viewers: u32,
    pub warmup_s: f64,
    pub window_s: f64,
    pub command: String,
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
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!(
                "reading {}; run `viewerfleet calibrate --out DIR` to make one",
                file.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a calibration written by `viewerfleet calibrate`",
                file.display()
            )
        })
    }

    /// Figures of one profile, when it was measured and at least one viewer played.
    pub fn profile(&self, name: &str) -> Option<&ProfileFigures> {
        self.profiles
            .iter()
            .find(|p| p.profile.name == name && p.viewers_measured > 0)
    }
}

/// What `calibrate` is asked to measure.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// Scenario whose target, video and network profile the viewers play; `None`: the
    /// PeerTube test's live viewer.
    pub scenario: Option<PathBuf>,
    pub viewers: u32,
    pub warmup: Duration,
    pub window: Duration,
    /// Folder for `calibration.json` and `calibration.md`.
    pub out: PathBuf,
    pub profiles: Vec<BrowserProfile>,
}

/// Measures every profile in turn; `calibration.json` is rewritten after each. Releases
/// browsers, driver, target and profiles on every path; stops early when `shutdown` fires.
pub async fn run(options: &CalibrateOptions, shutdown: &Shutdown) -> anyhow::Result<Calibration> {
    if options.viewers == 0 {
        anyhow::bail!("--viewers must be at least 1");
    }
    let overrides = Overrides {
        viewers: Some(options.viewers),
        ..Default::default()
    };
    let (plan, scenario_name) = match &options.scenario {
        Some(path) => (
            scenario::load(path, &overrides)?,
            path.display().to_string(),
        ),
        None => (
            scenario::parse(
                BUILT_IN_SCENARIO,
                "built-in calibration scenario",
                &overrides,
            )?,
            "built-in (refsite live, 2000/300 kbit/s, 500 ms)".into(),
        ),
    };
    let binaries = local_binaries(&plan);
    chromedriver::preflight(&binaries.chromedriver, &binaries.chromium)?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating output folder {}", options.out.display()))?;
    let placement = TargetPlacement {
        listen: "127.0.0.1:0".parse().expect("valid address"),
        netns: None,
    };
    let mut target = tokio::select! {
        t = target_process::start(&plan, &placement) => t?,
        _ = shutdown.wait() => anyhow::bail!("interrupted while starting the target"),
    };
    let driver = match ChromeDriver::start(&binaries.chromedriver).await {
        Ok(d) => d,
        Err(err) => {
            target.stop().await;
            return Err(err.into());
        }
    };
    let chromium = binaries.chromium.display().to_string();
    let result = calibrate_all(
        options,
        &plan,
        &scenario_name,
        &driver,
        &target,
        &chromium,
        shutdown,
    )
    .await;
    driver.shutdown().await;
    crate::viewer::remove_own_profiles();
    target.stop().await;
    result
}

async fn calibrate_all(
    options: &CalibrateOptions,
    plan: &Plan,
    scenario_name: &str,
    driver: &ChromeDriver,
    target: &target_process::StartedTarget,
    chromium: &str,
    shutdown: &Shutdown,
) -> anyhow::Result<Calibration> {
    let driver_pid = driver.pid().await.context("chromedriver is not running")?;
    let viewer_plans: Vec<_> = plan
        .viewer_plans()
        .into_iter()
        .map(|mut v| {
            v.start_after = Duration::ZERO;
            v
        })
        .collect();
    let versions = crate::sys::hostinfo::tool_versions(&[("chromium", chromium, &["--version"])]);
    let mut calibration = Calibration {
        created: chrono::Utc::now().to_rfc3339(),
        host: crate::sys::hostinfo::host_info(),
        chromium: versions.get("chromium").cloned().unwrap_or_default(),
        scenario: scenario_name.to_string(),
        viewers: options.viewers,
        warmup_s: options.warmup.as_secs_f64(),
        window_s: options.window.as_secs_f64(),
        command: crate::report::honesty::rerun_command(&std::env::args().collect::<Vec<_>>()),
        profiles: Vec::new(),
    };
    let spec = measure::MeasureSpec {
        webdriver_url: driver.url(),
        chromium: chromium.to_string(),
        driver_pid,
        viewers: &viewer_plans,
        warmup: options.warmup,
        window: options.window,
        pss_every: Duration::from_secs(5),
    };
    let out = options.out.join(CALIBRATION_JSON);
    for profile in &options.profiles {
        tracing::info!(
            "profile {}: {} viewers, {}s warm-up, {}s window",
            profile.name,
            options.viewers,
            options.warmup.as_secs(),
            options.window.as_secs()
        );
        let Some(figures) =
            measure::measure_profile(&spec, profile, target.target().as_ref(), shutdown).await
        else {
            break;
        };
        tracing::info!(
            "profile {}: {:.0} MB PSS and {:.3} cores per viewer, {:.0} kbit/s fetched",
            profile.name,
            figures.pss_mb_per_viewer,
            figures.cpu_cores_per_viewer,
            figures.download_kbps_per_viewer()
        );
        calibration.profiles.push(figures);
        // Written after every profile: an interrupted calibration keeps what it measured.
        std::fs::write(&out, serde_json::to_string_pretty(&calibration)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(calibration)
}

/// The chromedriver and Chromium the scenario's local fleet names, or the defaults.
fn local_binaries(plan: &Plan) -> LocalFleetPlan {
    match &plan.fleet {
        FleetPlan::Local(local) => local.clone(),
        _ => LocalFleetPlan::default(),
    }
}
