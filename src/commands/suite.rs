//! `viewerfleet suite`: several scenarios (and repeats) and their comparison.

use crate::cli::SuiteArgs;
use crate::model::exit::Exit;
use crate::model::scenario::Overrides;
use crate::report::comparison_text;
use crate::suite::{run_suite, SuitePlan};

pub async fn run(args: SuiteArgs, quiet: bool) -> anyhow::Result<super::Done> {
    // `--apply` is a list here: the suite runs each mode (`SuitePlan::sweep`).
    let overrides = Overrides {
        fleet: args.fleet,
        ..args.scale.overrides(&args.swarm)?
    };
    let plan = SuitePlan::sweep(
        &args.scenarios,
        &args.apply,
        args.swarm_sizes.as_ref(),
        args.repeat,
        &args.out,
        overrides,
    )?
    .with_run_repeats(&args.repeat_run)?;
    let plan = match &args.swarm_size_file {
        Some(path) => plan.with_size_file(path)?,
        None => plan,
    };
    if args.dry_run {
        print!("{}", plan.describe());
        println!("--dry-run: nothing started");
        return Ok(super::Done {
            exit: Exit::Ok,
            figures: None,
        });
    }
    let (shutdown, runner) = super::engine_runner(quiet, args.paid.yes)?;
    let mut err = std::io::stderr();
    let result = run_suite(&plan, &runner, &shutdown, &mut err).await?;
    println!();
    print!("{}", comparison_text(&result.comparison));
    println!("HTML comparison: {}", result.html.display());
    for name in &result.over_failure_limit {
        eprintln!("{name}: more viewers failed than its max_failed_viewers allows");
    }
    let thresholds_failed = result.thresholds_failed();
    for name in &thresholds_failed {
        eprintln!("{name}: THRESHOLDS FAILED (see its report.md)");
    }
    // Interrupted, then a run that failed or went over its failure limit, then thresholds.
    let exit = if result.interrupted {
        shutdown.exit()
    } else if !result.comparison.failed.is_empty() || !result.over_failure_limit.is_empty() {
        Exit::Failed
    } else if !thresholds_failed.is_empty() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    };
    Ok(super::Done {
        exit,
        figures: args
            .stdout
            .json
            .then(|| super::json::suite(&result, &args.out)),
    })
}

#[cfg(test)]
mod tests {
    use crate::model::exit::Exit;
    use crate::report::compare::Comparison;
    use crate::report::swarm_curve::SwarmPoint;
    use crate::suite::SuiteResult;
    use std::path::Path;

    /// `suite --json` of a sweep: its curves, checked against the suite's schema.
    #[test]
    fn a_sweeps_json_has_its_curves_and_matches_the_schema() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let base = crate::report::build(&root.join("tests/fixtures/run-steady")).unwrap();
        let runs: Vec<_> = [4, 16]
            .iter()
            .map(|n| {
                let mut r = base.clone();
                r.name = format!("a@tc@{n}-1");
                r
            })
            .collect();
        let comparison = Comparison::grouped(
            runs,
            |r| r.name.trim_end_matches("-1").to_string(),
            Vec::new(),
        )
        .with_swarm_points(|name| {
            let size: u32 = name.rsplit('@').next()?.parse().ok()?;
            Some(SwarmPoint::new("a@tc", 2, size - 2))
        });
        let result = SuiteResult {
            comparison,
            interrupted: false,
            runs_started: 2,
            html: "out/compare.html".into(),
            over_failure_limit: Vec::new(),
        };
        let figures = super::super::json::suite(&result, Path::new("out"));
        let text = super::super::json::document("suite", Exit::Ok, Some(figures), None);
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root.join("schemas/suite-summary.v1.json")).unwrap(),
        )
        .unwrap();
        let errors = viewerfleet_kit::json_schema::validate_closed(&schema, &doc);
        assert!(errors.is_empty(), "{errors:#?}\n{text}");
        let points = &doc["suite"]["swarm_curves"][0]["points"];
        assert_eq!(doc["suite"]["swarm_curves"][0]["name"], "a@tc");
        assert_eq!(points[0]["swarm_size"], 4);
        assert_eq!(points[1]["light_peers"], 14);
        assert_eq!(points[1]["bound"], 0.9375);
        assert_eq!(points[0]["headroom"], "NOT A FINDING: 4/4 starved");
        // Without a sweep the field is absent.
        let plain = SuiteResult {
            comparison: Comparison::per_run(vec![base], Vec::new()),
            ..result
        };
        let figures = super::super::json::suite(&plain, Path::new("out"));
        assert!(figures.get("swarm_curves").is_none());
    }
}
