//! Reports built from the crafted run folders in tests/fixtures (see make_fixtures.py for
//! what they hold): known answers, identical rebuilds from a copy, partial runs, and the
//! `report` and `compare` commands' exit codes and output.

use crate::support::fixtures as fixture_support;

use assert_cmd::Command;
use fixture_support::{copy_of, fixture};
use viewerfleet::report::{self, ReportSummary};

fn close(got: Option<f64>, want: f64) {
    let got = got.expect("value missing");
    assert!((got - want).abs() < 1e-6, "got {got}, want {want}");
}

#[test]
fn steady_run_table_has_the_known_answers() {
    let (_tmp, dir) = copy_of("run-steady");
    let s: ReportSummary = report::write_report(&dir).unwrap();
    assert!(!s.partial);
    assert_eq!(
        (
            s.viewers.requested,
            s.viewers.started,
            s.viewers.failed,
            s.viewers.lost
        ),
        (6, 5, 1, 1)
    );
    // Exporter: 4 viewers × 50 kB/s HTTP = 1.6 Mbit/s, × 100 kB/s P2P = 3.2 Mbit/s, posted
    // in 15 s steps; the 5e9 bytes from before the run are a baseline, not traffic.
    assert_eq!(s.source, viewerfleet::model::kinds::RateSource::Exporter);
    close(s.http_at_mbps, 1.6);
    close(s.p2p_at_mbps, 3.2);
    close(s.p2p_up_at_mbps, 3.2);
    close(s.http_peak_mbps, 1.6);
    close(s.http_share, 1.0 / 3.0);
    close(s.p2p_savings, 2.0 / 3.0);
    close(s.http_to_p2p_ratio, 0.5);
    assert_eq!(s.http_bytes, Some(30_000_000));
    assert_eq!(s.p2p_bytes, Some(60_000_000));
    assert_eq!(s.p2p_uploaded_bytes, Some(60_000_000));
    // Players: the lost viewer 5 adds 50 kB/s from 10 s to 78 s, so the peak is 5 × 0.4.
    let p = s.players.as_ref().unwrap();
    close(p.http_peak_mbps, 2.0);
    close(p.http_at_mbps, 1.6);
    assert_eq!(p.http_bytes, 50_000 * (150 + 148 + 146 + 144 + 68));
    // Origin ground truth: 200 kB/s over 150 s.
    assert_eq!(s.origin_bytes, Some(30_000_000));
    close(s.origin_deviation_pct, (32.8 - 30.0) / 30.0 * 100.0);
    close(s.exporter_origin_deviation_pct, 0.0);
    // Windows stated.
    assert_eq!(
        (s.windows.steady_from_s, s.windows.steady_to_s),
        (90.0, 120.0)
    );
    assert_eq!(s.windows.rate_window_s, 30.0);
    // QoE: TTFF 1000..3000 ms; 2 stalls of 1 s in 584 + 69 s watched.
    close(s.qoe.ttff_median_ms, 2000.0);
    close(s.qoe.ttff_p95_ms, 2900.0);
    assert_eq!(s.qoe.stalls, 2);
    close(s.qoe.stalls_per_viewer_minute, 2.0 / (653.0 / 60.0));
    close(s.qoe.stalled_time_share, 2.0 / 653.0);
    let reasons: Vec<(&str, &str)> = s
        .qoe
        .failed
        .iter()
        .map(|f| (f.kind.as_str(), f.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("failed", "session not created: Chrome failed to start"),
            ("lost", "browser crashed (session deleted)")
        ]
    );
    // Honesty: 95% busy from 100 to 120 s (22 of 152 s sampled) → saturated; the gap.
    let cpu = s.honesty.cpu.as_ref().unwrap();
    assert!(cpu.saturated);
    close(Some(cpu.saturated_share), 22.0 / 152.0);
    assert_eq!(s.honesty.scrape_gaps.len(), 1);
    let gap = &s.honesty.scrape_gaps[0];
    assert_eq!((gap.from_s, gap.to_s, gap.failed_reads), (60.0, 68.0, 3));
    assert!(s
        .honesty
        .implications
        .iter()
        .any(|l| l.contains("share one network address")));
    assert!(s
        .honesty
        .implications
        .iter()
        .any(|l| l.contains("not throttled")));
    assert_eq!(
        s.honesty.rerun_command,
        "viewerfleet run scenarios/local/live-normal.yaml --out runs/run-steady"
    );
}

#[test]
fn copied_run_folder_rebuilds_identical_files() {
    let (_a, first) = copy_of("run-steady");
    report::write_report(&first).unwrap();
    let (_b, second) = copy_of("run-steady");
    // The copy lives under another parent: nothing in the output may depend on where.
    let moved = second.with_file_name("elsewhere");
    std::fs::rename(&second, &moved).unwrap();
    report::write_report(&moved).unwrap();
    for name in [
        "report.json",
        "report.md",
        "report.html",
        "timeseries.csv",
        "viewers.csv",
        "host.csv",
    ] {
        let a = std::fs::read(first.join(name)).unwrap();
        let b = std::fs::read(moved.join(name)).unwrap();
        assert!(a == b, "{name} differs between the run folder and its copy");
    }
    // Rebuilding in place is stable too.
    let before = std::fs::read(first.join("report.json")).unwrap();
    report::write_report(&first).unwrap();
    assert_eq!(before, std::fs::read(first.join("report.json")).unwrap());
}

#[test]
fn killed_run_says_partial_and_moves_its_window() {
    let (_tmp, dir) = copy_of("run-killed");
    let s = report::write_report(&dir).unwrap();
    assert!(s.partial);
    assert!(s
        .partial_reason
        .as_deref()
        .unwrap()
        .contains("did not finish"));
    assert!(s.windows.steady_clipped);
    // T was never reached: target ready (0.5 s) + measure_at (120 s).
    assert_eq!(s.windows.measure_point_s, 120.5);
    assert_eq!(
        (s.windows.steady_from_s, s.windows.steady_to_s),
        (40.0, 70.0)
    );
    // Exporter over 40–70 s still holds two 15 s steps of 4 viewers.
    close(s.http_at_mbps, 1.6);
    // Players: all five started viewers active in 40–70 s.
    close(s.players.as_ref().unwrap().http_at_mbps, 2.0);
    assert_eq!(s.honesty.truncated_files, ["raw/viewer_samples.jsonl"]);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("**PARTIAL RUN**"), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("PARTIAL RUN"));
}

#[test]
fn report_command_prints_the_table_and_writes_files() {
    let (_tmp, dir) = copy_of("run-steady");
    let out = Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["report"])
        .arg(&dir)
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("exporter") && stdout.contains("33.3%"),
        "{stdout}"
    );
    assert!(stdout.contains("report.html"));
    for f in [
        "report.json",
        "report.md",
        "report.html",
        "timeseries.csv",
        "viewers.csv",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let ts = std::fs::read_to_string(dir.join("timeseries.csv")).unwrap();
    assert!(ts.starts_with("t_s,exporter_http_mbps,"));
    assert!(
        ts.lines().any(|l| l.starts_with("120,1.6,3.2,3.2,")),
        "{ts}"
    );
}

#[test]
fn report_on_a_folder_without_manifest_names_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["report"])
        .arg(tmp.path())
        .assert()
        .failure()
        .stderr(predicates::str::contains("no manifest.json"));
}

/// A folder with its manifest and no raw data (copied without `raw/`, or a run killed
/// before its first record) is not a run where nobody started: `report` fails with exit 2,
/// says the raw data is missing and why that happens, and writes no report.
#[test]
fn report_on_a_folder_without_raw_data_fails_and_says_the_data_is_missing() {
    let (_tmp, dir) = copy_of("run-steady");
    std::fs::remove_dir_all(dir.join("raw")).unwrap();
    for what in ["no raw/ folder", "raw/ holds no record"] {
        let assert = Command::cargo_bin("viewerfleet")
            .unwrap()
            .arg("report")
            .arg(&dir)
            .assert()
            .code(2)
            .stdout("");
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        for says in [
            what,
            "the raw data of this run is missing",
            "killed before it wrote any record",
            "copied without its raw/ folder",
        ] {
            assert!(stderr.contains(says), "{says:?} in {stderr}");
        }
        assert!(!dir.join("report.json").exists(), "no report of nothing");
        // Killed before the first record: raw/ is there, its files empty or absent.
        std::fs::create_dir_all(dir.join("raw")).unwrap();
        std::fs::write(dir.join("raw/run_events.jsonl"), "").unwrap();
    }
    // `compare` lists such a folder as one it could not read.
    let out = tempfile::tempdir().unwrap();
    let (_b, steady) = copy_of("run-steady");
    Command::cargo_bin("viewerfleet")
        .unwrap()
        .arg("compare")
        .args([&steady, &dir])
        .arg("--out")
        .arg(out.path())
        .assert()
        .code(1)
        .stdout(predicates::str::contains(
            "the raw data of this run is missing",
        ));
}

#[test]
fn compare_puts_runs_side_by_side_and_lists_unreadable_ones() {
    let (_a, steady) = copy_of("run-steady");
    let (_b, killed) = copy_of("run-killed");
    let out = tempfile::tempdir().unwrap();
    let missing = out.path().join("no-such-run");
    let assert = Command::cargo_bin("viewerfleet")
        .unwrap()
        .arg("compare")
        .args([&steady, &killed, &missing])
        .arg("--out")
        .arg(out.path())
        .assert()
        .code(1);
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("run-steady") && stdout.contains("run-killed"),
        "{stdout}"
    );
    assert!(stdout.contains("PARTIAL"));
    assert!(stdout.contains("FAILED no-such-run"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(json["groups"].as_array().unwrap().len(), 2);
    assert_eq!(json["groups"][0]["runs"][0]["http_at_mbps"], 1.6);
    assert_eq!(json["failed_runs"][0]["name"], "no-such-run");
    for f in ["compare.md", "compare.html", "compare.csv"] {
        assert!(out.path().join(f).exists(), "{f} missing");
    }
}

#[test]
fn compare_group_gives_mean_and_confidence_interval() {
    let (_a, one) = copy_of("run-steady");
    let (_b, killed) = copy_of("run-killed");
    let cmp = report::compare::compare_dirs(&[one, killed], true);
    assert_eq!(cmp.groups.len(), 1, "same scenario → one group");
    let g = &cmp.groups[0];
    // Players' HTTP at T: 1.6 (steady) and 2.0 (killed); exporter source for both → 1.6, 1.6.
    let http = g.stats.http_at_mbps.unwrap();
    assert_eq!(http.n, 2);
    assert!((http.mean - 1.6).abs() < 1e-9);
    let started = g.stats.viewers_started.unwrap();
    assert_eq!(started.mean, 5.0);
    assert_eq!(g.stats.partial_runs, 1);
    let text = report::comparison_text(&cmp);
    assert!(text.contains("±"), "{text}");
}

/// Golden files: the steady and starved fixtures' report.json and report.md as committed.
/// An intended change of the output is accepted with `VIEWERFLEET_UPDATE_GOLDEN=1 cargo test
/// --test fast report` and reviewed in the diff.
#[test]
fn fixtures_match_their_golden_reports() {
    for fixture_name in ["run-steady", "run-starved"] {
        let (_tmp, dir) = copy_of(fixture_name);
        report::write_report(&dir).unwrap();
        let golden = fixture("golden");
        for name in ["report.json", "report.md"] {
            let got = std::fs::read_to_string(dir.join(name)).unwrap();
            let path = golden.join(format!("{fixture_name}.{name}"));
            if std::env::var_os("VIEWERFLEET_UPDATE_GOLDEN").is_some() {
                std::fs::create_dir_all(&golden).unwrap();
                std::fs::write(&path, &got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                got == want,
                "{name} differs from {}; if intended, rerun with VIEWERFLEET_UPDATE_GOLDEN=1\n{got}",
                path.display()
            );
        }
    }
}

/// A Grid run whose node B (5 of 12 viewers) was saturated in the steady window and whose
/// pages there ran late: not a finding, both sets of figures, the reasons per viewer.
#[test]
fn a_starved_node_makes_the_run_not_a_finding_and_shows_both_figures() {
    use viewerfleet::report::{HeadroomVerdict, ViewerHeadroomStatus};
    let (_tmp, dir) = copy_of("run-starved");
    let s = report::write_report(&dir).unwrap();
    assert!(s.not_a_finding());
    let h = s.headroom.as_ref().unwrap();
    assert_eq!(h.verdict, HeadroomVerdict::NotAFinding);
    assert!(!h.host_judges_viewers);
    assert!(!s.honesty.cpu.as_ref().unwrap().viewers_machine);
    let v = &h.viewers;
    assert_eq!(
        (
            v.started,
            v.in_steady,
            v.starved,
            v.with_headroom,
            v.unknown
        ),
        (12, 12, 5, 6, 1)
    );
    assert_eq!(
        (v.starved_by_node, v.starved_by_page_lag, v.starved_by_host),
        (5, 5, 0)
    );
    let b = h
        .nodes
        .iter()
        .find(|n| n.name.ends_with(".12:5555"))
        .unwrap();
    assert!(b.saturated_in_steady);
    close(b.steady_hot_share, 1.0);
    assert_eq!((b.hot_spans[0].from_s, b.hot_spans[0].to_s), (60.0, 150.0));
    assert_eq!(h.unsampled_nodes.len(), 1);
    assert_eq!(h.unsampled_nodes[0].viewers, 2);
    // All 12: HTTP 660 kB/s, P2P 1140 kB/s; the 7 with headroom: 210 and 840 kB/s.
    let all = h.figures.all.as_ref().unwrap();
    let kept = h.figures.with_headroom.as_ref().unwrap();
    assert_eq!((all.viewers, kept.viewers), (12, 7));
    close(all.http_at_mbps, 5.28);
    close(all.p2p_savings, 1140.0 / 1800.0);
    close(kept.http_at_mbps, 1.68);
    close(kept.p2p_at_mbps, 6.72);
    close(kept.p2p_savings, 0.8);
    // The top-level (exporter) figures stay those of all viewers.
    close(s.p2p_savings, 1140.0 / 1800.0);
    assert_eq!(
        h.headline,
        "HEADROOM: 5 of 12 viewers starved in the steady window (node http://10.0.0.12:5555 \
         saturated 100% of it, 5 pages lagging): the P2P figure is not a finding; with headroom \
         only: P2P savings 80.0% (7 viewers) vs 63.3% for all 12 (players' stats)"
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("\n> **NOT A FINDING**: "), "{md}");
    assert!(
        md.contains("| with headroom | 7 | 1.68 | 6.72 | 20.0% | 80.0% |"),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<p class=\"notfinding\"><strong>NOT A FINDING</strong>"));
    assert!(html.contains("Viewer nodes&#39; CPU busy") || html.contains("Viewer nodes' CPU busy"));
    assert!(html.contains("Pages&#39; timer lateness") || html.contains("Pages' timer lateness"));
    let csv = std::fs::read_to_string(dir.join("viewers.csv")).unwrap();
    let row = |viewer: &str| {
        csv.lines()
            .find(|l| l.starts_with(&format!("{viewer},")))
            .unwrap()
            .to_string()
    };
    assert!(
        row("5").contains(",starved,page lag; node http://10.0.0.12:5555 saturated,9,"),
        "{csv}"
    );
    // …then when it was due, asked for, had its session and played (the fixture has no
    // arrival times or session events).
    assert!(
        row("0").ends_with(",stopped,,headroom,,1,0,6,,0,,1"),
        "{csv}"
    );
    assert!(row("11").contains(",unknown,"), "{csv}");
    assert!(dir.join("nodes.csv").exists());
    let statuses: Vec<ViewerHeadroomStatus> = v.listed.iter().map(|v| v.status).collect();
    assert_eq!(statuses, [ViewerHeadroomStatus::Starved; 5]);
}

/// How the nodes' browsers ran, as their load endpoints counted them: node B's without
/// Chromium's sandbox, said first and with its number of nodes; raw data without the count
/// (older endpoints, or nodes that counted none) says nothing of it.
#[test]
fn the_report_says_how_the_nodes_browsers_ran() {
    let (_tmp, dir) = copy_of("run-starved");
    let s = report::write_report(&dir).unwrap();
    let told: Vec<&String> = s
        .honesty
        .implications
        .iter()
        .filter(|l| l.starts_with("Measured on the nodes:"))
        .collect();
    assert_eq!(told.len(), 1, "{:?}", s.honesty.implications);
    assert!(
        told[0].starts_with(
            "Measured on the nodes: Browsers on 1 of 2 nodes ran as user viewerfleet-browser, \
             of their own, but without Chromium's sandbox: their kernel does not let that user \
             make a user namespace"
        ) && told[0].ends_with(
            "Browsers on 1 of 2 nodes ran as user viewerfleet-browser, of their own, with \
             Chromium's sandbox."
        ),
        "{}",
        told[0]
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("- {}\n", told[0])), "{md}");

    // The same run as an older endpoint would have left it.
    let path = dir.join("raw/node_samples.jsonl");
    let older: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("browsers_by_isolation");
            v.to_string()
        })
        .collect();
    std::fs::write(&path, older.join("\n") + "\n").unwrap();
    let s = report::write_report(&dir).unwrap();
    assert!(
        !s.honesty
            .implications
            .iter()
            .any(|l| l.contains("Measured on the nodes")),
        "{:?}",
        s.honesty.implications
    );
    assert!(s.not_a_finding(), "the rest of the report reads as before");
}

/// report.json of schema 1 (before the headroom section) still loads.
#[test]
fn a_report_json_without_headroom_still_loads() {
    let (_tmp, dir) = copy_of("run-steady");
    report::write_report(&dir).unwrap();
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let object = json.as_object_mut().unwrap();
    object.remove("headroom");
    object["schema_version"] = 1.into();
    object["honesty"]["cpu"]
        .as_object_mut()
        .unwrap()
        .remove("viewers_machine");
    let s: ReportSummary = serde_json::from_value(json).unwrap();
    assert!(s.headroom.is_none() && !s.not_a_finding());
    assert!(s.honesty.cpu.unwrap().viewers_machine);
}

/// The comparison shows each run's headroom, the players' P2P savings with headroom next
/// to all, and names the runs that are not findings under the table.
#[test]
fn compare_names_the_runs_that_are_not_findings() {
    let (_a, starved) = copy_of("run-starved");
    let (_b, killed) = copy_of("run-killed");
    let out = tempfile::tempdir().unwrap();
    let assert = Command::cargo_bin("viewerfleet")
        .unwrap()
        .arg("compare")
        .args([&starved, &killed])
        .arg("--out")
        .arg(out.path())
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("NOT A FINDING: 5/12 starved"), "{stdout}");
    assert!(stdout.contains("63.3% / 80.0%"), "{stdout}");
    assert!(
        stdout.contains("NOT A FINDING: run-starved — the steady window was starved"),
        "{stdout}"
    );
    assert!(!stdout.contains("NOT A FINDING: run-killed"), "{stdout}");
    let md = std::fs::read_to_string(out.path().join("compare.md")).unwrap();
    assert!(md.contains("> **NOT A FINDING: run-starved"), "{md}");
    assert!(
        md.contains("> run-starved: HEADROOM: 5 of 12 viewers starved"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.path().join("compare.html")).unwrap();
    assert!(html.contains("<div class=\"notfinding\">"), "{html}");
    let csv = std::fs::read_to_string(out.path().join("compare.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(
            ",cpu_saturated,headroom,viewers_in_steady,viewers_starved,players_p2p_savings,\
             headroom_p2p_savings"
        ),
        "{header}"
    );
    let starved_row = csv.lines().find(|l| l.contains(",run-starved,")).unwrap();
    assert!(
        starved_row.ends_with(",false,not-a-finding,12,5,0.633333,0.8"),
        "{starved_row}"
    );
    let cmp = report::compare::compare_dirs(&[starved, killed], false);
    let saturated: Vec<usize> = cmp
        .groups
        .iter()
        .map(|g| g.stats.cpu_saturated_runs)
        .collect();
    assert_eq!(saturated, [1, 0]);
}

#[test]
fn a_packed_run_says_how_many_viewers_shared_each_address() {
    let (_tmp, dir) = copy_of("run-steady");
    let path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["fleet"]["kind"] = "netns".into();
    manifest["fleet"]["packing"] = serde_json::json!({"per_browser": 2,
        "viewers_per_address": 2, "viewers_per_link": 2, "link": "4000/600 kbit/s"});
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let s: ReportSummary = report::write_report(&dir).unwrap();
    let lines = &s.honesty.implications;
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Viewers shared addresses in groups of 2")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("All viewers share one")),
        "{lines:?}"
    );
}

/// A failure reason quotes a browser's message as it came: a `\r\n`, a lone `\r` (which
/// the hand-written writer left unquoted), a comma and a quote in it must not break
/// `viewers.csv`. Read back by a CSV reader, the file has one record
/// per viewer, and the reason comes back whole.
#[test]
fn viewers_csv_keeps_one_row_per_viewer_when_a_reason_has_line_breaks_commas_and_quotes() {
    let (_tmp, dir) = copy_of("run-steady");
    let events = dir.join("raw/viewer_events.jsonl");
    let reason =
        "session not created: Chrome failed to start\r\nexited abnormally, \"crashed\"\rretry";
    let text = std::fs::read_to_string(&events).unwrap().replace(
        "\"reason\": \"session not created: Chrome failed to start\"",
        &format!("\"reason\": {}", serde_json::to_string(reason).unwrap()),
    );
    assert!(text.contains("\\r\\n"), "the fixture's failed viewer");
    std::fs::write(&events, text).unwrap();
    report::write_report(&dir).unwrap();

    let mut reader = csv::Reader::from_path(dir.join("viewers.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let viewers: Vec<&str> = rows.iter().map(|r| &r[column("viewer")]).collect();
    assert_eq!(viewers, ["0", "1", "2", "3", "4", "5"]);
    let failed = &rows[4];
    assert_eq!(&failed[column("end")], "failed");
    assert_eq!(&failed[column("reason")], reason);
    assert!(rows.iter().all(|r| r.len() == header.len()));
}
