//! `viewerfleet suite`: runs several scenarios in sequence (each `--repeat K` times, round
//! robin so slow drifts of the host spread over all scenarios), keeps going after a failed
//! run, stops starting runs on Ctrl-C/SIGTERM (the engine ends the current one and says
//! `interrupted`), then compares what finished: mean and 95% CI per scenario with repeats.
//! With `--swarm-sizes` (`sizes`), every scenario runs once per swarm size and the
//! comparison draws P2P offload against swarm size.

mod sizes;

pub use sizes::{SweepError, SweepSizes};

use crate::model::kinds::Throttling;
use crate::model::scenario::{Overrides, Plan};
use crate::report::compare::{dir_name, Comparison, FailedRun};
use crate::report::swarm_curve::SwarmPoint;
use crate::report::RunReport;
use crate::sys::shutdown::Shutdown;
use crate::{RunOutcome, RunSource};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Runs one validated plan into a folder: the engine, or a stand-in in tests.
#[async_trait::async_trait]
pub trait ScenarioRunner: Send + Sync {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome>;
}

/// The real run engine, sharing the suite's stop signal so Ctrl-C ends the current run and
/// the suite alike.
pub struct EngineRunner {
    pub shutdown: Shutdown,
    pub progress: bool,
    /// Cloud fleets: asked before servers are bought (`None`: go ahead).
    pub confirm_paid: Option<crate::cloud::up::Confirm>,
}

#[async_trait::async_trait]
impl ScenarioRunner for EngineRunner {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        crate::run_scenario(
            run.plan.clone(),
            &RunSource::scenario(&run.path, &run.overrides),
            &run.dir,
            self.shutdown.clone(),
            crate::RunOptions {
                progress: self.progress,
                confirm_paid: self.confirm_paid.clone(),
                ..crate::RunOptions::default()
            },
        )
        .await
    }
}

/// One scenario of a suite (one of its throttling modes), validated.
#[derive(Debug, Clone)]
pub struct SuiteScenario {
    /// The file stem, with `@<mode>` when the suite runs each scenario once per mode.
    pub name: String,
    pub path: PathBuf,
    pub overrides: Overrides,
    /// The plan every run of this scenario runs.
    pub plan: Plan,
    /// How many times the suite runs it (`--repeat`, or `--repeat-run` for this one).
    pub repeat: u32,
    /// `--swarm-sizes`: the swarm it runs (its viewers + light peers) and the curve it is a
    /// point of (`<scenario>@<mode>`).
    pub swarm: Option<SwarmPoint>,
}

/// One run of a suite: a scenario's plan and the folder it goes to.
#[derive(Debug, Clone)]
pub struct SuiteRun {
    pub name: String,
    pub path: PathBuf,
    pub overrides: Overrides,
    pub plan: Plan,
    pub dir: PathBuf,
}

/// A suite, checked before anything runs.
#[derive(Debug, Clone)]
pub struct SuitePlan {
    /// In run order.
    pub scenarios: Vec<SuiteScenario>,
    pub out: PathBuf,
    /// `--swarm-size-file`: where the swarm sizes are kept between suites.
    pub size_file: Option<PathBuf>,
    /// What that file held when the suite was planned.
    pub kept_sizes: SwarmSizes,
}

/// The swarm sizes a suite's governed ramps keep, per run name (`live-normal@tc`), from one
/// repeat to the next and, with `--swarm-size-file` (which `make demo` uses), from one suite
/// to the next: what each run's first ramp found to fit this host (`size_to_keep`), where
/// and when. Repeats then compare swarms of one size.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SwarmSizes {
    pub runs: std::collections::BTreeMap<String, SwarmSize>,
}

/// One run's kept size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SwarmSize {
    pub viewers: u32,
    /// Viewers per browser the size was measured with: a size is kept only for runs packed
    /// the same way (a file without it is measured again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_browser: Option<u32>,
    /// The run folder whose governed ramp measured it.
    pub settled_in: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SwarmSizeError {
    #[error("{path}: {problem}; it holds the swarm sizes earlier suites settled on, as {{\"runs\": {{\"live-normal@tc\": {{\"viewers\": 12, ...}}}}}}: fix it or remove it so the next suite measures them again")]
    Unreadable { path: PathBuf, problem: String },
}

impl SwarmSizes {
    /// The sizes in `path`, `None` when there is no such file yet.
    pub fn read(path: &Path) -> Result<Option<Self>, SwarmSizeError> {
        let unreadable = |problem: String| SwarmSizeError::Unreadable {
            path: path.to_path_buf(),
            problem,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(unreadable(err.to_string())),
        };
        let sizes: Self = serde_json::from_str(&text).map_err(|err| unreadable(err.to_string()))?;
        if let Some((name, _)) = sizes.runs.iter().find(|(_, s)| s.viewers == 0) {
            return Err(unreadable(format!("`{name}` has 0 viewers")));
        }
        Ok(Some(sizes))
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}

/// What a suite did.
#[derive(Debug)]
pub struct SuiteResult {
    pub comparison: Comparison,
    pub interrupted: bool,
    pub runs_started: usize,
    pub html: PathBuf,
    /// Run folders whose run ended with more failed viewers than `max_failed_viewers`
    /// allows (compared with the others, and the reason the suite exits 1).
    pub over_failure_limit: Vec<String>,
}

impl SuiteResult {
    /// Names of the compared runs at least one of whose thresholds failed.
    pub fn thresholds_failed(&self) -> Vec<String> {
        self.comparison
            .groups
            .iter()
            .flat_map(|g| &g.runs)
            .filter(|r| r.summary.thresholds_failed())
            .map(|r| r.name.clone())
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("--repeat must be at least 1")]
    Repeat,
    #[error("two scenarios are named `{0}` (run folders are named after the file stem): rename one of the files")]
    DuplicateName(String),
    #[error("{0}: already holds files; give `suite --out` a new or empty folder so no earlier run is mixed in")]
    OutNotEmpty(PathBuf),
    #[error("--repeat-run {name}=…: no run of this suite is named `{name}`; its runs are {known} (or give a file stem for all its modes and sizes)")]
    UnknownRun { name: String, known: String },
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

/// `--repeat-run NAME=K`: run NAME K times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRepeat {
    pub name: String,
    pub times: u32,
}

impl std::str::FromStr for RunRepeat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || {
            format!(
                "`{text}`: give NAME=K, a run's name (or a scenario file's stem) and how many times to run it, e.g. live-normal@http-only=3"
            )
        };
        let (name, times) = text.split_once('=').ok_or_else(usage)?;
        let times: u32 = times.trim().parse().map_err(|_| usage())?;
        let name = name.trim();
        if name.is_empty() || times == 0 {
            return Err(usage());
        }
        Ok(Self {
            name: name.to_string(),
            times,
        })
    }
}

impl SuitePlan {
    /// Checks every scenario (parses and validates it with the overrides) and the output
    /// folders before the first run starts.
    /// `modes`: run each scenario once per throttling mode (empty: as written).
    pub fn new(
        scenarios: &[PathBuf],
        modes: &[Throttling],
        repeat: u32,
        out: &Path,
        overrides: Overrides,
    ) -> anyhow::Result<Self> {
        Self::sweep(scenarios, modes, None, repeat, out, overrides)
    }

    /// [`SuitePlan::new`], and with `sizes` (`--swarm-sizes`) every scenario and mode once
    /// per swarm size: its viewers (a number, not `auto`) and size − viewers light peers, the
    /// run named `<scenario>[@<mode>]@<size>`.
    pub fn sweep(
        scenarios: &[PathBuf],
        modes: &[Throttling],
        sizes: Option<&SweepSizes>,
        repeat: u32,
        out: &Path,
        overrides: Overrides,
    ) -> anyhow::Result<Self> {
        if repeat == 0 {
            return Err(SuiteError::Repeat.into());
        }
        let variants: Vec<Option<Throttling>> = if modes.is_empty() {
            vec![None]
        } else {
            modes.iter().copied().map(Some).collect()
        };
        let mut named: Vec<SuiteScenario> = Vec::new();
        // Each file (and mode) once: the names of its runs, and of its sizes' curve.
        let mut series: Vec<String> = Vec::new();
        for path in scenarios {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into());
            for mode in &variants {
                let overrides = Overrides {
                    apply: mode.or(overrides.apply),
                    ..overrides.clone()
                };
                let plan = crate::model::scenario::load(path, &overrides)?;
                let name = match mode {
                    Some(mode) => format!("{stem}@{mode}"),
                    None => stem.clone(),
                };
                if series.contains(&name) {
                    return Err(SuiteError::DuplicateName(name).into());
                }
                series.push(name.clone());
                let Some(sizes) = sizes else {
                    named.push(SuiteScenario {
                        name,
                        path: path.clone(),
                        overrides,
                        plan,
                        repeat,
                        swarm: None,
                    });
                    continue;
                };
                for sized in sizes::expand(&name, path, &overrides, &plan, sizes)? {
                    named.push(SuiteScenario {
                        name: sized.name,
                        path: path.clone(),
                        overrides: sized.overrides,
                        plan: sized.plan,
                        repeat,
                        swarm: Some(sized.swarm),
                    });
                }
            }
        }
        let plan = Self {
            scenarios: named,
            out: out.to_path_buf(),
            size_file: None,
            kept_sizes: SwarmSizes::default(),
        };
        plan.check_out_dirs()?;
        Ok(plan)
    }

    /// Runs some scenarios more often than `--repeat` (`--repeat-run NAME=K`): a figure
    /// that moves from run to run more than the others gets the mean of K runs without
    /// repeating the steady ones. NAME is a run's name (`live-normal@http-only@16`) or the
    /// start of one up to an `@`: a file stem (every mode and size of that file), a
    /// `<scenario>@<mode>` (every swarm size of it).
    pub fn with_run_repeats(mut self, repeats: &[RunRepeat]) -> Result<Self, SuiteError> {
        for RunRepeat { name, times } in repeats {
            if *times == 0 {
                return Err(SuiteError::Repeat);
            }
            let mut matched = false;
            for s in &mut self.scenarios {
                let within = s
                    .name
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('@'));
                if within {
                    s.repeat = *times;
                    matched = true;
                }
            }
            if !matched {
                let known: Vec<&str> = self.scenarios.iter().map(|s| s.name.as_str()).collect();
                return Err(SuiteError::UnknownRun {
                    name: name.clone(),
                    known: known.join(", "),
                });
            }
        }
        self.check_out_dirs()?;
        Ok(self)
    }

    /// No run folder may hold an earlier run's files.
    fn check_out_dirs(&self) -> Result<(), SuiteError> {
        for run in self.runs() {
            if run.dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
                return Err(SuiteError::OutNotEmpty(run.dir));
            }
        }
        Ok(())
    }

    /// Keeps the swarm sizes in `path` between suites: read now (a broken file is an error
    /// before anything runs); a run without a size there adds the one its ramp measured.
    pub fn with_size_file(mut self, path: &Path) -> Result<Self, SwarmSizeError> {
        self.kept_sizes = SwarmSizes::read(path)?.unwrap_or_default();
        self.size_file = Some(path.to_path_buf());
        Ok(self)
    }

    /// The runs one line each, in run order (`suite --dry-run`): name, folder, swarm.
    pub fn describe(&self) -> String {
        let runs = self.runs();
        let mut out = format!(
            "{} run{} into {}:\n",
            runs.len(),
            if runs.len() == 1 { "" } else { "s" },
            self.out.display()
        );
        for (i, run) in runs.iter().enumerate() {
            out.push_str(&format!(
                "{:>3}. {} → {}: {}\n",
                i + 1,
                run.name,
                run.dir.display(),
                swarm_phrase(&run.plan)
            ));
        }
        out
    }

    /// The runs in run order: round robin over repeats (a scenario with fewer repeats
    /// drops out of the later rounds).
    pub fn runs(&self) -> Vec<SuiteRun> {
        let mut runs = Vec::new();
        let rounds = self.scenarios.iter().map(|s| s.repeat).max().unwrap_or(0);
        for k in 1..=rounds {
            for s in self.scenarios.iter().filter(|s| k <= s.repeat) {
                runs.push(SuiteRun {
                    name: s.name.clone(),
                    path: s.path.clone(),
                    overrides: s.overrides.clone(),
                    plan: s.plan.clone(),
                    dir: self.out.join(format!("{}-{k}", s.name)),
                });
            }
        }
        runs
    }
}

/// A plan's swarm in words: `4 viewers + 12 light peers (25 per page): a swarm of 16`.
fn swarm_phrase(plan: &Plan) -> String {
    let viewers = match plan.auto {
        Some(_) => format!("auto, at most {} viewers", plan.viewers),
        None => format!("{} viewers", plan.viewers),
    };
    match &plan.light {
        Some(l) if plan.auto.is_none() => format!(
            "{viewers} + {} ({} per page): a swarm of {}",
            crate::report::light::peers_phrase(l.peers),
            l.per_page,
            plan.viewers + l.peers
        ),
        Some(l) => format!(
            "{viewers} + {} ({} per page)",
            crate::report::light::peers_phrase(l.peers),
            l.per_page
        ),
        None => viewers,
    }
}

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

/// Writes the kept sizes into the size file.
fn keep_sizes(
    kept: &SwarmSizes,
    path: &Path,
    name: &str,
    viewers: u32,
    progress: &mut (dyn Write + Send),
) {
    let said = match kept.write(path) {
        Ok(()) => format!(
            "swarm size: {viewers} viewers for {name} kept in {} for the next suites (remove it to measure again)",
            path.display()
        ),
        Err(err) => format!("swarm size: could not write {}: {err}", path.display()),
    };
    let _ = writeln!(progress, "{said}");
}

/// A run with a governed ramp, bounded by the size the suite's first governed ramp
/// measured (its `--max-viewers`, so the manifest's re-run command repeats the bound).
fn bounded_by(run: &SuiteRun, first_fit: Option<u32>) -> SuiteRun {
    let mut run = run.clone();
    if let (Some(n), Some(_)) = (first_fit, run.plan.auto) {
        if n < run.plan.viewers {
            run.plan.viewers = n;
            run.overrides.viewers = run.overrides.viewers.at_most(n);
            run.plan.yaml.push_str(&format!(
                "# Bounded by the suite: at most {n} viewers, where its first governed ramp settled\n"
            ));
        }
    }
    run
}

/// The swarm size a governed ramp's run leaves for its repeats: the size it ran at when its
/// report found every viewer with headroom in the steady window (the limit is the ramp's
/// proxy, the report's verdict the judgement), else the most viewers the ramp measured below
/// its limit. A last step that took the host just past the limit yet left every viewer
/// room is kept: going one step back would compare a smaller swarm with this one.
fn size_to_keep(outcome: &RunOutcome) -> Option<u32> {
    let had_headroom = outcome
        .report
        .as_ref()
        .and_then(|r| r.headroom.as_ref())
        .is_some_and(|h| {
            h.verdict == crate::report::HeadroomVerdict::Finding
                && h.viewers.starved == 0
                && h.host.as_ref().is_some_and(|m| !m.saturated)
        });
    match (outcome.settled_viewers, outcome.fitting_viewers) {
        (Some(ran), Some(_)) if had_headroom => Some(ran),
        (_, fits) => fits,
    }
}

/// A run with a governed ramp going to a size an earlier ramp of the same run measured:
/// only a host clearly past its limit stops it short.
fn sized(run: &SuiteRun, viewers: u32) -> SuiteRun {
    let mut run = run.clone();
    if let Some(auto) = run.plan.auto.as_mut() {
        auto.known_to_fit = true;
        let n = viewers.min(run.plan.viewers);
        run.plan.viewers = n;
        run.overrides.viewers = run.overrides.viewers.at_most(n);
        run.plan.yaml.push_str(&format!(
            "# Sized by the suite: {n} viewers, as an earlier governed ramp of this run measured\n"
        ));
    }
    run
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scenario::ViewersOverride;
    use std::sync::Mutex;

    const SCENARIO: &str = "\
target:
  kind: refsite
  video: live
viewers:
  count: 2
duration: 3m
fleet:
  kind: local
";

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(name)
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }

    /// What the stand-in does for each call, in order.
    #[derive(Clone, Copy)]
    enum Step {
        Finish,
        Fail,
        Interrupt,
    }

    /// A runner that needs no browser: it copies a crafted run folder or fails.
    struct StandIn {
        steps: Mutex<Vec<Step>>,
        calls: Mutex<Vec<PathBuf>>,
    }

    #[async_trait::async_trait]
    impl ScenarioRunner for StandIn {
        async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
            let out = &run.dir;
            self.calls.lock().unwrap().push(out.to_path_buf());
            let step = self.steps.lock().unwrap().remove(0);
            match step {
                Step::Fail => anyhow::bail!("target never answered"),
                Step::Finish | Step::Interrupt => {
                    let interrupted = matches!(step, Step::Interrupt);
                    copy_dir(
                        &fixture(if interrupted {
                            "run-killed"
                        } else {
                            "run-steady"
                        }),
                        out,
                    );
                    Ok(RunOutcome {
                        run_dir: out.to_path_buf(),
                        ok: !interrupted,
                        interrupted,
                        exit_code: if interrupted { 130 } else { 0 },
                        report: None,
                        summary: String::new(),
                        settled_viewers: None,
                        fitting_viewers: None,
                    })
                }
            }
        }
    }

    fn scenarios(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
        names
            .iter()
            .map(|n| {
                let p = dir.join(format!("{n}.yaml"));
                std::fs::write(&p, format!("name: {n}\n{SCENARIO}")).unwrap();
                p
            })
            .collect()
    }

    async fn run(
        steps: Vec<Step>,
        names: &[&str],
        repeat: u32,
    ) -> (SuiteResult, Vec<PathBuf>, String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), names);
        let plan = SuitePlan::new(
            &files,
            &[],
            repeat,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap();
        let runner = StandIn {
            steps: Mutex::new(steps),
            calls: Mutex::new(Vec::new()),
        };
        let mut log = Vec::new();
        let result = run_suite(&plan, &runner, &Shutdown::new(), &mut log)
            .await
            .unwrap();
        let calls = runner.calls.into_inner().unwrap();
        (result, calls, String::from_utf8(log).unwrap(), dir)
    }

    /// A runner whose governed ramps settle where it is told; it records the bound each
    /// run was given.
    struct Settling {
        settles: Mutex<Vec<u32>>,
        seen: Mutex<Vec<(u32, Option<u32>, bool)>>,
    }

    impl Settling {
        /// A runner whose runs' ramps settle on `settles`, in run order.
        fn new(settles: Vec<u32>) -> Self {
            Self {
                settles: Mutex::new(settles),
                seen: Mutex::new(Vec::new()),
            }
        }
    }

    #[async_trait::async_trait]
    impl ScenarioRunner for Settling {
        async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
            self.seen.lock().unwrap().push((
                run.plan.viewers,
                run.overrides.viewers.max(),
                run.plan.auto.is_some_and(|a| a.known_to_fit),
            ));
            copy_dir(&fixture("run-steady"), &run.dir);
            let settled = self.settles.lock().unwrap().remove(0);
            Ok(RunOutcome {
                run_dir: run.dir.clone(),
                ok: true,
                interrupted: false,
                exit_code: 0,
                report: None,
                summary: String::new(),
                settled_viewers: Some(settled.min(run.plan.viewers)),
                fitting_viewers: Some(settled.min(run.plan.viewers)),
            })
        }
    }

    #[tokio::test]
    async fn governed_ramps_are_bounded_by_where_the_first_settled() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a", "b", "c"]);
        let auto = Overrides {
            viewers: ViewersOverride::Auto { max: Some(32) },
            ..Overrides::default()
        };
        let plan = SuitePlan::new(&files, &[], 1, &dir.path().join("out"), auto).unwrap();
        let runner = Settling::new(vec![12, 8, 16]);
        run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
            .await
            .unwrap();
        // The first may go to 32 and settles on 12; the others never above 12, even when
        // one of them settled lower.
        assert_eq!(
            runner.seen.into_inner().unwrap(),
            [
                (32, Some(32), false),
                (12, Some(12), false),
                (12, Some(12), false)
            ]
        );
    }

    #[tokio::test]
    async fn each_runs_size_is_kept_for_its_repeats_and_in_the_size_file_for_the_next_suite() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a", "b"]);
        let size_file = dir.path().join("state/swarm-size.json");
        let auto = Overrides {
            viewers: ViewersOverride::Auto { max: Some(32) },
            ..Overrides::default()
        };
        let suite_with = |out: &str, repeat: u32, settles: Vec<u32>, overrides: Overrides| {
            let plan = SuitePlan::new(&files, &[], repeat, &dir.path().join(out), overrides)
                .unwrap()
                .with_size_file(&size_file)
                .unwrap();
            (plan, Settling::new(settles))
        };
        let suite = |out: &str, repeat: u32, settles: Vec<u32>| {
            suite_with(out, repeat, settles, auto.clone())
        };
        // No file yet: `a` measures (up to 32) and settles on 12; `b` measures too, bounded
        // by 12, and settles on 8; their second repeats go to those sizes.
        let (plan, first) = suite("one", 2, vec![12, 8, 12, 8]);
        let mut log = Vec::new();
        run_suite(&plan, &first, &Shutdown::new(), &mut log)
            .await
            .unwrap();
        assert_eq!(
            first.seen.into_inner().unwrap(),
            [
                (32, Some(32), false),
                (12, Some(12), false),
                (12, Some(12), true),
                (8, Some(8), true)
            ]
        );
        let kept = SwarmSizes::read(&size_file).unwrap().unwrap();
        let sizes: Vec<(&str, u32)> = kept
            .runs
            .iter()
            .map(|(name, s)| (name.as_str(), s.viewers))
            .collect();
        assert_eq!(sizes, [("a", 12), ("b", 8)]);
        assert!(kept.runs["a"].settled_in.ends_with("a-1"), "{kept:?}");
        let log = String::from_utf8(log).unwrap();
        assert!(log.contains("12 viewers for a kept in"), "{log}");
        // The next suite goes to each run's size from its first run on, and leaves the
        // file as it was.
        let (plan, second) = suite("two", 1, vec![12, 8]);
        assert_eq!(plan.kept_sizes, kept);
        run_suite(&plan, &second, &Shutdown::new(), &mut Vec::new())
            .await
            .unwrap();
        assert_eq!(
            second.seen.into_inner().unwrap(),
            [(12, Some(12), true), (8, Some(8), true)]
        );
        assert_eq!(SwarmSizes::read(&size_file).unwrap(), Some(kept));
        // Packed differently, a run costs differently: its kept size does not apply.
        let packed = Overrides {
            per_browser: Some(2),
            ..auto.clone()
        };
        let (packed, third) = suite_with("three", 1, vec![10, 6], packed);
        run_suite(&packed, &third, &Shutdown::new(), &mut Vec::new())
            .await
            .unwrap();
        assert_eq!(
            third.seen.into_inner().unwrap(),
            [(32, Some(32), false), (10, Some(10), false)]
        );
        let resized = SwarmSizes::read(&size_file).unwrap().unwrap();
        assert_eq!(
            (resized.runs["a"].viewers, resized.runs["a"].per_browser),
            (10, Some(2))
        );
    }

    /// A runner whose ramp released 8 viewers, the last step past its limit (so 4 fit
    /// below it), with the report of the `run-steady` fixture: its host hot for 20 s of the
    /// steady window, or, `cool`, never.
    struct Crossed {
        cool: bool,
    }

    #[async_trait::async_trait]
    impl ScenarioRunner for Crossed {
        async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
            copy_dir(&fixture("run-steady"), &run.dir);
            if self.cool {
                let samples = run.dir.join("raw/host_samples.jsonl");
                let text = std::fs::read_to_string(&samples)?;
                std::fs::write(
                    &samples,
                    text.replace("\"cpu_busy\": 0.95", "\"cpu_busy\": 0.5"),
                )?;
            }
            let report = crate::report::build(&run.dir)?.summary;
            Ok(RunOutcome {
                run_dir: run.dir.clone(),
                ok: true,
                interrupted: false,
                exit_code: 0,
                report: Some(report),
                summary: String::new(),
                settled_viewers: Some(8),
                fitting_viewers: Some(4),
            })
        }
    }

    #[tokio::test]
    async fn a_ramp_past_its_limit_keeps_its_size_only_when_every_viewer_had_headroom() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a"]);
        let auto = Overrides {
            viewers: ViewersOverride::Auto { max: Some(32) },
            ..Overrides::default()
        };
        let kept = |cool: bool, out: &str| {
            let size_file = dir.path().join(format!("{out}.json"));
            let plan = SuitePlan::new(&files, &[], 1, &dir.path().join(out), auto.clone())
                .unwrap()
                .with_size_file(&size_file)
                .unwrap();
            async move {
                run_suite(&plan, &Crossed { cool }, &Shutdown::new(), &mut Vec::new())
                    .await
                    .unwrap();
                SwarmSizes::read(&size_file).unwrap().unwrap().runs["a"].viewers
            }
        };
        // The report found every viewer with headroom: the 8 it ran are kept.
        assert_eq!(kept(true, "cool").await, 8);
        // The host was saturated: one step fewer, the most measured below the limit.
        assert_eq!(kept(false, "hot").await, 4);
    }

    #[test]
    fn a_broken_swarm_size_file_is_an_error_that_says_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swarm-size.json");
        std::fs::write(&path, "sixteen").unwrap();
        let err = SwarmSizes::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("swarm-size.json") && err.contains("remove it"),
            "{err}"
        );
        std::fs::write(
            &path,
            r#"{"runs":{"vod@tc":{"viewers":0,"settled_in":"x","at":"y"}}}"#,
        )
        .unwrap();
        let err = SwarmSizes::read(&path).unwrap_err().to_string();
        assert!(err.contains("`vod@tc` has 0 viewers"), "{err}");
    }

    #[tokio::test]
    async fn keeps_going_after_a_failed_run_and_reports_it() {
        let (result, calls, log, _dir) = run(vec![Step::Fail, Step::Finish], &["a", "b"], 1).await;
        assert_eq!(calls.len(), 2);
        assert!(log.contains("a: FAILED: target never answered"), "{log}");
        let cmp = &result.comparison;
        assert_eq!(cmp.groups.len(), 1);
        assert_eq!(cmp.groups[0].name, "b");
        assert_eq!(cmp.failed.len(), 1);
        assert_eq!(cmp.failed[0].name, "a-1");
        assert!(result.html.exists());
        let md = std::fs::read_to_string(result.html.with_file_name("compare.md")).unwrap();
        assert!(
            md.contains("a-1") && md.contains("target never answered"),
            "{md}"
        );
    }

    #[tokio::test]
    async fn repeats_run_round_robin_and_get_confidence_intervals() {
        let (result, calls, _, _dir) = run(vec![Step::Finish; 4], &["a", "b"], 2).await;
        let names: Vec<String> = calls.iter().map(|p| dir_name(p)).collect();
        assert_eq!(names, ["a-1", "b-1", "a-2", "b-2"]);
        let cmp = &result.comparison;
        assert_eq!(
            cmp.groups.iter().map(|g| g.runs.len()).collect::<Vec<_>>(),
            [2, 2]
        );
        let share = cmp.groups[0].stats.http_share.unwrap();
        // Identical runs: mean 1/3, zero-width interval.
        assert!((share.mean - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(share.ci95, Some(0.0));
        assert!(cmp.text().contains("95% confidence interval"));
    }

    #[tokio::test]
    async fn one_run_repeated_more_than_the_others_runs_its_extra_rounds_alone() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a", "b"]);
        let both_modes = |out: &str, repeat: &str| {
            SuitePlan::new(
                &files,
                &[Throttling::HttpOnly, Throttling::CdpAll],
                1,
                &dir.path().join(out),
                Overrides::default(),
            )
            .unwrap()
            .with_run_repeats(&[repeat.parse().unwrap()])
            .unwrap()
        };
        let plan = both_modes("out", "a@http-only=3");
        let names: Vec<String> = plan.runs().iter().map(|r| dir_name(&r.dir)).collect();
        assert_eq!(
            names,
            [
                "a@http-only-1",
                "a@cdp-all-1",
                "b@http-only-1",
                "b@cdp-all-1",
                "a@http-only-2",
                "a@http-only-3"
            ]
        );
        let runner = StandIn {
            steps: Mutex::new(vec![Step::Finish; 6]),
            calls: Mutex::new(Vec::new()),
        };
        let result = run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
            .await
            .unwrap();
        let sizes: Vec<(String, usize)> = result
            .comparison
            .groups
            .iter()
            .map(|g| (g.name.clone(), g.runs.len()))
            .collect();
        assert_eq!(
            sizes,
            [
                ("a@http-only".to_string(), 3),
                ("a@cdp-all".to_string(), 1),
                ("b@http-only".to_string(), 1),
                ("b@cdp-all".to_string(), 1)
            ]
        );
        // A file stem names every mode of that file.
        let by_stem = both_modes("out2", "b=2");
        assert_eq!(by_stem.runs().len(), 6);
        assert!(by_stem
            .scenarios
            .iter()
            .all(|s| s.repeat == if s.name.starts_with('b') { 2 } else { 1 }));
    }

    #[test]
    fn a_repeat_for_no_run_of_the_suite_names_the_runs_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a"]);
        let plan = || {
            SuitePlan::new(
                &files,
                &[Throttling::HttpOnly],
                1,
                &dir.path().join("out"),
                Overrides::default(),
            )
            .unwrap()
        };
        let err = plan()
            .with_run_repeats(&["a@tc=2".parse().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`a@tc`") && err.contains("a@http-only"),
            "{err}"
        );
        for bad in ["a", "a=0", "a=two", "=3"] {
            let err = bad.parse::<RunRepeat>().unwrap_err();
            assert!(err.contains("NAME=K"), "{bad}: {err}");
        }
        // The repeats' folders are checked too.
        std::fs::create_dir_all(dir.path().join("out/a@http-only-2")).unwrap();
        std::fs::write(dir.path().join("out/a@http-only-2/x"), "").unwrap();
        let err = plan()
            .with_run_repeats(&["a=2".parse().unwrap()])
            .unwrap_err();
        assert!(err.to_string().contains("new or empty folder"), "{err}");
    }

    #[tokio::test]
    async fn interrupted_run_stops_the_suite_and_what_finished_is_compared() {
        let (result, calls, log, _dir) = run(
            vec![Step::Finish, Step::Interrupt, Step::Finish],
            &["a", "b", "c"],
            1,
        )
        .await;
        assert_eq!(calls.len(), 2, "no run may start after the interrupted one");
        assert!(result.interrupted);
        assert!(log.contains("interrupted"));
        let cmp = &result.comparison;
        assert_eq!(cmp.groups.len(), 2);
        assert!(cmp.groups[1].runs[0].summary.partial);
        assert!(cmp.text().contains("PARTIAL"));
    }

    #[tokio::test]
    async fn stop_flag_prevents_the_next_run() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a"]);
        let plan = SuitePlan::new(
            &files,
            &[],
            1,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap();
        let runner = StandIn {
            steps: Mutex::new(vec![Step::Finish]),
            calls: Mutex::new(Vec::new()),
        };
        let stop = Shutdown::new();
        stop.trigger();
        let result = run_suite(&plan, &runner, &stop, &mut Vec::new())
            .await
            .unwrap();
        assert!(result.interrupted);
        assert_eq!(result.runs_started, 0);
    }

    #[test]
    fn plan_is_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a"]);
        let err = SuitePlan::new(&files, &[], 0, dir.path(), Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("--repeat"));
        let twice = vec![files[0].clone(), files[0].clone()];
        let err = SuitePlan::new(&twice, &[], 1, dir.path(), Overrides::default()).unwrap_err();
        assert!(err.to_string().contains("named `a`"), "{err}");
        std::fs::create_dir_all(dir.path().join("out/a-1")).unwrap();
        std::fs::write(dir.path().join("out/a-1/x"), "").unwrap();
        let err = SuitePlan::new(
            &files,
            &[],
            1,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("new or empty folder"), "{err}");
        let missing = vec![dir.path().join("nope.yaml")];
        assert!(SuitePlan::new(&missing, &[], 1, dir.path(), Overrides::default()).is_err());
    }

    /// A sweep of the `scenarios` named `names` (2 viewers each) over `sizes`.
    fn sweep(
        dir: &Path,
        names: &[&str],
        modes: &[Throttling],
        sizes: &str,
        overrides: Overrides,
    ) -> anyhow::Result<SuitePlan> {
        let files = scenarios(dir, names);
        let sizes: SweepSizes = sizes.parse().unwrap();
        SuitePlan::sweep(&files, modes, Some(&sizes), 1, &dir.join("out"), overrides)
    }

    #[test]
    fn a_swarm_size_sweep_runs_each_scenario_and_mode_once_per_size() {
        let dir = tempfile::tempdir().unwrap();
        let modes = [Throttling::HttpOnly, Throttling::CdpAll];
        let plan = sweep(
            dir.path(),
            &["a", "b"],
            &modes,
            "16,2,4,16",
            Overrides::default(),
        )
        .unwrap();
        let runs = plan.runs();
        let names: Vec<String> = runs.iter().map(|r| dir_name(&r.dir)).collect();
        assert_eq!(
            names,
            [
                "a@http-only@2-1",
                "a@http-only@4-1",
                "a@http-only@16-1",
                "a@cdp-all@2-1",
                "a@cdp-all@4-1",
                "a@cdp-all@16-1",
                "b@http-only@2-1",
                "b@http-only@4-1",
                "b@http-only@16-1",
                "b@cdp-all@2-1",
                "b@cdp-all@4-1",
                "b@cdp-all@16-1"
            ]
        );
        // The file's 2 viewers in every run, the rest of the swarm light peers; the mode
        // as named.
        let swarms: Vec<(u32, Option<u32>, Option<u32>)> = runs[..3]
            .iter()
            .map(|r| {
                (
                    r.plan.viewers,
                    r.overrides.light_peers,
                    r.plan.light.as_ref().map(|l| l.peers),
                )
            })
            .collect();
        assert_eq!(
            swarms,
            [
                (2, Some(0), None),
                (2, Some(2), Some(2)),
                (2, Some(14), Some(14))
            ]
        );
        assert!(runs.iter().all(|r| {
            let mode = r.overrides.apply.unwrap().to_string();
            r.name.split('@').nth(1) == Some(mode.as_str())
        }));
        assert!(runs[2]
            .plan
            .yaml
            .contains("# Overridden on the command line: swarm.light_peers = 14"));
        // Each run is a point of its scenario@mode's curve.
        assert_eq!(
            plan.scenarios[2].swarm,
            Some(SwarmPoint {
                series: "a@http-only".into(),
                size: 16,
                viewers: 2,
                light_peers: 14
            })
        );
        let listed = plan.describe();
        assert!(listed.starts_with("12 runs into "), "{listed}");
        assert!(
            listed.contains(&format!(
                "  3. a@http-only@16 → {}: 2 viewers + 14 light peers (25 per page): a swarm of 16\n",
                dir.path().join("out/a@http-only@16-1").display()
            )),
            "{listed}"
        );
        assert!(listed.contains("  1. a@http-only@2 → "), "{listed}");
        assert!(
            listed.lines().nth(1).unwrap().ends_with(": 2 viewers"),
            "{listed}"
        );
        // `--repeat-run` names a scenario@mode for all its sizes, or one size.
        let repeated = plan
            .clone()
            .with_run_repeats(&["a@cdp-all=2".parse().unwrap()])
            .unwrap();
        let times: Vec<(&str, u32)> = repeated
            .scenarios
            .iter()
            .filter(|s| s.repeat > 1)
            .map(|s| (s.name.as_str(), s.repeat))
            .collect();
        assert_eq!(
            times,
            [("a@cdp-all@2", 2), ("a@cdp-all@4", 2), ("a@cdp-all@16", 2)]
        );
        let one = plan
            .with_run_repeats(&["b@http-only@4=3".parse().unwrap()])
            .unwrap();
        assert_eq!(one.runs().len(), 12 + 2);
        let err = one
            .with_run_repeats(&["a@http-only@8=2".parse().unwrap()])
            .unwrap_err();
        assert!(err.to_string().contains("`a@http-only@8`"), "{err}");
    }

    #[test]
    fn a_sweep_without_modes_names_runs_by_scenario_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let plan = sweep(dir.path(), &["a"], &[], "4,2", Overrides::default()).unwrap();
        let names: Vec<String> = plan.runs().iter().map(|r| dir_name(&r.dir)).collect();
        assert_eq!(names, ["a@2-1", "a@4-1"]);
        assert_eq!(
            plan.scenarios[1].swarm.as_ref().map(|s| s.series.as_str()),
            Some("a")
        );
        // `--viewers` sets the viewers the swarm keeps.
        let one = Overrides {
            viewers: ViewersOverride::Fixed(1),
            ..Overrides::default()
        };
        let plan = sweep(dir.path(), &["a"], &[], "1,4", one).unwrap();
        let swarms: Vec<(u32, u32)> = plan
            .scenarios
            .iter()
            .map(|s| {
                let p = s.swarm.as_ref().unwrap();
                (p.viewers, p.light_peers)
            })
            .collect();
        assert_eq!(swarms, [(1, 0), (1, 3)]);
    }

    #[test]
    fn a_sweep_needs_a_number_of_viewers_no_larger_than_its_smallest_size() {
        let dir = tempfile::tempdir().unwrap();
        let bad_input = |err: &anyhow::Error| {
            err.chain()
                .any(|c| c.downcast_ref::<SuiteError>().is_some())
        };
        let err = sweep(dir.path(), &["a"], &[], "1,4", Overrides::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("--swarm-sizes 1:")
                && text.contains("a.yaml runs 2 real viewers, more than a swarm of 1")
                && text.contains("sizes of at least 2"),
            "{text}"
        );
        assert!(bad_input(&err));
        let auto = Overrides {
            viewers: ViewersOverride::Auto { max: None },
            ..Overrides::default()
        };
        let err = sweep(dir.path(), &["a"], &[], "4", auto).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("--swarm-sizes keeps each scenario's real viewers")
                && text.contains("(--viewers auto)")
                && text.contains("give --viewers N instead"),
            "{text}"
        );
        assert!(bad_input(&err));
        let file = dir.path().join("c.yaml");
        std::fs::write(
            &file,
            format!("name: c\n{SCENARIO}").replace("count: 2", "count: auto"),
        )
        .unwrap();
        let sizes: SweepSizes = "4".parse().unwrap();
        let err = SuitePlan::sweep(
            &[file],
            &[],
            Some(&sizes),
            1,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("c.yaml: --swarm-sizes")
                && text.contains("(viewers.count: auto)")
                && text.contains("write a number in viewers.count, or give --viewers N"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_sweep_suite_compares_its_sizes_on_one_curve() {
        let dir = tempfile::tempdir().unwrap();
        let plan = sweep(dir.path(), &["a"], &[], "2,4", Overrides::default()).unwrap();
        let runner = StandIn {
            steps: Mutex::new(vec![Step::Finish; 2]),
            calls: Mutex::new(Vec::new()),
        };
        let result = run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
            .await
            .unwrap();
        let curves = result.comparison.swarm_curves();
        assert_eq!(curves.len(), 1);
        let c = &curves[0];
        assert_eq!(c.name, "a");
        let points: Vec<(u32, f64, Option<f64>)> = c
            .points
            .iter()
            .map(|p| (p.swarm_size, p.bound, p.p2p_savings.map(|s| s.mean)))
            .collect();
        // The fixture's players saved 2/3 at T.
        assert_eq!(
            points,
            [(2, 0.5, Some(2.0 / 3.0)), (4, 0.75, Some(2.0 / 3.0))]
        );
        let md = std::fs::read_to_string(result.html.with_file_name("compare.md")).unwrap();
        assert!(md.contains("## P2P offload against swarm size"), "{md}");
        assert!(
            md.contains("| 4 (2 + 2) | 1 | 66.7% | 33.3% | 75.0% | NOT A FINDING: 4/4 starved |"),
            "{md}"
        );
        assert!(result
            .comparison
            .text()
            .contains("P2P offload against swarm size"));
    }

    #[test]
    fn each_mode_is_a_run_of_its_own_named_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let files = scenarios(dir.path(), &["a", "b"]);
        let plan = SuitePlan::new(
            &files,
            &[Throttling::HttpOnly, Throttling::CdpAll],
            2,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap();
        let names: Vec<String> = plan
            .runs()
            .iter()
            .map(|r| r.dir.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "a@http-only-1",
                "a@cdp-all-1",
                "b@http-only-1",
                "b@cdp-all-1",
                "a@http-only-2",
                "a@cdp-all-2",
                "b@http-only-2",
                "b@cdp-all-2"
            ]
        );
        assert!(plan.runs().iter().all(|r| r.overrides.apply.is_some()
            && r.name
                .ends_with(&format!("@{}", r.overrides.apply.unwrap()))));
    }
}
