//! Leftovers of crashed runs: every server, firewall and SSH key carrying a `viewerfleet-run`
//! label whose run has expired (its `viewerfleet-expires` label, set at creation from the
//! scenario's duration and `fleet.ttl`, is past) or is older than `--older-than`. Resources
//! without the label, runs still within their lifetime and resources made by terraform/
//! (`viewerfleet-managed-by=terraform`) are never touched.

use super::api::HcloudApi;
use super::provision::{self, Deleted, LABEL_EXPIRES, LABEL_RUN};
use super::CloudError;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Set by terraform/: such resources belong to a Terraform state, not to `gc`.
pub const MANAGED_BY: &str = "viewerfleet-managed-by";

/// A resource's age limit when it carries a run label but no expiry (e.g. made by hand).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// One run found in the project.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundRun {
    pub run: String,
    pub servers: usize,
    pub firewalls: usize,
    pub ssh_keys: usize,
    /// Unix time after which it may go.
    pub expires: i64,
}

fn expiry(labels: &HashMap<String, String>, created: &str, older_than: Option<Duration>) -> i64 {
    let created = chrono::DateTime::parse_from_rfc3339(created)
        .map(|t| t.timestamp())
        .unwrap_or(0);
    let labelled = labels
        .get(LABEL_EXPIRES)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(created + DEFAULT_LIFETIME.as_secs() as i64);
    match older_than {
        Some(age) => labelled.min(created + age.as_secs() as i64),
        None => labelled,
    }
}

/// Lists every run in the project with its resources and expiry (the earliest of them).
pub async fn find_runs(
    api: &HcloudApi,
    older_than: Option<Duration>,
) -> Result<Vec<FoundRun>, CloudError> {
    let mut runs: BTreeMap<String, FoundRun> = BTreeMap::new();
    let mut note = |labels: &HashMap<String, String>, created: &str, kind: usize| {
        let Some(run) = labels.get(LABEL_RUN) else {
            return;
        };
        if labels.get(MANAGED_BY).is_some_and(|m| m == "terraform") {
            return; // terraform/ owns it: `terraform destroy` removes it.
        }
        let e = expiry(labels, created, older_than);
        let entry = runs.entry(run.clone()).or_insert(FoundRun {
            run: run.clone(),
            servers: 0,
            firewalls: 0,
            ssh_keys: 0,
            expires: e,
        });
        entry.expires = entry.expires.min(e);
        match kind {
            0 => entry.servers += 1,
            1 => entry.firewalls += 1,
            _ => entry.ssh_keys += 1,
        }
    };
    for s in provision::list_servers(api, Some(LABEL_RUN)).await? {
        note(&s.labels, &s.created, 0);
    }
    for f in provision::list_firewalls(api, Some(LABEL_RUN)).await? {
        note(&f.labels.clone().unwrap_or_default(), &f.created, 1);
    }
    for k in provision::list_ssh_keys(api, Some(LABEL_RUN)).await? {
        note(&k.labels, &k.created, 2);
    }
    Ok(runs.into_values().collect())
}

/// Deletes every expired run (or lists them with `dry_run`). Returns the runs and what went.
pub async fn gc(
    api: &HcloudApi,
    older_than: Option<Duration>,
    dry_run: bool,
) -> Result<(Vec<FoundRun>, Deleted), CloudError> {
    let now = chrono::Utc::now().timestamp();
    let expired: Vec<FoundRun> = find_runs(api, older_than)
        .await?
        .into_iter()
        .filter(|r| r.expires <= now)
        .collect();
    let mut all = Deleted::default();
    if dry_run {
        return Ok((expired, all));
    }
    for run in &expired {
        let d = provision::teardown(api, &run.run).await?;
        all.servers.extend(d.servers);
        all.firewalls.extend(d.firewalls);
        all.ssh_keys.extend(d.ssh_keys);
    }
    Ok((expired, all))
}
