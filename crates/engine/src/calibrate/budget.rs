//! What `plan --calibration` takes from a calibration: the cost of one of viewerfleet's
//! viewers (the `project` profile and its packed variants, which share its flags and the
//! decode lever) for the scenario's video and viewers per browser. A row measured at that
//! packing is used as it is (means over rounds: CPU averaged, memory at its peak); else the
//! cost is fitted over the packings measured as a fixed part per viewer plus a part per
//! browser shared by its viewers (cost = viewer + browser / N), and read at N.

use super::{BrowserProfile, Calibration, FidelityVerdict, ProfileFigures};
use crate::model::kinds::VideoKind;

/// Per-viewer CPU and memory for a video and a packing, and where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibratedBudget {
    pub cpu_per_viewer: f64,
    pub memory_mb_per_viewer: f64,
    /// e.g. `project, live, 4 rounds` or `fitted over 1 and 4 per browser (vod)`.
    pub source: String,
    /// A row used failed its fidelity check against the default profile.
    pub fidelity_failed: bool,
}

/// One of viewerfleet's own profiles (any packing), as opposed to `default` or a candidate.
fn is_viewerfleet(p: &BrowserProfile) -> bool {
    matches!(p.name.as_str(), "project" | "packed")
        || (p.no_video_track && p.flags == BrowserProfile::project().flags)
}

impl Calibration {
    /// The budget for `video` at `per_browser` viewers per browser; falls back to the other
    /// video's rows (named in `source`) when this one was not measured. `None`: no row of
    /// viewerfleet's profiles played.
    pub fn budget(&self, video: VideoKind, per_browser: u32) -> Option<CalibratedBudget> {
        let usable = |v: VideoKind| -> Vec<&ProfileFigures> {
            self.rows(v)
                .filter(|p| p.viewers_measured > 0 && is_viewerfleet(&p.profile))
                .collect()
        };
        let (rows, note) = match usable(video) {
            rows if !rows.is_empty() => (rows, String::new()),
            _ => {
                let other = match video {
                    VideoKind::Live => VideoKind::Vod,
                    VideoKind::Vod => VideoKind::Live,
                };
                (
                    usable(other),
                    format!("; {video} not measured, {other} used"),
                )
            }
        };
        if rows.is_empty() {
            return None;
        }
        let failed = |n: Option<u32>| {
            rows.iter()
                .filter(|p| n.is_none_or(|n| p.profile.per_browser.max(1) == n))
                .any(|p| {
                    p.fidelity
                        .as_ref()
                        .is_some_and(|f| f.verdict == FidelityVerdict::Fail)
                })
        };
        // Mean per packing.
        let mut packings: Vec<(u32, f64, f64, usize)> = Vec::new();
        for p in &rows {
            let n = p.profile.per_browser.max(1);
            match packings.iter_mut().find(|(m, ..)| *m == n) {
                Some((_, cpu, mem, k)) => {
                    *cpu += p.cpu_cores_per_viewer;
                    *mem += p.pss_mb_per_viewer_max;
                    *k += 1;
                }
                None => packings.push((n, p.cpu_cores_per_viewer, p.pss_mb_per_viewer_max, 1)),
            }
        }
        let means: Vec<(u32, f64, f64)> = packings
            .iter()
            .map(|(n, cpu, mem, k)| (*n, cpu / *k as f64, mem / *k as f64))
            .collect();
        let video_name = rows[0].video;
        if let Some((n, cpu, mem)) = means.iter().find(|(n, ..)| *n == per_browser) {
            let k = packings.iter().find(|p| p.0 == *n).map_or(0, |p| p.3);
            return Some(CalibratedBudget {
                cpu_per_viewer: *cpu,
                memory_mb_per_viewer: *mem,
                source: format!("{n} per browser, {video_name}, {k} row(s){note}"),
                fidelity_failed: failed(Some(*n)),
            });
        }
        let fit = |pick: fn(&(u32, f64, f64)) -> f64| fit_per_browser(&means, pick, per_browser);
        let measured: Vec<String> = means.iter().map(|(n, ..)| n.to_string()).collect();
        let largest = means.iter().map(|m| m.0).max().unwrap_or(1);
        let how = if per_browser > largest || means.len() == 1 {
            format!("measured at {largest} per browser ({video_name}), taken for {per_browser}")
        } else {
            format!(
                "fitted over {} per browser ({video_name}) for {per_browser}",
                measured.join(" and ")
            )
        };
        Some(CalibratedBudget {
            cpu_per_viewer: fit(|m| m.1),
            memory_mb_per_viewer: fit(|m| m.2),
            source: format!("{how}{note}"),
            fidelity_failed: failed(None),
        })
    }
}

/// Least squares of cost = a + b / N over the packings measured, read at `n`. Beyond the
/// largest packing measured the cost measured there is taken: an extrapolation does not
/// promise more than was seen.
fn fit_per_browser(means: &[(u32, f64, f64)], pick: fn(&(u32, f64, f64)) -> f64, n: u32) -> f64 {
    let Some(largest) = means.iter().max_by_key(|m| m.0) else {
        return 0.0;
    };
    if n >= largest.0 || means.len() == 1 {
        return pick(largest);
    }
    let xs: Vec<f64> = means.iter().map(|m| 1.0 / m.0 as f64).collect();
    let ys: Vec<f64> = means.iter().map(pick).collect();
    let k = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / k, ys.iter().sum::<f64>() / k);
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let a = my - b * mx;
    (a + b / n.max(1) as f64).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, per_browser: u32, video: VideoKind, cpu: f64, mem: f64) -> ProfileFigures {
        let mut profile = if name == "default" {
            BrowserProfile::default_chromedriver()
        } else {
            BrowserProfile::project()
        };
        profile.name = name.into();
        profile.per_browser = per_browser;
        let mut f = ProfileFigures::empty(profile, 4);
        f.video = video;
        f.viewers_measured = 4;
        f.cpu_cores_per_viewer = cpu;
        f.pss_mb_per_viewer_max = mem;
        f
    }

    fn calibration(rows: Vec<ProfileFigures>) -> Calibration {
        Calibration {
            created: String::new(),
            host: Default::default(),
            chromium: String::new(),
            scenario: String::new(),
            videos: vec![VideoKind::Live, VideoKind::Vod],
            viewers: 4,
            repeat: 1,
            warmup_s: 15.0,
            window_s: 60.0,
            command: String::new(),
            profiles: rows,
        }
    }

    #[test]
    fn a_measured_packing_is_used_as_it_is_per_video() {
        let c = calibration(vec![
            row("default", 1, VideoKind::Live, 0.16, 270.0),
            row("project", 1, VideoKind::Live, 0.08, 190.0),
            row("packed", 4, VideoKind::Live, 0.06, 130.0),
            row("packed", 4, VideoKind::Live, 0.07, 140.0),
            row("project", 1, VideoKind::Vod, 0.10, 240.0),
        ]);
        let b = c.budget(VideoKind::Live, 4).unwrap();
        assert!((b.cpu_per_viewer - 0.065).abs() < 1e-9, "{b:?}");
        assert!((b.memory_mb_per_viewer - 135.0).abs() < 1e-9, "{b:?}");
        assert!(b.source.contains("2 row(s)"), "{}", b.source);
        let b = c.budget(VideoKind::Vod, 1).unwrap();
        assert_eq!((b.cpu_per_viewer, b.memory_mb_per_viewer), (0.10, 240.0));
        // The default profile is never a budget.
        let only_default = calibration(vec![row("default", 1, VideoKind::Live, 0.16, 270.0)]);
        assert_eq!(only_default.budget(VideoKind::Live, 1), None);
    }

    #[test]
    fn other_packings_are_fitted_as_viewer_plus_browser_over_n() {
        // cost = 0.05 + 0.04 / N: 0.09 at 1, 0.06 at 4 → 0.055 at 8.
        let c = calibration(vec![
            row("project", 1, VideoKind::Live, 0.09, 200.0),
            row("packed", 4, VideoKind::Live, 0.06, 110.0),
        ]);
        let b = c.budget(VideoKind::Live, 8).unwrap();
        assert!(
            (b.cpu_per_viewer - 0.06).abs() < 1e-9,
            "no promise beyond N=4: {b:?}"
        );
        assert!(
            b.source.starts_with("measured at 4 per browser"),
            "{}",
            b.source
        );
        let b = c.budget(VideoKind::Live, 2).unwrap();
        assert!((b.cpu_per_viewer - 0.07).abs() < 1e-9, "{b:?}");
        assert!((b.memory_mb_per_viewer - 140.0).abs() < 1e-9, "{b:?}");
        assert!(
            b.source.starts_with("fitted over 1 and 4 per browser"),
            "{}",
            b.source
        );
        // A VOD scenario with only live rows says so.
        let b = c.budget(VideoKind::Vod, 1).unwrap();
        assert!(
            b.source.contains("vod not measured, live used"),
            "{}",
            b.source
        );
    }
}
