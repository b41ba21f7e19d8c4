//! `viewerfleet calibrate`: what one viewer costs on this machine, per browser profile.

use crate::calibrate::{self, CalibrateOptions, CALIBRATION_JSON};
use crate::cli::CalibrateArgs;
use crate::model::exit::Exit;
use crate::sys::shutdown::Shutdown;

pub async fn run(args: CalibrateArgs) -> anyhow::Result<super::Done> {
    let options = CalibrateOptions {
        scenario: args.scenario.clone(),
        videos: args.video.clone(),
        viewers: args.viewers,
        repeat: args.repeat,
        warmup: args.warmup,
        window: args.window,
        out: args.out.clone(),
        profiles: calibrate::resolve_profiles(&args.profiles, &args.profile)
            .map_err(|message| crate::model::exit::bad_input(anyhow::anyhow!(message)))?,
    };
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let calibration = match calibrate::run(&options, &shutdown).await {
        Ok(c) => c,
        Err(_) if shutdown.is_triggered() => return Ok(shutdown.exit().into()),
        Err(err) => return Err(err),
    };
    let markdown = calibrate::markdown(&calibration);
    std::fs::write(options.out.join("calibration.md"), &markdown)?;
    print!("{markdown}");
    let json = options.out.join(CALIBRATION_JSON);
    println!(
        "\nwritten: {} and calibration.md; size fleets with `viewerfleet plan --calibration {}`",
        json.display(),
        json.display()
    );
    let figures = args
        .stdout
        .json
        .then(|| super::json::calibrate(&calibration, &json));
    if shutdown.is_triggered() {
        return Ok(super::Done {
            exit: shutdown.exit(),
            figures,
        });
    }
    let all_played = calibration
        .profiles
        .iter()
        .all(|p| p.viewers_measured == p.viewers);
    for p in calibration.profiles.iter() {
        if let Some(f) = p
            .fidelity
            .as_ref()
            .filter(|f| f.verdict != calibrate::FidelityVerdict::Pass)
        {
            eprintln!(
                "note: profile {} ({}, round {}) fidelity {} against {}",
                p.profile.name,
                p.video,
                p.round + 1,
                f.verdict.as_str(),
                f.against
            );
        }
    }
    let exit = if all_played {
        Exit::Ok
    } else {
        eprintln!("warning: not every viewer played; see `failures` in calibration.json");
        Exit::Failed
    };
    Ok(super::Done { exit, figures })
}
