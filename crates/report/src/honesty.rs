//! The honesty section: what the fleet implies for the numbers, whether the host's CPU was
//! saturated (a busy load generator fakes a degradation, as the LiveKit load-test report
//! showed), scrape gaps, cut-short files, P2P that never happened, and the command to re-run.

use super::headroom;
use super::load::RunData;
use super::rates::Gap;
use super::summary::{CpuCheck, Honesty};
use super::table::Steady;
use crate::model::isolation::BrowserIsolation;
use crate::model::kinds::{FleetKind, Throttling};
use crate::model::rawdata::NodeSample;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// A host sample above this busy share counts as saturated (the machine rule's).
pub(crate) const CPU_BUSY_THRESHOLD: f64 = headroom::HOT_BUSY;
/// The run is flagged when saturated for more than this share of the sampled time…
pub(crate) const CPU_RUN_SHARE: f64 = headroom::SATURATED_RUN_SHARE;
/// …or for more than this share of the steady window.
pub(crate) const CPU_STEADY_SHARE: f64 = headroom::SATURATED_STEADY_SHARE;

/// What the fleet implies, one sentence each.
pub fn implications(run: &RunData) -> Vec<String> {
    let fleet = &run.manifest.fleet;
    let mut out = Vec::new();
    if let Some(setup) = run.manifest.browser.as_ref().filter(|b| !b.is_project()) {
        out.push(format!(
            "Browsers were started with the `{}` set-up ({} Chromium flags, {}), not \
             viewerfleet's own: what they cost and fetched is that set-up's.",
            setup.name,
            setup.flags.len(),
            if setup.no_video_track {
                "video track deselected"
            } else {
                "decoding video"
            }
        ));
    }
    if fleet.kind == FleetKind::Local {
        out.push(
            "Browsers, the target and the tracker share one machine: their CPU use competes \
             (see the host CPU check), and no real network lies between them."
                .to_string(),
        );
    }
    let shared_addresses = fleet.packing.as_ref().and_then(|p| p.viewers_per_address);
    if let Some(n) = shared_addresses {
        out.push(format!(
            "Viewers shared addresses in groups of {n} ({n} viewers per browser, one address \
             per browser): the platform sees {n} times fewer clients than viewers (PeerTube \
             counts one view per address and applies its API rate limit per address)."
        ));
    } else if !fleet.own_address_per_viewer && fleet.kind == FleetKind::Local {
        out.push(
            "All viewers share one network address: the platform sees one client (PeerTube \
             counts one view per address and applies its API rate limit, 50 requests per 10 s \
             per address by default, to all of them together, which can drop playback-metrics \
             POSTs), and peers talk over loopback/host candidates."
                .to_string(),
        );
    } else if !fleet.own_address_per_viewer {
        out.push(
            "Not every viewer had a network address of its own (the fleet notes say which \
             shared one): a platform sees viewers behind one address as one client (PeerTube \
             counts one view per address and applies its API rate limit, 50 requests per 10 s \
             per address by default, to them together)."
                .to_string(),
        );
    } else {
        out.push("Every viewer had its own network address.".to_string());
    }
    if fleet.throttling == Some(Throttling::CdpAll) {
        out.push(
            "P2P (WebRTC) was throttled by Chromium's whole-browser network emulation, which \
             slows data channels far below the configured link (measured on Chromium 156: \
             about 14 KB/s from a sender emulating 300 kbit/s up and 500 ms) and makes P2P \
             engines time their peers out: P2P figures are far below what these links would \
             carry. Use `apply: http-only` for the 2023 conditions or `apply: tc` for real \
             per-viewer links."
                .to_string(),
        );
    } else if fleet.p2p_shaped {
        out.push(format!(
            "P2P (WebRTC) was throttled per viewer ({}).",
            fleet.shaping
        ));
    } else {
        out.push(
            "P2P (WebRTC) was not throttled: viewers exchange segments faster than real home \
             connections would, so P2P figures are an upper bound, the limitation the PeerTube \
             2023 test reported too."
                .to_string(),
        );
    }
    if fleet.http_shaped {
        out.push(format!("HTTP was throttled ({}).", fleet.shaping));
    } else {
        out.push(
            "HTTP was not throttled: viewers download as fast as the host allows.".to_string(),
        );
    }
    out.extend(fleet.notes.iter().map(|n| format!("Fleet note: {n}")));
    out.extend(node_isolation(&run.node_samples));
    out
}

/// How the nodes' browsers ran, from what the nodes counted (their load endpoints): after
/// "Measured on the nodes:", one sentence per way they ran, each with its number of nodes, the ways to worry about (as
/// root, without Chromium's sandbox) first. A node that ran browsers more than one way
/// counts under each. `None` when no node counted any browser.
pub(crate) fn node_isolation(samples: &[NodeSample]) -> Option<String> {
    let mut ways_of: BTreeMap<&str, BTreeSet<&BrowserIsolation>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.ok) {
        for c in s.browsers_by_isolation.iter().filter(|c| c.browsers > 0) {
            ways_of.entry(&s.node).or_default().insert(&c.isolation);
        }
    }
    let mut nodes_of: BTreeMap<&BrowserIsolation, usize> = BTreeMap::new();
    for way in ways_of.values().flatten() {
        *nodes_of.entry(way).or_default() += 1;
    }
    let mut ways: Vec<(&BrowserIsolation, usize)> = nodes_of.into_iter().collect();
    ways.sort_by_key(|(way, nodes)| (!way.root(), way.sandbox, way.own_user(), Reverse(*nodes)));
    let sentences: Vec<String> = ways
        .iter()
        .map(|(way, nodes)| format!("{}.", way.on_nodes(*nodes, ways_of.len())))
        .collect();
    (!sentences.is_empty()).then(|| format!("Measured on the nodes: {}", sentences.join(" ")))
}

/// Host CPU saturation against the stated rule (`headroom`'s machine rule applied to this
/// host); `None` without host samples. When the browsers ran elsewhere it measured the
/// controller's machine only and says so (`viewers_machine`).
pub(crate) fn cpu_check(run: &RunData, steady: (f64, f64), sampling_s: f64) -> Option<CpuCheck> {
    let steady = Steady {
        from_s: steady.0,
        to_s: steady.1,
    };
    let host = headroom::host_machine(run, steady, sampling_s)?;
    Some(CpuCheck {
        rule: format!(
            "saturated when the host's CPU is above {:.0}% busy for more than {:.0}% of the \
             sampled time or more than {:.0}% of the steady window",
            CPU_BUSY_THRESHOLD * 100.0,
            CPU_RUN_SHARE * 100.0,
            CPU_STEADY_SHARE * 100.0
        ),
        viewers_machine: run.manifest.fleet.browsers_on_this_host(),
        saturated: host.saturated,
        mean_busy: host.mean_busy,
        max_busy: host.max_busy,
        saturated_share: host.hot_share,
        steady_saturated_share: host.steady_hot_share,
        samples: host.samples,
        mean_steal: host.mean_steal,
        mean_pressure: host.mean_pressure,
    })
}

/// The command line, quoted for a POSIX shell.
pub fn rerun_command(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Inputs gathered elsewhere for the section.
pub struct Findings {
    pub gaps: Vec<Gap>,
    pub exporter_status: String,
    pub warnings: Vec<String>,
    pub cpu: Option<CpuCheck>,
}

pub fn build(run: &RunData, findings: Findings) -> Honesty {
    Honesty {
        fleet_kind: run.manifest.fleet.kind,
        shaping: run.manifest.fleet.shaping.clone(),
        implications: implications(run),
        cpu: findings.cpu,
        scrape_gaps: findings.gaps,
        exporter_status: findings.exporter_status,
        truncated_files: run.truncated_files.clone(),
        warnings: findings.warnings,
        rerun_command: rerun_command(&run.manifest.command_line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        let args = ["viewerfleet", "run", "my scenario.yaml", "--out", "it's"].map(String::from);
        assert_eq!(
            rerun_command(&args),
            r"viewerfleet run 'my scenario.yaml' --out 'it'\''s'"
        );
    }

    /// A run of the example manifest with these node samples and nothing else.
    fn run_with(node_samples: Vec<NodeSample>) -> RunData {
        RunData {
            dir: "/nowhere/run".into(),
            manifest: crate::model::rawdata::Manifest::example(),
            run_events: Vec::new(),
            viewer_events: Vec::new(),
            viewer_samples: Vec::new(),
            exporter_samples: Vec::new(),
            host_samples: Vec::new(),
            node_samples,
            light_samples: Vec::new(),
            truncated_files: Vec::new(),
        }
    }

    #[test]
    fn a_browser_set_up_other_than_the_projects_is_named() {
        use crate::model::scenario::BrowserSetup;
        let mut run = run_with(Vec::new());
        let named = |run: &RunData| {
            implications(run)
                .into_iter()
                .filter(|l| l.contains("set-up"))
                .collect::<Vec<_>>()
        };
        assert!(named(&run).is_empty(), "older manifests name none");
        run.manifest.browser = Some(BrowserSetup::project());
        assert!(named(&run).is_empty(), "{:?}", named(&run));
        run.manifest.browser = Some(BrowserSetup {
            name: "default".into(),
            flags: vec!["--headless=new".into()],
            no_video_track: false,
        });
        let lines = named(&run);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("`default` set-up (1 Chromium flags, decoding video)"),
            "{lines:?}"
        );
    }

    #[test]
    fn the_nodes_browsers_are_told_from_their_counts_worries_first() {
        use crate::model::isolation::IsolationCount;
        let sample = |node: &str, ways: &[(&str, bool, u32)]| NodeSample {
            node: node.into(),
            ok: true,
            browsers_by_isolation: ways
                .iter()
                .map(|(user, sandbox, browsers)| IsolationCount {
                    isolation: BrowserIsolation {
                        user: user.to_string(),
                        sandbox: *sandbox,
                    },
                    browsers: *browsers,
                })
                .collect(),
            ..Default::default()
        };
        let own = "viewerfleet-browser";
        assert_eq!(node_isolation(&[]), None);
        // Older endpoints, failed reads and idle nodes say nothing.
        let mut failed = sample("c", &[("root", false, 2)]);
        failed.ok = false;
        assert_eq!(
            node_isolation(&[sample("a", &[]), sample("b", &[(own, true, 0)]), failed]),
            None
        );
        let all = node_isolation(&[
            sample("a", &[(own, true, 4)]),
            sample("b", &[(own, true, 3)]),
            sample("a", &[(own, true, 2)]),
        ])
        .unwrap();
        assert_eq!(
            all,
            "Measured on the nodes: Browsers on all 2 nodes ran as user viewerfleet-browser, of \
             their own, with Chromium's sandbox."
        );
        let mixed = node_isolation(&[
            sample("a", &[(own, true, 4)]),
            sample("b", &[(own, true, 3)]),
            sample("c", &[(own, false, 3)]),
            sample("d", &[("root", false, 1), (own, true, 2)]),
        ])
        .unwrap();
        let root = mixed.find("Browsers on 1 of 4 nodes ran as root, not as a user of their own, and without Chromium's sandbox");
        let unsandboxed = mixed.find("Browsers on 1 of 4 nodes ran as user viewerfleet-browser, of their own, but without Chromium's sandbox");
        let fine = mixed.find("Browsers on 3 of 4 nodes ran as user viewerfleet-browser, of their own, with Chromium's sandbox");
        assert!(
            root == Some("Measured on the nodes: ".len())
                && unsandboxed > root
                && fine > unsandboxed,
            "{mixed}"
        );
        let lines = implications(&run_with(vec![sample("a", &[("root", false, 1)])]));
        assert!(
            lines
                .last()
                .unwrap()
                .starts_with("Measured on the nodes: Browsers on the node ran as root"),
            "{lines:?}"
        );
    }
}
