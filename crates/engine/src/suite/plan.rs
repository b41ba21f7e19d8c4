//! A suite, checked before anything runs: its scenarios (per mode and swarm size), their
//! repeats and run folders, in run order.

use super::kept_sizes::{SwarmSizeError, SwarmSizes};
use super::sweep::{self, SweepSizes};
use super::SuiteError;
use crate::model::kinds::Throttling;
use crate::model::scenario::light::LightPlan;
use crate::model::scenario::{Overrides, Plan};
use crate::report::swarm_curve::SwarmPoint;
use std::path::{Path, PathBuf};

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
                for sized in sweep::expand(&name, path, &overrides, &plan, sizes)? {
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
    let pages = |l: &LightPlan| match l.per_page_not_applied {
        Some(_) => "1 per page under tc".to_string(),
        None => format!("{} per page", l.per_page),
    };
    match &plan.light {
        Some(l) if plan.auto.is_none() => format!(
            "{viewers} + {} ({}): a swarm of {}",
            crate::report::light::peers_phrase(l.peers),
            pages(l),
            plan.viewers + l.peers
        ),
        Some(l) => format!(
            "{viewers} + {} ({})",
            crate::report::light::peers_phrase(l.peers),
            pages(l)
        ),
        None => viewers,
    }
}
