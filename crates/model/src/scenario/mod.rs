//! Scenario files: the YAML model of one run (`ScenarioSpec`), validated into the one
//! internal `Plan` that the run engine uses. CLI overrides are applied to the plan, so the
//! engine never looks at the command line.
//!
//! Unknown fields are errors, and every error names the file, the line where it can be
//! found, the field and what is allowed — never a type of this program. Before any parsing,
//! the file must pass the input limits of `limits` (a regular file, 1 MiB, UTF-8, nested at
//! most 32 levels), so no file can make validation slow or endless.

mod browser;
pub mod churn;
pub mod fleet;
pub mod light;
mod limits;
pub mod networks;
pub mod packing;
mod plan;
mod spec;
pub mod thresholds;

pub use limits::{MAX_NESTING, MAX_SCENARIO_BYTES};

pub use browser::{BrowserSetup, CHROMIUM_FLAGS, PROJECT_SETUP};
pub use packing::{BrowserPlan, MAX_PER_BROWSER};
pub use plan::{AutoRamp, Plan, RunClock, TargetPlan, ViewerPlan, MAX_DURATION};
pub use spec::{
    AutoSpec, FailedThreshold, LinkProfile, NetworkProfile, ScenarioSpec, TargetSpec,
    ViewerCountSpec, ViewersSpec,
};
pub use thresholds::{Threshold, ThresholdText};

use crate::kinds::{FleetKind, Throttling};
use fleet::FleetSpec;
use std::path::Path;
use std::time::Duration;

/// A scenario that cannot be run, with where and why.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {field}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `viewers.count`; `(file)` for whole-file problems.
    pub field: String,
    pub message: String,
}

/// How many viewers the command line asks for instead of the file's `viewers.count`:
/// `--viewers N`, `--viewers auto` or neither, each with what `--max-viewers` may add. A
/// fixed count has no maximum, so `--viewers N --max-viewers M` cannot be written here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewersOverride {
    /// The file's count; `max` (`--max-viewers`) bounds its governed ramp when the file
    /// writes `count: auto`, and is an error when it writes a number.
    AsWritten { max: Option<u32> },
    /// `--viewers N`: exactly N, never a governed ramp.
    Fixed(u32),
    /// `--viewers auto`: a headroom-governed ramp, at most `max` (`--max-viewers`), else
    /// `viewers.auto.max`, else the file's count (if a number).
    Auto { max: Option<u32> },
}

impl Default for ViewersOverride {
    fn default() -> Self {
        ViewersOverride::AsWritten { max: None }
    }
}

/// A plain `--viewers N` (`up`, `plan`): N, or the file's count without the flag.
impl From<Option<u32>> for ViewersOverride {
    fn from(viewers: Option<u32>) -> Self {
        viewers.map_or_else(Self::default, ViewersOverride::Fixed)
    }
}

impl ViewersOverride {
    /// `--max-viewers`, if given.
    pub fn max(self) -> Option<u32> {
        match self {
            ViewersOverride::AsWritten { max } | ViewersOverride::Auto { max } => max,
            ViewersOverride::Fixed(_) => None,
        }
    }

    /// The same, a governed ramp bounded to at most `n` viewers (`--max-viewers n`); a
    /// fixed count stays as it is.
    pub fn at_most(self, n: u32) -> Self {
        match self {
            ViewersOverride::AsWritten { .. } => ViewersOverride::AsWritten { max: Some(n) },
            ViewersOverride::Auto { .. } => ViewersOverride::Auto { max: Some(n) },
            fixed @ ViewersOverride::Fixed(_) => fixed,
        }
    }

    /// `--viewers auto` was given.
    pub fn is_auto(self) -> bool {
        matches!(self, ViewersOverride::Auto { .. })
    }
}

/// Overrides given on the command line; they become part of the plan.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--viewers` and `--max-viewers`.
    pub viewers: ViewersOverride,
    /// `--duration` (or a ladder's `--hold`): the run's length; the file's timeline is
    /// stretched to it.
    pub duration: Option<Duration>,
    /// Run on this fleet instead (`local` or `netns`, with their defaults).
    pub fleet: Option<FleetKind>,
    /// Apply every network profile this way instead.
    pub apply: Option<Throttling>,
    /// Viewers per browser instead of `viewers.per_browser`.
    pub per_browser: Option<u32>,
    /// `--canary`: a cloud fleet starts with a canary node (`fleet.canary: true`).
    pub canary: bool,
    /// `--light-peers N`: light peers instead of `swarm.light_peers`.
    pub light_peers: Option<u32>,
    /// `--light-runtime R`: what runs them instead of `swarm.runtime`.
    pub light_runtime: Option<crate::kinds::LightRuntime>,
}

/// A duration as a command-line flag's value: humantime's words without their spaces
/// (`1m30s`), which `humantime::parse_duration` reads back to the same duration.
pub fn duration_flag(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
}

impl Overrides {
    /// The overrides as command-line flags, for the manifest's re-run command.
    pub fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.viewers {
            ViewersOverride::AsWritten { .. } => {}
            ViewersOverride::Fixed(n) => out.extend(["--viewers".to_string(), n.to_string()]),
            ViewersOverride::Auto { .. } => {
                out.extend(["--viewers".to_string(), "auto".to_string()])
            }
        }
        if let Some(n) = self.viewers.max() {
            out.extend(["--max-viewers".to_string(), n.to_string()]);
        }
        if let Some(d) = self.duration {
            out.extend(["--duration".to_string(), duration_flag(d)]);
        }
        if let Some(f) = self.fleet {
            out.extend(["--fleet".to_string(), f.to_string()]);
        }
        if let Some(a) = self.apply {
            out.extend(["--apply".to_string(), a.to_string()]);
        }
        if let Some(n) = self.light_peers {
            out.extend(["--light-peers".to_string(), n.to_string()]);
        }
        if let Some(r) = self.light_runtime {
            out.extend(["--light-runtime".to_string(), r.to_string()]);
        }
        if let Some(n) = self.per_browser {
            out.extend(["--per-browser".to_string(), n.to_string()]);
        }
        if self.canary {
            out.push("--canary".to_string());
        }
        out
    }

    /// The fleet and throttling overrides, applied to the scenario as written.
    fn apply_to(&self, spec: &mut ScenarioSpec, file: &str) -> Result<(), ScenarioError> {
        match self.fleet {
            None => {}
            Some(FleetKind::Local) => spec.fleet = FleetSpec::Local(Default::default()),
            Some(FleetKind::Netns) => spec.fleet = FleetSpec::Netns(Default::default()),
            Some(other) => {
                return Err(ScenarioError {
                    file: file.to_string(),
                    line: None,
                    field: "--fleet".into(),
                    message: format!(
                        "`{other}` needs settings of its own (a hub URL, a cloud account): \
                         write them in the scenario's `fleet:` section; --fleet takes `local` \
                         or `netns`"
                    ),
                })
            }
        }
        if self.canary {
            match &mut spec.fleet {
                FleetSpec::Hcloud(hcloud) => {
                    if hcloud.canary.is_none() {
                        hcloud.canary = Some(fleet::CanarySetting::On(true));
                    }
                }
                other => {
                    return Err(ScenarioError {
                        file: file.to_string(),
                        line: None,
                        field: "--canary".into(),
                        message: format!(
                            "measures a cloud node before the fleet is made: it needs `fleet: kind: hcloud` (this scenario's fleet is `{}`)",
                            other.kind()
                        ),
                    })
                }
            }
        }
        if let Some(apply) = self.apply {
            let profiles = spec
                .viewers
                .network
                .iter_mut()
                .chain(spec.viewers.alt_network.iter_mut().map(|a| &mut a.profile));
            for profile in profiles {
                profile.apply = Some(apply);
            }
            for share in spec.viewers.networks.iter_mut().flatten() {
                share.apply = Some(apply);
            }
        }
        Ok(())
    }
}

/// Reads, parses and validates a scenario file.
pub fn load(path: &Path, overrides: &Overrides) -> Result<Plan, ScenarioError> {
    let file = path.display().to_string();
    let text = limits::read_scenario_file(path).map_err(|r| whole_file(&file, r))?;
    parse(&text, &file, overrides)
}

/// Parses and validates scenario text; `file` is only used in error messages.
pub fn parse(text: &str, file: &str, overrides: &Overrides) -> Result<Plan, ScenarioError> {
    limits::check_text(text).map_err(|r| whole_file(file, r))?;
    let mut spec = spec::parse_spec(text, file)?;
    overrides.apply_to(&mut spec, file)?;
    plan::build(spec, text, file, overrides)
}

fn whole_file(file: &str, refusal: limits::Refusal) -> ScenarioError {
    ScenarioError {
        file: file.to_string(),
        line: refusal.line,
        field: "(file)".into(),
        message: refusal.message,
    }
}

/// Finds the 1-based line of a dotted field path in YAML text, by following indentation.
/// Good enough for the block-style files users write; `None` when it cannot tell.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    let mut parent_indent: isize = -1;
    let mut start = 0usize;
    let lines: Vec<&str> = text.lines().collect();
    let mut found = None;
    for key in path.split('.') {
        found = None;
        let mut i = start;
        while i < lines.len() {
            let line = lines[i];
            let trimmed = line.trim_start();
            let indent = (line.len() - trimmed.len()) as isize;
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                if indent <= parent_indent && i > start {
                    break;
                }
                if indent > parent_indent && (trimmed.starts_with(&format!("{key}:"))) {
                    found = Some(i);
                    parent_indent = indent;
                    start = i + 1;
                    break;
                }
            }
            i += 1;
        }
        found?;
    }
    found.map(|i| i + 1)
}

#[cfg(test)]
mod tests;
