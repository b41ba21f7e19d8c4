//! `calibration.md`: one row per profile, ratios against the `default` profile, the flags
//! of each, and the command that measured them.

use super::Calibration;
use std::fmt::Write;

/// A relative change, e.g. `−48%`, or `–` without a reference.
fn change(value: f64, reference: Option<f64>) -> String {
    match reference {
        Some(r) if r > 0.0 => {
            let pct = (value / r - 1.0) * 100.0;
            let sign = if pct < 0.0 { "−" } else { "+" };
            format!("{sign}{:.0}%", pct.abs())
        }
        _ => "–".into(),
    }
}

pub fn markdown(c: &Calibration) -> String {
    let mut s = String::new();
    let reference = c.profile("default");
    let _ = writeln!(s, "# Cost per viewer, by browser profile\n");
    let _ = writeln!(
        s,
        "{} viewers per profile, {}; {} s warm-up after every first frame, then a {} s window. Host: {} ({} cores, {:.0} GiB), {}. Chromium: {}.\n",
        c.viewers,
        c.scenario,
        c.warmup_s,
        c.window_s,
        c.host.cpu_model,
        c.host.cpus,
        c.host.mem_total_bytes as f64 / (1u64 << 30) as f64,
        c.host.kernel,
        c.chromium
    );
    let _ = writeln!(
        s,
        "| profile | played | processes / viewer | PSS MB / viewer (max) | CPU cores / viewer | fetched kbit/s / viewer (HTTP + P2P) | stalls | TTFF p50 | vs default: PSS / CPU / bytes |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for p in &c.profiles {
        let vs = if p.profile.name == "default" || p.viewers_measured == 0 {
            "–".to_string()
        } else {
            format!(
                "{} / {} / {}",
                change(p.pss_mb_per_viewer, reference.map(|r| r.pss_mb_per_viewer)),
                change(
                    p.cpu_cores_per_viewer,
                    reference.map(|r| r.cpu_cores_per_viewer)
                ),
                change(
                    p.download_kbps_per_viewer(),
                    reference.map(|r| r.download_kbps_per_viewer())
                ),
            )
        };
        let _ = writeln!(
            s,
            "| {} | {}/{} | {:.1} | {:.0} ({:.0}) | {:.3} | {:.0} ({:.0} + {:.0}) | {} | {} | {} |",
            p.profile.name,
            p.viewers_measured,
            p.viewers,
            p.processes_per_viewer,
            p.pss_mb_per_viewer,
            p.pss_mb_per_viewer_max,
            p.cpu_cores_per_viewer,
            p.download_kbps_per_viewer(),
            p.http_kbps_per_viewer,
            p.p2p_down_kbps_per_viewer,
            p.stalls,
            p.ttff_ms_median
                .map(|ms| format!("{:.1} s", ms / 1000.0))
                .unwrap_or_else(|| "–".into()),
            vs
        );
    }
    let _ = writeln!(s, "\nHow to read it: PSS is summed over every browser process (`/proc/<pid>/smaps_rollup`, shared pages split among their users) and averaged over the window; CPU is the browsers' CPU time over the window. A cheaper profile counts only if it fetched the same bytes (the last ratio near 0%) without more stalls.\n");
    let _ = writeln!(s, "## Flags\n");
    for p in &c.profiles {
        let _ = writeln!(s, "- `{}`: `{}`", p.profile.name, p.profile.flags.join(" "));
        for failure in &p.failures {
            let _ = writeln!(s, "  - not measured: {failure}");
        }
    }
    if let Some(project) = c.profile("project") {
        let _ = writeln!(
            s,
            "\n`viewerfleet plan --calibration calibration.json` sizes nodes with the `project` profile: {:.3} cores and {:.0} MB per viewer.",
            project.cpu_cores_per_viewer, project.pss_mb_per_viewer_max
        );
    }
    let _ = writeln!(s, "\nRe-run: `{}`", c.command);
    s
}

#[cfg(test)]
mod tests {
    use super::super::{BrowserProfile, ProfileFigures};
    use super::*;

    fn figures(name: &str, pss: f64, cpu: f64, http: f64) -> ProfileFigures {
        ProfileFigures {
            profile: BrowserProfile {
                name: name.into(),
                flags: vec!["--headless=new".into()],
            },
            viewers: 4,
            viewers_measured: 4,
            failures: vec![],
            processes_per_viewer: 8.0,
            pss_mb_per_viewer: pss,
            pss_mb_per_viewer_max: pss + 10.0,
            cpu_cores_per_viewer: cpu,
            http_kbps_per_viewer: http,
            p2p_down_kbps_per_viewer: 0.0,
            p2p_up_kbps_per_viewer: 0.0,
            stalls: 0,
            ttff_ms_median: Some(4200.0),
            window_s: 40.0,
        }
    }

    #[test]
    fn ratios_are_against_the_default_profile() {
        let c = Calibration {
            created: "2026-11-30T00:00:00Z".into(),
            host: Default::default(),
            chromium: "Chromium 156".into(),
            scenario: "built-in".into(),
            viewers: 4,
            warmup_s: 15.0,
            window_s: 40.0,
            command: "viewerfleet calibrate".into(),
            profiles: vec![
                figures("default", 300.0, 0.2, 650.0),
                figures("project", 150.0, 0.15, 650.0),
            ],
        };
        let md = markdown(&c);
        assert!(md.contains("| project | 4/4 | 8.0 | 150 (160) | 0.150 | 650 (650 + 0) | 0 | 4.2 s | −50% / −25% / +0% |"), "{md}");
        assert!(md.contains("| default | 4/4 |"));
        assert!(md.contains("0.150 cores and 160 MB per viewer"));
    }
}
