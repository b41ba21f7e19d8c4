//! The ladder's run loop: the scenario validated at every step first, then one engine run
//! per step into `OUT/step-<viewers>`, each step's report, and the capacity report over the
//! steps that finished.

use super::knee::KneeRules;
use super::project::ServerSpec;
use super::{analyze, step_from_run, write, CapacityReport};
use crate::model::exit::bad_input;
use crate::model::scenario::{self, duration_flag, Overrides, ViewersOverride};
use crate::sys::shutdown::Shutdown;
use crate::{run_scenario, RunOptions, RunSource};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// A ladder: what `viewerfleet ladder` was given.
#[derive(Clone)]
pub struct LadderOptions {
    /// The scenario; its viewer count is replaced by each step's.
    pub scenario: PathBuf,
    /// Viewer counts, in any order (sorted, repeats dropped).
    pub steps: Vec<u32>,
    /// Each step's duration (the scenario's timeline stretched to it); `None`: the file's.
    pub hold: Option<Duration>,
    /// One `step-<viewers>` run folder per step and the capacity report.
    pub out: PathBuf,
    /// Run nothing: rebuild the capacity report from the step folders in `out`.
    pub analyze_only: bool,
    /// Cores the target may use; `None`: this machine's.
    pub target_cores: Option<f64>,
    /// HTTP egress capacity of the target's link in Mbit/s (turns on the link rule).
    pub link_mbps: Option<f64>,
    /// The server the costs are projected to.
    pub server: ServerSpec,
    /// Each step's run as `RunOptions::progress` and `confirm_paid` say.
    pub run: RunOptions,
}

/// What a ladder ended with.
pub struct LadderOutcome {
    /// The capacity report over the steps that finished (written into `out`); `None` when
    /// it was interrupted before any step finished.
    pub report: Option<CapacityReport>,
    /// Ctrl-C or SIGTERM cut it short.
    pub interrupted: bool,
}

impl LadderOptions {
    /// The steps, sorted, without repeats; an error for none or a step of 0 viewers.
    fn sorted_steps(&self) -> anyhow::Result<Vec<u32>> {
        let mut steps = self.steps.clone();
        steps.sort_unstable();
        steps.dedup();
        if steps.first().is_none_or(|&first| first == 0) {
            return Err(bad_input(anyhow::anyhow!(
                "--steps needs viewer counts of at least 1, e.g. --steps 2,4,6,8"
            )));
        }
        Ok(steps)
    }

    /// The scenario's overrides at a step of `viewers`.
    fn overrides(&self, viewers: u32) -> Overrides {
        Overrides {
            viewers: ViewersOverride::Fixed(viewers),
            duration: self.hold,
            ..Default::default()
        }
    }

    /// The command that runs this ladder again, for the capacity report.
    fn rerun_line(&self) -> String {
        let steps: Vec<String> = self.steps.iter().map(|s| s.to_string()).collect();
        let mut line = format!(
            "viewerfleet ladder {} --steps {} --out {}",
            self.scenario.display(),
            steps.join(","),
            self.out.display()
        );
        if let Some(hold) = self.hold {
            line.push_str(&format!(" --hold {}", duration_flag(hold)));
        }
        line
    }
}

/// Runs the ladder (or, with `analyze_only`, reads its step folders) and writes the
/// capacity report into `out`; progress lines go to `progress`. Interrupted by `shutdown`,
/// the steps that finished are analysed. No finished step and no interruption is bad input.
pub async fn run(
    options: &LadderOptions,
    shutdown: &Shutdown,
    progress: &mut (dyn Write + Send),
) -> anyhow::Result<LadderOutcome> {
    let steps = options.sorted_steps()?;
    // Validate the scenario at every step before running any of them; each step runs
    // the plan validated here.
    let mut plans = Vec::with_capacity(steps.len());
    for &v in &steps {
        plans.push(scenario::load(&options.scenario, &options.overrides(v))?);
    }
    let name = plans[0].name.clone();
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("creating {}", options.out.display()))?;
    let mut results = Vec::new();
    for (&viewers, plan) in steps.iter().zip(plans) {
        let dir = options.out.join(format!("step-{viewers}"));
        if !options.analyze_only {
            if shutdown.is_triggered() {
                break;
            }
            let _ = writeln!(
                progress,
                "== ladder step: {viewers} viewers → {}",
                dir.display()
            );
            let outcome = run_scenario(
                plan,
                &RunSource::scenario(&options.scenario, &options.overrides(viewers)),
                &dir,
                shutdown.clone(),
                options.run.clone(),
            )
            .await
            .with_context(|| format!("ladder step {viewers}"))?;
            let _ = writeln!(progress, "{}", outcome.summary);
            if outcome.interrupted {
                break;
            }
        }
        if !dir.join(crate::model::rawdata::MANIFEST).exists() {
            continue;
        }
        let summary = crate::report::write_report(&dir)?;
        results.push(step_from_run(&dir, &summary)?);
    }
    let interrupted = shutdown.is_triggered();
    if results.is_empty() {
        if interrupted {
            return Ok(LadderOutcome {
                report: None,
                interrupted,
            });
        }
        return Err(bad_input(anyhow::anyhow!(
            "no ladder step finished; nothing to report (with --analyze-only, --out must hold step-<viewers> run folders)"
        )));
    }
    let host = crate::sys::hostinfo::host_info();
    let rules = KneeRules {
        target_cores: Some(options.target_cores.unwrap_or(host.cpus as f64)),
        link_mbps: options.link_mbps,
        ..KneeRules::default()
    };
    let report = analyze(
        &name,
        results,
        rules,
        Some(options.server.clone()),
        options.rerun_line(),
        format!("{} ({} × {})", host.hostname, host.cpus, host.cpu_model),
    );
    write(&report, &options.out)?;
    Ok(LadderOutcome {
        report: Some(report),
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(steps: &[u32], hold: Option<Duration>) -> LadderOptions {
        LadderOptions {
            scenario: "s.yaml".into(),
            steps: steps.to_vec(),
            hold,
            out: "out".into(),
            analyze_only: false,
            target_cores: None,
            link_mbps: None,
            server: ServerSpec {
                cores: 4.0,
                ram_bytes: 4_000_000_000,
                nic_mbps: 1000.0,
                usable_share: 0.6,
            },
            run: RunOptions::default(),
        }
    }

    #[test]
    fn steps_are_sorted_once_each_and_start_at_one_viewer() {
        assert_eq!(
            options(&[6, 2, 4, 2], None).sorted_steps().unwrap(),
            [2, 4, 6]
        );
        for bad in [&[][..], &[0, 2][..]] {
            let err = options(bad, None).sorted_steps().unwrap_err();
            assert!(err.to_string().contains("--steps needs"), "{err}");
        }
    }

    #[test]
    fn the_rerun_line_repeats_the_steps_and_the_hold() {
        let line = options(&[2, 4], Some(Duration::from_secs(90))).rerun_line();
        assert_eq!(
            line,
            "viewerfleet ladder s.yaml --steps 2,4 --out out --hold 1m30s"
        );
    }
}
