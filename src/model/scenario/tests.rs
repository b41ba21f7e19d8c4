//! Scenario validation: every field's bad values, unknown fields, bad YAML.

use super::*;

const GOOD: &str = "\
name: live-normal
target:
  kind: refsite
  video: live
  latency: normal
viewers:
  count: 8
  ramp: 30s
  p2p_off_share: 0.5
  network:
    download_kbps: 2000
    upload_kbps: 300
    latency_ms: 500
duration: 3m
sampling_interval: 2s
measure_at: 150s
steady_window: 30s
fleet:
  kind: local
";

fn parse_err(text: &str) -> ScenarioError {
    parse(text, "s.yaml", &Overrides::default()).expect_err("should be rejected")
}

#[test]
fn good_scenario_becomes_a_plan() {
    let plan = parse(GOOD, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!(plan.viewers, 8);
    assert_eq!(plan.measure_at.as_secs(), 150);
    let viewers = plan.viewer_plans();
    assert_eq!(viewers.iter().filter(|v| !v.p2p).count(), 4);
    assert_eq!(viewers.last().unwrap().start_after.as_secs(), 30);
    assert_eq!(viewers[0].start_after.as_secs(), 0);
}

#[test]
fn overrides_become_part_of_the_plan() {
    let over = Overrides {
        viewers: Some(3),
        duration: Some("20s".into()),
        ..Default::default()
    };
    let plan = parse(GOOD, "s.yaml", &over).unwrap();
    assert_eq!(plan.viewers, 3);
    assert_eq!(plan.duration.as_secs(), 20);
    // The timeline scales with the duration: ramp 30s of 3m becomes 20s * 30/180.
    assert_eq!(plan.ramp.as_millis(), 3333);
    assert!(plan.measure_at <= plan.duration);
    assert!(plan.yaml.contains("viewers.count = 3"));
}

#[test]
fn unknown_field_is_named_with_its_line() {
    let err = parse_err(&GOOD.replace("  ramp: 30s", "  rampe: 30s"));
    let text = err.to_string();
    assert!(text.contains("rampe"), "{text}");
    assert!(text.contains("s.yaml:8"), "{text}");
}

#[test]
fn unknown_top_level_field() {
    let err = parse_err(&format!("{GOOD}colour: blue\n"));
    assert!(err.to_string().contains("colour"), "{err}");
}

#[test]
fn bad_yaml_names_the_line() {
    let err = parse_err("name: x\ntarget: [\n");
    assert!(err.line.is_some(), "{err}");
}

#[test]
fn bad_values_name_field_and_fix() {
    let cases: &[(&str, &str, &str)] = &[
        ("  count: 8", "  count: 0", "viewers.count"),
        ("duration: 3m", "duration: soon", "duration"),
        ("  ramp: 30s", "  ramp: 10m", "viewers.ramp"),
        (
            "  p2p_off_share: 0.5",
            "  p2p_off_share: 1.5",
            "viewers.p2p_off_share",
        ),
        (
            "    upload_kbps: 300",
            "    upload_kbps: 0",
            "viewers.network.upload_kbps",
        ),
        (
            "    latency_ms: 500",
            "    latency_ms: 99999",
            "viewers.network.latency_ms",
        ),
        ("measure_at: 150s", "measure_at: 10m", "measure_at"),
        (
            "sampling_interval: 2s",
            "sampling_interval: 1ms",
            "sampling_interval",
        ),
        ("steady_window: 30s", "steady_window: 1s", "steady_window"),
        ("name: live-normal", "name: live normal/x", "name"),
        ("  kind: local", "  kind: moon", "fleet"),
        ("  video: live", "  video: podcast", "target.video"),
    ];
    for (from, to, field) in cases {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "case {from} did not apply");
        let err = parse_err(&text);
        assert!(
            err.field.starts_with(field) || err.to_string().contains(field),
            "{from} -> {to}: expected field {field}, got {err}"
        );
        assert!(err.line.is_some(), "{from} -> {to}: no line in {err}");
    }
}

#[test]
fn peertube_needs_url_and_refsite_rejects_it() {
    let err = parse_err(&GOOD.replace("kind: refsite", "kind: peertube"));
    assert!(err.message.contains("url"), "{err}");
    let err = parse_err(&GOOD.replace(
        "  latency: normal",
        "  latency: normal\n  url: http://x/w/1",
    ));
    assert_eq!(err.field, "target.url");
}

#[test]
fn latency_on_vod_is_rejected() {
    let err = parse_err(&GOOD.replace("video: live", "video: vod"));
    assert_eq!(err.field, "target.latency");
}

#[test]
fn failure_threshold_as_share() {
    let plan = parse(
        &format!("{GOOD}max_failed_viewers: \"25%\"\n"),
        "s.yaml",
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(plan.max_failed_viewers, 2);
    let err = parse_err(&format!("{GOOD}max_failed_viewers: \"lots\"\n"));
    assert_eq!(err.field, "max_failed_viewers");
}

#[test]
fn locate_follows_indentation() {
    assert_eq!(locate(GOOD, "viewers.network.upload_kbps"), Some(12));
    assert_eq!(locate(GOOD, "fleet.kind"), Some(19));
    assert_eq!(locate(GOOD, "viewers.nothing"), None);
}
