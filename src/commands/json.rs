//! `--json`: one stable, versioned document on stdout for every command (`run`, `suite`,
//! `compare`, `plan`, `calibrate`, `fidelity`, `report`, `validate`, `ladder`, `up`, `down`,
//! `gc`, `grid` and `refsite`; not the hidden `reaper`), so a script needs neither the text
//! nor the output folder's layout. The human-readable text then goes to stderr. `refsite`
//! prints its document once it listens and nothing after it.
//!
//! Every document has the same envelope — `schema_version`, `tool_version` (this build's
//! version), `command`, `exit_code`, `outcome` (the category of `model::exit::Exit`) and,
//! when the command ended on an error, `error` — and the command's figures under a key named
//! after it. A usage error under `--json` (a flag clap refuses) gets the envelope too
//! ([`usage_error`]). The layouts are committed as JSON Schemas in
//! `schemas/<command>-summary.v1.json`, open to added fields, and checked against real
//! outputs by the tests with every field named. The figures are mapped here field by field
//! rather than serialized from internal types, so a change inside the program does not
//! change the document: `JSON_ENVELOPE_VERSION` does, and only when a field changes meaning
//! or goes away (new fields may be added within a version).

use crate::engine::RunOutcome;
use crate::model::exit::Exit;
use crate::report::compare::{Comparison, FailedRun};
use crate::report::thresholds::ThresholdResult;
use crate::report::ReportSummary;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;

/// Version of the `--json` envelope and the documents in it (`schemas/*.v1.json`, the
/// `schema_version` field of every `--json` document); `report.json` has its own
/// (`report::summary::SCHEMA_VERSION`).
pub const JSON_ENVELOPE_VERSION: u32 = 1;

/// The envelope, in this order on the wire: what every document starts with.
#[derive(Serialize)]
struct Envelope<'a> {
    schema_version: u32,
    tool_version: &'static str,
    command: &'a str,
    exit_code: u8,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// `{"<command>": figures}`.
    #[serde(flatten)]
    figures: serde_json::Map<String, Value>,
}

/// The whole document, as printed: the envelope around a command's figures (or its error).
pub fn document(
    command: &str,
    exit: Exit,
    figures: Option<Value>,
    error: Option<String>,
) -> String {
    let mut named = serde_json::Map::new();
    if let Some(figures) = figures {
        named.insert(command.to_string(), figures);
    }
    // Straight to text: through a `Value` the envelope's order would be lost.
    serde_json::to_string_pretty(&Envelope {
        schema_version: JSON_ENVELOPE_VERSION,
        tool_version: env!("CARGO_PKG_VERSION"),
        command,
        exit_code: exit.code(),
        outcome: exit.as_str(),
        error,
        figures: named,
    })
    .unwrap_or_default()
}

/// A run's headline from its report: what `run` prints, and one row of `suite`/`compare`.
#[derive(Debug, Serialize)]
pub struct Headline<'a> {
    pub scenario: &'a str,
    pub partial: bool,
    pub viewers: Viewers,
    /// Where `http_*`/`p2p_*` below come from: `exporter`, `players` or `none`.
    pub source: &'a str,
    pub http_peak_mbps: Option<f64>,
    pub http_at_mbps: Option<f64>,
    pub p2p_at_mbps: Option<f64>,
    pub http_share: Option<f64>,
    pub p2p_savings: Option<f64>,
    /// The players' own figures at T (present when players were sampled).
    pub players: Option<Shares>,
    /// The exporter's figures at T (present when the run had an exporter).
    pub exporter: Option<Shares>,
    pub qoe: Qoe,
    pub p2p_undelivered_share: Option<f64>,
    pub headroom: Option<HeadroomLine<'a>>,
    pub thresholds: &'a [ThresholdResult],
    /// Notes on the figures: `PARTIAL`, `CPU-SATURATED`, scrape gaps, failed thresholds.
    pub flags: String,
}

#[derive(Debug, Serialize)]
pub struct Viewers {
    pub requested: u32,
    pub started: u32,
    pub failed: u32,
    pub lost: u32,
}

#[derive(Debug, Serialize)]
pub struct Shares {
    pub http_at_mbps: Option<f64>,
    pub p2p_at_mbps: Option<f64>,
    pub http_share: Option<f64>,
    pub p2p_savings: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Qoe {
    pub ttff_median_ms: Option<f64>,
    pub ttff_p95_ms: Option<f64>,
    pub stalls_per_viewer_minute: Option<f64>,
    pub stalled_time_share: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct HeadroomLine<'a> {
    /// `finding`, `not-a-finding` or `unknown`.
    pub verdict: &'a str,
    pub headline: &'a str,
    pub starved_viewers: u32,
    pub viewers_in_steady: u32,
}

impl<'a> Headline<'a> {
    pub fn of(s: &'a ReportSummary) -> Self {
        let shares = |t: &crate::report::SourceTable| Shares {
            http_at_mbps: t.http_at_mbps,
            p2p_at_mbps: t.p2p_at_mbps,
            http_share: t.http_share,
            p2p_savings: t.p2p_savings,
        };
        Headline {
            scenario: &s.scenario,
            partial: s.partial,
            viewers: Viewers {
                requested: s.viewers.requested,
                started: s.viewers.started,
                failed: s.viewers.failed,
                lost: s.viewers.lost,
            },
            source: s.source.as_str(),
            http_peak_mbps: s.http_peak_mbps,
            http_at_mbps: s.http_at_mbps,
            p2p_at_mbps: s.p2p_at_mbps,
            http_share: s.http_share,
            p2p_savings: s.p2p_savings,
            players: s.players.as_ref().map(shares),
            exporter: s.exporter.as_ref().map(shares),
            qoe: Qoe {
                ttff_median_ms: s.qoe.ttff_median_ms,
                ttff_p95_ms: s.qoe.ttff_p95_ms,
                stalls_per_viewer_minute: s.qoe.stalls_per_viewer_minute,
                stalled_time_share: s.qoe.stalled_time_share,
            },
            p2p_undelivered_share: s
                .p2p_reconciliation
                .as_ref()
                .and_then(|r| r.undelivered_share),
            headroom: s.headroom.as_ref().map(|h| HeadroomLine {
                verdict: h.verdict.as_str(),
                headline: &h.headline,
                starved_viewers: h.viewers.starved,
                viewers_in_steady: h.viewers.in_steady,
            }),
            thresholds: &s.thresholds,
            flags: crate::report::sections::flags(s),
        }
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// `run`'s figures: where the run went, the report's headline (absent without a report).
pub fn run(outcome: &RunOutcome) -> Value {
    let dir = &outcome.run_dir;
    let report = outcome.report.as_ref();
    let written = |name: &str| {
        let p = dir.join(name);
        p.exists().then(|| path(&p))
    };
    json!({
        "run_dir": path(dir),
        "report_json": written("report.json"),
        "report_html": written("report.html"),
        "interrupted": outcome.interrupted,
        "settled_viewers": outcome.settled_viewers,
        "headline": report.map(Headline::of),
    })
}

/// `report`'s figures: the run folder, the report's files and its headline (thresholds
/// judged again).
/// `report`'s figures: the report's files where they were written (`None`: nowhere, as
/// `--thresholds` without `--out`), and whose thresholds were judged.
pub fn report(
    run_dir: &Path,
    written: Option<&Path>,
    thresholds_from_cli: bool,
    summary: &ReportSummary,
) -> Value {
    json!({
        "run_dir": path(run_dir),
        "report_json": written.map(|d| path(&d.join("report.json"))),
        "report_html": written.map(|d| path(&d.join("report.html"))),
        "thresholds_from": if thresholds_from_cli { "command-line" } else { "manifest" },
        "headline": Headline::of(summary),
    })
}

/// One file `validate` checked: valid with its plan's summary and thresholds, or invalid
/// with the error (file, line, field) also printed on stderr.
pub fn validated_file(
    file: &Path,
    result: &Result<crate::model::scenario::Plan, crate::model::scenario::ScenarioError>,
) -> Value {
    match result {
        Ok(plan) => json!({
            "file": path(file),
            "valid": true,
            "scenario": plan.name,
            "summary": plan.summary_line(),
            "thresholds": plan.thresholds.iter().map(|t| json!({
                "metric": t.key(),
                "condition": t.condition.to_string(),
            })).collect::<Vec<_>>(),
            "error": null,
        }),
        Err(err) => json!({
            "file": path(file),
            "valid": false,
            "scenario": null,
            "summary": null,
            "thresholds": [],
            "error": err.to_string(),
        }),
    }
}

/// `validate`'s figures: one entry per file, in the order given, and the counts.
pub fn validate(files: Vec<Value>) -> Value {
    let valid = files.iter().filter(|f| f["valid"] == true).count();
    json!({
        "valid": valid,
        "invalid": files.len() - valid,
        "files": files,
    })
}

/// The document of a usage error under `--json` (a flag or value clap refuses): no
/// figures, `exit_code` 2, and clap's message as `error`. `command` is the subcommand
/// given (`viewerfleet` when none could be read).
pub fn usage_error(command: &str, message: &str) -> String {
    document(
        command,
        Exit::BadInput,
        None,
        Some(message.trim_end().to_string()),
    )
}

/// One compared run: its name and folder and its headline.
fn compared_runs(cmp: &Comparison) -> Value {
    let groups: Vec<Value> = cmp
        .groups
        .iter()
        .map(|g| {
            json!({
                "name": g.name,
                "stats": stats(&g.stats),
                "runs": g.runs.iter().map(|r| json!({
                    "name": r.name,
                    "headline": Headline::of(&r.summary),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!(groups)
}

/// A group's means with their 95% confidence intervals (`compare --group`, repeats).
fn stats(g: &crate::report::compare::GroupStats) -> Value {
    let ci = |v: &Option<crate::report::stats::MeanCi>| {
        v.as_ref()
            .map(|m| json!({"mean": m.mean, "ci95": m.ci95, "n": m.n}))
    };
    json!({
        "n": g.n,
        "http_peak_mbps": ci(&g.http_peak_mbps),
        "http_at_mbps": ci(&g.http_at_mbps),
        "p2p_at_mbps": ci(&g.p2p_at_mbps),
        "http_share": ci(&g.http_share),
        "p2p_savings": ci(&g.p2p_savings),
        "ttff_median_ms": ci(&g.ttff_median_ms),
        "stalls_per_viewer_minute": ci(&g.stalls_per_viewer_minute),
        "p2p_undelivered": ci(&g.p2p_undelivered),
        "viewers_started": ci(&g.viewers_started),
        "players_p2p_savings": ci(&g.players_p2p_savings),
        "headroom_p2p_savings": ci(&g.headroom_p2p_savings),
        "partial_runs": g.partial_runs,
        "not_a_finding_runs": g.cpu_saturated_runs,
        "headroom_unknown_runs": g.headroom_unknown_runs,
    })
}

fn failed_runs(failed: &[FailedRun]) -> Value {
    json!(failed
        .iter()
        .map(|f| json!({"name": f.name, "dir": f.dir, "error": f.error}))
        .collect::<Vec<_>>())
}

/// `compare`'s figures: the rows (grouped by scenario with `--group`), the folders that
/// could not be read, and the files written.
pub fn compare(cmp: &Comparison, out: &Path, thresholds_from_cli: bool) -> Value {
    json!({
        "groups": compared_runs(cmp),
        "failed_runs": failed_runs(&cmp.failed),
        "thresholds_from": if thresholds_from_cli { "command-line" } else { "manifest" },
        "thresholds_failed": cmp.thresholds_failed().iter().map(|(run, failed)| json!({
            "run": run.name,
            "failed": failed,
        })).collect::<Vec<_>>(),
        "compare_json": path(&out.join("compare.json")),
        "compare_html": path(&out.join("compare.html")),
    })
}

/// `suite`'s figures: the comparison of the runs that finished, and which runs failed,
/// went over their failure limit or failed a threshold.
pub fn suite(result: &crate::suite::SuiteResult, out: &Path) -> Value {
    let mut doc = json!({
        "runs_started": result.runs_started,
        "interrupted": result.interrupted,
        "groups": compared_runs(&result.comparison),
        "failed_runs": failed_runs(&result.comparison.failed),
        "over_failure_limit": result.over_failure_limit,
        "thresholds_failed": result.thresholds_failed(),
        "compare_json": path(&out.join("compare.json")),
        "compare_html": path(&result.html),
    });
    let curves = result.comparison.swarm_curves();
    if !curves.is_empty() {
        doc["swarm_curves"] = swarm_curves(&curves);
    }
    doc
}

/// `suite --swarm-sizes`: P2P offload against swarm size, one curve per scenario@mode.
fn swarm_curves(curves: &[crate::report::swarm_curve::SwarmCurve]) -> Value {
    let ci = |v: &Option<crate::report::stats::MeanCi>| {
        v.as_ref()
            .map(|m| json!({"mean": m.mean, "ci95": m.ci95, "n": m.n}))
    };
    json!(curves
        .iter()
        .map(|c| json!({
            "name": c.name,
            "points": c.points.iter().map(|p| json!({
                "group": p.group,
                "swarm_size": p.swarm_size,
                "viewers": p.viewers,
                "light_peers": p.light_peers,
                "n": p.n,
                "p2p_savings": ci(&p.p2p_savings),
                "http_share": ci(&p.http_share),
                "bound": p.bound,
                "headroom": p.headroom,
                "not_a_finding_runs": p.not_a_finding_runs,
                "headroom_unknown_runs": p.headroom_unknown_runs,
                "light_pages_judged": p.light_pages_judged,
                "light_pages_starved": p.light_pages_starved,
            })).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>())
}

/// One node type of a fleet plan.
fn node_option(o: &crate::cloud::sizing::NodeOption) -> Value {
    json!({
        "server_type": o.offer.name,
        "cores": o.offer.cores,
        "memory_gb": o.offer.memory_gb,
        "cpu_type": o.offer.cpu_type,
        "architecture": o.offer.architecture,
        "viewers_per_node": o.viewers_per_node,
        "limited_by": o.limited_by,
        "nodes": o.nodes,
        "nodes_hourly_net": o.nodes_hourly_net,
        "unavailable_after": o.offer.unavailable_after,
    })
}

/// One scenario's fleet plan (`plan`).
pub fn fleet_plan(
    scenario: &str,
    file: &Path,
    p: &crate::cloud::sizing::CloudSizing,
    budget: &crate::model::scenario::fleet::ViewerBudget,
) -> Value {
    json!({
        "scenario": scenario,
        "file": path(file),
        "viewers": p.viewers,
        "per_browser": p.per_browser,
        "budget": {
            "cpu_per_viewer": budget.cpu_per_viewer,
            "memory_mb_per_viewer": budget.memory_mb_per_viewer,
            "cpu_per_browser": budget.cpu_per_browser,
            "memory_mb_per_browser": budget.memory_mb_per_browser,
            "cpu_per_light_peer": budget.cpu_per_light_peer,
            "memory_mb_per_light_peer": budget.memory_mb_per_light_peer,
        },
        "location": p.location,
        "nodes": node_option(&p.chosen),
        "alternatives": p.alternatives.iter().map(node_option).collect::<Vec<_>>(),
        "cheapest_over_limit": p.cheapest_over_limit.as_ref().map(node_option),
        "hub": {
            "server_type": p.hub.name,
            "cores": p.hub.cores,
            "memory_gb": p.hub.memory_gb,
            "hourly_net": p.hub.hourly_net,
        },
        "servers": p.servers,
        "server_limit": p.server_limit,
        "currency": p.currency,
        "vat_rate": p.vat_rate,
        "hourly_net": p.hourly_net,
        "hourly_gross": p.hourly_gross,
        "billed_hours": p.billed_hours,
        "run_net": p.run_net,
        "run_gross": p.run_gross,
        "notes": p.notes,
    })
}

/// `plan`'s mix of real viewers and light peers (`light_mix`).
pub fn light_mix(
    m: &crate::cloud::sizing::MixPlan,
    most_real: Option<&crate::cloud::sizing::MixPlan>,
    plan: &crate::model::scenario::Plan,
) -> Value {
    let f = &m.fleet;
    json!({
        "swarm": m.swarm,
        "real_viewers": m.real,
        "light_peers": m.light,
        "per_page": m.per_page,
        "light_peer_in_viewers": m.light_as_viewers,
        "fits_server_limit": m.fits,
        "nodes": node_option(&f.chosen),
        "hubs": f.hubs.count,
        "servers": f.servers,
        "hourly_net": f.hourly_net,
        "hourly_gross": f.hourly_gross,
        "billed_hours": f.billed_hours,
        "run_net": f.run_net,
        "run_gross": f.run_gross,
        "fidelity": plan.fidelity.as_ref().map(|f| json!({
            "verdict": f.verdict,
            "swarm": f.swarm,
            "real": f.real,
            "created": f.created,
            "file": f.file,
            "fleet": f.fleet,
            "throttling": f.throttling,
        })),
        "target_hosts_light_peers": true,
        "most_real_viewers_within_limit": most_real.map(|most| json!({
            "real_viewers": most.real,
            "servers": most.fleet.servers,
            "hourly_net": most.fleet.hourly_net,
        })),
    })
}

/// `calibrate`'s figures: one row per profile, video and round.
pub fn calibrate(c: &crate::calibrate::Calibration, json_file: &Path) -> Value {
    let rows: Vec<Value> = c
        .profiles
        .iter()
        .map(|p| {
            json!({
                "profile": p.profile.name,
                "video": p.video.as_str(),
                "round": p.round + 1,
                "viewers": p.viewers,
                "viewers_measured": p.viewers_measured,
                "browsers": p.browsers,
                "failures": p.failures,
                "cpu_cores_per_viewer": p.cpu_cores_per_viewer,
                "pss_mb_per_viewer": p.pss_mb_per_viewer,
                "pss_mb_per_viewer_max": p.pss_mb_per_viewer_max,
                "processes_per_viewer": p.processes_per_viewer,
                "http_kbps_per_viewer": p.http_kbps_per_viewer,
                "p2p_down_kbps_per_viewer": p.p2p_down_kbps_per_viewer,
                "p2p_up_kbps_per_viewer": p.p2p_up_kbps_per_viewer,
                "p2p_share_pct": p.p2p_share_pct,
                "stalls": p.stalls,
                "ttff_ms_median": p.ttff_ms_median,
                "fidelity": p.fidelity.as_ref().map(|f| json!({
                    "verdict": f.verdict,
                    "against": f.against,
                })),
            })
        })
        .collect();
    json!({
        "calibration_json": path(json_file),
        "created": c.created,
        "chromium": c.chromium,
        "host_cpus": c.host.cpus,
        "viewers": c.viewers,
        "warmup_s": c.warmup_s,
        "window_s": c.window_s,
        "profiles": rows,
    })
}

/// `ladder`'s figures: the capacity report's files, one row per step with its verdict, the
/// knee and the projection onto the server given.
pub fn ladder(report: &crate::ladder::CapacityReport, out: &Path, interrupted: bool) -> Value {
    let violations = |v: &[crate::ladder::knee::Violation]| {
        v.iter()
            .map(|v| json!({"rule": v.rule, "detail": v.detail}))
            .collect::<Vec<_>>()
    };
    let steps: Vec<Value> = report
        .steps
        .iter()
        .zip(&report.verdicts)
        .map(|(s, v)| {
            json!({
                "viewers": s.viewers,
                "run_dir": s.run_dir,
                "started": s.started,
                "failed": s.failed,
                "http_mbps": s.http_mbps,
                "p2p_mbps": s.p2p_mbps,
                "http_share": s.http_share,
                "ttff_p95_ms": s.ttff_p95_ms,
                "stalls_per_viewer_minute": s.stalls_per_viewer_minute,
                "degraded": v.degraded,
                "generator_saturated": v.generator_saturated,
                "target_saturated": v.target_saturated,
                "violations": violations(&v.violations),
                "thresholds_failed": s.thresholds.iter().filter(|t| !t.pass)
                    .map(|t| t.metric.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "scenario": report.scenario,
        "out": path(out),
        "capacity_json": path(&out.join("capacity.json")),
        "capacity_html": path(&out.join("capacity.html")),
        "capacity_md": path(&out.join("capacity.md")),
        "interrupted": interrupted,
        "steps": steps,
        "knee": report.knee.as_ref().map(|k| json!({
            "at_viewers": k.at_viewers,
            "last_ok_viewers": k.last_ok_viewers,
            "limited_by": k.limited_by,
            "failure_mode": violations(&k.failure_mode),
        })),
        "projection": report.projection.as_ref().map(|p| json!({
            "viewers_with_p2p": p.viewers_with_p2p,
            "limited_by": p.limited_by,
            "by_cpu": p.by_cpu,
            "by_ram": p.by_ram,
            "by_nic_with_p2p": p.by_nic_with_p2p,
            "by_nic_without_p2p": p.by_nic_without_p2p,
        })),
    })
}

/// What a cloud command deleted, by kind (`down`, `gc`).
fn deleted(d: &crate::cloud::provision::Deleted) -> Value {
    json!({
        "servers": d.servers,
        "firewalls": d.firewalls,
        "ssh_keys": d.ssh_keys,
    })
}

/// `up`'s figures: the fleet's inventory (as `--inventory` writes it) and where it was
/// written.
pub fn up(
    inventory: Value,
    inventory_file: Option<&Path>,
    nodes: usize,
    capacity: u32,
    api_requests: u64,
) -> Value {
    json!({
        "run": inventory["run"].clone(),
        "hub_url": inventory["hub_url"].clone(),
        "nodes": nodes,
        "capacity": capacity,
        "api_requests": api_requests,
        "inventory_file": inventory_file.map(path),
        "inventory": inventory,
    })
}

/// `down`'s figures: the run and what was deleted.
pub fn down(run: &str, d: &crate::cloud::provision::Deleted, api_requests: u64) -> Value {
    json!({
        "run": run,
        "deleted": deleted(d),
        "api_requests": api_requests,
    })
}

/// The cloud part of `gc`: every run found with what to do with each resource, and what was
/// deleted (`null` with `--dry-run`).
pub fn gc_cloud(report: &crate::cloud::gc::GcReport, dry_run: bool, api_requests: u64) -> Value {
    use crate::cloud::gc::Disposal;
    json!({
        "skipped": null,
        "runs": report.runs.iter().map(|run| json!({
            "run": run.run,
            "resources": run.resources.iter().map(|r| {
                let (action, reason) = match &r.disposal {
                    Disposal::Delete(why) => ("delete", why),
                    Disposal::Keep(why) => ("keep", why),
                };
                json!({"kind": r.kind.noun(), "name": r.name, "action": action, "reason": reason})
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "deleted": (!dry_run).then(|| deleted(&report.deleted)),
        "api_requests": api_requests,
    })
}

/// The cloud part of `gc` when it was not asked (no token): why.
pub fn gc_cloud_skipped(reason: &str) -> Value {
    json!({"skipped": reason, "runs": [], "deleted": null, "api_requests": 0})
}

/// `gc`'s figures: what it removed (or would remove) here and in the cloud; a part not
/// asked for (`--local`, `--cloud`) is `null`.
pub fn gc(dry_run: bool, local: Option<&[String]>, cloud: Option<Value>) -> Value {
    json!({
        "dry_run": dry_run,
        "local": local.map(|lines| json!({"removed": lines})),
        "cloud": cloud,
    })
}

/// `grid up`'s figures: the hub, every node with its slots and load endpoint, the target's
/// namespace.
pub fn grid_up(st: &crate::grid::local_state::LocalGridState, state_file: &Path) -> Value {
    use crate::grid::local::slot_address;
    json!({
        "action": "up",
        "state_file": path(state_file),
        "hub_url": st.hub_url,
        "nodes": st.nodes.iter().map(|n| {
            let last = n.first_slot + n.slots.max(1) - 1;
            json!({
                "number": n.number,
                "url": n.url,
                "slots": n.slots,
                "first_slot": format!("{}{}", st.name_prefix, n.first_slot),
                "last_slot": format!("{}{}", st.name_prefix, last),
                "first_address": slot_address(st, n.first_slot),
                "last_address": slot_address(st, last),
                "load_url": n.load_url,
                "cgroup": n.cgroup.as_ref().map(|c| path(&c.dir())),
                "cores": n.cgroup.as_ref().and_then(|c| c.cores),
            })
        }).collect::<Vec<_>>(),
        "target_namespace": st.target_namespace,
        "target_origin": st.target_origin(),
        "nat": st.nat.unwrap_or_default().as_str(),
        "target_ipv4": (!st.target_ipv4.is_empty()).then_some(st.target_ipv4.as_str()),
    })
}

/// `grid down`'s figures: the state file and whether a Grid was recorded there.
pub fn grid_down(state_file: &Path, stopped: bool) -> Value {
    json!({"action": "down", "state_file": path(state_file), "stopped": stopped})
}

/// `grid files`'s figures: the configuration and the jar `grid up --local` would use.
pub fn grid_files(config: &str, jar: &Path, origin: &str) -> Value {
    json!({"action": "files", "config": config, "jar": path(jar), "jar_origin": origin})
}

/// `refsite`'s figures, printed once it listens (the `READY` line's payload): its address,
/// its metrics and its videos.
pub fn refsite(info: &crate::refsite::ReadyInfo) -> Value {
    json!({
        "base_url": info.base_url,
        "metrics_url": info.metrics_url,
        "videos": info.videos.iter().map(|v| json!({
            "id": v.id,
            "kind": v.kind.as_str(),
            "embed_url": v.embed_url,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(file: &str) -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("schemas")
            .join(file);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// A calibration as `calibrate` writes it: two profiles, one with a fidelity verdict.
    fn calibration() -> crate::calibrate::Calibration {
        let row = |name: &str, fidelity: Value| {
            json!({
                "profile": {"name": name, "flags": ["--headless=new"]},
                "video": "live", "round": 0, "viewers": 2, "viewers_measured": 2,
                "browsers": 2, "failures": [], "processes_per_viewer": 5.5,
                "pss_mb_per_viewer": 197.0, "pss_mb_per_viewer_max": 210.0,
                "cpu_cores_per_viewer": 0.113, "http_kbps_per_viewer": 300.0,
                "p2p_down_kbps_per_viewer": 350.0, "p2p_up_kbps_per_viewer": 360.0,
                "stalls": 0, "ttff_ms_median": 1800.0, "window_s": 60.0,
                "p2p_share_pct": 53.8, "fidelity": fidelity
            })
        };
        serde_json::from_value(json!({
            "created": "2026-12-01T10:00:00Z",
            "host": {"hostname": "h", "cpus": 2, "cpu_model": "x", "mem_total_bytes": 1,
                     "kernel": "k", "os": "o"},
            "chromium": "Chromium 156", "scenario": "built-in", "videos": ["live"],
            "viewers": 2, "warmup_s": 15.0, "window_s": 60.0, "command": "viewerfleet calibrate",
            "profiles": [
                row("default", Value::Null),
                row(
                    "project",
                    json!({"against": "default", "verdict": "fail", "checks": [],
                           "bytes_change_pct": 12.0, "segment_share_pct": 1.0,
                           "p2p_share_points": -3.0, "stalls": 0, "reference_stalls": 0,
                           "segments_change_pct": 0.0, "renditions_points": 0.0,
                           "ttff_change_ms": null}),
                ),
            ]
        }))
        .unwrap()
    }

    #[test]
    fn calibrate_json_matches_its_schema() {
        let text = document(
            "calibrate",
            Exit::Ok,
            Some(calibrate(
                &calibration(),
                Path::new("runs/cal/calibration.json"),
            )),
            None,
        );
        let doc: Value = serde_json::from_str(&text).unwrap();
        let errors = viewerfleet_kit::json_schema::validate_closed(
            &schema("calibrate-summary.v1.json"),
            &doc,
        );
        assert!(errors.is_empty(), "{errors:#?}\n{text}");
        assert_eq!(
            doc["calibrate"]["profiles"][1]["fidelity"]["verdict"],
            "fail"
        );
        assert_eq!(doc["calibrate"]["profiles"][0]["round"], 1);
        // The envelope comes first, in this order.
        let keys: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  \""))
            .map(|l| l.trim().split('"').nth(1).unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "schema_version",
                "tool_version",
                "command",
                "exit_code",
                "outcome",
                "calibrate"
            ]
        );
    }

    fn assert_matches(file: &str, command: &str, figures: Value) -> Value {
        let text = document(command, Exit::Ok, Some(figures), None);
        let doc: Value = serde_json::from_str(&text).unwrap();
        let errors = viewerfleet_kit::json_schema::validate_closed(&schema(file), &doc);
        assert!(errors.is_empty(), "{errors:#?}\n{text}");
        doc
    }

    /// `grid up --local` needs root and Java: its document from a Grid as its state file
    /// records it, two nodes (one with a CPU quota) behind a NAT.
    #[test]
    fn grid_up_json_matches_its_schema() {
        use crate::grid::local_state::{LocalGridState, NodeState};
        let node = |number: u32, cores: Option<f64>| NodeState {
            number,
            url: format!("http://127.0.0.1:{}", 37000 + number),
            first_slot: number * 100,
            slots: 3,
            slots_up: true,
            cgroup: Some(crate::sys::cgroup::CpuCgroup {
                roots: vec!["/sys/fs/cgroup".into()],
                rel: format!("viewerfleet/vfg1/node-{number}").into(),
                cores,
            }),
            load_url: format!("http://127.0.0.1:{}/metrics", 38000 + number),
            ..NodeState::default()
        };
        let st = LocalGridState {
            hub_url: "http://127.0.0.1:38465/".into(),
            prefix: "fd76:6700:6884::/64".into(),
            name_prefix: "vfg6884-".into(),
            target_namespace: "vfg6884-0".into(),
            target_address: "fd76:6700:6884::2".into(),
            target_ipv4: "100.64.0.2".into(),
            nat: Some(crate::model::kinds::NatKind::Home),
            target_port: 8080,
            nodes: vec![node(1, None), node(2, Some(0.5))],
            ..LocalGridState::default()
        };
        let doc = assert_matches(
            "grid-summary.v1.json",
            "grid",
            grid_up(&st, Path::new("/run/viewerfleet/grid/local.json")),
        );
        let grid = &doc["grid"];
        assert_eq!(grid["action"], "up");
        assert_eq!(grid["nodes"][1]["first_slot"], "vfg6884-200");
        assert_eq!(grid["nodes"][1]["last_slot"], "vfg6884-202");
        assert_eq!(grid["nodes"][1]["cores"], 0.5);
        assert_eq!(grid["target_origin"], "http://[fd76:6700:6884::2]:8080");
        // The other actions' documents are checked by the fast tier (tests/fast/json_all.rs).
        assert_matches(
            "grid-summary.v1.json",
            "grid",
            grid_down(Path::new("/x.json"), true),
        );
    }

    #[test]
    fn every_schema_allows_every_exit_and_names_its_command() {
        for command in [
            "run",
            "suite",
            "compare",
            "plan",
            "calibrate",
            "fidelity",
            "report",
            "validate",
            "ladder",
            "up",
            "down",
            "gc",
            "grid",
            "refsite",
        ] {
            let schema = schema(&format!("{command}-summary.v1.json"));
            for exit in Exit::ALL {
                let doc: Value = serde_json::from_str(&document(
                    command,
                    exit,
                    None,
                    Some("what went wrong".into()),
                ))
                .unwrap();
                let errors = viewerfleet_kit::json_schema::validate_closed(&schema, &doc);
                assert!(errors.is_empty(), "{command} {exit}: {errors:#?}");
            }
            let other = document("other", Exit::Ok, None, Some("x".into()));
            let errors = viewerfleet_kit::json_schema::validate_closed(
                &schema,
                &serde_json::from_str(&other).unwrap(),
            );
            assert!(!errors.is_empty(), "{command}: the command is checked");
        }
    }
}
