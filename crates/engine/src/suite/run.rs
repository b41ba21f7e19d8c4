//! The suite's loop: one run after the other (sized by the kept swarm sizes), until the
//! last or a stop; then the reports of what finished and their comparison.

use super::kept_sizes::{bounded_by, keep_sizes, size_to_keep, sized, SwarmSize};
use super::plan::SuitePlan;
use super::{ScenarioRunner, SuiteResult};
use crate::report::compare::{dir_name, Comparison, FailedRun};
use crate::report::RunReport;
use crate::sys::shutdown::Shutdown;
use crate::RunOutcome;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Runs the plan, then writes `compare.{json,csv,md,html}` into `plan.out`.
pub async fn run_suite(
    plan: &SuitePlan,
    runner: &dyn ScenarioRunner,
    stop: &Shutdown,
    progress: &mut (dyn Write + Send),
) -> anyhow::Result<SuiteResult> {
    std::fs::create_dir_all(&plan.out)?;
    let Ran {
        finished,
        mut failed,
        started,
        interrupted,
        over_failure_limit,
    } = run_all(plan, runner, stop, progress).await;
    if interrupted {
        let _ = writeln!(
            progress,
            "interrupted: no further runs started; comparing what finished"
        );
    }
    let reports = report_finished(&finished, &mut failed);
    let comparison = compare_in_suite_order(plan, reports, failed);
    crate::report::render::write_compare(&comparison, &plan.out)?;
    Ok(SuiteResult {
        comparison,
        interrupted,
        runs_started: started,
        html: plan.out.join("compare.html"),
        over_failure_limit,
    })
}

/// What the runs left behind.
#[derive(Default)]
struct Ran {
    /// `(name, run folder)` of every run with raw data to report on.
    finished: Vec<(String, PathBuf)>,
    failed: Vec<FailedRun>,
    started: usize,
    /// A stop came, or a run ended interrupted: no further runs were started.
    interrupted: bool,
    /// Run folders with more failed viewers than their scenario allows.
    over_failure_limit: Vec<String>,
}

/// Runs the plan's runs one after the other, until the last or until stopped.
async fn run_all(
    plan: &SuitePlan,
    runner: &dyn ScenarioRunner,
    stop: &Shutdown,
    progress: &mut (dyn Write + Send),
) -> Ran {
    let runs = plan.runs();
    let total = runs.len();
    let mut ran = Ran::default();
    // Governed ramps keep one swarm size per run name: the size file's or an earlier
    // repeat's; a run without one measures its own, bounded by what the suite's first
    // ramp kept.
    let mut kept = plan.kept_sizes.clone();
    let mut first_fit: Option<u32> = None;
    for (i, run) in runs.iter().enumerate() {
        if stop.is_triggered() {
            ran.interrupted = true;
            break;
        }
        ran.started += 1;
        let tag = format!("[{}/{total}] {}", i + 1, run.name);
        let known = run
            .plan
            .auto
            .and_then(|_| kept.runs.get(&run.name))
            .filter(|size| size.per_browser == Some(run.plan.per_browser))
            .cloned();
        let run = &match &known {
            Some(size) => {
                let _ = writeln!(
                    progress,
                    "{tag}: swarm size {} viewers, as {} measured at {}",
                    size.viewers, size.settled_in, size.at
                );
                sized(run, size.viewers)
            }
            None => bounded_by(run, first_fit),
        };
        let _ = writeln!(
            progress,
            "{tag}: running {} → {}",
            run.path.display(),
            run.dir.display()
        );
        let result = runner.run(run).await;
        if let Ok(outcome) = &result {
            let keep = size_to_keep(outcome);
            if let (None, Some(fits), true) = (&known, keep, outcome.ok) {
                kept.runs.insert(
                    run.name.clone(),
                    SwarmSize {
                        viewers: fits,
                        per_browser: Some(run.plan.per_browser),
                        settled_in: run.dir.display().to_string(),
                        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    },
                );
                if let Some(path) = &plan.size_file {
                    keep_sizes(&kept, path, &run.name, fits, progress);
                }
            }
            first_fit = first_fit.or(keep);
        }
        ran.record(&tag, &run.name, &run.dir, result, progress);
        if ran.interrupted {
            break;
        }
    }
    ran
}

impl Ran {
    /// Records how one run ended, says so on `progress`, and keeps its folder for the
    /// comparison if it holds raw data (a run that failed midway may still have some).
    fn record(
        &mut self,
        tag: &str,
        name: &str,
        dir: &Path,
        result: anyhow::Result<RunOutcome>,
        progress: &mut (dyn Write + Send),
    ) {
        let has_raw_data = dir.join(crate::model::rawdata::MANIFEST).exists();
        match result {
            Ok(outcome) => {
                let _ = writeln!(
                    progress,
                    "{tag}: {}{}",
                    if outcome.ok {
                        "done"
                    } else {
                        "finished with problems"
                    },
                    if outcome.summary.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", outcome.summary)
                    }
                );
                if outcome.exit_code == crate::model::exit::Exit::FAILED {
                    self.over_failure_limit.push(dir_name(dir));
                }
                if has_raw_data {
                    self.finished.push((name.to_string(), dir.to_path_buf()));
                } else {
                    self.failed.push(failed_run(
                        dir,
                        format!("the run wrote no manifest.json: {}", outcome.summary),
                    ));
                }
                self.interrupted = outcome.interrupted;
            }
            Err(err) => {
                let _ = writeln!(progress, "{tag}: FAILED: {err:#}");
                if has_raw_data {
                    self.finished.push((name.to_string(), dir.to_path_buf()));
                }
                self.failed.push(failed_run(dir, format!("{err:#}")));
            }
        }
    }
}
/// A run without a report, and why.
fn failed_run(dir: &Path, error: String) -> FailedRun {
    FailedRun {
        name: dir_name(dir),
        dir: dir.display().to_string(),
        error,
    }
}

/// Builds and writes each finished run's report; a run whose report fails joins `failed`.
fn report_finished(
    finished: &[(String, PathBuf)],
    failed: &mut Vec<FailedRun>,
) -> Vec<(String, RunReport)> {
    let mut reports = Vec::new();
    for (name, dir) in finished {
        match crate::report::build_and_write(dir) {
            Ok(report) => reports.push((name.clone(), report)),
            Err(err) => failed.push(failed_run(dir, format!("report: {err:#}"))),
        }
    }
    reports
}

/// The comparison of the reports, grouped by scenario name, in the suite's order.
fn compare_in_suite_order(
    plan: &SuitePlan,
    mut reports: Vec<(String, RunReport)>,
    failed: Vec<FailedRun>,
) -> Comparison {
    let order: Vec<&String> = plan.scenarios.iter().map(|s| &s.name).collect();
    reports.sort_by_key(|(name, _)| order.iter().position(|n| *n == name));
    let keys: Vec<(String, String)> = reports
        .iter()
        .map(|(n, r)| (r.name.clone(), n.clone()))
        .collect();
    Comparison::grouped(
        reports.into_iter().map(|(_, r)| r).collect(),
        |r| {
            keys.iter()
                .find(|(run, _)| *run == r.name)
                .map(|(_, n)| n.clone())
                .unwrap_or_default()
        },
        failed,
    )
    .with_swarm_points(|name| {
        plan.scenarios
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.swarm.clone())
    })
}
