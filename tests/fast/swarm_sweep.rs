//! `suite --swarm-sizes`: the comparison's "P2P offload against swarm size" (tables, plot,
//! compare.json) from crafted reports, and the command line's sweep: its plan and run names
//! (`--dry-run`), and the errors that name the flag before anything starts.
//!
//! Light peers join refsite's swarm only, and refsite needs ffmpeg and real pages, so no
//! sweep runs here: the WebDriver stub plays a PeerTube page, which light peers cannot join.
//! The runs themselves are the suite's stand-in runner's (`suite::tests`).

use crate::support::fixtures::copy_of;
use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;
use viewerfleet::report::compare::Comparison;
use viewerfleet::report::swarm_curve::SwarmPoint;
use viewerfleet::report::{self, HeadroomVerdict, RunReport};

/// The `run-steady` fixture's report as run `name` whose swarm saved `savings` at T (the
/// players' table); `finding`: its viewers had headroom (the fixture's did not).
fn at(base: &RunReport, name: &str, savings: f64, finding: bool) -> RunReport {
    let mut r = base.clone();
    r.name = name.to_string();
    let players = r.summary.players.as_mut().unwrap();
    players.p2p_savings = Some(savings);
    players.http_share = Some(1.0 - savings);
    if finding {
        let h = r.summary.headroom.as_mut().unwrap();
        h.verdict = HeadroomVerdict::Finding;
        h.viewers.starved = 0;
    }
    r
}

/// Two curves of 4 real viewers each: live@http-only at 4, 16 (twice) and 64 (not a
/// finding), live@tc at 4 and 16.
fn sweep_comparison() -> Comparison {
    let (_tmp, dir) = copy_of("run-steady");
    let base = report::build(&dir).unwrap();
    let runs = vec![
        at(&base, "live@http-only@4-1", 0.40, true),
        at(&base, "live@http-only@16-1", 0.68, true),
        at(&base, "live@http-only@64-1", 0.85, false),
        at(&base, "live@tc@4-1", 0.30, true),
        at(&base, "live@tc@16-1", 0.55, true),
        at(&base, "live@http-only@16-2", 0.72, true),
    ];
    let group = |r: &RunReport| r.name.rsplit_once('-').unwrap().0.to_string();
    Comparison::grouped(runs, group, Vec::new()).with_swarm_points(|name| {
        let (series, size) = name.rsplit_once('@')?;
        Some(SwarmPoint::new(series, 4, size.parse::<u32>().ok()? - 4))
    })
}

#[test]
fn the_comparison_shows_p2p_offload_against_swarm_size() {
    let cmp = sweep_comparison();
    let out = tempfile::tempdir().unwrap();
    report::render::write_compare(&cmp, out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("compare.md")).unwrap();
    let section = md
        .split_once("## P2P offload against swarm size\n")
        .expect("the section")
        .1;
    // Savings and HTTP share at T per size (mean ± 95% CI for the repeated 16), the bound
    // 1 − 1/N, headroom as the comparison's table says it.
    let header = "| Swarm size N (viewers + light peers) | n | P2P savings at T | HTTP share at T | Bound 1 − 1/N (p2p-media-loader's design) | Headroom |\n|---|---:|---:|---:|---:|---|\n";
    let http_only = format!(
        "### live@http-only\n\n{header}\
         | 4 (4 + 0) | 1 | 40.0% | 60.0% | 75.0% | ok |\n\
         | 16 (4 + 12) | 2 | 70.0 ± 25.4% | 30.0 ± 25.4% | 93.8% | ok |\n\
         | 64 (4 + 60) | 1 | 85.0% | 15.0% | 98.4% | NOT A FINDING: 4/4 starved |\n"
    );
    let tc = format!(
        "### live@tc\n\n{header}\
         | 4 (4 + 0) | 1 | 30.0% | 70.0% | 75.0% | ok |\n\
         | 16 (4 + 12) | 1 | 55.0% | 45.0% | 93.8% | ok |\n"
    );
    assert!(section.contains(&http_only), "{section}");
    assert!(section.contains(&tc), "{section}");
    assert!(
        section.find("### live@http-only") < section.find("### live@tc"),
        "{section}"
    );
    // Above the list of runs, below the comparison's own table.
    assert!(md.find("## P2P offload") < md.find("## Runs"), "{md}");

    // compare.json: the same figures.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    let curves = json["swarm_curves"].as_array().unwrap();
    assert_eq!(curves.len(), 2);
    let points = curves[0]["points"].as_array().unwrap();
    let figures: Vec<(u64, f64, f64)> = points
        .iter()
        .map(|p| {
            (
                p["swarm_size"].as_u64().unwrap(),
                p["p2p_savings"]["mean"].as_f64().unwrap(),
                p["bound"].as_f64().unwrap(),
            )
        })
        .collect();
    let expected = [(4, 0.40, 0.75), (16, 0.70, 0.9375), (64, 0.85, 0.984375)];
    for (got, want) in figures.iter().zip(expected) {
        assert_eq!(got.0, want.0);
        assert!((got.1 - want.1).abs() < 1e-9 && (got.2 - want.2).abs() < 1e-12);
    }
    assert_eq!(points[2]["not_a_finding_runs"], 1);
    assert_eq!(points[1]["group"], "live@http-only@16");

    // The plot: sizes on a log axis from 4 (x = 92) to 64 (x = 716), savings 0..100%.
    let html = std::fs::read_to_string(out.path().join("compare.html")).unwrap();
    let svg = html
        .split_once("<h2>P2P offload against swarm size</h2>")
        .unwrap()
        .1;
    let svg = &svg[svg.find("<svg").unwrap()..svg.find("</svg>").unwrap()];
    for label in [">4</text>", ">16</text>", ">64</text>", ">100</text>"] {
        assert!(svg.contains(label), "{label}: {svg}");
    }
    assert!(svg.contains("P2P savings at T (%)"));
    assert!(svg.contains("swarm size N = viewers + light peers (log scale)"));
    assert!(svg.contains("bound 1 − 1/N (p2p-media-loader's design)"));
    assert_eq!(svg.matches("<circle").count(), 5);
    // 40% at 4, 70% at 16 (halfway), 85% at 64, not a finding: hollow.
    assert!(
        svg.contains(r##"<circle cx="92.0" cy="176.8" r="4" fill="#d9480f""##),
        "{svg}"
    );
    assert!(
        svg.contains(r##"<circle cx="404.0" cy="111.4" r="4""##),
        "{svg}"
    );
    assert!(
        svg.contains(r##"<circle cx="716.0" cy="78.7" r="4" fill="#fff" stroke="#d9480f""##),
        "{svg}"
    );
    // The bound, dashed grey, from 75% at 4 to 98.4% at 64.
    let bound = svg
        .split("<path d=\"")
        .find(|p| p.contains(r##"stroke="#495057" stroke-width="2" stroke-dasharray="6 4""##))
        .expect("the bound's dashed line");
    assert!(bound.starts_with("M92.0,100.5 "), "{bound}");
    assert!(bound.contains(" L716.0,49.4\""), "{bound}");
    // The terminal's text has the tables too.
    let text = cmp.text();
    let row = text
        .lines()
        .find(|l| l.starts_with("64 (4 + 60)"))
        .expect("the row of 64");
    let cells: Vec<&str> = row
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            "64 (4 + 60)",
            "1",
            "85.0%",
            "15.0%",
            "98.4%",
            "NOT A FINDING: 4/4 starved"
        ]
    );
}

#[test]
fn one_swarm_size_or_none_draws_no_curve() {
    let (_tmp, dir) = copy_of("run-steady");
    let base = report::build(&dir).unwrap();
    let runs = vec![
        at(&base, "a@16-1", 0.5, true),
        at(&base, "b@16-1", 0.6, true),
    ];
    let group = |r: &RunReport| r.name.rsplit_once('-').unwrap().0.to_string();
    let one_size = Comparison::grouped(runs.clone(), group, Vec::new())
        .with_swarm_points(|name| Some(SwarmPoint::new(name.split('@').next()?, 4, 12)));
    assert!(one_size.swarm_curves().is_empty());
    let plain = Comparison::grouped(runs, group, Vec::new());
    for cmp in [one_size, plain] {
        let out = tempfile::tempdir().unwrap();
        report::render::write_compare(&cmp, out.path()).unwrap();
        let md = std::fs::read_to_string(out.path().join("compare.md")).unwrap();
        assert!(!md.contains("P2P offload against swarm size"), "{md}");
        let json = std::fs::read_to_string(out.path().join("compare.json")).unwrap();
        assert!(!json.contains("swarm_curves"), "{json}");
    }
}

fn viewerfleet(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("viewerfleet").unwrap();
    cmd.current_dir(dir);
    cmd
}

/// `suite ARGS --dry-run` in `dir`, which must succeed: its stdout (the plan).
fn suite_dry_run(dir: &Path, args: &[&str]) -> String {
    let out = viewerfleet(dir)
        .arg("suite")
        .args(args)
        .arg("--dry-run")
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Scenario files `names` in `dir`: refsite (light peers join its swarm), 2 viewers.
fn scenarios(dir: &Path, names: &[&str]) {
    for name in names {
        std::fs::write(
            dir.join(format!("{name}.yaml")),
            format!(
                "name: {name}\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: 2\n\
                 duration: 3m\nswarm:\n  per_page: 10\nfleet:\n  kind: local\n"
            ),
        )
        .unwrap();
    }
}

/// Under tc each light peer gets a page (and a shaped link) of its own, whatever
/// `swarm.per_page` says: the plan says so where it applies and keeps the pages elsewhere.
#[test]
fn under_tc_the_suite_plans_one_light_peer_per_page() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "name: a\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: 2\n  network:\n    \
         download_kbps: 2000\n    upload_kbps: 300\nduration: 3m\nswarm:\n  light_peers: 6\n  \
         per_page: 3\nfleet:\n  kind: netns\n",
    )
    .unwrap();
    let stdout = suite_dry_run(
        dir.path(),
        &["a.yaml", "--out", "s", "--apply", "http-only,tc"],
    );
    assert!(
        stdout.contains("a@http-only-1: 2 viewers + 6 light peers (3 per page): a swarm of 8"),
        "{stdout}"
    );
    assert!(
        stdout.contains("a@tc-1: 2 viewers + 6 light peers (1 per page under tc): a swarm of 8"),
        "{stdout}"
    );
}

#[test]
fn a_sweep_suite_plans_and_names_one_run_per_scenario_mode_and_size() {
    let dir = tempfile::tempdir().unwrap();
    scenarios(dir.path(), &["a", "b"]);
    let stdout = suite_dry_run(
        dir.path(),
        &[
            "a.yaml",
            "b.yaml",
            "--out",
            "sweep",
            "--apply",
            "http-only,tc",
            "--swarm-sizes",
            "4,2,4",
        ],
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "8 runs into sweep:",
            "  1. a@http-only@2 → sweep/a@http-only@2-1: 2 viewers",
            "  2. a@http-only@4 → sweep/a@http-only@4-1: 2 viewers + 2 light peers (10 per page): a swarm of 4",
            "  3. a@tc@2 → sweep/a@tc@2-1: 2 viewers",
            "  4. a@tc@4 → sweep/a@tc@4-1: 2 viewers + 2 light peers (10 per page): a swarm of 4",
            "  5. b@http-only@2 → sweep/b@http-only@2-1: 2 viewers",
            "  6. b@http-only@4 → sweep/b@http-only@4-1: 2 viewers + 2 light peers (10 per page): a swarm of 4",
            "  7. b@tc@2 → sweep/b@tc@2-1: 2 viewers",
            "  8. b@tc@4 → sweep/b@tc@4-1: 2 viewers + 2 light peers (10 per page): a swarm of 4",
            "--dry-run: nothing started",
        ]
    );
    assert!(
        !dir.path().join("sweep").exists(),
        "a dry run writes nothing"
    );
}

#[test]
fn a_bad_sweep_exits_2_naming_the_flag_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    scenarios(dir.path(), &["a"]);
    let suite = |extra: &[&str]| {
        viewerfleet(dir.path())
            .args(["suite", "a.yaml", "--out", "sweep"])
            .args(extra)
            .assert()
            .code(2)
    };
    suite(&["--swarm-sizes", "4,x"]).stderr(predicate::str::contains(
        "--swarm-sizes `4,x`: `x` is not a whole number",
    ));
    suite(&["--swarm-sizes", "0,4"]).stderr(predicate::str::contains("a swarm of 0"));
    suite(&["--swarm-sizes", ""]).stderr(predicate::str::contains("--swarm-sizes"));
    suite(&["--swarm-sizes", "1,4"]).stderr(predicate::str::contains(
        "--swarm-sizes 1: a.yaml runs 2 real viewers, more than a swarm of 1: give sizes of at least 2",
    ));
    suite(&["--swarm-sizes", "4", "--viewers", "auto"]).stderr(
        predicate::str::contains("needs a number of viewers, not `auto` (--viewers auto)")
            .and(predicate::str::contains("give --viewers N instead")),
    );
    suite(&["--swarm-sizes", "4", "--light-peers", "3"]).stderr(
        predicate::str::contains("--light-peers").and(predicate::str::contains("--swarm-sizes")),
    );
    assert!(!dir.path().join("sweep").exists());
}
