//! `viewerfleet down RUN`: deletes a cloud run's servers, firewalls and keys.

use crate::cli::DownArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::provision;
use std::process::ExitCode;

pub async fn run(args: DownArgs) -> anyhow::Result<ExitCode> {
    provision::check_run_id(&args.run)?;
    let api = HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref())?;
    let deleted = provision::teardown(&api, &args.run).await?;
    println!("run {}: deleted {}", args.run, deleted.summary());
    for name in deleted
        .servers
        .iter()
        .chain(&deleted.firewalls)
        .chain(&deleted.ssh_keys)
    {
        println!("  {name}");
    }
    Ok(ExitCode::SUCCESS)
}
