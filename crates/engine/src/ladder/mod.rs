//! Capacity ladders: a scenario run at increasing viewer counts, each step a normal run
//! folder (`DIR/step-<viewers>`); knee detection with stated rules; per-viewer costs
//! fitted on the healthy steps; a projection for a user-given server; a capacity report
//! (`capacity.md`, `capacity.html`, `capacity.json`) in `DIR`. `run` is the loop over the
//! steps.

mod fit;
pub mod knee;
pub mod project;
mod render;
mod run;
mod step;

use knee::{judge, KneeRules, StepResult};
use project::{fit_costs, project, ServerSpec};
use std::path::Path;

pub use render::{markdown, CapacityReport};
pub use run::{run, LadderOptions, LadderOutcome};
pub use step::step_from_run;

/// Judges the steps, finds the knee, fits costs on the healthy steps, projects.
pub fn analyze(
    scenario: &str,
    steps: Vec<StepResult>,
    rules: KneeRules,
    server: Option<ServerSpec>,
    rerun: String,
    host: String,
) -> CapacityReport {
    let verdicts: Vec<_> = steps.iter().map(|s| judge(s, &rules)).collect();
    let knee = knee::find_knee(&verdicts);
    let healthy: Vec<&StepResult> = steps
        .iter()
        .zip(&verdicts)
        .take_while(|(_, v)| !v.degraded)
        .map(|(s, _)| s)
        .collect();
    let costs = fit_costs(&healthy);
    let projection = server.map(|s| project(&costs, &s));
    let mut caveats = vec![
        "Target CPU and memory are measured for local targets only (refsite's process tree); the target shares the machine with the browsers unless the fleet is remote.".to_string(),
        "Costs are fitted on healthy steps only; with fewer than three, R² is not defined and the fit is a line through two points.".to_string(),
        "A projection extrapolates a line: caches, kernel limits and tracker fan-out may bend it at larger scales. Re-run the ladder on the real server to confirm.".to_string(),
        "HTTP egress without P2P assumes every byte the peers exchanged would otherwise come from the server.".to_string(),
    ];
    if healthy.len() < 2 {
        caveats.push("Fewer than two healthy steps: per-viewer costs could not be fitted; start the ladder lower.".into());
    }
    if knee.as_ref().is_some_and(|k| k.limited_by == "generator") {
        caveats.push(
            "The knee was set by the load generator's CPU: the target's own limit was not reached."
                .into(),
        );
    }
    CapacityReport {
        scenario: scenario.to_string(),
        generated_at: chrono::Utc::now().to_rfc3339(),
        host,
        steps,
        verdicts,
        rules,
        knee,
        costs,
        projection,
        rerun,
        caveats,
    }
}

pub fn write(report: &CapacityReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::write(dir.join("capacity.md"), render::markdown(report))?;
    std::fs::write(dir.join("capacity.html"), render::html(report))?;
    std::fs::write(
        dir.join("capacity.json"),
        serde_json::to_vec_pretty(report)?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(viewers: u32, gen: f64, stalls: f64) -> StepResult {
        let v = viewers as f64;
        StepResult {
            viewers,
            run_dir: format!("step-{viewers}"),
            started: viewers,
            failed: 0,
            http_mbps: 0.3 * v,
            p2p_mbps: 0.5 * v,
            http_share: Some(0.375),
            target_cpu_cores: Some(0.01 + 0.005 * v),
            target_rss_bytes: Some(40_000_000 + 2_000_000 * viewers as u64),
            generator_cpu_busy: gen,
            generator_cores: 2,
            stalls_per_viewer_minute: stalls,
            ttff_p95_ms: Some(1500.0),
            thresholds: Vec::new(),
        }
    }

    #[test]
    fn crafted_ladder_has_known_knee_costs_and_report() {
        let steps = vec![
            step(2, 0.25, 0.0),
            step(4, 0.5, 0.0),
            step(6, 0.75, 0.1),
            step(8, 0.97, 3.0),
        ];
        let report = analyze(
            "live-normal",
            steps,
            KneeRules {
                target_cores: Some(2.0),
                ..Default::default()
            },
            Some(ServerSpec {
                cores: 4.0,
                ram_bytes: 4_000_000_000,
                nic_mbps: 1000.0,
                usable_share: 0.6,
            }),
            "viewerfleet ladder x.yaml --steps 2,4,6,8 --out l".into(),
            "host".into(),
        );
        let knee = report.knee.as_ref().unwrap();
        assert_eq!((knee.at_viewers, knee.limited_by), (8, "generator"));
        assert_eq!(report.costs.steps_used, vec![2, 4, 6]);
        assert!((report.costs.cpu_cores.unwrap().slope - 0.005).abs() < 1e-12);
        let p = report.projection.as_ref().unwrap();
        // CPU: (2.4 - 0.01) / 0.005 = 478; network with P2P: 600 / 0.3 = 2000.
        assert_eq!(p.by_cpu, Some(478));
        assert_eq!(p.by_nic_with_p2p, Some(2000));
        assert_eq!(p.limited_by, Some("cpu"));
        let md = render::markdown(&report);
        assert!(md.contains("| 8 | 8 | 0 |"), "{md}");
        assert!(md.contains("DEGRADED (stalls, generator_cpu)"));
        assert!(md.contains("The **load generator** saturated, not the target"));
        let html = render::html(&report);
        assert!(html.contains("<table>") && html.contains("<b>load generator</b>"));
        assert!(!md.contains("## Thresholds"), "no thresholds, no section");
    }

    #[test]
    fn the_capacity_report_says_up_to_which_step_the_thresholds_held() {
        use crate::model::scenario::ThresholdText;
        let judged = |share: f64| {
            let mut summary: crate::report::ReportSummary = serde_json::from_str(include_str!(
                "../../../../tests/fixtures/golden/run-steady.report.json"
            ))
            .unwrap();
            summary.p2p_savings = Some(share);
            crate::report::thresholds::evaluate(
                &[ThresholdText::new("p2p_savings_at_t", ">= 60%")],
                &summary,
            )
        };
        let steps: Vec<StepResult> = [(2, 0.8), (4, 0.65), (6, 0.55)]
            .into_iter()
            .map(|(viewers, share)| StepResult {
                thresholds: judged(share),
                ..step(viewers, 0.3, 0.0)
            })
            .collect();
        let report = analyze(
            "vod",
            steps,
            KneeRules::default(),
            None,
            String::new(),
            "host".into(),
        );
        let md = render::markdown(&report);
        assert!(
            md.contains("thresholds held up to **4 viewers**; they first failed at 6 viewers"),
            "{md}"
        );
        assert!(
            md.contains("- 6 viewers: FAILED `p2p_savings_at_t >= 60%` (got 55%)"),
            "{md}"
        );
    }
}
