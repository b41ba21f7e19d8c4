//! `viewerfleet down RUN`: deletes a cloud run's servers, firewalls and keys.

use super::Done;
use crate::cli::DownArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::provision::{self, Deleted};
use crate::cloud::CloudError;
use crate::model::exit::Exit;
use crate::sys::shutdown::Shutdown;

fn print(run: &str, deleted: &Deleted) {
    println!("run {run}: deleted {}", deleted.summary());
    for name in deleted
        .servers
        .iter()
        .chain(&deleted.firewalls)
        .chain(&deleted.ssh_keys)
    {
        println!("  {name}");
    }
}

pub async fn run(args: DownArgs) -> anyhow::Result<Done> {
    provision::check_run_id(&args.run)?;
    let api = HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref())?;
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let result = tokio::select! {
        r = async {
            crate::cloud::gc::warn_about_leftovers(&api, Some(&args.run)).await;
            provision::teardown(&api, &args.run).await
        } => r,
        _ = shutdown.wait() => {
            eprintln!(
                "interrupted: the teardown of run {} stopped part-way; run `viewerfleet down {}` again",
                args.run, args.run
            );
            return Ok(shutdown.exit().into());
        }
    };
    let deleted = match result {
        Ok(deleted) if deleted.is_empty() => {
            println!(
                "run {}: nothing to delete (no resource labelled {}={})",
                args.run,
                provision::LABEL_RUN,
                args.run
            );
            deleted
        }
        Ok(deleted) => {
            print(&args.run, &deleted);
            deleted
        }
        Err(CloudError::TeardownIncomplete { run, deleted, left }) => {
            print(&run, &deleted);
            return Err(CloudError::TeardownIncomplete { run, deleted, left }.into());
        }
        Err(e) => return Err(e.into()),
    };
    println!("({} Hetzner API requests)", api.requests());
    Ok(Done {
        exit: Exit::Ok,
        figures: args
            .stdout
            .json
            .then(|| super::json::down(&args.run, &deleted, api.requests())),
    })
}
