//! The swarm sizes governed ramps keep between a suite's repeats and, through
//! `--swarm-size-file`, between suites: read, written, and applied to the next run.

use super::plan::SuiteRun;
use crate::RunOutcome;
use std::io::Write;
use std::path::{Path, PathBuf};

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

    pub(super) fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text + "\n")
    }
}
/// Writes the kept sizes into the size file.
pub(super) fn keep_sizes(
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
pub(super) fn bounded_by(run: &SuiteRun, first_fit: Option<u32>) -> SuiteRun {
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
pub(super) fn size_to_keep(outcome: &RunOutcome) -> Option<u32> {
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
pub(super) fn sized(run: &SuiteRun, viewers: u32) -> SuiteRun {
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
