//! `viewerfleet ladder`: a scenario at increasing viewer counts, and its capacity report
//! (the loop over the steps is `ladder::run`).

use super::Done;
use crate::cli::LadderArgs;
use crate::engine::RunOptions;
use crate::ladder::project::ServerSpec;
use crate::ladder::{self, markdown, LadderOptions};
use crate::model::exit::Exit;

pub async fn run(args: LadderArgs, quiet: bool) -> anyhow::Result<Done> {
    let options = LadderOptions {
        scenario: args.scenario.clone(),
        steps: args.steps.clone(),
        hold: args.hold,
        out: args.out.clone(),
        analyze_only: args.analyze_only,
        target_cores: args.target_cores,
        link_mbps: args.link_mbps,
        server: ServerSpec {
            cores: args.server_cores,
            ram_bytes: (args.server_ram_gb * 1e9) as u64,
            nic_mbps: args.server_nic_mbps,
            usable_share: args.usable_share,
        },
        run: RunOptions {
            progress: !quiet,
            confirm_paid: super::confirm_paid(args.paid.yes),
            ..RunOptions::default()
        },
    };
    let shutdown = crate::sys::shutdown::Shutdown::new();
    shutdown.listen_for_signals()?;
    let outcome = ladder::run(&options, &shutdown, &mut std::io::stderr()).await?;
    let Some(report) = outcome.report else {
        eprintln!("interrupted before a ladder step finished; nothing to report");
        return Ok(shutdown.exit().into());
    };
    print!("{}", markdown(&report));
    println!(
        "capacity report: {}",
        args.out.join("capacity.html").display()
    );
    // Interrupted: the steps that finished are analysed, and the code says it was cut short.
    Ok(Done {
        exit: if outcome.interrupted {
            shutdown.exit()
        } else {
            Exit::Ok
        },
        figures: args
            .stdout
            .json
            .then(|| super::json::ladder(&report, &args.out, outcome.interrupted)),
    })
}
