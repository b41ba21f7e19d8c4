//! `viewerfleet fidelity SCENARIO --swarm N [--real K] [--repeat 3] --out DIR`: do light
//! peers offload like real viewers? (`calibrate::light_fidelity` measures and judges.)
//!
//! Why a subcommand of its own and not a mode of `calibrate`: calibrate measures what one
//! viewer costs on this machine per browser profile — it forces the local fleet, replaces
//! the scenario's timeline with a warm-up and a window, drops its thresholds, and writes the
//! `calibration.json` that `plan --calibration` reads; every flag of it (`--profiles`,
//! `--profile`, `--video`, `--viewers`, `--warmup`, `--window`) chooses profiles or timing.
//! Light-peer fidelity must run the scenario as written — its fleet (a page of light peers
//! shares a netns slot's link or a Grid node's CPU), its throttling and its measurement
//! point T, whose P2P savings are what the verdict vouches for — and it compares two
//! compositions of one swarm, not browser profiles. As a calibrate mode, half of
//! calibrate's flags would mean nothing in it and its two flags nothing in calibrate, and
//! its output would not be a calibration. What the two share — a verdict against a
//! reference measured on the same machine, the ±5-point P2P tolerance, `pass` / `FAIL` /
//! `inconclusive` — the code shares: the measurement lives beside calibrate's fidelity in
//! `calibrate::light_fidelity`.

use crate::calibrate::light_fidelity::{self, FidelityOptions, FidelityPlan};
use crate::calibrate::FidelityVerdict;
use crate::cli::FidelityArgs;
use crate::model::exit::Exit;
use crate::model::scenario::Overrides;

pub async fn run(args: FidelityArgs, quiet: bool) -> anyhow::Result<super::Done> {
    let plan = FidelityPlan::new(FidelityOptions {
        scenario: args.scenario.clone(),
        swarm: args.swarm,
        real: args.real,
        repeat: args.repeat,
        out: args.out.clone(),
        overrides: Overrides {
            duration: args.duration,
            fleet: args.fleet,
            apply: args.apply,
            ..Overrides::default()
        },
    })?;
    let (shutdown, runner) = super::engine_runner(quiet, args.paid.yes)?;
    let mut err = std::io::stderr();
    let result = light_fidelity::run(&plan, &runner, &shutdown, &mut err).await?;
    println!();
    print!("{}", light_fidelity::markdown(&result.fidelity));
    println!(
        "\nwritten: {}; a scenario's runs rely on it with `swarm.fidelity: PATH` (relative to the scenario file)",
        result.file.display()
    );
    let exit = if result.fidelity.interrupted {
        shutdown.exit()
    } else if result.fidelity.verdict == FidelityVerdict::Pass {
        Exit::Ok
    } else {
        Exit::Failed
    };
    Ok(super::Done {
        exit,
        figures: args
            .stdout
            .json
            .then(|| serde_json::to_value(&result.fidelity).unwrap_or_default()),
    })
}
