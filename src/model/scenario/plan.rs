//! Validation: `ScenarioSpec` → `Plan`, the one type the run engine uses.

use super::fleet::FleetPlan;
use super::spec::{FailedThreshold, NetworkProfile, ScenarioSpec};
use super::{Overrides, ScenarioError};
use crate::model::kinds::{Latency, TargetKind, Throttling, VideoKind};
use std::time::Duration;

/// A validated run: every default filled in, every value in range.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub description: Option<String>,
    pub target: TargetPlan,
    pub viewers: u32,
    pub ramp: Duration,
    pub p2p_off_share: f64,
    pub network: Option<NetworkProfile>,
    pub alt_network: Option<(f64, NetworkProfile)>,
    pub duration: Duration,
    pub sampling_interval: Duration,
    pub measure_at: Duration,
    pub steady_window: Duration,
    pub max_failed_viewers: u32,
    pub fleet: FleetPlan,
    /// The scenario as run (the file's text with overrides applied), saved in the run folder.
    pub yaml: String,
}

#[derive(Debug, Clone)]
pub struct TargetPlan {
    pub kind: TargetKind,
    pub video: VideoKind,
    pub latency: Latency,
    /// peertube only.
    pub url: Option<String>,
    pub exporter: Option<String>,
    /// refsite only.
    pub metrics_interval: Duration,
    pub vod_length: Duration,
}

/// What one viewer is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewerPlan {
    /// 0-based; stable across the run and in raw data.
    pub index: u32,
    /// When it arrives, from the run's start.
    pub start_after: Duration,
    pub p2p: bool,
    pub network: Option<NetworkProfile>,
}

impl Plan {
    /// The viewers in arrival order: spread evenly over the ramp; the P2P-off and
    /// alternative-network viewers interleaved evenly so every part of the ramp has some.
    pub fn viewer_plans(&self) -> Vec<ViewerPlan> {
        (0..self.viewers)
            .map(|index| {
                let start_after = if self.viewers <= 1 {
                    Duration::ZERO
                } else {
                    self.ramp.mul_f64(index as f64 / (self.viewers - 1) as f64)
                };
                let network = match self.alt_network {
                    Some((share, alt)) if picked(index, share) => Some(alt),
                    _ => self.network,
                };
                ViewerPlan {
                    index,
                    start_after,
                    p2p: !picked(index, self.p2p_off_share),
                    network,
                }
            })
            .collect()
    }

    pub fn summary_line(&self) -> String {
        format!(
            "{} viewers ({}% P2P off) on {} {}, ramp {}, duration {}, measured at {}, fleet {}",
            self.viewers,
            (self.p2p_off_share * 100.0).round(),
            self.target.kind,
            self.target.video,
            humantime::format_duration(self.ramp),
            humantime::format_duration(self.duration),
            humantime::format_duration(self.measure_at),
            self.fleet.kind(),
        )
    }
}

/// Whether viewer `index` belongs to a share, spreading the chosen ones evenly:
/// with share 0.5 every second viewer (1, 3, 5, …) is picked.
fn picked(index: u32, share: f64) -> bool {
    let i = index as f64;
    ((i + 1.0) * share).floor() > (i * share).floor()
}

pub(super) fn build(
    spec: ScenarioSpec,
    text: &str,
    file: &str,
    overrides: &Overrides,
) -> Result<Plan, ScenarioError> {
    let err = |field: &str, message: String| ScenarioError {
        file: file.to_string(),
        line: super::locate(text, field),
        field: field.to_string(),
        message,
    };
    let duration_field = |field: &str, value: &str| -> Result<Duration, ScenarioError> {
        humantime::parse_duration(value).map_err(|e| {
            err(
                field,
                format!("`{value}` is not a duration ({e}); write e.g. `90s`, `5m` or `1h 30m`"),
            )
        })
    };

    if spec.name.trim().is_empty()
        || !spec
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(err(
            "name",
            format!(
                "`{}` is not allowed; use letters, digits, `-`, `_` or `.` (it names the output folder)",
                spec.name
            ),
        ));
    }

    let viewers = overrides.viewers.unwrap_or(spec.viewers.count);
    if viewers == 0 {
        return Err(err("viewers.count", "must be at least 1 (got 0)".into()));
    }
    if viewers > 100_000 {
        return Err(err(
            "viewers.count",
            format!("{viewers} is more than the 100000 viewers one run supports"),
        ));
    }

    let duration = match &overrides.duration {
        Some(value) => humantime::parse_duration(value).map_err(|e| ScenarioError {
            file: "--duration".into(),
            line: None,
            field: "duration".into(),
            message: format!("`{value}` is not a duration ({e}); write e.g. `90s` or `5m`"),
        })?,
        None => duration_field("duration", &spec.duration)?,
    };
    if duration < Duration::from_secs(5) {
        return Err(err("duration", "must be at least 5s".into()));
    }
    let written_duration = duration_field("duration", &spec.duration)?;
    // A duration given on the command line scales the whole timeline (ramp, measure point,
    // window), so a shortened run keeps the scenario's shape.
    let scale = |d: Duration| -> Duration {
        if overrides.duration.is_some() && !written_duration.is_zero() {
            d.mul_f64(duration.as_secs_f64() / written_duration.as_secs_f64())
        } else {
            d
        }
    };
    let ramp = match &spec.viewers.ramp {
        Some(value) => scale(duration_field("viewers.ramp", value)?),
        None => Duration::ZERO,
    };
    if ramp >= duration {
        return Err(err(
            "viewers.ramp",
            format!(
                "the ramp ({}) must end before the run does (duration {})",
                humantime::format_duration(ramp),
                humantime::format_duration(duration)
            ),
        ));
    }
    let sampling_interval = match &spec.sampling_interval {
        Some(value) => duration_field("sampling_interval", value)?,
        None => Duration::from_secs(2),
    };
    if sampling_interval < Duration::from_millis(500) || sampling_interval > duration / 2 {
        return Err(err(
            "sampling_interval",
            "must be between 500ms and half the duration".into(),
        ));
    }
    // With duration overridden (shorter runs), a measure point beyond the end moves to it.
    let measure_at = match &spec.measure_at {
        Some(value) => scale(duration_field("measure_at", value)?),
        None => duration,
    };
    if measure_at > duration && overrides.duration.is_none() {
        return Err(err(
            "measure_at",
            format!(
                "{} is after the end of the run ({}); choose a point within the duration",
                humantime::format_duration(measure_at),
                humantime::format_duration(duration)
            ),
        ));
    }
    let measure_at = measure_at.min(duration);
    let steady_window = match &spec.steady_window {
        Some(value) => scale(duration_field("steady_window", value)?),
        None => scale(Duration::from_secs(30)).min(measure_at),
    };
    // A shortened run samples often enough to keep two samples in its window.
    let sampling_interval = if overrides.duration.is_some() {
        sampling_interval
            .min(steady_window / 2)
            .max(Duration::from_millis(500))
    } else {
        sampling_interval
    };
    if steady_window > measure_at || steady_window < sampling_interval * 2 {
        return Err(err(
            "steady_window",
            "must hold at least two samples and end at measure_at (start at or after 0s)".into(),
        ));
    }

    let p2p_off_share = spec.viewers.p2p_off_share.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&p2p_off_share) || p2p_off_share.is_nan() {
        return Err(err(
            "viewers.p2p_off_share",
            format!("{p2p_off_share} is not a share; use a number from 0.0 to 1.0"),
        ));
    }
    if let Some(network) = &spec.viewers.network {
        check_network(network, "viewers.network", &err)?;
    }
    let alt_network = match &spec.viewers.alt_network {
        Some(alt) => {
            if !(0.0..=1.0).contains(&alt.share) {
                return Err(err(
                    "viewers.alt_network.share",
                    format!("{} is not a share; use a number from 0.0 to 1.0", alt.share),
                ));
            }
            check_network(&alt.profile, "viewers.alt_network.profile", &err)?;
            Some((alt.share, alt.profile))
        }
        None => None,
    };

    let t = &spec.target;
    let latency = t.latency.unwrap_or(Latency::Normal);
    if t.video == VideoKind::Vod && t.latency.is_some() {
        return Err(err(
            "target.latency",
            "applies to live videos only; remove it or set `video: live`".into(),
        ));
    }
    match t.kind {
        TargetKind::Peertube => {
            let url = t.url.as_deref().ok_or_else(|| {
                err(
                    "target",
                    "`kind: peertube` needs `url:` (the video's watch or embed URL)".into(),
                )
            })?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(err("target.url", format!("`{url}` is not an http(s) URL")));
            }
            if let Some(exporter) = &t.exporter {
                if !(exporter.starts_with("http://") || exporter.starts_with("https://")) {
                    return Err(err(
                        "target.exporter",
                        format!("`{exporter}` is not an http(s) URL; e.g. http://127.0.0.1:9091/metrics"),
                    ));
                }
            }
            for (field, value) in [
                ("target.metrics_interval", &t.metrics_interval),
                ("target.vod_length", &t.vod_length),
            ] {
                if value.is_some() {
                    return Err(err(field, "applies to `kind: refsite` only".into()));
                }
            }
        }
        TargetKind::Refsite => {
            for (field, value) in [("target.url", &t.url), ("target.exporter", &t.exporter)] {
                if value.is_some() {
                    return Err(err(
                        field,
                        "refsite is started by the run itself; remove this field (it applies to `kind: peertube`)".into(),
                    ));
                }
            }
        }
    }
    let metrics_interval = match &t.metrics_interval {
        Some(value) => duration_field("target.metrics_interval", value)?,
        None => Duration::from_secs(15),
    };
    if metrics_interval < Duration::from_secs(1) {
        return Err(err("target.metrics_interval", "must be at least 1s".into()));
    }
    let vod_length = match &t.vod_length {
        Some(value) => duration_field("target.vod_length", value)?,
        None => Duration::from_secs(120),
    };
    if vod_length < Duration::from_secs(10) || vod_length > Duration::from_secs(3600) {
        return Err(err(
            "target.vod_length",
            "must be between 10s and 1h".into(),
        ));
    }

    let max_failed_viewers = match &spec.max_failed_viewers {
        None => 0,
        Some(FailedThreshold::Count(n)) => *n,
        Some(FailedThreshold::Share(s)) => {
            let share = s
                .strip_suffix('%')
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| (0.0..=100.0).contains(v))
                .ok_or_else(|| {
                    err(
                        "max_failed_viewers",
                        format!("`{s}` is neither a count (e.g. 2) nor a percentage (e.g. \"5%\")"),
                    )
                })?;
            (viewers as f64 * share / 100.0).floor() as u32
        }
    };

    let fleet = spec
        .fleet
        .plan(viewers)
        .map_err(|(field, message)| err(&format!("fleet.{field}"), message))?;

    if let Some(n) = &spec.viewers.network {
        check_tc_fleet(n, "viewers.network", &fleet, &err)?;
    }
    if let Some((_, n)) = &alt_network {
        check_tc_fleet(n, "viewers.alt_network.profile", &fleet, &err)?;
    }

    let mut yaml = text.to_string();
    if overrides.viewers.is_some() || overrides.duration.is_some() {
        yaml.push_str(&format!(
            "\n# Overridden on the command line: viewers.count = {viewers}, duration = {}\n",
            humantime::format_duration(duration)
        ));
    }
    if let Some(kind) = overrides.fleet {
        yaml.push_str(&format!(
            "# Overridden on the command line: fleet.kind = {kind}\n"
        ));
    }
    if let Some(apply) = overrides.apply {
        yaml.push_str(&format!(
            "# Overridden on the command line: every network profile's apply = {apply}\n"
        ));
    }

    Ok(Plan {
        name: spec.name,
        description: spec.description,
        target: TargetPlan {
            kind: t.kind,
            video: t.video,
            latency,
            url: t.url.clone(),
            exporter: t.exporter.clone(),
            metrics_interval,
            vod_length,
        },
        viewers,
        ramp,
        p2p_off_share,
        network: spec.viewers.network.map(|n| with_throttling(n, &fleet)),
        alt_network: alt_network.map(|(share, n)| (share, with_throttling(n, &fleet))),
        duration,
        sampling_interval,
        measure_at,
        steady_window,
        max_failed_viewers,
        fleet,
        yaml,
    })
}

/// `apply: tc` where the fleet gives viewers no interfaces of their own is refused before
/// anything starts (Grids are checked per slot at run time: only their nodes know).
fn check_tc_fleet(
    network: &NetworkProfile,
    field: &str,
    fleet: &FleetPlan,
    err: &dyn Fn(&str, String) -> ScenarioError,
) -> Result<(), ScenarioError> {
    if network.apply == Some(Throttling::Tc) && matches!(fleet, FleetPlan::Local(_)) {
        return Err(err(
            &format!("{field}.apply"),
            "`tc` needs one network interface per viewer, which the local fleet does not \
             have; use `fleet: kind: netns` (as root) or `apply: http-only`"
                .into(),
        ));
    }
    Ok(())
}

/// Fills in the fleet's default throttling where the plan can know it: tc where every
/// viewer has its own interface (netns), the 2023 conditions (HTTP only) on the local fleet.
/// On a Grid only the nodes know whether their slots shape: left unset, each viewer then
/// gets tc when its slot is shaped and HTTP-only rules otherwise.
fn with_throttling(mut network: NetworkProfile, fleet: &FleetPlan) -> NetworkProfile {
    if network.apply.is_none() {
        network.apply = match fleet {
            FleetPlan::Netns(_) => Some(Throttling::Tc),
            FleetPlan::Local(_) => Some(Throttling::HttpOnly),
            FleetPlan::Grid(_) | FleetPlan::Hcloud(_) => None,
        };
    }
    network
}

fn check_network(
    network: &NetworkProfile,
    field: &str,
    err: &dyn Fn(&str, String) -> ScenarioError,
) -> Result<(), ScenarioError> {
    for (name, value, max) in [
        ("download_kbps", network.download_kbps, 10_000_000),
        ("upload_kbps", network.upload_kbps, 10_000_000),
    ] {
        if let Some(v) = value {
            if v < 8 || v > max {
                return Err(err(
                    &format!("{field}.{name}"),
                    format!("{v} kbit/s is out of range; use 8 to {max} kbit/s"),
                ));
            }
        }
    }
    if let Some(latency) = network.latency_ms {
        if latency > 10_000 {
            return Err(err(
                &format!("{field}.latency_ms"),
                format!("{latency} ms is out of range; use 0 to 10000 ms"),
            ));
        }
    }
    Ok(())
}
