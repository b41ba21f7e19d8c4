//! `calibration.md`: per video, one row per profile and round with its cost and the ratios
//! against the `default` profile of the same round, then the fidelity of each against it
//! (the rule's checks, segments over time, renditions), a summary over rounds, the flags of
//! each profile, and the command that measured them.

use super::{Calibration, ProfileFigures};
use crate::model::kinds::VideoKind;
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

fn ms(v: Option<f64>) -> String {
    v.map(|ms| format!("{:.1} s", ms / 1000.0))
        .unwrap_or_else(|| "–".into())
}

pub fn markdown(c: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Cost per viewer, by browser profile\n");
    let _ = writeln!(
        s,
        "{} viewers per profile, {}; {} s warm-up after every first frame, then a {} s window; {} round(s), round robin. Host: {} ({} cores, {:.0} GiB), {}. Chromium: {}.\n",
        c.viewers,
        c.scenario,
        c.warmup_s,
        c.window_s,
        c.repeat,
        c.host.cpu_model,
        c.host.cpus,
        c.host.mem_total_bytes as f64 / (1u64 << 30) as f64,
        c.host.kernel,
        c.chromium
    );
    let videos = if c.videos.is_empty() {
        vec![VideoKind::Live]
    } else {
        c.videos.clone()
    };
    for video in videos {
        let rows: Vec<&ProfileFigures> = c.rows(video).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {video}\n");
        cost_table(&mut s, c, &rows);
        fidelity_table(&mut s, &rows);
        if c.repeat > 1 {
            summary_table(&mut s, &rows);
        }
    }
    let _ = writeln!(s, "How to read it: PSS is summed over every browser process (`/proc/<pid>/smaps_rollup`, shared pages split among their users) and averaged over the window; CPU is the browsers' CPU time over the window; both are divided by the viewers that played. A cheaper profile counts only if its fidelity passes: bytes requested within ±5% of the default's (over the window for live, since each page opened for VOD, whose player fetches ahead), P2P share within ±5 points, no more stalls, every viewer played; `inconclusive` when one segment weighs more than 5% of the bytes compared.\n");
    let _ = writeln!(s, "## Profiles\n");
    let mut seen = Vec::new();
    for p in &c.profiles {
        if !seen.contains(&&p.profile.name) {
            seen.push(&p.profile.name);
            let _ = writeln!(
                s,
                "- `{}` ({}): `{}`",
                p.profile.name,
                p.profile.levers(),
                p.profile.flags.join(" ")
            );
        }
        for failure in &p.failures {
            let _ = writeln!(
                s,
                "  - {} round {}: not measured: {failure}",
                p.video,
                p.round + 1
            );
        }
    }
    for video in &c.videos {
        for n in [1, super::PACKED_PER_BROWSER] {
            if let Some(b) = c.budget(*video, n) {
                let _ = writeln!(
                    s,
                    "\n`viewerfleet plan --calibration calibration.json` sizes a {video} scenario with {n} viewer(s) per browser at {:.3} cores and {:.0} MB per viewer ({}){}.",
                    b.cpu_per_viewer,
                    b.memory_mb_per_viewer,
                    b.source,
                    if b.fidelity_failed { "; a row used FAILED its fidelity check" } else { "" }
                );
            }
        }
    }
    let _ = writeln!(s, "\nRe-run: `{}`", c.command);
    s
}

fn reference<'a>(rows: &[&'a ProfileFigures], round: u32) -> Option<&'a ProfileFigures> {
    rows.iter()
        .copied()
        .find(|r| r.profile.name == "default" && r.round == round && r.viewers_measured > 0)
}

fn cost_table(s: &mut String, c: &Calibration, rows: &[&ProfileFigures]) {
    let _ = writeln!(
        s,
        "| profile | round | played | browsers | processes / viewer | PSS MB / viewer (max) | CPU cores / viewer | fetched kbit/s / viewer (HTTP + P2P) | stalls | TTFF p50 | vs default: PSS / CPU | fidelity |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for p in rows {
        let r = reference(rows, p.round);
        let vs = if p.profile.name == "default" || p.viewers_measured == 0 {
            "–".to_string()
        } else {
            format!(
                "{} / {}",
                change(p.pss_mb_per_viewer, r.map(|r| r.pss_mb_per_viewer)),
                change(p.cpu_cores_per_viewer, r.map(|r| r.cpu_cores_per_viewer)),
            )
        };
        let round = if c.repeat > 1 {
            (p.round + 1).to_string()
        } else {
            "1".into()
        };
        let _ = writeln!(
            s,
            "| {} | {round} | {}/{} | {} | {:.1} | {:.0} ({:.0}) | {:.3} | {:.0} ({:.0} + {:.0}) | {} | {} | {} | {} |",
            p.profile.name,
            p.viewers_measured,
            p.viewers,
            p.browsers,
            p.processes_per_viewer,
            p.pss_mb_per_viewer,
            p.pss_mb_per_viewer_max,
            p.cpu_cores_per_viewer,
            p.download_kbps_per_viewer(),
            p.http_kbps_per_viewer,
            p.p2p_down_kbps_per_viewer,
            p.stalls,
            ms(p.ttff_ms_median),
            vs,
            p.fidelity
                .as_ref()
                .map(|f| f.verdict.as_str())
                .unwrap_or("–"),
        );
    }
    let _ = writeln!(s);
}

fn fidelity_table(s: &mut String, rows: &[&ProfileFigures]) {
    let _ = writeln!(
        s,
        "| profile | round | bytes / viewer ({}) | P2P share | stalls | TTFF | segments / viewer | segments by +20/+40/+60 s after opening | renditions (share of segments) | video track off | verdict |",
        rows.first().map(|r| r.bytes_basis.words()).unwrap_or("")
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|");
    for p in rows {
        let (bytes, share, stalls, ttff, segments, verdict) = match &p.fidelity {
            Some(f) => (
                format!(
                    "{:.0} kB ({:+.1}%)",
                    p.download_bytes_per_viewer / 1000.0,
                    f.bytes_change_pct
                ),
                format!("{:.1}% ({:+.1})", p.p2p_share_pct, f.p2p_share_points),
                format!("{} (default {})", f.stalls, f.reference_stalls),
                format!(
                    "{}{}",
                    ms(p.ttff_ms_median),
                    f.ttff_change_ms
                        .map(|d| format!(" ({:+.1} s)", d / 1000.0))
                        .unwrap_or_default()
                ),
                format!(
                    "{:.1} ({:+.1}%)",
                    p.segments_per_viewer, f.segments_change_pct
                ),
                failing(f),
            ),
            None => (
                format!("{:.0} kB", p.download_bytes_per_viewer / 1000.0),
                format!("{:.1}%", p.p2p_share_pct),
                p.stalls.to_string(),
                ms(p.ttff_ms_median),
                format!("{:.1}", p.segments_per_viewer),
                "reference".to_string(),
            ),
        };
        let renditions = p
            .renditions
            .iter()
            .map(|(h, share)| format!("{h}p {share:.0}%"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "| {} | {} | {bytes} | {share} | {stalls} | {ttff} | {segments} | {} | {} | {} | {verdict} |",
            p.profile.name,
            p.round + 1,
            segments_at(p, &[20.0, 40.0, 60.0]),
            if renditions.is_empty() { "–".into() } else { renditions },
            match p.video_track_off {
                Some(true) => "yes",
                Some(false) => "no",
                None => "–",
            },
        );
    }
    let _ = writeln!(s);
}

/// `pass`, or the verdict with the rules that did not hold.
fn failing(f: &super::Fidelity) -> String {
    let broken: Vec<&str> = f
        .checks
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.text.as_str())
        .collect();
    if broken.is_empty() {
        f.verdict.as_str().to_string()
    } else {
        format!("{}: {}", f.verdict.as_str(), broken.join("; "))
    }
}

/// Segments requested per viewer by each time after its page opened.
fn segments_at(p: &ProfileFigures, at: &[f64]) -> String {
    let values: Vec<String> = at
        .iter()
        .map(|t| {
            p.over_time
                .iter()
                .find(|q| (q.t_s - t).abs() < 1e-6)
                .map(|q| format!("{:.1}", q.segments))
                .unwrap_or_else(|| "–".into())
        })
        .collect();
    values.join(" / ")
}

/// Mean and range over rounds per profile.
fn summary_table(s: &mut String, rows: &[&ProfileFigures]) {
    let _ = writeln!(
        s,
        "| profile | rounds | PSS MB / viewer: mean (range) | CPU cores / viewer: mean (range) | fidelity |"
    );
    let _ = writeln!(s, "|---|---:|---|---|---|");
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.profile.name.as_str()) {
            names.push(&r.profile.name);
        }
    }
    for name in names {
        let of: Vec<&&ProfileFigures> = rows
            .iter()
            .filter(|r| r.profile.name == name && r.viewers_measured > 0)
            .collect();
        if of.is_empty() {
            continue;
        }
        let stat = |f: fn(&ProfileFigures) -> f64| {
            let v: Vec<f64> = of.iter().map(|r| f(r)).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                    (a.min(*x), b.max(*x))
                });
            (mean, lo, hi)
        };
        let (pm, pl, ph) = stat(|r| r.pss_mb_per_viewer);
        let (cm, cl, ch) = stat(|r| r.cpu_cores_per_viewer);
        let verdicts: Vec<&str> = of
            .iter()
            .filter_map(|r| r.fidelity.as_ref().map(|f| f.verdict.as_str()))
            .collect();
        let _ = writeln!(
            s,
            "| {name} | {} | {pm:.0} ({pl:.0}–{ph:.0}) | {cm:.3} ({cl:.3}–{ch:.3}) | {} |",
            of.len(),
            if verdicts.is_empty() {
                "reference".to_string()
            } else {
                verdicts.join(", ")
            }
        );
    }
    let _ = writeln!(s);
}

#[cfg(test)]
mod tests {
    use super::super::{fidelity, BrowserProfile, ProfileFigures};
    use super::*;

    fn figures(profile: BrowserProfile, pss: f64, cpu: f64, round: u32) -> ProfileFigures {
        let mut f = ProfileFigures::empty(profile, 4);
        f.viewers_measured = 4;
        f.browsers = 4;
        f.round = round;
        f.processes_per_viewer = 8.0;
        f.pss_mb_per_viewer = pss;
        f.pss_mb_per_viewer_max = pss + 10.0;
        f.cpu_cores_per_viewer = cpu;
        f.http_kbps_per_viewer = 650.0;
        f.ttff_ms_median = Some(4200.0);
        f.window_s = 60.0;
        f.download_bytes_per_viewer = 4_875_000.0;
        f.segment_bytes_mean = 162_500.0;
        f.segments_per_viewer = 30.0;
        f.renditions = [("240".to_string(), 100.0)].into();
        let point = |t_s, segments| super::super::TimePoint {
            t_s,
            download_bytes: 0.0,
            p2p_bytes: 0.0,
            segments,
        };
        f.over_time = vec![point(10.0, 4.0), point(20.0, 9.0), point(40.0, 19.0)];
        f
    }

    #[test]
    fn ratios_and_fidelity_are_against_the_default_of_the_same_round() {
        let default = figures(BrowserProfile::default_chromedriver(), 300.0, 0.2, 0);
        let mut project = figures(BrowserProfile::project(), 150.0, 0.15, 0);
        project.fidelity = Some(fidelity::judge(&project, &default));
        let default2 = figures(BrowserProfile::default_chromedriver(), 250.0, 0.3, 1);
        let mut packed = figures(BrowserProfile::packed(), 100.0, 0.1, 1);
        packed.browsers = 1;
        packed.stalls = 2;
        packed.fidelity = Some(fidelity::judge(&packed, &default2));
        let c = Calibration {
            created: "2026-12-01T00:00:00Z".into(),
            host: Default::default(),
            chromium: "Chromium 156".into(),
            scenario: "built-in".into(),
            videos: vec![VideoKind::Live],
            viewers: 4,
            repeat: 2,
            warmup_s: 15.0,
            window_s: 60.0,
            command: "viewerfleet calibrate".into(),
            profiles: vec![default, project, default2, packed],
        };
        let md = markdown(&c);
        assert!(md.contains("| project | 1 | 4/4 | 4 | 8.0 | 150 (160) | 0.150 | 650 (650 + 0) | 0 | 4.2 s | −50% / −25% | pass |"), "{md}");
        assert!(md.contains("| packed | 2 | 4/4 | 1 |"), "{md}");
        assert!(md.contains("−60% / −67% | FAIL |"), "{md}");
        assert!(
            md.contains("FAIL: 2 stalls against 0 (no more allowed)"),
            "{md}"
        );
        assert!(
            md.contains("| 9.0 / 19.0 / – |"),
            "segments over time: {md}"
        );
        assert!(md.contains("240p 100%"), "{md}");
        assert!(
            md.contains("| project | 1 | 150 (150–150) | 0.150 (0.150–0.150) | pass |"),
            "{md}"
        );
        assert!(md.contains("sizes a live scenario with 1 viewer(s) per browser at 0.150 cores and 160 MB per viewer"), "{md}");
        assert!(
            md.contains("`packed` (4 per browser, video track off)"),
            "{md}"
        );
    }
}
