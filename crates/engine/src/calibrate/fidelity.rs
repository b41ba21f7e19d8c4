//! Does a cheaper profile still behave like the default one? Measured, not assumed: each
//! profile's viewers are set against the `default` profile's of the same video and round,
//! on what they requested (bytes, segments over time, renditions chosen by ABR), the P2P
//! share, stalls and time to first frame. The pass rule is the (#18): bytes within
//! ±5% over a basis long enough that one segment more or less stays inside that, the P2P
//! share within ±5 points, no more stalls, and every viewer played. TTFF, segment counts
//! and renditions are reported beside it.

use super::measure::{BytesBasis, ProfileFigures};
pub use crate::model::scenario::light::FidelityVerdict;
use serde::{Deserialize, Serialize};

/// Bytes may differ from the default's by this much (percent).
pub(crate) const BYTES_TOLERANCE_PCT: f64 = 5.0;
/// The P2P share may differ by this many percentage points.
pub(crate) const P2P_SHARE_TOLERANCE_POINTS: f64 = 5.0;

/// One rule's outcome, in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `played`, `basis`, `bytes`, `p2p_share` or `stalls`.
    pub rule: String,
    pub ok: bool,
    pub text: String,
}

/// A profile against the default, as `calibration.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// The profile compared against (`default`) and its round.
    pub against: String,
    pub verdict: FidelityVerdict,
    /// Seconds compared: the window, or each viewer's first T seconds (VOD).
    #[serde(default)]
    pub compared_s: f64,
    pub checks: Vec<Check>,
    /// Bytes requested per viewer (HTTP + P2P), change in percent.
    pub bytes_change_pct: f64,
    /// One segment of the reference as a percentage of the bytes compared.
    pub segment_share_pct: f64,
    /// P2P share, this profile's minus the reference's, in points.
    pub p2p_share_points: f64,
    pub stalls: u32,
    pub reference_stalls: u32,
    /// Segments requested per viewer, change in percent.
    pub segments_change_pct: f64,
    /// Largest difference in the share of segments loaded at one rendition height, points.
    pub renditions_points: f64,
    /// Median time to first frame, this profile's minus the reference's (ms).
    pub ttff_change_ms: Option<f64>,
}

fn change_pct(value: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        (value / reference - 1.0) * 100.0
    } else if value > 0.0 {
        100.0
    } else {
        0.0
    }
}

/// What one profile's viewers did over the basis both profiles are compared on.
struct Compared {
    bytes: f64,
    p2p_share_pct: f64,
    segments: f64,
}

/// The figures to compare and over how many seconds: the window's, or, since each page
/// opened (VOD), both profiles' at the longest time after opening that both reached.
fn compared(p: &ProfileFigures, reference: &ProfileFigures) -> (Compared, Compared, f64) {
    let stored = |f: &ProfileFigures| Compared {
        bytes: f.download_bytes_per_viewer,
        p2p_share_pct: f.p2p_share_pct,
        segments: f.segments_per_viewer,
    };
    let last = |f: &ProfileFigures| f.over_time.last().map(|q| q.t_s);
    match (p.bytes_basis, last(p), last(reference)) {
        (BytesBasis::SinceOpen, Some(a), Some(b)) => {
            let t = a.min(b);
            let at = |f: &ProfileFigures| {
                f.at(t).map_or_else(
                    || stored(f),
                    |q| Compared {
                        bytes: q.download_bytes,
                        p2p_share_pct: 100.0 * q.p2p_bytes / q.download_bytes.max(1.0),
                        segments: q.segments,
                    },
                )
            };
            (at(p), at(reference), t)
        }
        _ => (stored(p), stored(reference), p.window_s),
    }
}

/// Judges `p` against `reference` (the default profile, same video and round).
pub fn judge(p: &ProfileFigures, reference: &ProfileFigures) -> Fidelity {
    let (mine, theirs, compared_s) = compared(p, reference);
    let bytes_change_pct = change_pct(mine.bytes, theirs.bytes);
    let segment_share_pct = if theirs.bytes > 0.0 {
        100.0 * reference.segment_bytes_mean / theirs.bytes
    } else {
        100.0
    };
    let p2p_share_points = mine.p2p_share_pct - theirs.p2p_share_pct;
    let per_viewer = |stalls: u32, viewers: u32| stalls as f64 / viewers.max(1) as f64;
    let more_stalls = per_viewer(p.stalls, p.viewers_measured)
        > per_viewer(reference.stalls, reference.viewers_measured);
    let mut checks = vec![
        Check {
            rule: "played".into(),
            ok: p.viewers_measured == p.viewers && p.viewers > 0,
            text: format!("{} of {} viewers played and were measured", p.viewers_measured, p.viewers),
        },
        Check {
            rule: "bytes".into(),
            ok: bytes_change_pct.abs() <= BYTES_TOLERANCE_PCT,
            text: format!(
                "{:.0} kB per viewer against {:.0} kB ({:+.1}%, allowed ±{BYTES_TOLERANCE_PCT}%)",
                mine.bytes / 1000.0,
                theirs.bytes / 1000.0,
                bytes_change_pct
            ),
        },
        Check {
            rule: "p2p_share".into(),
            ok: p2p_share_points.abs() <= P2P_SHARE_TOLERANCE_POINTS,
            text: format!(
                "P2P share {:.1}% against {:.1}% ({:+.1} points, allowed ±{P2P_SHARE_TOLERANCE_POINTS})",
                mine.p2p_share_pct, theirs.p2p_share_pct, p2p_share_points
            ),
        },
        Check {
            rule: "stalls".into(),
            ok: !more_stalls,
            text: format!(
                "{} stalls against {} (no more allowed)",
                p.stalls, reference.stalls
            ),
        },
    ];
    let basis_ok = segment_share_pct <= BYTES_TOLERANCE_PCT;
    checks.push(Check {
        rule: "basis".into(),
        ok: basis_ok,
        text: format!(
            "one segment is {segment_share_pct:.1}% of the {} compared ({compared_s:.0} s){}",
            p.bytes_basis.words(),
            if basis_ok {
                String::new()
            } else {
                format!(
                    ": more than ±{BYTES_TOLERANCE_PCT}%, so one segment more or less decides; use a longer --window"
                )
            }
        ),
    });
    // On a basis too short, the bytes rule cannot tell a change from one segment.
    let failed = checks
        .iter()
        .any(|c| !c.ok && c.rule != "basis" && (basis_ok || c.rule != "bytes"));
    let verdict = if failed {
        FidelityVerdict::Fail
    } else if !basis_ok {
        FidelityVerdict::Inconclusive
    } else {
        FidelityVerdict::Pass
    };
    Fidelity {
        against: format!("{} (round {})", reference.profile.name, reference.round + 1),
        verdict,
        compared_s,
        checks,
        bytes_change_pct,
        segment_share_pct,
        p2p_share_points,
        stalls: p.stalls,
        reference_stalls: reference.stalls,
        segments_change_pct: change_pct(mine.segments, theirs.segments),
        renditions_points: renditions_points(p, reference),
        ttff_change_ms: p
            .ttff_ms_median
            .zip(reference.ttff_ms_median)
            .map(|(a, b)| a - b),
    }
}

/// The largest difference, in points, between two profiles' shares of segments loaded at
/// any one rendition height.
fn renditions_points(p: &ProfileFigures, reference: &ProfileFigures) -> f64 {
    p.renditions
        .keys()
        .chain(reference.renditions.keys())
        .map(|h| {
            let get = |f: &ProfileFigures| f.renditions.get(h).copied().unwrap_or(0.0);
            (get(p) - get(reference)).abs()
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::super::measure::BytesBasis;
    use super::*;

    fn figures(bytes: f64, p2p: f64, stalls: u32) -> ProfileFigures {
        let mut f = ProfileFigures::empty(super::super::BrowserProfile::project(), 4);
        f.viewers_measured = 4;
        f.download_bytes_per_viewer = bytes;
        f.segment_bytes_mean = bytes / 40.0;
        f.p2p_share_pct = p2p;
        f.stalls = stalls;
        f.segments_per_viewer = 40.0;
        f.bytes_basis = BytesBasis::Window;
        f.renditions = [("240".to_string(), 100.0)].into();
        f.ttff_ms_median = Some(11_000.0);
        f
    }

    #[test]
    fn within_noise_passes() {
        let reference = figures(3_250_000.0, 69.0, 1);
        let f = judge(&figures(3_380_000.0, 66.0, 1), &reference);
        assert_eq!(f.verdict, FidelityVerdict::Pass, "{f:?}");
        assert!((f.bytes_change_pct - 4.0).abs() < 1e-9);
        assert!((f.p2p_share_points + 3.0).abs() < 1e-9);
        assert_eq!(f.ttff_change_ms, Some(0.0));
        assert_eq!(f.renditions_points, 0.0);
        assert!(f.checks.iter().all(|c| c.ok), "{:?}", f.checks);
    }

    #[test]
    fn each_rule_fails_on_its_own() {
        let reference = figures(3_250_000.0, 69.0, 1);
        let failing = |f: &Fidelity| -> Vec<String> {
            f.checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.rule.clone())
                .collect()
        };
        // 6% more bytes.
        let f = judge(&figures(3_445_000.0, 69.0, 1), &reference);
        assert_eq!(
            (f.verdict, failing(&f)),
            (FidelityVerdict::Fail, vec!["bytes".to_string()])
        );
        // 5.5 points less P2P.
        let f = judge(&figures(3_250_000.0, 63.5, 1), &reference);
        assert_eq!(failing(&f), ["p2p_share"]);
        // One stall more.
        let f = judge(&figures(3_250_000.0, 69.0, 2), &reference);
        assert_eq!(failing(&f), ["stalls"]);
        assert!(f
            .checks
            .iter()
            .any(|c| c.text == "2 stalls against 1 (no more allowed)"));
        // A viewer that never played.
        let mut short = figures(3_250_000.0, 69.0, 1);
        short.viewers_measured = 3;
        short.stalls = 0;
        let f = judge(&short, &reference);
        assert_eq!(failing(&f), ["played"]);
    }

    #[test]
    fn a_basis_shorter_than_twenty_segments_is_inconclusive() {
        let mut reference = figures(1_000_000.0, 69.0, 0);
        reference.segment_bytes_mean = 100_000.0; // 10% of the bytes compared
        let f = judge(&figures(1_020_000.0, 69.0, 0), &reference);
        assert_eq!(f.verdict, FidelityVerdict::Inconclusive, "{f:?}");
        let basis = f.checks.iter().find(|c| c.rule == "basis").unwrap();
        assert!(
            basis.text.contains("use a longer --window"),
            "{}",
            basis.text
        );
        // Bytes off by more than a segment cannot be told from noise there either…
        let f = judge(&figures(1_200_000.0, 69.0, 0), &reference);
        assert_eq!(f.verdict, FidelityVerdict::Inconclusive);
        // …but the other rules still fail, however short the basis.
        let f = judge(&figures(1_000_000.0, 60.0, 0), &reference);
        assert_eq!(f.verdict, FidelityVerdict::Fail);
    }

    #[test]
    fn vod_is_compared_over_the_first_seconds_both_profiles_reached() {
        use super::super::TimePoint;
        let point = |t_s: f64, rate: f64| TimePoint {
            t_s,
            download_bytes: t_s * rate,
            p2p_bytes: t_s * rate / 2.0,
            segments: t_s / 2.0,
        };
        let mut reference = figures(0.0, 0.0, 0);
        reference.bytes_basis = BytesBasis::SinceOpen;
        reference.segment_bytes_mean = 150_000.0;
        reference.over_time = (1..=16).map(|k| point(5.0 * k as f64, 300_000.0)).collect();
        // Tabs start sooner: this profile was read 20 s longer, and fetches 3% faster.
        let mut packed = figures(0.0, 0.0, 0);
        packed.bytes_basis = BytesBasis::SinceOpen;
        packed.over_time = (1..=20).map(|k| point(5.0 * k as f64, 309_000.0)).collect();
        let f = judge(&packed, &reference);
        assert_eq!(f.compared_s, 80.0);
        assert!((f.bytes_change_pct - 3.0).abs() < 1e-9, "{f:?}");
        assert!(f.p2p_share_points.abs() < 1e-9, "{f:?}");
        assert_eq!(f.verdict, FidelityVerdict::Pass, "{f:?}");
    }

    #[test]
    fn renditions_are_compared_by_share_of_segments() {
        let reference = figures(3_000_000.0, 70.0, 0);
        let mut other = figures(3_000_000.0, 70.0, 0);
        other.renditions = [("240".to_string(), 80.0), ("360".to_string(), 20.0)].into();
        let f = judge(&other, &reference);
        assert_eq!(f.renditions_points, 20.0);
        assert_eq!(
            f.verdict,
            FidelityVerdict::Pass,
            "renditions are reported, not judged"
        );
    }
}
