//! Small statistics: percentiles for QoE, mean with a 95% confidence interval (Student's t)
//! for repeated runs.

use serde::{Deserialize, Serialize};

/// Percentile `p` (0..=100) by linear interpolation between closest ranks (numpy's default).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64))
}

/// Mean of repeated measurements with the half-width of its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    pub mean: f64,
    /// Half-width: the interval is `mean ± ci95`. `None` with a single value.
    pub ci95: Option<f64>,
    pub n: usize,
}

/// Mean and 95% CI (Student's t, two-sided, n − 1 degrees of freedom) of the finite values.
pub(crate) fn mean_ci(values: &[f64]) -> Option<MeanCi> {
    let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let ci95 = (n > 1).then(|| {
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t975(n - 1) * var.sqrt() / (n as f64).sqrt()
    });
    Some(MeanCi { mean, ci95, n })
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (table; for df between
/// table rows the smaller df's value is used, which widens the interval slightly).
pub(crate) fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df - 1],
        31..=39 => 2.042,
        40..=59 => 2.021,
        60..=119 => 2.000,
        120..=999 => 1.980,
        _ => 1.960,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert!((percentile(&v, 95.0).unwrap() - 3.85).abs() < 1e-9);
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn mean_ci_matches_hand_computation() {
        // mean 20, sd 10 (sample), n 3 → 4.303 × 10 / √3 = 24.843...
        let got = mean_ci(&[10.0, 20.0, 30.0]).unwrap();
        assert_eq!(got.mean, 20.0);
        assert!((got.ci95.unwrap() - 24.8434).abs() < 1e-3, "{got:?}");
        let one = mean_ci(&[5.0]).unwrap();
        assert_eq!((one.mean, one.ci95, one.n), (5.0, None, 1));
        assert!(mean_ci(&[f64::NAN]).is_none());
    }
}
