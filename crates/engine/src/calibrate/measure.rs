//! Measuring one profile: one run of the engine — the same scenario runner as `run` — with
//! K viewers arriving at once on the local fleet, started with the profile's browser set-up
//! and packing, long enough for them to start, warm up and play through the window. The
//! run lands in a run folder of its own (raw data, manifest, report), and the profile's
//! figures are computed from that raw data (`from_run`): the browsers' PSS and CPU over the
//! window, and what the players fetched, which segments they asked for over time and at
//! which renditions, so `fidelity` can check a cheaper profile behaves the same.

use super::fidelity::Fidelity;
use super::profiles::BrowserProfile;
use crate::model::kinds::VideoKind;
use crate::model::scenario::fleet::FleetPlan;
use crate::model::scenario::{Plan, RunClock};
use crate::report::RunData;
use crate::sys::shutdown::Shutdown;
use crate::{RunOptions, RunSource};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// What the bytes, segments, renditions and P2P share of a profile are counted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BytesBasis {
    /// The window (live: the player fetches as the stream goes).
    #[default]
    Window,
    /// Each viewer's first T seconds after its page opened, T the same for the profiles
    /// compared (VOD: the player and the P2P engine fetch ahead as fast as the link
    /// allows, so a window of wall-clock time would depend on how fast viewers started).
    SinceOpen,
}

impl BytesBasis {
    pub(crate) fn for_video(video: VideoKind) -> Self {
        match video {
            VideoKind::Live => BytesBasis::Window,
            VideoKind::Vod => BytesBasis::SinceOpen,
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            BytesBasis::Window => "bytes of the window",
            BytesBasis::SinceOpen => "bytes in each viewer's first seconds",
        }
    }
}

fn live() -> VideoKind {
    VideoKind::Live
}

/// Seconds between the points of `ProfileFigures::over_time`.
pub(crate) const OVER_TIME_STEP_S: f64 = 5.0;

/// What a viewer had done `t_s` seconds after its page opened, mean over the viewers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    pub t_s: f64,
    /// HTTP + P2P bytes downloaded.
    pub download_bytes: f64,
    pub p2p_bytes: f64,
    /// Media segments requested.
    pub segments: f64,
}

/// What one profile cost, per playing viewer, over the window, and what its viewers did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigures {
    pub profile: BrowserProfile,
    /// The video played (older files: live).
    #[serde(default = "live")]
    pub video: VideoKind,
    /// 0-based round of `--repeat`.
    #[serde(default)]
    pub round: u32,
    pub viewers: u32,
    /// Viewers that played and were read at both ends of the window.
    pub viewers_measured: u32,
    /// Browsers (WebDriver sessions) the viewers played in.
    #[serde(default)]
    pub browsers: u32,
    /// Why others were not (session refused, no first frame, …).
    pub failures: Vec<String>,
    pub processes_per_viewer: f64,
    /// Mean of the PSS samples taken during the window.
    pub pss_mb_per_viewer: f64,
    pub pss_mb_per_viewer_max: f64,
    /// CPU cores (CPU seconds per second) per viewer.
    pub cpu_cores_per_viewer: f64,
    pub http_kbps_per_viewer: f64,
    pub p2p_down_kbps_per_viewer: f64,
    pub p2p_up_kbps_per_viewer: f64,
    pub stalls: u32,
    pub ttff_ms_median: Option<f64>,
    pub window_s: f64,
    /// What the fidelity figures below are counted over.
    #[serde(default)]
    pub bytes_basis: BytesBasis,
    /// Bytes downloaded per viewer (HTTP + P2P) over the basis.
    #[serde(default)]
    pub download_bytes_per_viewer: f64,
    /// P2P downloaded / (HTTP + P2P downloaded) over the basis, in percent.
    #[serde(default)]
    pub p2p_share_pct: f64,
    /// Media segments requested per viewer over the basis.
    #[serde(default)]
    pub segments_per_viewer: f64,
    /// Mean bytes of one loaded segment.
    #[serde(default)]
    pub segment_bytes_mean: f64,
    /// Share (percent) of the segments loaded over the basis at each rendition height.
    #[serde(default)]
    pub renditions: BTreeMap<String, f64>,
    /// Every `OVER_TIME_STEP_S` seconds after each page opened: what the viewers had
    /// downloaded and requested by then (means over the viewers measured).
    #[serde(default)]
    pub over_time: Vec<TimePoint>,
    /// Every measured viewer had its video track deselected (`None`: not exposed).
    #[serde(default)]
    pub video_track_off: Option<bool>,
    /// Against the default profile of the same video and round (none for the default).
    #[serde(default)]
    pub fidelity: Option<Fidelity>,
}

impl ProfileFigures {
    /// Everything a viewer downloaded (HTTP + P2P) per second of the window.
    pub fn download_kbps_per_viewer(&self) -> f64 {
        self.http_kbps_per_viewer + self.p2p_down_kbps_per_viewer
    }

    /// The last point of `over_time` at or before `t_s`.
    pub fn at(&self, t_s: f64) -> Option<&TimePoint> {
        self.over_time
            .iter()
            .take_while(|p| p.t_s <= t_s + 1e-6)
            .last()
    }

    /// Figures of a profile whose viewers measured nothing (yet).
    pub fn empty(profile: BrowserProfile, viewers: u32) -> Self {
        Self {
            profile,
            video: VideoKind::Live,
            round: 0,
            viewers,
            viewers_measured: 0,
            browsers: 0,
            failures: Vec::new(),
            processes_per_viewer: 0.0,
            pss_mb_per_viewer: 0.0,
            pss_mb_per_viewer_max: 0.0,
            cpu_cores_per_viewer: 0.0,
            http_kbps_per_viewer: 0.0,
            p2p_down_kbps_per_viewer: 0.0,
            p2p_up_kbps_per_viewer: 0.0,
            stalls: 0,
            ttff_ms_median: None,
            window_s: 0.0,
            bytes_basis: BytesBasis::Window,
            download_bytes_per_viewer: 0.0,
            p2p_share_pct: 0.0,
            segments_per_viewer: 0.0,
            segment_bytes_mean: 0.0,
            renditions: BTreeMap::new(),
            over_time: Vec::new(),
            video_track_off: None,
            fidelity: None,
        }
    }
}

/// How every profile is measured: the warm-up after the last viewer's first frame, then
/// the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub warmup: Duration,
    pub window: Duration,
}

/// The longest the viewers of a measurement may take to start and play their first frame
/// before its timeline starts anyway (a viewer gets 2 minutes for its session and 90 s for
/// its first frame).
const STARTUP_LIMIT: Duration = Duration::from_secs(240);

impl Timing {
    /// How long the run goes on after the window, so every viewer is read past its end.
    fn tail(sampling: Duration) -> Duration {
        (sampling * 2).max(Duration::from_secs(3))
    }
}

/// The plan of one measurement: the calibration's plan (`base`) with every viewer arriving
/// at once, the profile's browser set-up and packing, all browsers started together on the
/// local fleet, a timeline that starts when every viewer has played its first frame, and
/// then runs the warm-up, the window and a short tail; the window is the run's steady
/// window ending at its measurement point (so the run's own report shows the same seconds,
/// and `from_run` finds them in the run folder).
pub fn plan_for(base: &Plan, profile: &BrowserProfile, timing: Timing) -> Plan {
    let mut plan = base.clone();
    plan.per_browser = profile.per_browser.max(1);
    plan.browser = profile.setup();
    // A calibration measures cost; a scenario's pass/fail conditions are not its question.
    plan.thresholds.clear();
    plan.ramp = Duration::ZERO;
    plan.clock = RunClock::FromEveryFirstFrame {
        limit: STARTUP_LIMIT,
    };
    let browsers = plan.viewers.div_ceil(plan.per_browser);
    if let FleetPlan::Local(local) = &mut plan.fleet {
        local.max_parallel_starts = browsers as usize;
    }
    plan.sampling_interval = plan
        .sampling_interval
        .min(timing.window / 2)
        .max(Duration::from_millis(500));
    plan.measure_at = timing.warmup + timing.window;
    plan.steady_window = timing.window;
    plan.duration = plan.measure_at + Timing::tail(plan.sampling_interval);
    let human = |d: Duration| humantime::format_duration(d).to_string();
    plan.yaml.push_str(&format!(
        "# calibrate: browser profile `{}` ({}; its flags are in manifest.json), viewers.per_browser = {}, \
         every viewer arrives at once on the local fleet (viewers.ramp = 0s); the timeline starts when \
         every viewer has played its first frame: duration = {}, measured over the last {} before {} \
         (steady_window, measure_at), sampling_interval = {}\n",
        profile.name,
        profile.levers(),
        plan.per_browser,
        human(plan.duration),
        human(plan.steady_window),
        human(plan.measure_at),
        human(plan.sampling_interval),
    ));
    plan
}

/// Measures `profile`: one engine run of its plan into `dir` (the manifest's re-run
/// command is `rerun`), then its figures from the run's raw data. `None`: the run was
/// interrupted (by `shutdown`); the engine released browsers, driver and target either way.
pub(crate) async fn measure_profile(
    base: &Plan,
    profile: &BrowserProfile,
    timing: Timing,
    dir: &Path,
    rerun: Vec<String>,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<ProfileFigures>> {
    let plan = plan_for(base, profile, timing);
    let outcome = crate::run_scenario(
        plan,
        &RunSource::Command(rerun),
        dir,
        shutdown.clone(),
        RunOptions {
            progress: false,
            ..RunOptions::default()
        },
    )
    .await?;
    if outcome.interrupted {
        return Ok(None);
    }
    let run =
        RunData::load(dir).with_context(|| format!("reading the run in {}", dir.display()))?;
    if let Some(warmup) = super::from_run::warmup_of_last_viewer(&run) {
        if warmup + 1.0 < timing.warmup.as_secs_f64() {
            tracing::warn!(
                "profile {}: the last viewer played its first frame {warmup:.0} s before the window, not the {} s of warm-up asked for (its viewers started slowly)",
                profile.name,
                timing.warmup.as_secs()
            );
        }
    }
    Ok(Some(super::from_run::figures(&run, profile)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scenario::{self, Overrides};

    #[test]
    fn a_measurements_plan_starts_everyone_at_once_and_ends_its_window_at_the_measure_point() {
        let base = scenario::parse(
            "name: c\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: 8\n  ramp: 30s\nduration: 2m\nfleet:\n  kind: local\n",
            "c.yaml",
            &Overrides::default(),
        )
        .unwrap();
        let timing = Timing {
            warmup: Duration::from_secs(15),
            window: Duration::from_secs(60),
        };
        let plan = plan_for(&base, &super::super::BrowserProfile::packed(), timing);
        assert_eq!(plan.ramp, Duration::ZERO);
        assert_eq!(plan.per_browser, 4);
        assert!(plan.browser.no_video_track);
        assert_eq!(plan.browser.name, "packed");
        // From the last first frame: warm-up, window, then a tail of two samples.
        assert!(matches!(plan.clock, RunClock::FromEveryFirstFrame { .. }));
        assert_eq!(plan.measure_at, Duration::from_secs(15 + 60));
        assert_eq!(plan.steady_window, timing.window);
        assert_eq!(plan.duration, plan.measure_at + Duration::from_secs(4));
        match &plan.fleet {
            FleetPlan::Local(local) => assert_eq!(local.max_parallel_starts, 2),
            other => panic!("{other:?}"),
        }
        assert!(plan.yaml.contains("# calibrate: browser profile `packed`"));
        let default = plan_for(&base, &BrowserProfile::default_chromedriver(), timing);
        assert!(!default.browser.no_video_track && default.per_browser == 1);
        match &default.fleet {
            FleetPlan::Local(local) => assert_eq!(local.max_parallel_starts, 8),
            other => panic!("{other:?}"),
        }
    }
}
