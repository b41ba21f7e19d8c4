//! Leftovers of crashed runs, decided resource by resource.
//!
//! Only what viewerfleet made is considered: a `viewerfleet-run` label, a
//! `viewerfleet-role` viewerfleet gives, and a numeric `viewerfleet-expires`. Resources
//! marked `viewerfleet-managed-by` (terraform/ sets it) belong to Terraform and are never
//! touched, even when they share a run label. Each of ours is deleted when
//!
//! - its `viewerfleet-expires` (the run's planned end + `fleet.ttl`) has passed, or
//! - it was created longer ago than `--older-than`, or
//! - its run's heartbeat stopped more than the grace ago (10 minutes by default): the
//!   heartbeat of a run is its hub's `viewerfleet-heartbeat` label (refreshed every minute
//!   by a live controller, removed when a fleet is handed over to its TTL); a run without
//!   a hub goes by the newest heartbeat its resources were created with;
//! - its run has no controller's heartbeat (the fleet was left standing) and its reaper's
//!   label (`viewerfleet-reaper`, refreshed by the reaper that enforces the run's TTL, see
//!   `reaper`) stopped more than the grace ago: nobody but a `gc` would end that run now.
//!
//! Why the reaper's own label, and only on a fleet left standing: while a controller drives
//! a run, its heartbeat says more (the run is in use) and the reaper stands by on the same
//! machine; once the controller left, the reaper is what guards the run, and a reaper that
//! can no longer write its label (its machine died, it was killed) guards nothing.
//!
//! Times are whole seconds; every sum saturates, so no `--older-than` overflows or wraps.
//! Deletion goes through the same teardown as `down` (servers first, confirmed gone), but
//! only of the resources decided on.

use super::api::HcloudApi;
use super::provision::{
    self, Deleted, Inventory, Kind, Named, LABEL_EXPIRES, LABEL_HEARTBEAT, LABEL_MANAGED_BY,
    LABEL_REAPER, LABEL_ROLE, LABEL_RUN, ROLES,
};
use super::CloudError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a run's heartbeat may be silent before `gc` deletes the run.
pub const DEFAULT_HEARTBEAT_GRACE: Duration = Duration::from_secs(10 * 60);

/// What `gc` considers.
#[derive(Debug, Clone, PartialEq)]
pub struct GcOptions {
    /// Also delete resources created longer ago than this.
    pub older_than: Option<Duration>,
    pub heartbeat_grace: Duration,
    pub dry_run: bool,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            older_than: None,
            heartbeat_grace: DEFAULT_HEARTBEAT_GRACE,
            dry_run: false,
        }
    }
}

/// What `gc` decided about one resource.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposal {
    /// To delete, and why.
    Delete(String),
    /// Left alone, and why.
    Keep(String),
}

/// One resource carrying a run label.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub kind: Kind,
    pub id: i64,
    pub name: String,
    pub disposal: Disposal,
}

/// One run found in the project.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundRun {
    pub run: String,
    pub resources: Vec<Found>,
}

impl FoundRun {
    pub fn to_delete(&self) -> impl Iterator<Item = &Found> {
        self.resources
            .iter()
            .filter(|r| matches!(r.disposal, Disposal::Delete(_)))
    }

    pub fn kept(&self) -> impl Iterator<Item = &Found> {
        self.resources
            .iter()
            .filter(|r| matches!(r.disposal, Disposal::Keep(_)))
    }

    /// `2 server(s), 1 firewall(s), 1 SSH key(s)` of those to delete.
    pub fn summary(&self) -> String {
        let n = |k: Kind| self.to_delete().filter(|r| r.kind == k).count();
        format!(
            "{} server(s), {} firewall(s), {} SSH key(s)",
            n(Kind::Server),
            n(Kind::Firewall),
            n(Kind::SshKey)
        )
    }

    fn inventory(&self) -> Inventory {
        let mut inv = Inventory::default();
        for r in self.to_delete() {
            let named = Named {
                id: r.id,
                name: r.name.clone(),
            };
            match r.kind {
                Kind::Server => inv.servers.push(named),
                Kind::Firewall => inv.firewalls.push(named),
                Kind::SshKey => inv.ssh_keys.push(named),
            }
        }
        inv
    }
}

/// What `gc` did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcReport {
    pub runs: Vec<FoundRun>,
    pub deleted: Deleted,
    /// Deletions that failed, each with what to run next.
    pub failures: Vec<String>,
}

/// `t + d` in Unix seconds, saturating.
fn plus(t: i64, d: Duration) -> i64 {
    t.saturating_add(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn label(v: &Value, key: &str) -> Option<String> {
    v["labels"][key].as_str().map(str::to_string)
}

fn seconds(v: &Value, key: &str) -> Option<i64> {
    label(v, key)?.trim().parse().ok()
}

pub(crate) fn when(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| t.to_string())
}

struct Listed {
    kind: Kind,
    json: Value,
}

/// The run's heartbeat: its hubs' label if it has hubs (the first hub carries it; a run
/// split over several hubs creates the others without one), else the newest of its
/// resources.
fn run_heartbeat(resources: &[Listed]) -> Option<i64> {
    let mut hubs = resources
        .iter()
        .filter(|r| r.kind == Kind::Server && label(&r.json, LABEL_ROLE).as_deref() == Some("hub"))
        .peekable();
    if hubs.peek().is_some() {
        return hubs.filter_map(|h| seconds(&h.json, LABEL_HEARTBEAT)).max();
    }
    resources
        .iter()
        .filter_map(|r| seconds(&r.json, LABEL_HEARTBEAT))
        .max()
}

/// The newest reaper's label of a run's resources (the reaper writes it on the first hub).
fn run_reaper(resources: &[Listed]) -> Option<i64> {
    resources
        .iter()
        .filter_map(|r| seconds(&r.json, LABEL_REAPER))
        .max()
}

/// What to do with one resource of a run with heartbeat `heartbeat` and reaper's label
/// `reaper`, at `now`.
fn judge(
    r: &Listed,
    heartbeat: Option<i64>,
    reaper: Option<i64>,
    opts: &GcOptions,
    now: i64,
) -> Disposal {
    let v = &r.json;
    if let Some(by) = label(v, LABEL_MANAGED_BY) {
        return Disposal::Keep(format!(
            "managed by {by} ({LABEL_MANAGED_BY}): `terraform destroy` removes it"
        ));
    }
    let role = label(v, LABEL_ROLE);
    let expires = seconds(v, LABEL_EXPIRES);
    let (Some(_), Some(expires)) = (role.filter(|r| ROLES.contains(&r.as_str())), expires) else {
        return Disposal::Keep(format!(
            "lacks viewerfleet's labels ({LABEL_ROLE}, {LABEL_EXPIRES}): not made by viewerfleet"
        ));
    };
    if expires <= now {
        return Disposal::Delete(format!("expired at {}", when(expires)));
    }
    let created = v["created"]
        .as_str()
        .and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok())
        .map(|c| c.timestamp());
    if let (Some(age), Some(created)) = (opts.older_than, created) {
        if plus(created, age) <= now {
            return Disposal::Delete(format!(
                "created {} ago, longer than --older-than",
                humantime::format_duration(Duration::from_secs(
                    now.saturating_sub(created).max(0) as u64
                ))
            ));
        }
    }
    if let Some(beat) = heartbeat {
        if plus(beat, opts.heartbeat_grace) <= now {
            return Disposal::Delete(format!(
                "its controller's heartbeat stopped at {} (more than {} ago)",
                when(beat),
                humantime::format_duration(opts.heartbeat_grace)
            ));
        }
        return Disposal::Keep(format!(
            "its controller is alive (heartbeat {} s ago)",
            now.saturating_sub(beat).max(0)
        ));
    }
    if let Some(beat) = reaper {
        if plus(beat, opts.heartbeat_grace) <= now {
            return Disposal::Delete(format!(
                "its reaper stopped at {} (more than {} ago): nothing enforces its TTL",
                when(beat),
                humantime::format_duration(opts.heartbeat_grace)
            ));
        }
        return Disposal::Keep(format!(
            "left standing until {}, its reaper alive ({} s ago)",
            when(expires),
            now.saturating_sub(beat).max(0)
        ));
    }
    Disposal::Keep(format!("within its lifetime (until {})", when(expires)))
}

/// Every run in the project with what to do with each of its resources.
pub async fn find(api: &HcloudApi, opts: &GcOptions) -> Result<Vec<FoundRun>, CloudError> {
    let now = chrono::Utc::now().timestamp();
    let mut runs: BTreeMap<String, Vec<Listed>> = BTreeMap::new();
    for kind in [Kind::Server, Kind::Firewall, Kind::SshKey] {
        let listed: Vec<Value> = provision::list(api, kind, Some(LABEL_RUN)).await?;
        for json in listed {
            if let Some(run) = label(&json, LABEL_RUN) {
                runs.entry(run).or_default().push(Listed { kind, json });
            }
        }
    }
    Ok(runs
        .into_iter()
        .map(|(run, listed)| {
            let heartbeat = run_heartbeat(&listed);
            let reaper = run_reaper(&listed);
            let resources = listed
                .iter()
                .map(|r| Found {
                    kind: r.kind,
                    id: r.json["id"].as_i64().unwrap_or_default(),
                    name: r.json["name"].as_str().unwrap_or_default().to_string(),
                    disposal: judge(r, heartbeat, reaper, opts, now),
                })
                .collect();
            FoundRun { run, resources }
        })
        .collect())
}

/// One warning per run that `gc` would delete now (its controller or its reaper is gone,
/// or it expired), saying why and what removes it.
pub fn warnings(runs: &[FoundRun]) -> Vec<String> {
    runs.iter()
        .filter_map(|run| {
            let why = run.to_delete().find_map(|r| match &r.disposal {
                Disposal::Delete(why) => Some(why.clone()),
                Disposal::Keep(_) => None,
            })?;
            Some(format!(
                "run {} is left over ({}: {why}); `viewerfleet gc --cloud` removes it",
                run.run,
                run.summary()
            ))
        })
        .collect()
}

/// Warns (a log line each) about runs of the project that `gc` would delete; what cannot
/// be listed is not worth stopping a command for.
/// `except`: the run the command is about (`down` deletes it anyway).
pub async fn warn_about_leftovers(api: &HcloudApi, except: Option<&str>) {
    match find(api, &GcOptions::default()).await {
        Ok(mut runs) => {
            runs.retain(|r| Some(r.run.as_str()) != except);
            for line in warnings(&runs) {
                tracing::warn!("{line}");
            }
        }
        Err(e) => tracing::debug!("leftover runs not checked: {e}"),
    }
}

/// Deletes what `find` decided (nothing with `dry_run`).
pub async fn gc(api: &HcloudApi, opts: &GcOptions) -> Result<GcReport, CloudError> {
    let runs = find(api, opts).await?;
    let mut report = GcReport::default();
    if !opts.dry_run {
        for run in &runs {
            let inv = run.inventory();
            if inv.is_empty() {
                continue;
            }
            match provision::delete_inventory(api, &run.run, inv, 10).await {
                Ok(d) => report.deleted.extend(d),
                Err(CloudError::TeardownIncomplete { run, deleted, left }) => {
                    report.deleted.extend(deleted.clone());
                    report
                        .failures
                        .push(CloudError::TeardownIncomplete { run, deleted, left }.to_string());
                }
                Err(e) => report
                    .failures
                    .push(format!("run {}: {e}; run `viewerfleet gc` again", run.run)),
            }
        }
    }
    report.runs = runs;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server(labels: Value, created: i64) -> Listed {
        Listed {
            kind: Kind::Server,
            json: json!({"id": 1, "name": "s", "labels": labels,
                         "created": chrono::DateTime::from_timestamp(created, 0).unwrap().to_rfc3339()}),
        }
    }

    #[test]
    fn a_huge_older_than_neither_overflows_nor_wraps() {
        let now = 1_800_000_000;
        let r = server(
            json!({"viewerfleet-run": "r", "viewerfleet-role": "node", "viewerfleet-expires": (now + 3600).to_string()}),
            now - 5,
        );
        for age in [
            Duration::MAX,
            Duration::from_secs(u64::MAX),
            Duration::from_secs(i64::MAX as u64 + 10),
        ] {
            let opts = GcOptions {
                older_than: Some(age),
                ..GcOptions::default()
            };
            assert!(
                matches!(judge(&r, None, None, &opts, now), Disposal::Keep(_)),
                "{age:?}"
            );
        }
        assert_eq!(plus(i64::MAX - 1, Duration::from_secs(100)), i64::MAX);
    }

    #[test]
    fn a_stale_heartbeat_deletes_before_the_ttl_a_fresh_one_keeps() {
        let now = 1_800_000_000;
        let labels = json!({"viewerfleet-run": "r", "viewerfleet-role": "node", "viewerfleet-expires": (now + 4 * 3600).to_string()});
        let r = server(labels, now - 3600);
        let opts = GcOptions::default();
        assert!(
            matches!(judge(&r, Some(now - 11 * 60), None, &opts, now), Disposal::Delete(m) if m.contains("heartbeat stopped"))
        );
        assert!(
            matches!(judge(&r, Some(now - 60), None, &opts, now), Disposal::Keep(m) if m.contains("alive"))
        );
        assert!(
            matches!(judge(&r, None, None, &opts, now), Disposal::Keep(m) if m.contains("lifetime"))
        );
    }

    #[test]
    fn a_fleet_left_standing_goes_when_its_reaper_stops_and_stays_while_it_beats() {
        let now = 1_800_000_000;
        let labels = json!({"viewerfleet-run": "r", "viewerfleet-role": "hub", "viewerfleet-expires": (now + 4 * 3600).to_string()});
        let r = server(labels, now - 3600);
        let opts = GcOptions::default();
        assert!(
            matches!(judge(&r, None, Some(now - 11 * 60), &opts, now), Disposal::Delete(m) if m.contains("reaper stopped"))
        );
        assert!(
            matches!(judge(&r, None, Some(now - 60), &opts, now), Disposal::Keep(m) if m.contains("reaper alive"))
        );
        // A driven run: the controller's heartbeat speaks, whatever the reaper's label says.
        assert!(
            matches!(judge(&r, Some(now - 60), Some(now - 3600), &opts, now), Disposal::Keep(m) if m.contains("controller is alive"))
        );
        let hub = server(
            json!({"viewerfleet-role": "hub", "viewerfleet-reaper": "500"}),
            0,
        );
        assert_eq!(run_reaper(&[hub]), Some(500));
    }

    #[test]
    fn the_hubs_heartbeat_speaks_for_the_run() {
        let node = server(
            json!({"viewerfleet-role": "node", "viewerfleet-heartbeat": "100"}),
            0,
        );
        let handed_over = server(json!({"viewerfleet-role": "hub"}), 0);
        assert_eq!(
            run_heartbeat(&[node, handed_over]),
            None,
            "a hub without heartbeat: TTL only"
        );
        let node = server(
            json!({"viewerfleet-role": "node", "viewerfleet-heartbeat": "100"}),
            0,
        );
        let fw = Listed {
            kind: Kind::Firewall,
            json: json!({"labels": {"viewerfleet-role": "node-firewall", "viewerfleet-heartbeat": "90"}}),
        };
        assert_eq!(run_heartbeat(&[node, fw]), Some(100), "no hub: the newest");
        // Several hubs: the one with the heartbeat speaks, wherever it is listed.
        let second = server(json!({"viewerfleet-role": "hub"}), 0);
        let first = server(
            json!({"viewerfleet-role": "hub", "viewerfleet-heartbeat": "300"}),
            0,
        );
        assert_eq!(run_heartbeat(&[second, first]), Some(300));
    }
}
