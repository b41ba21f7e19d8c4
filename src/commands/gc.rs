//! `viewerfleet gc`: removes what earlier crashes left behind: browsers and profiles,
//! viewer slots, local Grids and their sessions (unless `--cloud`), and cloud runs (unless
//! `--local`).

use super::Done;
use crate::cli::GcArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::gc::{self, Disposal, GcOptions};
use crate::cloud::CloudError;
use crate::model::exit::Exit;
use crate::sys::shutdown::Shutdown;

pub async fn run(args: GcArgs) -> anyhow::Result<Done> {
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let mut cloud = None;
    if !args.local {
        let found = tokio::select! {
            r = gc_hcloud(&args) => r,
            _ = shutdown.wait() => {
                eprintln!("interrupted: cloud leftovers may remain; run `viewerfleet gc` again");
                return Ok(shutdown.exit().into());
            }
        };
        cloud = Some(found?);
        if args.cloud {
            return Ok(Done {
                exit: Exit::Ok,
                figures: args
                    .stdout
                    .json
                    .then(|| super::json::gc(args.dry_run, None, cloud)),
            });
        }
    }
    let mut removed = crate::viewer::gc::collect_leftovers(args.dry_run)?;
    removed.extend(crate::netns::gc::leftover_lines(args.dry_run));
    removed.extend(crate::grid::local::gc(args.dry_run).await);
    removed.extend(crate::fleet::grid::gc_sessions(args.dry_run).await);
    for line in &removed {
        println!(
            "{}{line}",
            if args.dry_run {
                "would remove: "
            } else {
                "removed: "
            }
        );
    }
    if removed.is_empty() {
        println!("nothing left over from earlier runs");
    }
    Ok(Done {
        exit: Exit::Ok,
        figures: args
            .stdout
            .json
            .then(|| super::json::gc(args.dry_run, Some(&removed), cloud)),
    })
}

/// The cloud part: deletes, resource by resource, what expired, outlived `--older-than` or
/// lost its controller's heartbeat. Returns its part of `--json`'s figures.
async fn gc_hcloud(args: &GcArgs) -> anyhow::Result<serde_json::Value> {
    let opts = GcOptions {
        older_than: args.older_than,
        heartbeat_grace: args.heartbeat_grace.unwrap_or(gc::DEFAULT_HEARTBEAT_GRACE),
        dry_run: args.dry_run,
    };
    let api = match HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref()) {
        Ok(api) => api,
        Err(CloudError::NoToken) => {
            println!("hcloud: no HCLOUD_TOKEN, skipping cloud leftovers");
            return Ok(super::json::gc_cloud_skipped("no HCLOUD_TOKEN"));
        }
        Err(e) => return Err(e.into()),
    };
    let report = gc::gc(&api, &opts).await?;
    for run in &report.runs {
        let doomed: Vec<_> = run.to_delete().collect();
        if !doomed.is_empty() {
            println!(
                "hcloud: run {}: {} {}",
                run.run,
                if args.dry_run {
                    "would delete"
                } else {
                    "deleting"
                },
                run.summary()
            );
        }
        for r in &run.resources {
            let (what, why) = match &r.disposal {
                Disposal::Delete(why) if args.dry_run => ("would delete", why),
                Disposal::Delete(why) => ("delete", why),
                Disposal::Keep(why) => ("keep", why),
            };
            println!("  {what} {} {}: {why}", r.kind.noun(), r.name);
        }
    }
    if !args.dry_run {
        println!(
            "hcloud: deleted {} ({} API requests)",
            report.deleted.summary(),
            api.requests()
        );
    }
    if !report.failures.is_empty() {
        // What the API would not delete: the outside world's failure (exit code 69).
        return Err(crate::model::exit::unavailable(anyhow::anyhow!(
            "{}",
            report.failures.join("\n")
        )));
    }
    Ok(super::json::gc_cloud(&report, args.dry_run, api.requests()))
}
