//! `viewerfleet ladder`: a scenario at increasing viewer counts, and its capacity report.

use super::Done;
use crate::cli::LadderArgs;
use crate::engine::{run_scenario, RunOptions, RunSource};
use crate::ladder::knee::KneeRules;
use crate::ladder::project::ServerSpec;
use crate::ladder::{analyze, markdown, step_from_run, write};
use crate::model::exit::Exit;
use crate::model::scenario::{self, Overrides, ViewersOverride};
use anyhow::Context;

pub async fn run(args: LadderArgs, quiet: bool) -> anyhow::Result<Done> {
    let confirm_paid = super::confirm_paid(args.paid.yes);
    let mut steps = args.steps.clone();
    steps.sort_unstable();
    steps.dedup();
    if steps.is_empty() || steps[0] == 0 {
        return Err(crate::model::exit::bad_input(anyhow::anyhow!(
            "--steps needs viewer counts of at least 1, e.g. --steps 2,4,6,8"
        )));
    }
    // Validate the scenario at every step before running any of them; each step runs
    // the plan validated here.
    let overrides = |viewers: u32| Overrides {
        viewers: ViewersOverride::Fixed(viewers),
        duration: args.hold,
        ..Default::default()
    };
    let mut plans = Vec::with_capacity(steps.len());
    for &v in &steps {
        plans.push(scenario::load(&args.scenario, &overrides(v))?);
    }
    let name = plans[0].name.clone();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let shutdown = crate::sys::shutdown::Shutdown::new();
    shutdown.listen_for_signals()?;
    let mut results = Vec::new();
    for (&viewers, plan) in steps.iter().zip(plans) {
        let dir = args.out.join(format!("step-{viewers}"));
        if !args.analyze_only {
            if shutdown.is_triggered() {
                break;
            }
            eprintln!("== ladder step: {viewers} viewers → {}", dir.display());
            let outcome = run_scenario(
                plan,
                &RunSource::scenario(&args.scenario, &overrides(viewers)),
                &dir,
                shutdown.clone(),
                RunOptions {
                    progress: !quiet,
                    confirm_paid: confirm_paid.clone(),
                    ..RunOptions::default()
                },
            )
            .await
            .with_context(|| format!("ladder step {viewers}"))?;
            eprintln!("{}", outcome.summary);
            if outcome.interrupted {
                break;
            }
        }
        if !dir.join(crate::model::rawdata::MANIFEST).exists() {
            continue;
        }
        let summary = crate::report::write_report(&dir)?;
        results.push(step_from_run(&dir, &summary)?);
    }
    if results.is_empty() {
        if shutdown.is_triggered() {
            eprintln!("interrupted before a ladder step finished; nothing to report");
            return Ok(shutdown.exit().into());
        }
        return Err(crate::model::exit::bad_input(anyhow::anyhow!(
            "no ladder step finished; nothing to report (with --analyze-only, --out must hold step-<viewers> run folders)"
        )));
    }
    let host = crate::sys::hostinfo::host_info();
    let rules = KneeRules {
        target_cores: Some(args.target_cores.unwrap_or(host.cpus as f64)),
        link_mbps: args.link_mbps,
        ..KneeRules::default()
    };
    let server = ServerSpec {
        cores: args.server_cores,
        ram_bytes: (args.server_ram_gb * 1e9) as u64,
        nic_mbps: args.server_nic_mbps,
        usable_share: args.usable_share,
    };
    let report = analyze(
        &name,
        results,
        rules,
        Some(server),
        rerun_line(&args),
        format!("{} ({} × {})", host.hostname, host.cpus, host.cpu_model),
    );
    write(&report, &args.out)?;
    print!("{}", markdown(&report));
    println!(
        "capacity report: {}",
        args.out.join("capacity.html").display()
    );
    // Interrupted: the steps that finished are analysed, and the code says it was cut short.
    let interrupted = shutdown.is_triggered();
    Ok(Done {
        exit: if interrupted {
            shutdown.exit()
        } else {
            Exit::Ok
        },
        figures: args
            .json
            .then(|| super::json::ladder(&report, &args.out, interrupted)),
    })
}

fn rerun_line(args: &LadderArgs) -> String {
    let steps: Vec<String> = args.steps.iter().map(|s| s.to_string()).collect();
    let mut line = format!(
        "viewerfleet ladder {} --steps {} --out {}",
        args.scenario.display(),
        steps.join(","),
        args.out.display()
    );
    if let Some(hold) = args.hold {
        line.push_str(&format!(" --hold {}", scenario::duration_flag(hold)));
    }
    line
}
