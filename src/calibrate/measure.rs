//! Measuring one profile: K viewers play the target through one chromedriver; after a
//! warm-up, the browsers' PSS (sampled) and CPU time (delta) over a window are summed over
//! every process below the driver, and the players' byte counters say what they fetched,
//! so a cheaper profile can be checked to request the same bytes.

use super::profiles::BrowserProfile;
use crate::model::scenario::ViewerPlan;
use crate::sys::hostinfo;
use crate::sys::shutdown::Shutdown;
use crate::target::{PlayerStats, Target};
use crate::viewer::{SlotShaping, Viewer, ViewerTimeouts};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What one profile cost, per playing viewer, over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigures {
    pub profile: BrowserProfile,
    pub viewers: u32,
    /// Viewers that played and were read at both ends of the window.
    pub viewers_measured: u32,
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
}

impl ProfileFigures {
    /// Everything a viewer downloaded (HTTP + P2P): what "the same bytes" compares.
    pub fn download_kbps_per_viewer(&self) -> f64 {
        self.http_kbps_per_viewer + self.p2p_down_kbps_per_viewer
    }
}

/// How a profile is measured.
pub struct MeasureSpec<'a> {
    pub webdriver_url: String,
    pub chromium: String,
    pub driver_pid: u32,
    pub viewers: &'a [ViewerPlan],
    pub warmup: Duration,
    pub window: Duration,
    pub pss_every: Duration,
}

/// Plays, measures and closes every viewer of `profile`. Viewers are closed on every path,
/// including a shutdown signal (then the figures are `None`).
pub async fn measure_profile(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    target: &dyn Target,
    shutdown: &Shutdown,
) -> Option<ProfileFigures> {
    // Outside the measurement, so a shutdown that drops it still closes every viewer.
    let mut viewers: Vec<(u32, Viewer)> = Vec::new();
    let figures = tokio::select! {
        f = play_and_measure(spec, profile, target, &mut viewers) => Some(f),
        _ = shutdown.wait() => None,
    };
    for (_, viewer) in viewers {
        viewer.close().await;
    }
    wait_for_browsers_gone(spec.driver_pid, Duration::from_secs(20)).await;
    figures
}

async fn play_and_measure(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    target: &dyn Target,
    viewers: &mut Vec<(u32, Viewer)>,
) -> ProfileFigures {
    let mut failures = Vec::new();
    let slot = crate::viewer::ViewerSlot {
        webdriver_url: spec.webdriver_url.clone(),
        chrome_binary: Some(spec.chromium.clone()),
        extra_args: vec!["--remote-debugging-pipe".into()],
        node: "local".into(),
        address: None,
        shaping: SlotShaping::NONE,
    };
    // Sessions one at a time (chromedriver starts browsers serially anyway), pages opened
    // as soon as each exists.
    for plan in spec.viewers {
        match start_viewer(&slot, profile, plan, target).await {
            Ok(viewer) => viewers.push((plan.index, viewer)),
            Err(err) => failures.push(format!("viewer {}: {err}", plan.index)),
        }
    }
    let first_frames = futures::future::join_all(
        viewers
            .iter()
            .map(|(_, v)| v.wait_first_frame(target, Duration::from_millis(500))),
    )
    .await;
    let mut ttff = Vec::new();
    let mut playing = Vec::new();
    for (i, result) in first_frames.into_iter().enumerate() {
        match result {
            Ok(ms) => {
                ttff.push(ms);
                playing.push(i);
            }
            Err(err) => failures.push(format!("viewer {}: {err}", viewers[i].0)),
        }
    }
    tokio::time::sleep(spec.warmup).await;

    let read_all = || async {
        futures::future::join_all(playing.iter().map(|&i| viewers[i].1.read(target))).await
    };
    let cpu_before = cpu_by_pid(spec.driver_pid);
    let stats_before = read_all().await;
    let started = Instant::now();
    let mut pss_samples = Vec::new();
    let mut process_counts = Vec::new();
    loop {
        let (pss, processes) = tree_pss(spec.driver_pid);
        pss_samples.push(pss);
        process_counts.push(processes);
        let left = spec.window.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(left.min(spec.pss_every)).await;
    }
    let stats_after = read_all().await;
    let window_s = started.elapsed().as_secs_f64();
    let cpu_after = cpu_by_pid(spec.driver_pid);

    let cpu_s: f64 = cpu_after
        .iter()
        .map(|(pid, after)| after - cpu_before.get(pid).copied().unwrap_or(0.0))
        .filter(|d| *d > 0.0)
        .sum();
    let mut deltas = Vec::new();
    for (before, after) in stats_before.iter().zip(&stats_after) {
        match (before, after) {
            (Ok(b), Ok(a)) => deltas.push(delta(b, a)),
            (Err(err), _) | (_, Err(err)) => failures.push(format!("reading stats: {err}")),
        }
    }
    let measured = deltas.len().max(1) as f64;
    let per_viewer_kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / window_s.max(1e-3) / measured;
    let sum = |f: fn(&StatsDelta) -> u64| deltas.iter().map(f).sum::<u64>();
    let n_playing = playing.len().max(1) as f64;
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    ttff.sort_by(f64::total_cmp);
    ProfileFigures {
        profile: profile.clone(),
        viewers: spec.viewers.len() as u32,
        viewers_measured: deltas.len() as u32,
        failures,
        processes_per_viewer: mean(&process_counts) / n_playing,
        pss_mb_per_viewer: mean(&pss_samples) / 1e6 / n_playing,
        pss_mb_per_viewer_max: pss_samples.iter().copied().max().unwrap_or(0) as f64
            / 1e6
            / n_playing,
        cpu_cores_per_viewer: cpu_s / window_s.max(1e-3) / n_playing,
        http_kbps_per_viewer: per_viewer_kbps(sum(|d| d.http)),
        p2p_down_kbps_per_viewer: per_viewer_kbps(sum(|d| d.p2p_down)),
        p2p_up_kbps_per_viewer: per_viewer_kbps(sum(|d| d.p2p_up)),
        stalls: deltas.iter().map(|d| d.stalls).sum(),
        ttff_ms_median: (!ttff.is_empty()).then(|| ttff[ttff.len() / 2]),
        window_s,
    }
}

async fn start_viewer(
    slot: &crate::viewer::ViewerSlot,
    profile: &BrowserProfile,
    plan: &ViewerPlan,
    target: &dyn Target,
) -> Result<Viewer, crate::viewer::ViewerError> {
    let viewer = Viewer::create_with_flags(slot, ViewerTimeouts::default(), &profile.flags).await?;
    let prepared = async {
        if let Some(network) = &plan.network {
            viewer.throttle(network, slot).await?;
        }
        viewer.open(target, plan.p2p).await
    }
    .await;
    match prepared {
        Ok(_) => Ok(viewer),
        Err(err) => {
            viewer.close().await;
            Err(err)
        }
    }
}

struct StatsDelta {
    http: u64,
    p2p_down: u64,
    p2p_up: u64,
    stalls: u32,
}

fn delta(before: &PlayerStats, after: &PlayerStats) -> StatsDelta {
    StatsDelta {
        http: after.http_bytes.saturating_sub(before.http_bytes),
        p2p_down: after.p2p_down_bytes.saturating_sub(before.p2p_down_bytes),
        p2p_up: after.p2p_up_bytes.saturating_sub(before.p2p_up_bytes),
        stalls: after.stalls.saturating_sub(before.stalls),
    }
}

fn cpu_by_pid(root: u32) -> HashMap<u32, f64> {
    hostinfo::descendants_cpu(root).into_iter().collect()
}

/// PSS summed over every process below the driver (the browsers), and how many there are.
fn tree_pss(root: u32) -> (u64, u64) {
    let members = hostinfo::descendants_cpu(root);
    let pss = members
        .iter()
        .filter_map(|(pid, _)| hostinfo::pss_bytes(*pid))
        .sum();
    (pss, members.len() as u64)
}

/// Waits until the driver has no browser left, so the next profile starts from zero.
async fn wait_for_browsers_gone(root: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !hostinfo::descendants_cpu(root).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_never_go_negative() {
        let a = PlayerStats {
            http_bytes: 100,
            p2p_down_bytes: 50,
            stalls: 2,
            ..Default::default()
        };
        let b = PlayerStats {
            http_bytes: 300,
            p2p_down_bytes: 40,
            stalls: 3,
            ..Default::default()
        };
        let d = delta(&a, &b);
        assert_eq!((d.http, d.p2p_down, d.p2p_up, d.stalls), (200, 0, 0, 1));
    }
}
