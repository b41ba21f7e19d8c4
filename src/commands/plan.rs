//! `viewerfleet plan`: node counts and costs of each scenario's cloud fleet.

use crate::cli::PlanArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::{pricing, sizing, CloudError};
use crate::model::exit::bad_input;
use crate::model::exit::Exit;
use crate::model::scenario::fleet::{FleetPlan, HcloudFleetSpec};
use crate::model::scenario::{self, Overrides, Plan};
use crate::sys::shutdown::Shutdown;
use anyhow::Context;

/// The scenario's hcloud settings, if its fleet is `hcloud`.
pub(super) fn hcloud_spec(plan: &Plan) -> Option<HcloudFleetSpec> {
    match &plan.fleet {
        FleetPlan::Hcloud(spec) => Some((**spec).clone()),
        _ => None,
    }
}

/// Node counts and costs for each scenario; exits 130/143 on Ctrl-C/SIGTERM like every command.
pub async fn run(args: PlanArgs) -> anyhow::Result<super::Done> {
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let json = args.stdout.json;
    tokio::select! {
        r = plan_all(args) => r.map(|(plans, over)| {
            // A fleet that cannot be bought is no estimate to go on: its own exit code.
            for line in &over {
                eprintln!("{line}");
            }
            super::Done {
                exit: if over.is_empty() { Exit::Ok } else { Exit::OverServerLimit },
                figures: json.then(|| serde_json::json!({ "scenarios": plans })),
            }
        }),
        _ = shutdown.wait() => Ok(shutdown.exit().into()),
    }
}

/// Prints every scenario's plan and returns them for `--json`, with one line for each
/// scenario no fleet of which fits `fleet.server_limit` (neither all real viewers nor the
/// mix with light peers offered).
async fn plan_all(args: PlanArgs) -> anyhow::Result<(Vec<serde_json::Value>, Vec<String>)> {
    let overrides = Overrides {
        viewers: args.viewers.into(),
        per_browser: args.per_browser,
        ..Default::default()
    };
    let calibration = match &args.calibration {
        Some(path) => Some(crate::calibrate::Calibration::load(path).map_err(bad_input)?),
        None => None,
    };
    if args.tfvars.is_some() && args.scenarios.len() != 1 {
        return Err(bad_input(anyhow::anyhow!(
            "--tfvars writes one fleet's Terraform variables: give one scenario (got {})",
            args.scenarios.len()
        )));
    }
    let mut api: Option<(Option<String>, HcloudApi)> = None;
    let mut plans = Vec::new();
    let mut over = Vec::new();
    for path in &args.scenarios {
        let plan = scenario::load(path, &overrides)?;
        let mut spec = match hcloud_spec(&plan) {
            Some(spec) => spec,
            None => {
                println!(
                    "{}: the scenario's fleet is `{}`; estimating with the hcloud defaults",
                    path.display(),
                    plan.fleet.kind()
                );
                HcloudFleetSpec::default()
            }
        };
        if let (Some(calibration), Some(path)) = (&calibration, &args.calibration) {
            let budget = calibration
                .budget(plan.target.video, plan.per_browser)
                .with_context(|| {
                    format!(
                        "{}: no row of viewerfleet's profiles (project, packed) with a playing viewer; run `viewerfleet calibrate` with --profiles including project",
                        path.display()
                    )
                })
                .map_err(bad_input)?;
            println!(
                "{}: budget from {} (measured {} on {} cores; {}): {:.3} cores and {:.0} MB PSS (peak) per viewer{}",
                path_label(path),
                path.display(),
                calibration.created,
                calibration.host.cpus,
                budget.source,
                budget.cpu_per_viewer,
                budget.memory_mb_per_viewer,
                if budget.fidelity_failed {
                    "; WARNING: a profile used failed its fidelity check (see calibration.md)"
                } else {
                    ""
                }
            );
            // The calibration measured the viewer at this packing: nothing per browser on top.
            spec.budget.cpu_per_viewer = budget.cpu_per_viewer;
            spec.budget.memory_mb_per_viewer = budget.memory_mb_per_viewer;
            spec.budget.cpu_per_browser = 0.0;
            spec.budget.memory_mb_per_browser = 0.0;
        }
        // A figure given on the command line is the whole cost of a viewer.
        if let Some(cpu) = args.cpu_per_viewer {
            spec.budget.cpu_per_viewer = cpu;
            spec.budget.cpu_per_browser = 0.0;
        }
        if let Some(mem) = args.memory_mb_per_viewer {
            spec.budget.memory_mb_per_viewer = mem;
            spec.budget.memory_mb_per_browser = 0.0;
        }
        spec.validate(plan.viewers)
            .map_err(|(field, message)| CloudError::Invalid { field, message })
            .with_context(|| format!("{}", path.display()))?;
        if api
            .as_ref()
            .is_none_or(|(file, _)| *file != spec.token_file)
        {
            api = Some((
                spec.token_file.clone(),
                HcloudApi::from_env(spec.token_file.as_deref())?,
            ));
        }
        let client = &api
            .as_ref()
            .map(|(_, a)| a.clone())
            .context("no API client")?;
        let catalogue = pricing::fetch(client, &spec.location).await?;
        let pace = sizing::Pace::of(&plan);
        // The whole swarm, real viewers and the scenario's light peers, sized as if every
        // member were a real viewer: the all-real row the mix below is compared with. Not
        // `cloud::up::size`, on purpose: that sizes the fleet `up` makes for the plan's real
        // viewers (and logs its choice), while this row prices the swarm as all real.
        let swarm = plan.viewers + plan.light.as_ref().map_or(0, |l| l.peers);
        let fleet = sizing::plan(
            &spec,
            swarm,
            plan.per_browser,
            plan.duration,
            pace,
            &catalogue,
        )?;
        let mix = match &plan.light {
            Some(light) => Some((sizing::scenario_mix(&spec, &plan, light, &catalogue)?, None)),
            None if fleet.over_limit() => Some(sizing::fit_mix(
                &spec,
                swarm,
                crate::model::scenario::light::DEFAULT_PER_PAGE,
                plan.per_browser,
                plan.duration,
                pace,
                &catalogue,
            )?),
            None => None,
        };
        let label = format!("{} ({})", plan.name, path.display());
        // Through `print!`, so `--json` moves the text to stderr.
        let mut text = Vec::new();
        sizing::render(&mut text, &label, &fleet, &spec.budget)?;
        if let Some((mix, most_real)) = &mix {
            sizing::render_mix(&mut text, &fleet, mix, most_real.as_ref())?;
            for line in mix_notes(&plan) {
                use std::io::Write;
                writeln!(text, "    {line}")?;
            }
        }
        if let Some((warmup, window)) = spec.canary() {
            use std::io::Write;
            let canary = crate::cloud::canary::canary_viewers(
                fleet.chosen.viewers_per_node,
                plan.per_browser,
            );
            writeln!(
                text,
                "  canary: first 1 × {} with {canary} viewers, measured over {} after {} of warm-up; the other nodes are then sized from what a viewer cost there (a cost more than {:.0}% off this budget is reported)",
                fleet.chosen.offer.name,
                humantime::format_duration(window),
                humantime::format_duration(warmup),
                crate::cloud::canary::CANARY_MARGIN * 100.0,
            )?;
        }
        print!("{}", String::from_utf8_lossy(&text));
        println!();
        if let Some(out) = &args.tfvars {
            write_tfvars(out, &plan, &spec, &fleet)?;
        }
        let fit = Fit::of(&fleet, mix.as_ref().map(|(m, _)| m));
        if !fit.fits {
            over.push(fit.message(&label, &fleet));
        }
        let mut json = super::json::fleet_plan(&plan.name, path, &fleet, &spec.budget);
        json["light_mix"] = mix.as_ref().map_or(serde_json::Value::Null, |(m, most)| {
            super::json::light_mix(m, most.as_ref(), &plan)
        });
        json["fits_server_limit"] = fit.fits.into();
        json["fewest_servers"] = fit.fewest_servers.into();
        plans.push(json);
    }
    Ok((plans, over))
}

/// Whether a scenario's fleet fits `fleet.server_limit`: all real viewers, or the mix with
/// light peers `plan` offers; and the fewest servers any of them needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fit {
    pub fits: bool,
    pub fewest_servers: u32,
}

impl Fit {
    pub(crate) fn of(all_real: &sizing::CloudSizing, mix: Option<&sizing::MixPlan>) -> Fit {
        let fits = !all_real.over_limit() || mix.is_some_and(|m| m.fits);
        let fewest_servers = mix
            .map(|m| m.fleet.fewest_servers())
            .into_iter()
            .chain([all_real.fewest_servers()])
            .min()
            .unwrap_or(all_real.servers);
        Fit {
            fits,
            fewest_servers,
        }
    }

    /// What to do when nothing fits, for stderr.
    fn message(&self, label: &str, all_real: &sizing::CloudSizing) -> String {
        format!(
            "error: {label}: no fleet fits fleet.server_limit ({}), neither all real viewers nor a mix with light peers; the fewest servers that would fit are {} (exit code {}). Raise the project's limit (Console → project → Limits), then set `fleet.server_limit: {}`; or lower the viewers, the per-viewer budget, or use `fleet: grid` with servers you have",
            all_real.server_limit,
            self.fewest_servers,
            Exit::OVER_SERVER_LIMIT,
            self.fewest_servers,
        )
    }
}

/// What a mix of real viewers and light peers relies on: the fidelity verdict the scenario
/// names, and whether its target can host light peers yet.
fn mix_notes(plan: &Plan) -> Vec<String> {
    let mut out = vec![match plan.fidelity.as_ref() {
        Some(f) => format!(
            "fidelity: {} ({} real vs {} real + {} light, measured {}{}; {})",
            f.verdict.as_str(),
            f.swarm,
            f.real,
            f.swarm - f.real,
            f.created,
            match f.measured_on() {
                on if on.is_empty() => on,
                on => format!(" {on}"),
            },
            f.file
        ),
        None => "fidelity: no verdict measured for these light peers: `viewerfleet fidelity SCENARIO --swarm N --real K --out DIR` measures one on a refsite scenario, and `swarm.fidelity` names its fidelity.json".into(),
    }];
    if plan.target.kind != crate::model::kinds::TargetKind::Refsite {
        out.push(format!(
            "light peers on a `{}` target run p2p-media-loader-core 2.x in browser pages of the instance: they share the real viewers' swarm only where the instance's player runs that engine too",
            plan.target.kind
        ));
    }
    out
}

/// Writes `plan --tfvars`: what Terraform needs besides the token, after the same checks
/// as `up` (controller addresses, an SSH public key), and says what the module cannot do.
fn write_tfvars(
    out: &std::path::Path,
    plan: &Plan,
    spec: &HcloudFleetSpec,
    fleet: &crate::cloud::sizing::CloudSizing,
) -> anyhow::Result<()> {
    use crate::cloud::tfvars;
    let ssh_key = crate::cloud::up::check_up(spec).map_err(bad_input)?;
    let secrets = crate::grid::auth::GridSecrets::generate();
    let text = tfvars::render(plan, spec, fleet, &ssh_key, &secrets);
    crate::grid::auth::write_private(out, text.as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    for limit in tfvars::limits(plan, fleet) {
        eprintln!("warning: {}: {limit}", out.display());
    }
    println!(
        "Terraform variables: {} (`terraform -chdir=terraform apply -var-file=...`)",
        out.display()
    );
    Ok(())
}

/// The file name of a calibration path, for its budget line.
fn path_label(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
