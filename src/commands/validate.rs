//! `viewerfleet validate`: checks scenario files without running them.

use crate::cli::ValidateArgs;
use crate::model::exit::Exit;
use crate::model::scenario::{self, Overrides};

/// Checks each file and prints a one-line summary of its plan; exit code 2 when any file
/// is invalid, as `run` and `plan` give for the same file.
pub fn run(args: ValidateArgs) -> anyhow::Result<Exit> {
    let mut failed = 0;
    for path in &args.scenarios {
        match scenario::load(path, &Overrides::default()) {
            Ok(plan) => {
                println!("{}: ok — {}", path.display(), plan.summary_line());
                if !plan.thresholds.is_empty() {
                    let list: Vec<String> = plan
                        .thresholds
                        .iter()
                        .map(|t| format!("{} {}", t.key(), t.condition))
                        .collect();
                    println!("  thresholds: {}", list.join(", "));
                }
            }
            Err(err) => {
                failed += 1;
                eprintln!("{err}");
            }
        }
    }
    Ok(if failed == 0 {
        Exit::Ok
    } else {
        Exit::BadInput
    })
}
