//! `viewerfleet compare`: one table across run folders. Exits 99 when a compared run
//! failed its thresholds (the manifest's, or `--thresholds`' which then win), 1 when a
//! folder could not be read.

use crate::cli::CompareArgs;
use crate::model::exit::Exit;
use crate::report::{compare, comparison_text, render};

pub async fn run(args: CompareArgs) -> anyhow::Result<super::Done> {
    let out = args.output.out.clone().unwrap_or_else(|| ".".into());
    let given = crate::report::thresholds_from_cli(&args.thresholds)?;
    let cmp = compare::compare_dirs_judged(&args.run_dirs, args.group, given.as_deref());
    if cmp.groups.is_empty() {
        for f in &cmp.failed {
            eprintln!("{}: {}", f.dir, f.error);
        }
        return Err(crate::model::exit::bad_input(anyhow::anyhow!(
            "none of the {} run folders could be read",
            args.run_dirs.len()
        )));
    }
    render::write_compare(&cmp, &out)?;
    print!("{}", comparison_text(&cmp));
    println!("HTML comparison: {}", out.join("compare.html").display());
    let failed_thresholds = cmp.thresholds_failed();
    if !failed_thresholds.is_empty() {
        println!(
            "THRESHOLDS FAILED in {} of the compared runs ({}{}):",
            failed_thresholds.len(),
            if cmp.failed.is_empty() {
                "exit code 99"
            } else {
                "exit code 1: a folder could not be read"
            },
            if given.is_some() {
                "; judged from --thresholds"
            } else {
                ""
            }
        );
        for (run, failed) in &failed_thresholds {
            for t in failed {
                println!(
                    "  {}: {} {}: {}{}",
                    run.name,
                    t.metric,
                    t.condition,
                    t.observed,
                    t.reason
                        .as_ref()
                        .map(|why| format!(" ({why})"))
                        .unwrap_or_default()
                );
            }
        }
    }
    // A folder that could not be read (1) comes before a failed threshold (99).
    let exit = if !cmp.failed.is_empty() {
        Exit::Failed
    } else if !failed_thresholds.is_empty() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    };
    Ok(super::Done {
        exit,
        figures: args
            .stdout
            .json
            .then(|| super::json::compare(&cmp, &out, given.is_some())),
    })
}
