use super::*;
use crate::model::kinds::Throttling;
use crate::model::scenario::Overrides;
use crate::model::scenario::ViewersOverride;
use crate::report::compare::dir_name;
use crate::report::swarm_curve::SwarmPoint;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const SCENARIO: &str = "\
target:
  kind: refsite
  video: live
viewers:
  count: 2
duration: 3m
fleet:
  kind: local
";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What the stand-in does for each call, in order.
#[derive(Clone, Copy)]
enum Step {
    Finish,
    Fail,
    Interrupt,
}

/// A runner that needs no browser: it copies a crafted run folder or fails.
struct StandIn {
    steps: Mutex<Vec<Step>>,
    calls: Mutex<Vec<PathBuf>>,
}

#[async_trait::async_trait]
impl ScenarioRunner for StandIn {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        let out = &run.dir;
        self.calls.lock().unwrap().push(out.to_path_buf());
        let step = self.steps.lock().unwrap().remove(0);
        match step {
            Step::Fail => anyhow::bail!("target never answered"),
            Step::Finish | Step::Interrupt => {
                let interrupted = matches!(step, Step::Interrupt);
                copy_dir(
                    &fixture(if interrupted {
                        "run-killed"
                    } else {
                        "run-steady"
                    }),
                    out,
                );
                Ok(RunOutcome {
                    run_dir: out.to_path_buf(),
                    ok: !interrupted,
                    interrupted,
                    exit_code: if interrupted { 130 } else { 0 },
                    report: None,
                    summary: String::new(),
                    settled_viewers: None,
                    fitting_viewers: None,
                })
            }
        }
    }
}

fn scenarios(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(format!("{n}.yaml"));
            std::fs::write(&p, format!("name: {n}\n{SCENARIO}")).unwrap();
            p
        })
        .collect()
}

async fn run(
    steps: Vec<Step>,
    names: &[&str],
    repeat: u32,
) -> (SuiteResult, Vec<PathBuf>, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), names);
    let plan = SuitePlan::new(
        &files,
        &[],
        repeat,
        &dir.path().join("out"),
        Overrides::default(),
    )
    .unwrap();
    let runner = StandIn {
        steps: Mutex::new(steps),
        calls: Mutex::new(Vec::new()),
    };
    let mut log = Vec::new();
    let result = run_suite(&plan, &runner, &Shutdown::new(), &mut log)
        .await
        .unwrap();
    let calls = runner.calls.into_inner().unwrap();
    (result, calls, String::from_utf8(log).unwrap(), dir)
}

/// A runner whose governed ramps settle where it is told; it records the bound each
/// run was given.
struct Settling {
    settles: Mutex<Vec<u32>>,
    seen: Mutex<Vec<(u32, Option<u32>, bool)>>,
}

impl Settling {
    /// A runner whose runs' ramps settle on `settles`, in run order.
    fn new(settles: Vec<u32>) -> Self {
        Self {
            settles: Mutex::new(settles),
            seen: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl ScenarioRunner for Settling {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        self.seen.lock().unwrap().push((
            run.plan.viewers,
            run.overrides.viewers.max(),
            run.plan.auto.is_some_and(|a| a.known_to_fit),
        ));
        copy_dir(&fixture("run-steady"), &run.dir);
        let settled = self.settles.lock().unwrap().remove(0);
        Ok(RunOutcome {
            run_dir: run.dir.clone(),
            ok: true,
            interrupted: false,
            exit_code: 0,
            report: None,
            summary: String::new(),
            settled_viewers: Some(settled.min(run.plan.viewers)),
            fitting_viewers: Some(settled.min(run.plan.viewers)),
        })
    }
}

#[tokio::test]
async fn governed_ramps_are_bounded_by_where_the_first_settled() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a", "b", "c"]);
    let auto = Overrides {
        viewers: ViewersOverride::Auto { max: Some(32) },
        ..Overrides::default()
    };
    let plan = SuitePlan::new(&files, &[], 1, &dir.path().join("out"), auto).unwrap();
    let runner = Settling::new(vec![12, 8, 16]);
    run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    // The first may go to 32 and settles on 12; the others never above 12, even when
    // one of them settled lower.
    assert_eq!(
        runner.seen.into_inner().unwrap(),
        [
            (32, Some(32), false),
            (12, Some(12), false),
            (12, Some(12), false)
        ]
    );
}

#[tokio::test]
async fn each_runs_size_is_kept_for_its_repeats_and_in_the_size_file_for_the_next_suite() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a", "b"]);
    let size_file = dir.path().join("state/swarm-size.json");
    let auto = Overrides {
        viewers: ViewersOverride::Auto { max: Some(32) },
        ..Overrides::default()
    };
    let suite_with = |out: &str, repeat: u32, settles: Vec<u32>, overrides: Overrides| {
        let plan = SuitePlan::new(&files, &[], repeat, &dir.path().join(out), overrides)
            .unwrap()
            .with_size_file(&size_file)
            .unwrap();
        (plan, Settling::new(settles))
    };
    let suite =
        |out: &str, repeat: u32, settles: Vec<u32>| suite_with(out, repeat, settles, auto.clone());
    // No file yet: `a` measures (up to 32) and settles on 12; `b` measures too, bounded
    // by 12, and settles on 8; their second repeats go to those sizes.
    let (plan, first) = suite("one", 2, vec![12, 8, 12, 8]);
    let mut log = Vec::new();
    run_suite(&plan, &first, &Shutdown::new(), &mut log)
        .await
        .unwrap();
    assert_eq!(
        first.seen.into_inner().unwrap(),
        [
            (32, Some(32), false),
            (12, Some(12), false),
            (12, Some(12), true),
            (8, Some(8), true)
        ]
    );
    let kept = SwarmSizes::read(&size_file).unwrap().unwrap();
    let sizes: Vec<(&str, u32)> = kept
        .runs
        .iter()
        .map(|(name, s)| (name.as_str(), s.viewers))
        .collect();
    assert_eq!(sizes, [("a", 12), ("b", 8)]);
    assert!(kept.runs["a"].settled_in.ends_with("a-1"), "{kept:?}");
    let log = String::from_utf8(log).unwrap();
    assert!(log.contains("12 viewers for a kept in"), "{log}");
    // The next suite goes to each run's size from its first run on, and leaves the
    // file as it was.
    let (plan, second) = suite("two", 1, vec![12, 8]);
    assert_eq!(plan.kept_sizes, kept);
    run_suite(&plan, &second, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    assert_eq!(
        second.seen.into_inner().unwrap(),
        [(12, Some(12), true), (8, Some(8), true)]
    );
    assert_eq!(SwarmSizes::read(&size_file).unwrap(), Some(kept));
    // Packed differently, a run costs differently: its kept size does not apply.
    let packed = Overrides {
        per_browser: Some(2),
        ..auto.clone()
    };
    let (packed, third) = suite_with("three", 1, vec![10, 6], packed);
    run_suite(&packed, &third, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    assert_eq!(
        third.seen.into_inner().unwrap(),
        [(32, Some(32), false), (10, Some(10), false)]
    );
    let resized = SwarmSizes::read(&size_file).unwrap().unwrap();
    assert_eq!(
        (resized.runs["a"].viewers, resized.runs["a"].per_browser),
        (10, Some(2))
    );
}

/// A runner whose ramp released 8 viewers, the last step past its limit (so 4 fit
/// below it), with the report of the `run-steady` fixture: its host hot for 20 s of the
/// steady window, or, `cool`, never.
struct Crossed {
    cool: bool,
}

#[async_trait::async_trait]
impl ScenarioRunner for Crossed {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        copy_dir(&fixture("run-steady"), &run.dir);
        if self.cool {
            let samples = run.dir.join("raw/host_samples.jsonl");
            let text = std::fs::read_to_string(&samples)?;
            std::fs::write(
                &samples,
                text.replace("\"cpu_busy\": 0.95", "\"cpu_busy\": 0.5"),
            )?;
        }
        let report = crate::report::build(&run.dir)?.summary;
        Ok(RunOutcome {
            run_dir: run.dir.clone(),
            ok: true,
            interrupted: false,
            exit_code: 0,
            report: Some(report),
            summary: String::new(),
            settled_viewers: Some(8),
            fitting_viewers: Some(4),
        })
    }
}

#[tokio::test]
async fn a_ramp_past_its_limit_keeps_its_size_only_when_every_viewer_had_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a"]);
    let auto = Overrides {
        viewers: ViewersOverride::Auto { max: Some(32) },
        ..Overrides::default()
    };
    let kept = |cool: bool, out: &str| {
        let size_file = dir.path().join(format!("{out}.json"));
        let plan = SuitePlan::new(&files, &[], 1, &dir.path().join(out), auto.clone())
            .unwrap()
            .with_size_file(&size_file)
            .unwrap();
        async move {
            run_suite(&plan, &Crossed { cool }, &Shutdown::new(), &mut Vec::new())
                .await
                .unwrap();
            SwarmSizes::read(&size_file).unwrap().unwrap().runs["a"].viewers
        }
    };
    // The report found every viewer with headroom: the 8 it ran are kept.
    assert_eq!(kept(true, "cool").await, 8);
    // The host was saturated: one step fewer, the most measured below the limit.
    assert_eq!(kept(false, "hot").await, 4);
}

#[test]
fn a_broken_swarm_size_file_is_an_error_that_says_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("swarm-size.json");
    std::fs::write(&path, "sixteen").unwrap();
    let err = SwarmSizes::read(&path).unwrap_err().to_string();
    assert!(
        err.contains("swarm-size.json") && err.contains("remove it"),
        "{err}"
    );
    std::fs::write(
        &path,
        r#"{"runs":{"vod@tc":{"viewers":0,"settled_in":"x","at":"y"}}}"#,
    )
    .unwrap();
    let err = SwarmSizes::read(&path).unwrap_err().to_string();
    assert!(err.contains("`vod@tc` has 0 viewers"), "{err}");
}

#[tokio::test]
async fn keeps_going_after_a_failed_run_and_reports_it() {
    let (result, calls, log, _dir) = run(vec![Step::Fail, Step::Finish], &["a", "b"], 1).await;
    assert_eq!(calls.len(), 2);
    assert!(log.contains("a: FAILED: target never answered"), "{log}");
    let cmp = &result.comparison;
    assert_eq!(cmp.groups.len(), 1);
    assert_eq!(cmp.groups[0].name, "b");
    assert_eq!(cmp.failed.len(), 1);
    assert_eq!(cmp.failed[0].name, "a-1");
    assert!(result.html.exists());
    let md = std::fs::read_to_string(result.html.with_file_name("compare.md")).unwrap();
    assert!(
        md.contains("a-1") && md.contains("target never answered"),
        "{md}"
    );
}

#[tokio::test]
async fn repeats_run_round_robin_and_get_confidence_intervals() {
    let (result, calls, _, _dir) = run(vec![Step::Finish; 4], &["a", "b"], 2).await;
    let names: Vec<String> = calls.iter().map(|p| dir_name(p)).collect();
    assert_eq!(names, ["a-1", "b-1", "a-2", "b-2"]);
    let cmp = &result.comparison;
    assert_eq!(
        cmp.groups.iter().map(|g| g.runs.len()).collect::<Vec<_>>(),
        [2, 2]
    );
    let share = cmp.groups[0].stats.http_share.unwrap();
    // Identical runs: mean 1/3, zero-width interval.
    assert!((share.mean - 1.0 / 3.0).abs() < 1e-9);
    assert_eq!(share.ci95, Some(0.0));
    assert!(cmp.text().contains("95% confidence interval"));
}

#[tokio::test]
async fn one_run_repeated_more_than_the_others_runs_its_extra_rounds_alone() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a", "b"]);
    let both_modes = |out: &str, repeat: &str| {
        SuitePlan::new(
            &files,
            &[Throttling::HttpOnly, Throttling::CdpAll],
            1,
            &dir.path().join(out),
            Overrides::default(),
        )
        .unwrap()
        .with_run_repeats(&[repeat.parse().unwrap()])
        .unwrap()
    };
    let plan = both_modes("out", "a@http-only=3");
    let names: Vec<String> = plan.runs().iter().map(|r| dir_name(&r.dir)).collect();
    assert_eq!(
        names,
        [
            "a@http-only-1",
            "a@cdp-all-1",
            "b@http-only-1",
            "b@cdp-all-1",
            "a@http-only-2",
            "a@http-only-3"
        ]
    );
    let runner = StandIn {
        steps: Mutex::new(vec![Step::Finish; 6]),
        calls: Mutex::new(Vec::new()),
    };
    let result = run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    let sizes: Vec<(String, usize)> = result
        .comparison
        .groups
        .iter()
        .map(|g| (g.name.clone(), g.runs.len()))
        .collect();
    assert_eq!(
        sizes,
        [
            ("a@http-only".to_string(), 3),
            ("a@cdp-all".to_string(), 1),
            ("b@http-only".to_string(), 1),
            ("b@cdp-all".to_string(), 1)
        ]
    );
    // A file stem names every mode of that file.
    let by_stem = both_modes("out2", "b=2");
    assert_eq!(by_stem.runs().len(), 6);
    assert!(by_stem
        .scenarios
        .iter()
        .all(|s| s.repeat == if s.name.starts_with('b') { 2 } else { 1 }));
}

#[test]
fn a_repeat_for_no_run_of_the_suite_names_the_runs_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a"]);
    let plan = || {
        SuitePlan::new(
            &files,
            &[Throttling::HttpOnly],
            1,
            &dir.path().join("out"),
            Overrides::default(),
        )
        .unwrap()
    };
    let err = plan()
        .with_run_repeats(&["a@tc=2".parse().unwrap()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`a@tc`") && err.contains("a@http-only"),
        "{err}"
    );
    for bad in ["a", "a=0", "a=two", "=3"] {
        let err = bad.parse::<RunRepeat>().unwrap_err();
        assert!(err.contains("NAME=K"), "{bad}: {err}");
    }
    // The repeats' folders are checked too.
    std::fs::create_dir_all(dir.path().join("out/a@http-only-2")).unwrap();
    std::fs::write(dir.path().join("out/a@http-only-2/x"), "").unwrap();
    let err = plan()
        .with_run_repeats(&["a=2".parse().unwrap()])
        .unwrap_err();
    assert!(err.to_string().contains("new or empty folder"), "{err}");
}

#[tokio::test]
async fn interrupted_run_stops_the_suite_and_what_finished_is_compared() {
    let (result, calls, log, _dir) = run(
        vec![Step::Finish, Step::Interrupt, Step::Finish],
        &["a", "b", "c"],
        1,
    )
    .await;
    assert_eq!(calls.len(), 2, "no run may start after the interrupted one");
    assert!(result.interrupted);
    assert!(log.contains("interrupted"));
    let cmp = &result.comparison;
    assert_eq!(cmp.groups.len(), 2);
    assert!(cmp.groups[1].runs[0].summary.partial);
    assert!(cmp.text().contains("PARTIAL"));
}

#[tokio::test]
async fn stop_flag_prevents_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a"]);
    let plan = SuitePlan::new(
        &files,
        &[],
        1,
        &dir.path().join("out"),
        Overrides::default(),
    )
    .unwrap();
    let runner = StandIn {
        steps: Mutex::new(vec![Step::Finish]),
        calls: Mutex::new(Vec::new()),
    };
    let stop = Shutdown::new();
    stop.trigger();
    let result = run_suite(&plan, &runner, &stop, &mut Vec::new())
        .await
        .unwrap();
    assert!(result.interrupted);
    assert_eq!(result.runs_started, 0);
}

#[test]
fn plan_is_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a"]);
    let err = SuitePlan::new(&files, &[], 0, dir.path(), Overrides::default()).unwrap_err();
    assert!(err.to_string().contains("--repeat"));
    let twice = vec![files[0].clone(), files[0].clone()];
    let err = SuitePlan::new(&twice, &[], 1, dir.path(), Overrides::default()).unwrap_err();
    assert!(err.to_string().contains("named `a`"), "{err}");
    std::fs::create_dir_all(dir.path().join("out/a-1")).unwrap();
    std::fs::write(dir.path().join("out/a-1/x"), "").unwrap();
    let err = SuitePlan::new(
        &files,
        &[],
        1,
        &dir.path().join("out"),
        Overrides::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("new or empty folder"), "{err}");
    let missing = vec![dir.path().join("nope.yaml")];
    assert!(SuitePlan::new(&missing, &[], 1, dir.path(), Overrides::default()).is_err());
}

/// A sweep of the `scenarios` named `names` (2 viewers each) over `sizes`.
fn sweep(
    dir: &Path,
    names: &[&str],
    modes: &[Throttling],
    sizes: &str,
    overrides: Overrides,
) -> anyhow::Result<SuitePlan> {
    let files = scenarios(dir, names);
    let sizes: SweepSizes = sizes.parse().unwrap();
    SuitePlan::sweep(&files, modes, Some(&sizes), 1, &dir.join("out"), overrides)
}

#[test]
fn a_swarm_size_sweep_runs_each_scenario_and_mode_once_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let modes = [Throttling::HttpOnly, Throttling::CdpAll];
    let plan = sweep(
        dir.path(),
        &["a", "b"],
        &modes,
        "16,2,4,16",
        Overrides::default(),
    )
    .unwrap();
    let runs = plan.runs();
    let names: Vec<String> = runs.iter().map(|r| dir_name(&r.dir)).collect();
    assert_eq!(
        names,
        [
            "a@http-only@2-1",
            "a@http-only@4-1",
            "a@http-only@16-1",
            "a@cdp-all@2-1",
            "a@cdp-all@4-1",
            "a@cdp-all@16-1",
            "b@http-only@2-1",
            "b@http-only@4-1",
            "b@http-only@16-1",
            "b@cdp-all@2-1",
            "b@cdp-all@4-1",
            "b@cdp-all@16-1"
        ]
    );
    // The file's 2 viewers in every run, the rest of the swarm light peers; the mode
    // as named.
    let swarms: Vec<(u32, Option<u32>, Option<u32>)> = runs[..3]
        .iter()
        .map(|r| {
            (
                r.plan.viewers,
                r.overrides.light_peers,
                r.plan.light.as_ref().map(|l| l.peers),
            )
        })
        .collect();
    assert_eq!(
        swarms,
        [
            (2, Some(0), None),
            (2, Some(2), Some(2)),
            (2, Some(14), Some(14))
        ]
    );
    assert!(runs.iter().all(|r| {
        let mode = r.overrides.apply.unwrap().to_string();
        r.name.split('@').nth(1) == Some(mode.as_str())
    }));
    assert!(runs[2]
        .plan
        .yaml
        .contains("# Overridden on the command line: swarm.light_peers = 14"));
    // Each run is a point of its scenario@mode's curve.
    assert_eq!(
        plan.scenarios[2].swarm,
        Some(SwarmPoint {
            series: "a@http-only".into(),
            size: 16,
            viewers: 2,
            light_peers: 14
        })
    );
    let listed = plan.describe();
    assert!(listed.starts_with("12 runs into "), "{listed}");
    assert!(
        listed.contains(&format!(
            "  3. a@http-only@16 → {}: 2 viewers + 14 light peers (25 per page): a swarm of 16\n",
            dir.path().join("out/a@http-only@16-1").display()
        )),
        "{listed}"
    );
    assert!(listed.contains("  1. a@http-only@2 → "), "{listed}");
    assert!(
        listed.lines().nth(1).unwrap().ends_with(": 2 viewers"),
        "{listed}"
    );
    // `--repeat-run` names a scenario@mode for all its sizes, or one size.
    let repeated = plan
        .clone()
        .with_run_repeats(&["a@cdp-all=2".parse().unwrap()])
        .unwrap();
    let times: Vec<(&str, u32)> = repeated
        .scenarios
        .iter()
        .filter(|s| s.repeat > 1)
        .map(|s| (s.name.as_str(), s.repeat))
        .collect();
    assert_eq!(
        times,
        [("a@cdp-all@2", 2), ("a@cdp-all@4", 2), ("a@cdp-all@16", 2)]
    );
    let one = plan
        .with_run_repeats(&["b@http-only@4=3".parse().unwrap()])
        .unwrap();
    assert_eq!(one.runs().len(), 12 + 2);
    let err = one
        .with_run_repeats(&["a@http-only@8=2".parse().unwrap()])
        .unwrap_err();
    assert!(err.to_string().contains("`a@http-only@8`"), "{err}");
}

#[test]
fn a_sweep_without_modes_names_runs_by_scenario_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let plan = sweep(dir.path(), &["a"], &[], "4,2", Overrides::default()).unwrap();
    let names: Vec<String> = plan.runs().iter().map(|r| dir_name(&r.dir)).collect();
    assert_eq!(names, ["a@2-1", "a@4-1"]);
    assert_eq!(
        plan.scenarios[1].swarm.as_ref().map(|s| s.series.as_str()),
        Some("a")
    );
    // `--viewers` sets the viewers the swarm keeps.
    let one = Overrides {
        viewers: ViewersOverride::Fixed(1),
        ..Overrides::default()
    };
    let plan = sweep(dir.path(), &["a"], &[], "1,4", one).unwrap();
    let swarms: Vec<(u32, u32)> = plan
        .scenarios
        .iter()
        .map(|s| {
            let p = s.swarm.as_ref().unwrap();
            (p.viewers, p.light_peers)
        })
        .collect();
    assert_eq!(swarms, [(1, 0), (1, 3)]);
}

#[test]
fn a_sweep_needs_a_number_of_viewers_no_larger_than_its_smallest_size() {
    let dir = tempfile::tempdir().unwrap();
    let bad_input = |err: &anyhow::Error| {
        err.chain()
            .any(|c| c.downcast_ref::<SuiteError>().is_some())
    };
    let err = sweep(dir.path(), &["a"], &[], "1,4", Overrides::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("--swarm-sizes 1:")
            && text.contains("a.yaml runs 2 real viewers, more than a swarm of 1")
            && text.contains("sizes of at least 2"),
        "{text}"
    );
    assert!(bad_input(&err));
    let auto = Overrides {
        viewers: ViewersOverride::Auto { max: None },
        ..Overrides::default()
    };
    let err = sweep(dir.path(), &["a"], &[], "4", auto).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("--swarm-sizes keeps each scenario's real viewers")
            && text.contains("(--viewers auto)")
            && text.contains("give --viewers N instead"),
        "{text}"
    );
    assert!(bad_input(&err));
    let file = dir.path().join("c.yaml");
    std::fs::write(
        &file,
        format!("name: c\n{SCENARIO}").replace("count: 2", "count: auto"),
    )
    .unwrap();
    let sizes: SweepSizes = "4".parse().unwrap();
    let err = SuitePlan::sweep(
        &[file],
        &[],
        Some(&sizes),
        1,
        &dir.path().join("out"),
        Overrides::default(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("c.yaml: --swarm-sizes")
            && text.contains("(viewers.count: auto)")
            && text.contains("write a number in viewers.count, or give --viewers N"),
        "{text}"
    );
}

#[tokio::test]
async fn a_sweep_suite_compares_its_sizes_on_one_curve() {
    let dir = tempfile::tempdir().unwrap();
    let plan = sweep(dir.path(), &["a"], &[], "2,4", Overrides::default()).unwrap();
    let runner = StandIn {
        steps: Mutex::new(vec![Step::Finish; 2]),
        calls: Mutex::new(Vec::new()),
    };
    let result = run_suite(&plan, &runner, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    let curves = result.comparison.swarm_curves();
    assert_eq!(curves.len(), 1);
    let c = &curves[0];
    assert_eq!(c.name, "a");
    let points: Vec<(u32, f64, Option<f64>)> = c
        .points
        .iter()
        .map(|p| (p.swarm_size, p.bound, p.p2p_savings.map(|s| s.mean)))
        .collect();
    // The fixture's players saved 2/3 at T.
    assert_eq!(
        points,
        [(2, 0.5, Some(2.0 / 3.0)), (4, 0.75, Some(2.0 / 3.0))]
    );
    let md = std::fs::read_to_string(result.html.with_file_name("compare.md")).unwrap();
    assert!(md.contains("## P2P offload against swarm size"), "{md}");
    assert!(
        md.contains("| 4 (2 + 2) | 1 | 66.7% | 33.3% | 75.0% | NOT A FINDING: 4/4 starved |"),
        "{md}"
    );
    assert!(result
        .comparison
        .text()
        .contains("P2P offload against swarm size"));
}

#[test]
fn each_mode_is_a_run_of_its_own_named_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = scenarios(dir.path(), &["a", "b"]);
    let plan = SuitePlan::new(
        &files,
        &[Throttling::HttpOnly, Throttling::CdpAll],
        2,
        &dir.path().join("out"),
        Overrides::default(),
    )
    .unwrap();
    let names: Vec<String> = plan
        .runs()
        .iter()
        .map(|r| r.dir.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "a@http-only-1",
            "a@cdp-all-1",
            "b@http-only-1",
            "b@cdp-all-1",
            "a@http-only-2",
            "a@cdp-all-2",
            "b@http-only-2",
            "b@cdp-all-2"
        ]
    );
    assert!(plan.runs().iter().all(|r| r.overrides.apply.is_some()
        && r.name
            .ends_with(&format!("@{}", r.overrides.apply.unwrap()))));
}
