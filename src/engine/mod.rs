//! The run engine: takes a `Plan`, starts the target and the fleet, brings viewers up along
//! the ramp, samples players, exporter and host, appends raw data as it arrives, and
//! releases everything on every exit path (success, error, Ctrl-C, SIGTERM).

mod gc;
mod manifest;
mod progress;
mod recorder;
mod run;
mod samplers;
mod shared;
pub(crate) mod target_process;
mod viewer_task;

use crate::scenario::{self, Overrides};
use crate::shutdown::Shutdown;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a run ended, for `suite` and the exit code.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_dir: PathBuf,
    /// False when viewers failed beyond the threshold, the target never answered, or the
    /// run was interrupted.
    pub ok: bool,
    pub interrupted: bool,
    /// 0 ok; 1 too many failed viewers; 130/143 interrupted by SIGINT/SIGTERM.
    pub exit_code: u8,
    /// Short summary printed at the end.
    pub summary: String,
}

/// Runs one scenario into `out` (created; must be empty or absent). Listens for Ctrl-C and
/// SIGTERM itself, so a suite stops at the run it is in.
pub async fn run_scenario(
    scenario: &Path,
    out: &Path,
    overrides: &Overrides,
) -> anyhow::Result<RunOutcome> {
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    run_scenario_with(scenario, out, overrides, shutdown, true).await
}

/// As `run_scenario`, with the caller's stop signal and progress choice.
pub async fn run_scenario_with(
    scenario: &Path,
    out: &Path,
    overrides: &Overrides,
    shutdown: Shutdown,
    progress: bool,
) -> anyhow::Result<RunOutcome> {
    let options = RunOptions {
        progress,
        ..RunOptions::default()
    };
    run_scenario_full(scenario, out, overrides, shutdown, options).await
}

/// How a run is carried out, beyond its scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Show progress on stderr.
    pub progress: bool,
    /// Serve the controller's metrics here during the run (loopback only).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Build the report from raw data at the end.
    pub write_report: bool,
    /// Cloud fleets: leave the servers running (delete them later with `viewerfleet down`).
    pub keep: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            progress: true,
            metrics_listen: None,
            write_report: true,
            keep: false,
        }
    }
}

/// As `run_scenario_with`, with every option.
pub async fn run_scenario_full(
    scenario: &Path,
    out: &Path,
    overrides: &Overrides,
    shutdown: Shutdown,
    options: RunOptions,
) -> anyhow::Result<RunOutcome> {
    let RunOptions {
        progress,
        metrics_listen,
        write_report,
        keep,
    } = options;
    let plan = scenario::load(scenario, overrides)?;
    let ctx = run::RunContext {
        out: out.to_path_buf(),
        rerun_command: rerun_command(scenario, out, overrides),
        shutdown,
        progress,
        metrics_listen,
        metrics: crate::metrics::controller::ControllerMetrics::new(),
        keep,
    };
    tracing::info!("run {}: {}", plan.name, plan.summary_line());
    let mut outcome = run::execute(plan, ctx).await?;
    if write_report {
        // The report is rebuilt from raw data; a failure here loses nothing.
        match crate::report::write_report(&outcome.run_dir) {
            Ok(_) => outcome.summary.push_str(&format!(
                "\nreport: {}",
                outcome.run_dir.join("report.html").display()
            )),
            Err(err) => tracing::error!(
                "building the report failed ({err:#}); run `viewerfleet report {}` to retry",
                outcome.run_dir.display()
            ),
        }
    }
    Ok(outcome)
}

/// The command that re-runs this run, as written into the manifest.
fn rerun_command(scenario: &Path, out: &Path, overrides: &Overrides) -> Vec<String> {
    let mut cmd = vec![
        "viewerfleet".to_string(),
        "run".to_string(),
        scenario.display().to_string(),
        "--out".to_string(),
        format!("{}-rerun", out.display()),
    ];
    if let Some(v) = overrides.viewers {
        cmd.extend(["--viewers".to_string(), v.to_string()]);
    }
    if let Some(d) = &overrides.duration {
        cmd.extend(["--duration".to_string(), d.clone()]);
    }
    cmd
}

/// `viewerfleet run`.
pub async fn cli_run(args: crate::cli::RunArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let overrides = Overrides {
        viewers: args.viewers,
        duration: args.duration.clone(),
    };
    // Validate before anything else, so a bad file costs nothing.
    let plan = scenario::load(&args.scenario, &overrides)?;
    let out = match args.out {
        Some(out) => out,
        None => PathBuf::from("runs").join(format!(
            "{}-{}",
            plan.name,
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        )),
    };
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let outcome = run_scenario_full(
        &args.scenario,
        &out,
        &overrides,
        shutdown,
        RunOptions {
            progress: !quiet,
            metrics_listen: args.metrics_listen,
            write_report: !args.no_report,
            keep: args.keep,
        },
    )
    .await
    .with_context(|| format!("run {}", plan.name))?;
    println!("{}", outcome.summary);
    println!("raw data: {}", outcome.run_dir.display());
    Ok(ExitCode::from(outcome.exit_code))
}

/// `viewerfleet gc`.
pub async fn cli_gc(args: crate::cli::GcArgs) -> anyhow::Result<ExitCode> {
    let mut removed = gc::collect_local(args.dry_run)?;
    removed.extend(crate::gridlocal::gc(args.dry_run).await);
    removed.extend(crate::fleet::grid::gc_sessions(args.dry_run).await);
    for line in &removed {
        println!(
            "{}{line}",
            if args.dry_run {
                "would remove: "
            } else {
                "removed: "
            }
        );
    }
    if removed.is_empty() {
        println!("nothing left over from earlier runs");
    }
    Ok(ExitCode::SUCCESS)
}
