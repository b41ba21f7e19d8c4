//! `viewerfleet gc`: removes what earlier crashes left behind: browsers and profiles,
//! viewer slots, local Grids and their sessions (unless `--cloud`), and cloud runs (unless
//! `--local`).

use crate::cli::GcArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::gc::{self, GcOptions, Verdict};
use crate::cloud::CloudError;
use crate::model::exit::Exit;
use crate::sys::shutdown::Shutdown;
use std::time::Duration;

pub async fn run(args: GcArgs) -> anyhow::Result<Exit> {
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    if !args.local {
        let cloud = tokio::select! {
            r = gc_hcloud(&args) => r,
            _ = shutdown.wait() => {
                eprintln!("interrupted: cloud leftovers may remain; run `viewerfleet gc` again");
                return Ok(shutdown.exit());
            }
        };
        cloud?;
        if args.cloud {
            return Ok(Exit::Ok);
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
    Ok(Exit::Ok)
}

fn duration(flag: &str, value: &Option<String>) -> anyhow::Result<Option<Duration>> {
    value
        .as_deref()
        .map(|v| {
            humantime::parse_duration(v).map_err(|e| {
                crate::model::exit::bad_input(anyhow::anyhow!(
                    "{flag} `{v}`: {e}; write e.g. 2h or 30m"
                ))
            })
        })
        .transpose()
}

/// The cloud part: deletes, resource by resource, what expired, outlived `--older-than` or
/// lost its controller's heartbeat.
async fn gc_hcloud(args: &GcArgs) -> anyhow::Result<()> {
    let opts = GcOptions {
        older_than: duration("--older-than", &args.older_than)?,
        heartbeat_grace: duration("--heartbeat-grace", &args.heartbeat_grace)?
            .unwrap_or(gc::DEFAULT_HEARTBEAT_GRACE),
        dry_run: args.dry_run,
    };
    let api = match HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref()) {
        Ok(api) => api,
        Err(CloudError::NoToken) => {
            println!("hcloud: no HCLOUD_TOKEN, skipping cloud leftovers");
            return Ok(());
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
            let (what, why) = match &r.verdict {
                Verdict::Delete(why) if args.dry_run => ("would delete", why),
                Verdict::Delete(why) => ("delete", why),
                Verdict::Keep(why) => ("keep", why),
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
    Ok(())
}
