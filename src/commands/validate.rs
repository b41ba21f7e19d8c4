//! `viewerfleet validate`: checks scenario files without running them.

use super::Done;
use crate::cli::ValidateArgs;
use crate::model::exit::Exit;
use crate::model::scenario::{self, Overrides};

/// Checks each file and prints a one-line summary of its plan; exit code 2 when any file
/// is invalid, as `run` and `plan` give for the same file. Under `--json`, every file's
/// verdict is in the document too.
pub fn run(args: ValidateArgs) -> anyhow::Result<Done> {
    let mut failed = 0;
    let mut files = Vec::new();
    for path in &args.scenarios {
        let result = scenario::load(path, &Overrides::default());
        match &result {
            Ok(plan) => {
                println!("{}: ok — {}", path.display(), plan.summary_line());
                if !plan.thresholds.is_empty() {
                    let list: Vec<String> = plan
                        .thresholds
                        .iter()
                        .map(|t| match t.abort {
                            Some(a) => format!(
                                "{} {} (abort_on_fail after {})",
                                t.key(),
                                t.condition,
                                humantime::format_duration(a.delay)
                            ),
                            None => format!("{} {}", t.key(), t.condition),
                        })
                        .collect();
                    println!("  thresholds: {}", list.join(", "));
                }
            }
            Err(err) => {
                failed += 1;
                eprintln!("{err}");
            }
        }
        if args.json {
            files.push(super::json::validated_file(path, &result));
        }
    }
    let exit = if failed == 0 {
        Exit::Ok
    } else {
        Exit::BadInput
    };
    Ok(Done {
        exit,
        figures: args.json.then(|| super::json::validate(files)),
    })
}
