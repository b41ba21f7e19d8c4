//! How numbers read in every report: rates, shares, bytes, durations, means with their
//! confidence interval, and the dash for a figure that does not exist.

use super::stats::MeanCi;

pub const NONE: &str = "—";

pub fn mbps(v: Option<f64>) -> String {
    match v {
        Some(v) if v.abs() < 10.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.1}"),
        None => NONE.into(),
    }
}

pub fn pct(share: Option<f64>) -> String {
    share.map_or(NONE.into(), |s| format!("{:.1}%", s * 100.0))
}

/// HTTP/P2P as the PeerTube post printed it (a percentage); beyond 1000% it means "almost
/// no P2P", printed as such rather than as a big number.
pub fn ratio(v: Option<f64>) -> String {
    match v {
        Some(r) if r > 10.0 => "> 1000%".into(),
        other => pct(other),
    }
}

pub fn bytes(v: Option<u64>) -> String {
    match v {
        None => NONE.into(),
        Some(b) if b >= 1_000_000_000 => format!("{:.2} GB", b as f64 / 1e9),
        Some(b) if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        Some(b) if b >= 1_000 => format!("{:.1} kB", b as f64 / 1e3),
        Some(b) => format!("{b} B"),
    }
}

pub fn ms(v: Option<f64>) -> String {
    v.map_or(NONE.into(), |v| format!("{v:.0} ms"))
}

pub fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or(NONE.into(), |v| format!("{v:.digits$}"))
}

/// `mean ± ci` with a formatter for the mean.
pub(crate) fn mean_ci(v: Option<MeanCi>, scale: f64, digits: usize, suffix: &str) -> String {
    match v {
        None => NONE.into(),
        Some(MeanCi {
            mean,
            ci95: Some(ci),
            ..
        }) => {
            format!(
                "{:.digits$} ± {:.digits$}{suffix}",
                mean * scale,
                ci * scale
            )
        }
        Some(MeanCi { mean, .. }) => format!("{:.digits$}{suffix}", mean * scale),
    }
}
