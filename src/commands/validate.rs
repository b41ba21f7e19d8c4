//! `viewerfleet validate`: checks scenario files without running them.

use super::Done;
use crate::cli::ValidateArgs;
use crate::model::exit::Exit;
use crate::model::scenario::fleet::FleetPlan;
use crate::model::scenario::{self, Overrides, Plan};
use serde_json::{json, Value};

/// Checks each file and prints a one-line summary of its plan; exit code 2 when any file
/// is invalid, as `run` and `plan` give for the same file. With `--check-grid`, a Grid
/// fleet's hubs are asked too (69 when one fails, unless a file was invalid). Under
/// `--json`, every file's verdict is in the document too.
pub async fn run(args: ValidateArgs) -> anyhow::Result<Done> {
    let mut failed = 0;
    let mut grid_exit: Option<Exit> = None;
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
        let grid = match (&result, args.check_grid) {
            (Ok(plan), true) => Some(check_grid(plan).await),
            _ => None,
        };
        if let Some((exit, _)) = &grid {
            if *exit != Exit::Ok && grid_exit.is_none_or(|e| e == Exit::Unavailable) {
                grid_exit = Some(*exit);
            }
        }
        if args.stdout.json {
            let mut file = super::json::validated_file(path, &result);
            if let Some((_, doc)) = grid {
                file["grid"] = doc;
            }
            files.push(file);
        }
    }
    let exit = match (failed, grid_exit) {
        (0, None) => Exit::Ok,
        (0, Some(exit)) => exit,
        _ => Exit::BadInput,
    };
    Ok(Done {
        exit,
        figures: args.stdout.json.then(|| super::json::validate(files)),
    })
}

/// Asks a Grid fleet's hubs what a run would: prints the answer and gives the exit it means
/// and its JSON (`null` for a fleet that is not a Grid).
async fn check_grid(plan: &Plan) -> (Exit, Value) {
    let FleetPlan::Grid(grid) = &plan.fleet else {
        println!("  grid: not a Grid fleet, nothing to ask");
        return (Exit::Ok, Value::Null);
    };
    match crate::fleet::grid::reach(grid).await {
        Ok(reached) => {
            let hubs: Vec<Value> = reached
                .hubs
                .iter()
                .zip(&reached.capacity)
                .map(|(hub, slots)| json!({"url": hub, "slots": slots}))
                .collect();
            println!(
                "  grid: {} answered /status: {} node(s), {} slot(s)",
                reached.hubs.join(", "),
                reached.nodes.len(),
                reached.capacity.iter().sum::<usize>()
            );
            (
                Exit::Ok,
                json!({"ok": true, "hubs": hubs, "nodes": reached.nodes.len()}),
            )
        }
        Err(err) => {
            eprintln!("  grid: {err:#}");
            (
                super::exit_for(&err),
                json!({"ok": false, "error": format!("{err:#}")}),
            )
        }
    }
}
