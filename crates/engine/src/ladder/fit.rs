//! Least-squares line fits of per-viewer costs over the ladder's steps before the knee.

/// `y = intercept + slope * x`, with how well it fits.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LineFit {
    pub intercept: f64,
    pub slope: f64,
    /// Coefficient of determination; 1 is a perfect line. NaN with fewer than 3 points.
    pub r_squared: f64,
    pub points: usize,
}

impl LineFit {
    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// Fits a line through the points; `None` with fewer than two distinct x values.
pub(crate) fn fit_line(points: &[(f64, f64)]) -> Option<LineFit> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.1 - (intercept + slope * p.0)).powi(2))
        .sum();
    let r_squared = if points.len() < 3 {
        f64::NAN
    } else if ss_tot == 0.0 {
        1.0
    } else {
        1.0 - ss_res / ss_tot
    };
    Some(LineFit {
        intercept,
        slope,
        r_squared,
        points: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line_is_recovered() {
        let f = fit_line(&[(2.0, 0.5), (4.0, 0.9), (6.0, 1.3), (8.0, 1.7)]).unwrap();
        assert!((f.slope - 0.2).abs() < 1e-12);
        assert!((f.intercept - 0.1).abs() < 1e-12);
        assert!((f.r_squared - 1.0).abs() < 1e-12);
        assert!((f.at(10.0) - 2.1).abs() < 1e-12);
    }

    #[test]
    fn noisy_line_has_lower_r_squared() {
        let f = fit_line(&[(1.0, 1.0), (2.0, 3.0), (3.0, 2.0), (4.0, 5.0)]).unwrap();
        assert!((f.slope - 1.1).abs() < 1e-9, "{f:?}");
        assert!(f.r_squared < 0.9 && f.r_squared > 0.5, "{f:?}");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit_line(&[(1.0, 1.0)]).is_none());
        assert!(fit_line(&[(2.0, 1.0), (2.0, 3.0)]).is_none());
        assert!(fit_line(&[(1.0, 1.0), (2.0, 2.0)])
            .unwrap()
            .r_squared
            .is_nan());
    }
}
