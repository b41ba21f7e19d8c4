//! `viewerfleet report`: builds a run's report from its raw data, and judges the
//! scenario's thresholds again (exit code 99 when one fails, as `run` gave). With
//! `--thresholds`, the thresholds given there are judged instead of the manifest's, and
//! nothing is written into the run folder unless `--out` names a folder.

use super::Done;
use crate::cli::ReportArgs;
use crate::model::exit::Exit;
use anyhow::Context;

pub async fn run(args: ReportArgs) -> anyhow::Result<Done> {
    let given = crate::report::thresholds_from_cli(&args.thresholds)?;
    let mut report = crate::report::build(&args.run_dir)?;
    if let Some(given) = &given {
        crate::report::rejudge(&mut report, given);
    }
    // Where the files go: --out, else the run folder unless thresholds were given.
    let written = match (&args.output.out, &given) {
        (Some(out), _) => Some(out.clone()),
        (None, None) => Some(args.run_dir.clone()),
        (None, Some(_)) => None,
    };
    if let Some(dir) = &written {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::report::render::write_run(&report, dir)?;
    }
    print!("{}", crate::report::sections::run_text(&report));
    if given.is_some() {
        println!(
            "thresholds: judged from --thresholds (the command line wins over the thresholds the run's manifest froze)"
        );
    }
    match &written {
        Some(dir) => println!("HTML report: {}", dir.join("report.html").display()),
        None => println!(
            "nothing written (--thresholds without --out leaves {} as it is)",
            args.run_dir.display()
        ),
    }
    let exit = if report.summary.thresholds_failed() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    };
    Ok(Done {
        exit,
        figures: args.stdout.json.then(|| {
            super::json::report(
                &args.run_dir,
                written.as_deref(),
                given.is_some(),
                &report.summary,
            )
        }),
    })
}
