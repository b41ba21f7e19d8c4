//! Raw data that cannot be true of the run that wrote it: viewer ids the plan never had,
//! times outside the run, counters beyond what any link carries, shares outside 0..1.
//!
//! Such records are left out of every number and listed in the honesty section with their
//! file and line, so a folder merged from two runs, a hand edit or a damaged copy never
//! turns into a quiet "2006/6 viewers started" or a report sized by `t = 1e12`. The bounds
//! are wide on purpose: they catch what is impossible, not what is unusual.

use super::load::RunData;
use crate::model::rawdata::{
    self, ExporterSample, HostSample, LightSample, NodeSample, RunEvent, ViewerEvent, ViewerSample,
};
use std::borrow::Cow;
use std::path::Path;

/// Time after the planned end that records may still carry (teardown, a slow target, a
/// cloud fleet's set-up before the clock started).
pub(crate) const SLACK_S: f64 = 24.0 * 3600.0;
/// What one viewer's counters may grow by per second: a 100 Gbit/s link.
pub(crate) const MAX_BYTES_PER_S: f64 = 12.5e9;
/// The largest value an exporter counter or gauge may hold (an exabyte).
pub(crate) const MAX_EXPORTER_VALUE: f64 = 1e18;
/// Lines of one file named in the warning; the rest are counted.
const EXAMPLES: usize = 3;

/// The run's data with impossible records left out, and what was left out.
pub(crate) struct Screened<'a> {
    pub run: Cow<'a, RunData>,
    /// One sentence per file (and one per implausible manifest value), for the honesty
    /// section's warnings.
    pub warnings: Vec<String>,
}

/// What the manifest's plan allows.
struct Bounds {
    /// Viewer ids are `0..viewers`; `None` when the manifest plans none (ids unchecked).
    viewers: Option<u32>,
    /// Light peer ids are `0..peers`; `None` when the manifest plans none (ids unchecked).
    light_peers: Option<u32>,
    /// Latest plausible `t`.
    t_max_s: f64,
    planned_s: f64,
}

impl Bounds {
    fn of(run: &RunData, warnings: &mut Vec<String>) -> Self {
        let plan = &run.manifest.plan;
        let max_s = crate::model::scenario::MAX_DURATION.as_secs_f64();
        let planned_s = if plan.duration_s.is_finite() && (0.0..=max_s).contains(&plan.duration_s) {
            plan.duration_s
        } else {
            warnings.push(format!(
                "manifest.json: plan.duration_s = {} is no run length this tool plans (0 to {max_s:.0} s); times were checked against {max_s:.0} s.",
                num(plan.duration_s)
            ));
            max_s
        };
        let viewers = if plan.viewers == 0 {
            warnings.push(
                "manifest.json plans no viewers: viewer ids could not be checked against the plan."
                    .to_string(),
            );
            None
        } else if plan.churn.is_some() {
            // Replacements are numbered on: at most one per viewer and second watched.
            let per_viewer = 1 + planned_s.ceil() as u64;
            Some(u32::try_from(u64::from(plan.viewers) * per_viewer).unwrap_or(u32::MAX))
        } else {
            Some(plan.viewers)
        };
        Bounds {
            viewers,
            light_peers: plan.light.as_ref().map(|l| l.peers).filter(|n| *n > 0),
            t_max_s: planned_s + SLACK_S,
            planned_s,
        }
    }

    fn time(&self, t: f64) -> Option<String> {
        (!(0.0..=self.t_max_s).contains(&t)).then(|| {
            format!(
                "t = {} s is outside the run (0 to {:.0} s: the planned {:.0} s and a day)",
                num(t),
                self.t_max_s,
                self.planned_s
            )
        })
    }

    fn viewer(&self, viewer: u32) -> Option<String> {
        let n = self.viewers?;
        (viewer >= n).then(|| {
            format!(
                "viewer {viewer} is not in the plan (viewers 0 to {})",
                n - 1
            )
        })
    }

    /// A cumulative counter of one viewer at time `t`.
    fn bytes(&self, name: &str, value: u64, t: f64) -> Option<String> {
        let limit = MAX_BYTES_PER_S * (t.max(0.0) + 60.0);
        (value as f64 > limit).then(|| {
            format!("{name} = {value} is more than a 100 Gbit/s link carries by t = {t:.0} s")
        })
    }

    /// A duration in ms that cannot exceed the time since the run started.
    fn elapsed_ms(&self, name: &str, value: f64, t: f64) -> Option<String> {
        let limit = (t.max(0.0) + 60.0) * 1000.0;
        (!(0.0..=limit).contains(&value)).then(|| {
            format!(
                "{name} = {} ms is not between 0 and the {limit:.0} ms since the run started",
                num(value)
            )
        })
    }

    fn viewer_sample(&self, s: &ViewerSample) -> Option<String> {
        self.time(s.t)
            .or_else(|| self.viewer(s.viewer))
            .or_else(|| self.bytes("http_down_bytes", s.http_down_bytes, s.t))
            .or_else(|| self.bytes("p2p_down_bytes", s.p2p_down_bytes, s.t))
            .or_else(|| self.bytes("p2p_up_bytes", s.p2p_up_bytes, s.t))
            .or_else(|| self.elapsed_ms("stalled_ms", s.stalled_ms, s.t))
    }

    /// A light peer's read: the same bounds as a viewer's, against the planned light peers.
    fn light_sample(&self, s: &LightSample) -> Option<String> {
        let peer = |peer: u32| {
            let n = self.light_peers?;
            (peer >= n).then(|| {
                format!(
                    "light peer {peer} is not in the plan (light peers 0 to {})",
                    n - 1
                )
            })
        };
        self.time(s.t)
            .or_else(|| peer(s.peer))
            .or_else(|| self.bytes("http_down_bytes", s.http_down_bytes, s.t))
            .or_else(|| self.bytes("p2p_down_bytes", s.p2p_down_bytes, s.t))
            .or_else(|| self.bytes("p2p_up_bytes", s.p2p_up_bytes, s.t))
            .or_else(|| self.elapsed_ms("waited_ms", s.waited_ms, s.t))
    }

    fn viewer_event(&self, e: &ViewerEvent) -> Option<String> {
        self.time(e.t)
            .or_else(|| self.viewer(e.viewer))
            .or_else(|| {
                e.ttff_ms
                    .and_then(|ttff| self.elapsed_ms("ttff_ms", ttff, e.t))
            })
    }

    fn exporter_sample(&self, s: &ExporterSample) -> Option<String> {
        self.time(s.t).or_else(|| {
            s.sums
                .iter()
                .find(|(_, v)| !(0.0..=MAX_EXPORTER_VALUE).contains(*v))
                .map(|(name, v)| {
                    format!(
                        "{name} = {} is not between 0 and {MAX_EXPORTER_VALUE:e}",
                        num(*v)
                    )
                })
        })
    }

    fn host_sample(&self, s: &HostSample) -> Option<String> {
        self.time(s.t).or_else(|| {
            (!(0.0..=1.0).contains(&s.cpu_busy))
                .then(|| format!("cpu_busy = {} is not a share from 0 to 1", num(s.cpu_busy)))
        })
    }

    /// A node's shares: busy may pass 1 briefly under a quota's bursts, never 64 times.
    fn node_sample(&self, s: &NodeSample) -> Option<String> {
        let share = |name: &str, value: Option<f64>, max: f64| {
            value
                .filter(|v| !(0.0..=max).contains(v))
                .map(|v| format!("{name} = {} is not a share from 0 to {max}", num(v)))
        };
        self.time(s.t)
            .or_else(|| share("cpu_busy", s.cpu_busy, 64.0))
            .or_else(|| share("cpu_steal", s.cpu_steal, 1.0))
            .or_else(|| share("cpu_throttled", s.cpu_throttled, 1.0))
    }
}

/// A number as people read it: `1e300`, not three hundred digits.
fn num(v: f64) -> String {
    if v != 0.0 && !(1e-3..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Leaves out what cannot be true of the run; borrows the data unchanged when all is
/// plausible (the usual case).
pub fn screen(run: &RunData) -> Screened<'_> {
    let mut warnings = Vec::new();
    let b = Bounds::of(run, &mut warnings);
    let dir = run.dir.as_path();
    let mut changed = Cow::Borrowed(run);
    if let Some(kept) = keep(
        dir,
        rawdata::RUN_EVENTS,
        &run.run_events,
        |e: &RunEvent| b.time(e.t),
        &mut warnings,
    ) {
        changed.to_mut().run_events = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::VIEWER_EVENTS,
        &run.viewer_events,
        |e| b.viewer_event(e),
        &mut warnings,
    ) {
        changed.to_mut().viewer_events = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::VIEWER_SAMPLES,
        &run.viewer_samples,
        |s| b.viewer_sample(s),
        &mut warnings,
    ) {
        changed.to_mut().viewer_samples = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::EXPORTER_SAMPLES,
        &run.exporter_samples,
        |s| b.exporter_sample(s),
        &mut warnings,
    ) {
        changed.to_mut().exporter_samples = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::HOST_SAMPLES,
        &run.host_samples,
        |s| b.host_sample(s),
        &mut warnings,
    ) {
        changed.to_mut().host_samples = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::NODE_SAMPLES,
        &run.node_samples,
        |s| b.node_sample(s),
        &mut warnings,
    ) {
        changed.to_mut().node_samples = kept;
    }
    if let Some(kept) = keep(
        dir,
        rawdata::LIGHT_SAMPLES,
        &run.light_samples,
        |s| b.light_sample(s),
        &mut warnings,
    ) {
        changed.to_mut().light_samples = kept;
    }
    Screened {
        run: changed,
        warnings,
    }
}

/// The records that pass `check`, or `None` when all do. What fails is described in one
/// warning naming the file and the lines (read again from the file: the loaded records
/// are sorted by time and carry no line numbers).
fn keep<T: Clone + for<'de> serde::Deserialize<'de>>(
    dir: &Path,
    name: &str,
    records: &[T],
    check: impl Fn(&T) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<Vec<T>> {
    let failed = records.iter().filter(|r| check(r).is_some()).count();
    if failed == 0 {
        return None;
    }
    let kept: Vec<T> = records
        .iter()
        .filter(|r| check(r).is_none())
        .cloned()
        .collect();
    let from_file: Vec<String> = match rawdata::read_records::<T>(&dir.join(name)) {
        Ok(contents) => contents
            .records
            .iter()
            .zip(&contents.line_numbers)
            .filter_map(|(r, line)| check(r).map(|why| format!("line {line}: {why}")))
            .take(EXAMPLES)
            .collect(),
        Err(_) => Vec::new(),
    };
    // The file may have changed since it was loaded: then without line numbers.
    let examples = if from_file.len() == failed.min(EXAMPLES) {
        from_file
    } else {
        records.iter().filter_map(&check).take(EXAMPLES).collect()
    };
    let more = failed.saturating_sub(examples.len());
    warnings.push(format!(
        "{name}: {failed} line{} left out of every number because {} cannot be true of this run — {}{}.",
        if failed == 1 { "" } else { "s" },
        if failed == 1 { "it" } else { "they" },
        examples.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    ));
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rawdata::{Manifest, PlanSummary};

    fn run(samples: Vec<ViewerSample>) -> RunData {
        let mut manifest = Manifest::example();
        manifest.plan = PlanSummary {
            viewers: 6,
            duration_s: 150.0,
            ..Default::default()
        };
        RunData {
            dir: "/nowhere".into(),
            manifest,
            run_events: vec![],
            viewer_events: vec![],
            viewer_samples: samples,
            exporter_samples: vec![],
            host_samples: vec![],
            node_samples: vec![],
            light_samples: vec![],
            truncated_files: vec![],
        }
    }

    fn sample(t: f64, viewer: u32, http: u64) -> ViewerSample {
        ViewerSample {
            t,
            viewer,
            http_down_bytes: http,
            ..Default::default()
        }
    }

    #[test]
    fn plausible_data_is_borrowed_unchanged() {
        let data = run(vec![sample(2.0, 0, 1000), sample(4.0, 5, 2000)]);
        let screened = screen(&data);
        assert!(matches!(screened.run, Cow::Borrowed(_)));
        assert!(screened.warnings.is_empty(), "{:?}", screened.warnings);
    }

    #[test]
    fn impossible_samples_are_left_out_and_named() {
        let data = run(vec![
            sample(2.0, 0, 1000),
            sample(1e300, 0, 1000),
            sample(1e12, 1, 1000),
            sample(3.0, 6, 1000),
            sample(4.0, 2, u64::MAX),
            sample(-1.0, 3, 0),
        ]);
        let screened = screen(&data);
        assert_eq!(screened.run.viewer_samples, vec![sample(2.0, 0, 1000)]);
        let warning = &screened.warnings[0];
        assert!(
            warning.starts_with("raw/viewer_samples.jsonl: 5 lines left out"),
            "{warning}"
        );
        assert!(
            warning.contains("t = 1e300 s is outside the run"),
            "{warning}"
        );
        assert!(warning.contains("and 2 more"), "{warning}");
    }

    #[test]
    fn impossible_light_peer_reads_are_left_out_and_named() {
        use crate::model::rawdata::{LightSample, LightSummary};
        let mut data = run(vec![]);
        data.manifest.plan.light = Some(LightSummary {
            runtime: None,
            peers: 4,
            per_page: 2,
            shaping: String::new(),
            fidelity: None,
        });
        let read = |t: f64, peer: u32| LightSample {
            t,
            peer,
            ..Default::default()
        };
        data.light_samples = vec![read(2.0, 3), read(1e12, 0), read(4.0, 4)];
        let screened = screen(&data);
        assert_eq!(screened.run.light_samples, vec![read(2.0, 3)]);
        let warning = &screened.warnings[0];
        assert!(
            warning.starts_with("raw/light_samples.jsonl: 2 lines left out"),
            "{warning}"
        );
        assert!(
            warning.contains("light peer 4 is not in the plan (light peers 0 to 3)"),
            "{warning}"
        );
    }
}
