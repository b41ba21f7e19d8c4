//! The fuzz harness, on stable Rust: generated inputs (proptest) and a replayed corpus
//! (`tests/fuzz/corpus/`) for the three parsers that read what people write or copy by hand:
//!
//! - the scenario parser: valid scenarios with one to four mutations (values from a pool of
//!   hostile ones, lines deleted, duplicated, re-indented, cut, junk inserted), and text of
//!   random characters;
//! - the raw-data reader, and the report built from what it reads: JSON lines with extreme
//!   numbers, unplanned viewer ids, damaged and cut-short lines, bytes that are not UTF-8;
//! - the Prometheus text parser: random text, and generated expositions that must parse back
//!   to the samples they were written from.
//!
//! Every case must end without a panic, in an answer that holds what the module promises
//! (an error naming the file, the line and the field, never a type of this program; a
//! report whose viewers started never exceed those planned). `make test-fast` runs
//! [`DEFAULT_CASES`] new cases per target; `VIEWERFLEET_FUZZ_CASES=20000 cargo test --test
//! fast fuzz` runs longer. A failing case is printed shrunk to its smallest form: add it to
//! the corpus folder of its target, where every file is replayed on every run.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use std::path::{Path, PathBuf};
use viewerfleet::metrics::prom_text;
use viewerfleet::model::rawdata;
use viewerfleet::model::scenario::{self, Overrides, ScenarioError};

/// New cases per target in each test run (seconds in all on 2 cores).
const DEFAULT_CASES: u32 = 64;

fn config() -> Config {
    let cases = std::env::var("VIEWERFLEET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        // The corpus is the record of past failures, not files proptest writes.
        failure_persistence: None,
        ..Config::default()
    }
}

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
    files
}

// ---------------------------------------------------------------------------------------
// Scenarios

const BASE: &str = "\
name: fuzz
description: generated
target:
  kind: refsite
  video: live
  latency: normal
  metrics_interval: 5s
viewers:
  count: 8
  ramp: 30s
  p2p_off_share: 0.5
  network:
    download_kbps: 2000
    upload_kbps: 300
    latency_ms: 500
    apply: cdp
  alt_network:
    share: 0.5
    profile: {download_kbps: 20000, upload_kbps: 5000}
duration: 3m
sampling_interval: 2s
measure_at: 150s
steady_window: 30s
max_failed_viewers: 1
fleet:
  kind: local
  max_parallel_starts: 2
";

/// Other targets and fleets, so their sections get mutated too.
const VARIANTS: &[(&str, &str)] = &[
    ("", ""),
    (
        "  kind: refsite\n  video: live\n  latency: normal\n  metrics_interval: 5s\n",
        "  kind: peertube\n  video: live\n  latency: normal\n  url: https://peertube.example/w/9c9de5e8-0a1e-484a-b099-e80766180a6d\n  exporter: http://127.0.0.1:9091/metrics\n",
    ),
    (
        "  kind: local\n  max_parallel_starts: 2\n",
        "  kind: netns\n  prefix: fd00:5f::/64\n  target_port: 8080\n",
    ),
    (
        "  kind: local\n  max_parallel_starts: 2\n",
        "  kind: grid\n  url: http://127.0.0.1:4444/\n  session_retries: 3\n  retry_backoff: 2s\n  recreate_lost: true\n",
    ),
    (
        "  kind: local\n  max_parallel_starts: 2\n",
        "  kind: hcloud\n  location: fsn1\n  controller_ips: [\"203.0.113.7/32\"]\n  budget: {cpu_per_viewer: 0.165}\n  on_limit: teardown\n  ttl: 4h\n",
    ),
];

/// Values people (and accidents) put where a field's value belongs.
const HOSTILE: &[&str] = &[
    "-1",
    "0",
    "1",
    "4294967296",
    "99999999999999999999999",
    "1.5",
    "-0.5",
    ".nan",
    ".inf",
    "-.inf",
    "1e300",
    "~",
    "null",
    "''",
    "\"\"",
    "[]",
    "{}",
    "[1, 2]",
    "{a: 1}",
    "true",
    "yes",
    "5%",
    "\"5%\"",
    "\"-5%\"",
    "\"150%\"",
    "1h",
    "8d",
    "0s",
    "1ns",
    "1000000000y",
    "-5s",
    "soon",
    "0x10",
    "&a 1",
    "*a",
    "!!str 3",
    "!!binary aGk=",
    "|\n  text",
    "\"\\u0000\"",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    "http://",
    "ftp://x/w/1",
    "https://p.example/w/",
    "https://p.example/videos/embed/abc",
    "fd00::/64",
    "'[[[[[[[['",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{",
    "ünïcödé",
    "\t",
    "- a\n- b",
    "? x",
    "a: b: c",
    "\"unterminated",
    "'also",
    "# comment",
    "@",
    "`",
    "%YAML 1.2",
    "---",
    "...",
    "<<: *a",
];

#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the value after `key:` on a line.
    Value(usize, usize),
    Delete(usize),
    Duplicate(usize),
    Indent(usize, u8),
    Dedent(usize),
    /// Insert text at a byte position (kept on a char boundary).
    Insert(usize, String),
    /// Cut the text at a byte position.
    Cut(usize),
    Swap(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let junk = prop_oneof![
        "[\\[\\]{}:,'\"#&*!|>?\\- \t\n]{1,12}",
        "\\PC{1,12}",
        Just("\n  ".to_string()),
        Just("\t".to_string()),
        Just("\u{feff}".to_string()),
        Just("\r\n".to_string()),
    ];
    prop_oneof![
        4 => (0usize..64, 0..HOSTILE.len()).prop_map(|(l, v)| Mutation::Value(l, v)),
        1 => (0usize..64).prop_map(Mutation::Delete),
        1 => (0usize..64).prop_map(Mutation::Duplicate),
        1 => (0usize..64, 1u8..5).prop_map(|(l, n)| Mutation::Indent(l, n)),
        1 => (0usize..64).prop_map(Mutation::Dedent),
        2 => (0usize..2000, junk).prop_map(|(p, s)| Mutation::Insert(p, s)),
        1 => (0usize..2000).prop_map(Mutation::Cut),
        1 => (0usize..64, 0usize..64).prop_map(|(a, b)| Mutation::Swap(a, b)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    let boundary = |p: usize| {
        let mut p = p % (text.len() + 1);
        while !text.is_char_boundary(p) {
            p -= 1;
        }
        p
    };
    match m {
        Mutation::Value(l, v) => {
            let line = &mut lines[l % n];
            if let Some(pos) = line.find(": ") {
                line.truncate(pos + 2);
            } else if line.ends_with(':') {
                line.push(' ');
            }
            line.push_str(HOSTILE[*v]);
        }
        Mutation::Delete(l) => {
            lines.remove(l % n);
        }
        Mutation::Duplicate(l) => {
            let line = lines[l % n].clone();
            lines.insert(l % n, line);
        }
        Mutation::Indent(l, k) => lines[l % n].insert_str(0, &" ".repeat(*k as usize)),
        Mutation::Dedent(l) => lines[l % n] = lines[l % n].trim_start().to_string(),
        Mutation::Insert(p, s) => {
            let p = boundary(*p);
            return format!("{}{s}{}", &text[..p], &text[p..]);
        }
        Mutation::Cut(p) => return text[..boundary(*p)].to_string(),
        Mutation::Swap(a, b) => lines.swap(a % n, b % n),
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Words that would reveal this program's types in a message (unless the input held them).
const TYPE_WORDS: &[&str] = &[
    "ScenarioSpec",
    "TargetSpec",
    "ViewersSpec",
    "NetworkProfile",
    "AltNetwork",
    "FailedThreshold",
    "FleetSpec",
    "FleetKind",
    "TargetKind",
    "VideoKind",
    "ShapingLayer",
    "ViewerBudget",
    "OnLimit",
    "OnNodeFailure",
    "untagged enum",
    "tagged enum",
    "struct ",
    "expected u8",
    "expected u16",
    "expected u32",
    "expected u64",
    "expected i64",
    "expected f64",
    "expected usize",
    "PathBuf",
];

/// What `scenario::parse` must give for any text: a plan that keeps the documented
/// invariants, or an error that names this file, a line of it, a field, and no type.
fn scenario_outcome_is_sound(
    text: &str,
    file: &str,
    result: Result<scenario::Plan, ScenarioError>,
) -> Result<(), TestCaseError> {
    match result {
        Ok(plan) => {
            prop_assert!((1..=100_000).contains(&plan.viewers), "{}", plan.viewers);
            prop_assert!(plan.duration <= scenario::MAX_DURATION);
            prop_assert!(plan.ramp < plan.duration);
            prop_assert!(plan.measure_at <= plan.duration);
            prop_assert!(plan.steady_window <= plan.measure_at);
            prop_assert!(plan.sampling_interval * 2 <= plan.steady_window);
            prop_assert!((0.0..=1.0).contains(&plan.p2p_off_share));
            let line = plan.summary_line();
            prop_assert!(line.contains(&plan.viewers.to_string()), "{line}");
        }
        Err(err) => {
            let shown = err.to_string();
            prop_assert_eq!(&err.file, file);
            prop_assert!(shown.starts_with(file), "{shown}");
            prop_assert!(!err.field.is_empty(), "{shown}");
            prop_assert!(!err.message.trim().is_empty(), "{shown}");
            if let Some(line) = err.line {
                let lines = text.split('\n').count();
                prop_assert!(
                    line >= 1 && line <= lines,
                    "line {line} of {lines}: {shown}"
                );
            }
            for word in TYPE_WORDS {
                prop_assert!(
                    text.contains(word) || !shown.contains(word),
                    "names `{word}`: {shown}"
                );
            }
        }
    }
    Ok(())
}

fn check_scenario_text(text: &str) -> Result<(), TestCaseError> {
    let result = scenario::parse(text, "fuzz.yaml", &Overrides::default());
    scenario_outcome_is_sound(text, "fuzz.yaml", result)
}

#[test]
fn fuzz_scenario_mutations_of_valid_files() {
    let strategy = (
        0..VARIANTS.len(),
        proptest::collection::vec(mutation(), 1..=4),
    );
    proptest!(config(), |((variant, mutations) in strategy)| {
        let (from, to) = VARIANTS[variant];
        let mut text = if from.is_empty() { BASE.to_string() } else { BASE.replace(from, to) };
        for m in &mutations {
            text = apply(&text, m);
        }
        check_scenario_text(&text)?;
    });
}

#[test]
fn fuzz_scenario_random_text() {
    let strategy = prop_oneof![
        "\\PC{0,400}",
        "[ -~\n\t]{0,400}",
        "[\\[\\]{}:,'\"#&*!|>?\\- \n]{0,400}",
    ];
    proptest!(config(), |(text in strategy)| {
        check_scenario_text(&text)?;
    });
}

#[test]
fn fuzz_scenario_file_bytes() {
    // Through `load`, so bytes that are not UTF-8 reach the reader too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.yaml");
    let file = path.display().to_string();
    proptest!(config(), |(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), keep_base in any::<bool>())| {
        if keep_base {
            let mut with_base = BASE.as_bytes().to_vec();
            with_base.append(&mut bytes);
            bytes = with_base;
        }
        std::fs::write(&path, &bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let result = scenario::load(&path, &Overrides::default());
        scenario_outcome_is_sound(&text, &file, result)?;
    });
}

#[test]
fn scenario_corpus_replays_cleanly() {
    for path in corpus("scenario") {
        let file = path.display().to_string();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let result = scenario::load(&path, &Overrides::default());
        if let Err(e) = scenario_outcome_is_sound(&text, &file, result) {
            panic!("{file}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Raw data and the report built from it

/// The raw files a run writes, with a generator of one record of each.
const RAW_FILES: &[&str] = &[
    rawdata::RUN_EVENTS,
    rawdata::VIEWER_EVENTS,
    rawdata::VIEWER_SAMPLES,
    rawdata::EXPORTER_SAMPLES,
    rawdata::HOST_SAMPLES,
];

fn time() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => 0.0..160.0f64,
        1 => Just(-1.0),
        1 => Just(1e12),
        1 => Just(1e300),
        1 => Just(-1e300),
        1 => Just(f64::MAX),
        1 => Just(8.0 * 86_400.0),
        1 => any::<f64>().prop_filter("JSON has no NaN or infinity", |v| v.is_finite()),
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0..50_000_000u64,
        1 => Just(u64::MAX),
        1 => Just(1u64 << 53),
        1 => any::<u64>(),
    ]
}

fn viewer_id() -> impl Strategy<Value = u32> {
    prop_oneof![6 => 0..6u32, 1 => 6..3000u32, 1 => Just(u32::MAX)]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0..1e6f64,
        1 => Just(-1.0),
        1 => Just(f64::MAX),
        1 => Just(-f64::MAX),
        1 => any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]
}

/// One JSON record for raw file `file` (an index into `RAW_FILES`).
fn record(file: usize) -> BoxedStrategy<serde_json::Value> {
    use serde_json::json;
    match file {
        0 => (
            time(),
            prop::sample::select(vec![
                "started",
                "target_ready",
                "ramp_done",
                "measure_point",
                "finished",
                "interrupted",
                "error",
                "exploded",
            ]),
        )
            .prop_map(|(t, event)| json!({"t": t, "event": event}))
            .boxed(),
        1 => (
            time(),
            viewer_id(),
            prop::sample::select(vec![
                "creating",
                "session_created",
                "page_opened",
                "playing",
                "failed",
                "lost",
                "stopped",
            ]),
            any::<bool>(),
            proptest::option::of(float()),
        )
            .prop_map(|(t, viewer, event, p2p, ttff)| {
                json!({"t": t, "viewer": viewer, "event": event, "p2p": p2p,
                       "ttff_ms": ttff, "reason": "fuzz"})
            })
            .boxed(),
        2 => (
            (time(), viewer_id(), count(), count(), count()),
            (
                any::<u32>(),
                any::<bool>(),
                float(),
                any::<u32>(),
                float(),
                count(),
            ),
        )
            .prop_map(
                |((t, viewer, http, p2p, up), (peers, playing, cur, stalls, stalled, dropped))| {
                    json!({"t": t, "viewer": viewer, "http_down_bytes": http, "p2p_down_bytes": p2p,
                       "p2p_up_bytes": up, "peers": peers, "playing": playing,
                       "current_time_s": cur, "stalls": stalls, "stalled_ms": stalled,
                       "dropped_frames": dropped, "errors": 0})
                },
            )
            .boxed(),
        3 => (
            time(),
            any::<bool>(),
            proptest::collection::btree_map(
                prop::sample::select(vec![
                    "peertube_playback_http_downloaded_bytes_total",
                    "peertube_playback_p2p_downloaded_bytes_total",
                    "peertube_playback_p2p_uploaded_bytes_total",
                    "refsite_origin_segment_bytes_total",
                    "refsite_origin_sent_bytes_total",
                    "process_cpu_seconds_total",
                ]),
                float(),
                0..6,
            ),
        )
            .prop_map(|(t, ok, sums)| json!({"t": t, "ok": ok, "latency_ms": 3.0, "sums": sums}))
            .boxed(),
        _ => (time(), float(), any::<u32>(), count())
            .prop_map(|(t, busy, cores, mem)| {
                json!({"t": t, "cpu_busy": busy, "cores": cores, "mem_used_bytes": mem,
                       "mem_total_bytes": mem, "load1": busy})
            })
            .boxed(),
    }
}

#[derive(Debug, Clone)]
enum RawLine {
    Record(serde_json::Value),
    Junk(String),
    Blank,
}

fn raw_file() -> impl Strategy<Value = (usize, Vec<RawLine>, bool)> {
    (0..RAW_FILES.len()).prop_flat_map(|file| {
        let line = prop_oneof![
            8 => record(file).prop_map(RawLine::Record),
            1 => "\\PC{0,40}".prop_map(RawLine::Junk),
            1 => Just(RawLine::Blank),
        ];
        (
            Just(file),
            proptest::collection::vec(line, 0..40),
            any::<bool>(),
        )
    })
}

/// A copy of the steady fixture whose raw file `name` is replaced by `contents`.
fn run_folder_with(name: &str, contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = crate::support::fixtures::copy_of("run-steady");
    std::fs::write(dir.join(name), contents).unwrap();
    (tmp, dir)
}

/// Obviously impossible for the steady fixture (6 viewers, 150 s): records that any
/// sound report must leave out and name, whatever its exact bounds.
fn obviously_impossible(record: &serde_json::Value) -> bool {
    let t = record["t"].as_f64().unwrap_or(0.0);
    let viewer = record["viewer"].as_u64().unwrap_or(0);
    let http = record["http_down_bytes"].as_u64().unwrap_or(0);
    !(0.0..=1e7).contains(&t) || viewer >= 6 || http == u64::MAX
}

/// Reads raw file `name` with the record type the report reads it with.
fn read_as_its_type(path: &Path, name: &str) -> Result<(), String> {
    let shown = |e: anyhow::Error| e.to_string();
    match name {
        rawdata::RUN_EVENTS => rawdata::read_jsonl::<rawdata::RunEvent>(path).map(drop),
        rawdata::VIEWER_EVENTS => rawdata::read_jsonl::<rawdata::ViewerEvent>(path).map(drop),
        rawdata::VIEWER_SAMPLES => rawdata::read_jsonl::<rawdata::ViewerSample>(path).map(drop),
        rawdata::EXPORTER_SAMPLES => rawdata::read_jsonl::<rawdata::ExporterSample>(path).map(drop),
        _ => rawdata::read_jsonl::<rawdata::HostSample>(path).map(drop),
    }
    .map_err(shown)
}

/// What reading a raw file and reporting on its folder must give.
fn report_outcome_is_sound(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let path = dir.join(name);
    let reads_cleanly = read_as_its_type(&path, name)
        .and_then(|()| rawdata::read_jsonl::<serde_json::Value>(&path).map_err(|e| e.to_string()));
    match viewerfleet::report::write_report(dir) {
        Ok(s) => {
            prop_assert!(
                s.viewers.started <= s.viewers.requested,
                "{}/{} viewers started",
                s.viewers.started,
                s.viewers.requested
            );
            for (what, v) in [
                ("http_peak_mbps", s.http_peak_mbps),
                ("http_at_mbps", s.http_at_mbps),
                ("p2p_at_mbps", s.p2p_at_mbps),
                ("p2p_up_at_mbps", s.p2p_up_at_mbps),
            ] {
                if let Some(v) = v {
                    prop_assert!(v.is_finite() && v >= 0.0, "{what} = {v}");
                }
            }
            if let Some(share) = s.http_share {
                prop_assert!((0.0..=1.0).contains(&share), "http_share = {share}");
            }
            let records = reads_cleanly.expect("the report read the file, so must read_jsonl");
            if records.records.iter().any(obviously_impossible) {
                prop_assert!(
                    s.honesty
                        .warnings
                        .iter()
                        .any(|w| w.starts_with(&format!("{name}: ")) && w.contains("line")),
                    "impossible records of {name} not reported: {:?}",
                    s.honesty.warnings
                );
            }
            let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
            prop_assert!(md.contains("Honesty") || md.contains("honesty"));
        }
        Err(err) => {
            let shown = format!("{err:#}");
            prop_assert!(shown.contains(name), "the error names the file: {shown}");
            let damaged = reads_cleanly.is_err();
            prop_assert!(damaged, "report failed on a file read_jsonl reads: {shown}");
            let lines = bytes.split(|&b| b == b'\n').count();
            let line: usize = shown
                .split(&format!("{name}:"))
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no line number in: {shown}"));
            prop_assert!(
                line >= 1 && line <= lines,
                "line {line} of {lines}: {shown}"
            );
        }
    }
    Ok(())
}

#[test]
fn fuzz_raw_data_and_the_report_built_from_it() {
    proptest!(config(), |((file, lines, cut_last) in raw_file())| {
        let name = RAW_FILES[file];
        let mut text = String::new();
        for line in &lines {
            match line {
                RawLine::Record(v) => text.push_str(&v.to_string()),
                RawLine::Junk(s) => text.push_str(&s.replace('\n', " ")),
                RawLine::Blank => {}
            }
            text.push('\n');
        }
        if cut_last && text.len() > 2 {
            // A writer killed mid-line.
            let mut end = text.len() - 2;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        let (_tmp, dir) = run_folder_with(name, text.as_bytes());
        report_outcome_is_sound(&dir, name, text.as_bytes())?;
    });
}

#[test]
fn fuzz_raw_data_reader_on_random_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.jsonl");
    proptest!(config(), |(bytes in proptest::collection::vec(any::<u8>(), 0..400))| {
        std::fs::write(&path, &bytes).unwrap();
        match rawdata::read_jsonl::<rawdata::ViewerSample>(&path) {
            Ok(contents) => {
                prop_assert_eq!(contents.records.len(), contents.line_numbers.len());
                prop_assert!(contents.line_numbers.windows(2).all(|w| w[0] < w[1]));
            }
            Err(err) => {
                let shown = err.to_string();
                prop_assert!(shown.contains("x.jsonl:"), "{shown}");
            }
        }
    });
}

#[test]
fn raw_data_corpus_replays_cleanly() {
    for path in corpus("rawdata") {
        let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
        let raw = RAW_FILES
            .iter()
            .find(|name| file_name.starts_with(name.trim_start_matches("raw/").trim_end_matches(".jsonl")))
            .unwrap_or_else(|| panic!("{file_name}: name it after the raw file it stands for (e.g. viewer_samples-….jsonl)"));
        let bytes = std::fs::read(&path).unwrap();
        let (_tmp, dir) = run_folder_with(raw, &bytes);
        if let Err(e) = report_outcome_is_sound(&dir, raw, &bytes) {
            panic!("{file_name}: {e}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Prometheus text

fn prom_outcome_is_sound(text: &str) -> Result<(), TestCaseError> {
    match prom_text::parse(text) {
        Ok(samples) => {
            for s in &samples {
                prop_assert!(!s.name.is_empty());
                prop_assert!(
                    !s.name.starts_with(|c: char| c.is_ascii_digit()),
                    "{}",
                    s.name
                );
            }
            for v in prom_text::sums_by_name(&samples, &[""]).values() {
                prop_assert!(v.is_finite(), "a sum that is not a number: {v}");
            }
        }
        Err(err) => {
            let lines = text.lines().count();
            prop_assert!(
                err.line >= 1 && err.line <= lines,
                "line {} of {lines}",
                err.line
            );
            prop_assert!(err.text.chars().count() <= 200);
        }
    }
    Ok(())
}

#[test]
fn fuzz_prometheus_random_text() {
    let strategy = prop_oneof!["\\PC{0,300}", "[a-z_{}=\",# \n\\\\0-9.+eE-]{0,300}",];
    proptest!(config(), |(text in strategy)| {
        prom_outcome_is_sound(&text)?;
    });
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[test]
fn fuzz_prometheus_expositions_parse_back_to_their_samples() {
    let value = prop_oneof![
        any::<f64>(),
        Just(f64::MAX),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
    ];
    let sample = (
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
        proptest::collection::vec(("[a-zA-Z_][a-zA-Z0-9_]{0,10}", "\\PC{0,12}"), 0..4),
        value,
        proptest::option::of(any::<i64>()),
    );
    proptest!(config(), |(samples in proptest::collection::vec(sample, 0..12))| {
        let mut text = String::from("# HELP generated\n# TYPE generated counter\n");
        for (name, labels, value, ts) in &samples {
            text.push_str(name);
            if !labels.is_empty() {
                let inner: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                    .collect();
                text.push_str(&format!("{{{}}}", inner.join(",")));
            }
            let v = if value.is_nan() {
                "NaN".to_string()
            } else if value.is_infinite() {
                if *value > 0.0 { "+Inf".into() } else { "-Inf".into() }
            } else {
                format!("{value:e}")
            };
            text.push_str(&format!(" {v}"));
            if let Some(ts) = ts {
                text.push_str(&format!(" {ts}"));
            }
            text.push('\n');
        }
        let parsed = prom_text::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(parsed.len(), samples.len());
        for (got, (name, labels, value, ts)) in parsed.iter().zip(&samples) {
            prop_assert_eq!(&got.name, name);
            prop_assert_eq!(&got.labels, labels);
            prop_assert!(got.value == *value || (got.value.is_nan() && value.is_nan()));
            prop_assert_eq!(got.timestamp_ms, *ts);
        }
        prom_outcome_is_sound(&text)?;
    });
}

#[test]
fn prometheus_corpus_replays_cleanly() {
    for path in corpus("prom") {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        if let Err(e) = prom_outcome_is_sound(&text) {
            panic!("{}: {e}", path.display());
        }
    }
}
