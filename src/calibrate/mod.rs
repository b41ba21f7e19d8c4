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
pub use profiles::{BrowserProfile, DEFAULT_FLAGS};

use crate::cli::CalibrateArgs;
use crate::engine::target_process;
use crate::fleet::chromedriver::{self, ChromeDriver, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use crate::fleet::{FleetSpec, TargetPlacement};
use crate::scenario::{self, Overrides, Plan};
use crate::shutdown::Shutdown;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
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
    pub host: crate::rawdata::HostInfo,
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

/// `viewerfleet calibrate`.
pub async fn cli_calibrate(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let profiles = profiles::resolve(&args.profiles, &args.profile)
        .map_err(|message| anyhow::anyhow!(message))?;
    let warmup = parse_duration("--warmup", &args.warmup)?;
    let window = parse_duration("--window", &args.window)?;
    if args.viewers == 0 {
        anyhow::bail!("--viewers must be at least 1");
    }
    let overrides = Overrides {
        viewers: Some(args.viewers),
        duration: None,
    };
    let (plan, scenario_name) = match &args.scenario {
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
    let (driver_path, chromium) = local_binaries(&plan);
    chromedriver::preflight(&driver_path, chromium.as_ref())?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating output folder {}", args.out.display()))?;

    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let placement = TargetPlacement {
        listen: "127.0.0.1:0".parse().expect("valid address"),
        netns: None,
    };
    let mut target = tokio::select! {
        t = target_process::start(&plan, &placement) => t?,
        _ = shutdown.wait() => return Ok(ExitCode::from(shutdown.exit_code())),
    };
    let driver = match ChromeDriver::start(&driver_path).await {
        Ok(d) => d,
        Err(err) => {
            target.stop().await;
            return Err(err.into());
        }
    };
    let result = calibrate_all(
        &args,
        &plan,
        &scenario_name,
        &profiles,
        warmup,
        window,
        &driver,
        &target,
        &chromium,
        &shutdown,
    )
    .await;
    driver.shutdown().await;
    crate::viewer::remove_own_profiles();
    target.stop().await;
    let calibration = result?;
    let markdown = render::markdown(&calibration);
    std::fs::write(args.out.join("calibration.md"), &markdown)?;
    print!("{markdown}");
    println!(
        "\nwritten: {} and calibration.md; size fleets with `viewerfleet plan --calibration {}`",
        args.out.join(CALIBRATION_JSON).display(),
        args.out.join(CALIBRATION_JSON).display()
    );
    if shutdown.is_triggered() {
        return Ok(ExitCode::from(shutdown.exit_code()));
    }
    let all_played = calibration
        .profiles
        .iter()
        .all(|p| p.viewers_measured == p.viewers);
    Ok(if all_played {
        ExitCode::SUCCESS
    } else {
        eprintln!("warning: not every viewer played; see `failures` in calibration.json");
        ExitCode::from(1)
    })
}

#[allow(clippy::too_many_arguments)]
async fn calibrate_all(
    args: &CalibrateArgs,
    plan: &Plan,
    scenario_name: &str,
    profiles: &[BrowserProfile],
    warmup: Duration,
    window: Duration,
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
    let versions = crate::hostinfo::tool_versions(&[("chromium", chromium, &["--version"])]);
    let mut calibration = Calibration {
        created: chrono::Utc::now().to_rfc3339(),
        host: crate::hostinfo::host_info(),
        chromium: versions.get("chromium").cloned().unwrap_or_default(),
        scenario: scenario_name.to_string(),
        viewers: args.viewers,
        warmup_s: warmup.as_secs_f64(),
        window_s: window.as_secs_f64(),
        command: crate::report::honesty::rerun_command(&std::env::args().collect::<Vec<_>>()),
        profiles: Vec::new(),
    };
    let spec = measure::MeasureSpec {
        webdriver_url: driver.url(),
        chromium: chromium.to_string(),
        driver_pid,
        viewers: &viewer_plans,
        warmup,
        window,
        pss_every: Duration::from_secs(5),
    };
    let out = args.out.join(CALIBRATION_JSON);
    for profile in profiles {
        tracing::info!(
            "profile {}: {} viewers, {}s warm-up, {}s window",
            profile.name,
            args.viewers,
            warmup.as_secs(),
            window.as_secs()
        );
        let Some(figures) =
            measure::measure_profile(&spec, profile, &target.adapter, shutdown).await
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

fn local_binaries(plan: &Plan) -> (PathBuf, String) {
    let (driver, chromium) = match &plan.fleet {
        FleetSpec::Local(spec) => (spec.chromedriver.clone(), spec.chromium.clone()),
        _ => (None, None),
    };
    (
        PathBuf::from(driver.unwrap_or_else(|| DEFAULT_CHROMEDRIVER.into())),
        chromium.unwrap_or_else(|| DEFAULT_CHROMIUM.into()),
    )
}

fn parse_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}; write e.g. 30s or 1m"))
}
