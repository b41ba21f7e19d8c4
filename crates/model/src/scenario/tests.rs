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
        viewers: ViewersOverride::Fixed(3),
        duration: Some(std::time::Duration::from_secs(20)),
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
fn light_peers_on_peertube_run_in_browser_pages_and_node_is_refused_with_the_fix() {
    let peertube = GOOD
        .replace("kind: refsite", "kind: peertube")
        .replace(
            "  latency: normal",
            "  latency: normal\n  url: http://x/w/1",
        )
        .replace("fleet:", "swarm:\n  light_peers: 30\nfleet:");
    let plan = parse(&peertube, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!(plan.light.as_ref().map(|l| l.peers), Some(30));
    let err =
        parse_err(&peertube.replace("  light_peers: 30", "  light_peers: 30\n  runtime: node"));
    assert_eq!(err.field, "swarm.runtime");
    assert!(err.message.contains("swarm.runtime: browser"), "{err}");
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

#[test]
fn negative_failure_threshold_names_its_line_and_both_forms() {
    let text = format!("{GOOD}max_failed_viewers: -1\n");
    let err = parse_err(&text);
    assert_eq!(err.field, "max_failed_viewers");
    assert_eq!(err.line, Some(text.lines().count()));
    assert!(err.message.contains("a count of viewers"), "{err}");
    assert!(err.message.contains("\"5%\""), "{err}");
    assert!(!err.to_string().contains("enum"), "{err}");
}

#[test]
fn serde_type_names_become_what_is_allowed() {
    let err = parse_err(&GOOD.replace("  count: 8", "  count: -3"));
    assert_eq!(err.field, "viewers.count");
    assert!(
        err.message
            .starts_with("-3 is negative; write a whole number of viewers (e.g. 16) or `auto`"),
        "{err}"
    );
    let err = parse_err(&GOOD.replace("fleet:\n  kind: local\n", "fleet: 3\n"));
    assert!(
        err.message
            .contains("`kind:` `local`, `netns`, `grid` or `hcloud`"),
        "{err}"
    );
    let err = parse_err("- just\n- a list\n");
    assert!(err.message.contains("the scenario's fields"), "{err}");
}

#[test]
fn fleet_fields_keep_their_name_and_line_with_kind_first_or_later() {
    let kind_first = GOOD.replace("  kind: local\n", "  kind: netns\n  target_port: 70000\n");
    let err = parse_err(&kind_first);
    assert_eq!(err.field, "fleet.target_port");
    assert_eq!(err.line, Some(20));
    let kind_later = GOOD.replace(
        "  kind: local\n",
        "  max_parallel_starts: 3\n  kind: local\n",
    );
    let plan = parse(&kind_later, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!(plan.fleet.kind(), crate::kinds::FleetKind::Local);
    let err = parse_err(&GOOD.replace("  kind: local\n", "  max_parallel_starts: 3\n"));
    assert!(err.message.contains("missing `kind:`"), "{err}");
}

#[test]
fn peertube_urls_need_a_video_path() {
    let peertube = |url: &str| {
        GOOD.replace("kind: refsite", "kind: peertube").replace(
            "  latency: normal",
            &format!("  latency: normal\n  url: {url}"),
        )
    };
    for ok in [
        "https://p.example/w/9c9de5e8-0a1e-484a-b099-e80766180a6d",
        "https://p.example/videos/watch/9c9de5e8-0a1e-484a-b099-e80766180a6d",
        "http://127.0.0.1:8080/videos/embed/abc",
    ] {
        parse(&peertube(ok), "s.yaml", &Overrides::default()).expect(ok);
    }
    let err = parse_err(&peertube("https://www.youtube.com/watch?v=dQw4w9WgXcQ"));
    assert_eq!(err.field, "target.url");
    assert!(err.message.contains("is a YouTube page"), "{err}");
    assert!(err.message.contains("/videos/embed/<uuid>"), "{err}");
    let err = parse_err(&peertube("https://p.example/about"));
    assert!(err.message.contains("its path is `/about`"), "{err}");
    let err = parse_err(&peertube("peertube.example/w/1"));
    assert!(err.message.contains("is not a URL"), "{err}");
}

#[test]
fn durations_are_bounded_before_they_reach_arithmetic() {
    let err = parse_err(&GOOD.replace("duration: 3m", "duration: 8d"));
    assert_eq!(err.field, "duration");
    assert!(err.message.contains("7days"), "{err}");
    // A tiny written duration scaled to a long one would overflow: an error, not a panic.
    let text = GOOD
        .replace("duration: 3m", "duration: 1ns")
        .replace("  ramp: 30s", "  ramp: 6d");
    let over = Overrides {
        duration: Some(std::time::Duration::from_secs(7 * 86400)),
        ..Default::default()
    };
    let err = parse(&text, "s.yaml", &over).expect_err("out of range");
    assert_eq!(err.field, "viewers.ramp");
}

#[test]
fn files_that_are_not_scenarios_are_refused_before_parsing() {
    let err = load(std::path::Path::new("/dev/zero"), &Overrides::default()).unwrap_err();
    assert_eq!(err.field, "(file)");
    assert!(err.message.contains("a character device"), "{err}");
    let deep = format!("name: {}", "[".repeat(100_000));
    let err = parse_err(&deep);
    assert_eq!(err.line, Some(1));
    assert!(err.message.contains("nesting level 33"), "{err}");
}

#[test]
fn count_auto_is_a_governed_ramp_with_a_maximum_and_a_limit() {
    let plan = parse(
        &GOOD.replace("count: 8", "count: auto"),
        "s.yaml",
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(plan.viewers, plan::AUTO_MAX_VIEWERS);
    assert_eq!(plan.auto.map(|a| a.cpu_below), Some(plan::AUTO_CPU_BELOW));
    let text = GOOD.replace(
        "count: 8",
        "count: auto\n  auto:\n    max: 24\n    cpu_below: 0.6",
    );
    let plan = parse(&text, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!((plan.viewers, plan.auto.unwrap().cpu_below), (24, 0.6));
    // `--viewers auto` over a count: the count is the maximum; `--viewers N` over auto: N.
    let auto = Overrides {
        viewers: ViewersOverride::Auto { max: None },
        ..Default::default()
    };
    let plan = parse(GOOD, "s.yaml", &auto).unwrap();
    assert_eq!((plan.viewers, plan.auto.is_some()), (8, true));
    assert!(plan.yaml.contains("viewers.count = auto (at most 8)"));
    let fixed = Overrides {
        viewers: ViewersOverride::Fixed(5),
        ..Default::default()
    };
    let plan = parse(&text, "s.yaml", &fixed).unwrap();
    assert_eq!((plan.viewers, plan.auto), (5, None));
}

#[test]
fn count_auto_refuses_what_it_cannot_do() {
    let err = parse_err(&GOOD.replace("count: 8", "count: lots"));
    assert!(err.message.contains("`auto`"), "{err}");
    let err = parse_err(&GOOD.replace("count: 8", "count: 8\n  auto:\n    max: 4"));
    assert_eq!(err.field, "viewers.auto", "{err}");
    let err = parse_err(&GOOD.replace("count: 8", "count: auto\n  auto:\n    cpu_below: 70"));
    assert_eq!(err.field, "viewers.auto.cpu_below", "{err}");
    assert!(err.message.contains("0.7 for 70%"), "{err}");
    let err = parse_err(&GOOD.replace("count: 8", "count: auto").replace(
        "  kind: local",
        "  kind: grid\n  url: http://127.0.0.1:4444/",
    ));
    assert_eq!(err.field, "viewers.count", "{err}");
    assert!(err.message.contains("runs its browsers elsewhere"), "{err}");
}

#[test]
fn max_viewers_bounds_a_governed_ramp_only() {
    let bounded = Overrides {
        viewers: ViewersOverride::Auto { max: Some(5) },
        ..Default::default()
    };
    let plan = parse(GOOD, "s.yaml", &bounded).unwrap();
    assert_eq!((plan.viewers, plan.auto.is_some()), (5, true));
    assert_eq!(
        bounded.flags(),
        ["--viewers", "auto", "--max-viewers", "5"].map(String::from)
    );
    let err = parse(
        GOOD,
        "s.yaml",
        &Overrides {
            viewers: ViewersOverride::AsWritten { max: Some(5) },
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.field, "--max-viewers", "{err}");
}

#[test]
fn thresholds_become_part_of_the_plan_in_the_files_order() {
    let text = format!(
        "{GOOD}thresholds:\n  ttff_p95: \"< 15s\"\n  players.p2p_savings_at_t: \">= 60%\"\n  failed_viewers: <= 2\n  headroom: finding\n"
    );
    let plan = parse(&text, "s.yaml", &Overrides::default()).unwrap();
    let keys: Vec<String> = plan
        .thresholds
        .iter()
        .map(|t| format!("{} {}", t.key(), t.condition))
        .collect();
    assert_eq!(
        keys,
        [
            "ttff_p95 < 15s",
            "players.p2p_savings_at_t >= 60%",
            "failed_viewers <= 2",
            "headroom finding"
        ]
    );
    assert!(parse(GOOD, "s.yaml", &Overrides::default())
        .unwrap()
        .thresholds
        .is_empty());
}

#[test]
fn a_bad_threshold_names_its_line_the_metric_and_what_is_allowed() {
    let line = GOOD.lines().count() + 4;
    let text = format!(
        "{GOOD}thresholds:\n  ttff_p95: \"< 15s\"\n  stalls_per_viewer_minute: \"< 0.5\"\n  http_share_at_t: \"< 0.4\"\n"
    );
    let err = parse_err(&text);
    assert_eq!(err.line, Some(line), "{err}");
    assert_eq!(err.field, "thresholds.http_share_at_t", "{err}");
    assert!(
        err.message.contains("a share in %, e.g. \"< 40%\""),
        "{err}"
    );

    let text = format!("{GOOD}thresholds:\n  ttff_p95: \"< 15s\"\n  p95_ttff: \"< 15s\"\n");
    let err = parse_err(&text);
    assert_eq!(err.line, Some(GOOD.lines().count() + 3), "{err}");
    assert!(
        err.message.contains("`p95_ttff` is not a metric")
            && err.message.contains("`ttff_p95`")
            && err.message.contains("`starved_viewers`"),
        "{err}"
    );
    // A plain number has no comparison.
    let err = parse_err(&format!("{GOOD}thresholds:\n  ttff_p95: 15\n"));
    assert!(err.message.contains("has no comparison"), "{err}");
    assert!(!err.message.contains("Condition"), "{err}");
    // Unquoted `>=` starts a YAML block scalar: refused, with the line.
    let err = parse_err(&format!("{GOOD}thresholds:\n  p2p_savings_at_t: >= 60%\n"));
    assert_eq!(err.line, Some(GOOD.lines().count() + 2), "{err}");
    assert!(err.message.contains("quote it"), "{err}");
    let err = parse_err(&format!(
        "{GOOD}thresholds:\n  ttff_p95: \"< 15s\"\n  ttff_p95: \"< 10s\"\n"
    ));
    assert!(err.to_string().contains("ttff_p95"), "{err}");
}

#[test]
fn a_grid_fleet_keeps_enough_starts_in_flight_for_its_ramp() {
    let grid = |extra: &str| {
        let text = GOOD
            .replace("count: 8", "count: 1000")
            .replace("ramp: 30s", "ramp: 120s")
            .replace(
                "  kind: local\n",
                &format!("  kind: grid\n  url: http://127.0.0.1:4444/\n{extra}"),
            );
        match parse(&text, "s.yaml", &Overrides::default()).unwrap().fleet {
            fleet::FleetPlan::Grid(g) => g.max_parallel_starts,
            other => panic!("{other:?}"),
        }
    };
    // 1000 viewers in 120 s: 8.3 a second, each holding its permit 16 s.
    assert_eq!(grid(""), 134);
    assert_eq!(grid("  max_parallel_starts: 8\n"), 8);
    assert_eq!(
        fleet::grid::parallel_starts_for(3, std::time::Duration::from_secs(60)),
        4
    );
    assert_eq!(
        fleet::grid::parallel_starts_for(100_000, std::time::Duration::ZERO),
        256
    );
}

#[test]
fn canary_applies_to_cloud_fleets_only() {
    let err = parse(
        GOOD,
        "s.yaml",
        &Overrides {
            canary: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.field, "--canary", "{err}");
    assert!(err.message.contains("fleet: kind: hcloud"), "{err}");
}

const MIX: &str = "\
name: internet-mix
target:
  kind: refsite
  video: live
viewers:
  count: 10
  ramp: 30s
  networks:
    - share: 0.5
      profile: fibre
      nat: home
    - share: 0.3
      profile: dsl
      nat: home
      stack: ipv4
    - share: 0.2
      profile: mobile-4g
      nat: cgnat
duration: 3m
fleet:
  kind: netns
";

#[test]
fn a_network_mix_assigns_classes_by_their_shares() {
    let plan = parse(MIX, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!(plan.networks.len(), 3);
    let viewers = plan.viewer_plans();
    let count = |k: u32| viewers.iter().filter(|v| v.access.class == Some(k)).count();
    assert_eq!((count(0), count(1), count(2)), (5, 3, 2));
    let dsl = viewers.iter().find(|v| v.access.class == Some(1)).unwrap();
    assert_eq!(dsl.access.nat, crate::kinds::NatKind::Home);
    assert_eq!(dsl.access.stack, Some(crate::kinds::IpStack::Ipv4));
    // The library's link, applied with tc on the netns fleet.
    let profile = dsl.network.unwrap();
    assert_eq!(
        (profile.link.download_kbps, profile.link.upload_kbps),
        (Some(10_000), Some(1_000))
    );
    assert_eq!(profile.apply, Some(crate::kinds::Throttling::Tc));
    match &plan.fleet {
        fleet::FleetPlan::Netns(n) => assert!(n.internet),
        other => panic!("{other:?}"),
    }
    // --apply reaches the mix too.
    let over = Overrides {
        apply: Some(Throttling::HttpOnly),
        ..Default::default()
    };
    let plan = parse(MIX, "s.yaml", &over).unwrap();
    assert!(plan
        .networks
        .iter()
        .all(|c| c.profile.unwrap().apply == Some(Throttling::HttpOnly)));
}

#[test]
fn a_network_mix_is_refused_where_it_cannot_be_emulated_or_does_not_add_up() {
    let err = parse_err(&MIX.replace("kind: netns", "kind: local"));
    assert_eq!(err.field, "viewers.networks[0].nat");
    assert!(err.message.contains("kind: netns"), "{err}");
    let err = parse_err(&MIX.replace("share: 0.2", "share: 0.3"));
    assert_eq!(err.field, "viewers.networks");
    assert!(err.message.contains("add up to 1.100"), "{err}");
    let err = parse_err(&MIX.replace("profile: dsl", "profile: dialup"));
    assert_eq!(err.field, "viewers.networks[1].profile");
    let err = parse_err(&MIX.replace(
        "  networks:",
        "  network: {download_kbps: 2000}\n  networks:",
    ));
    assert_eq!(err.field, "viewers.networks");
    assert!(err.message.contains("shorthand"), "{err}");
    // Public viewers with both families need no emulation: any fleet takes them.
    let public =
        "  networks:\n    - {share: 1, profile: {download_kbps: 2000, upload_kbps: 300}}\n";
    let text = GOOD.replace(
        "  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\n",
        public,
    );
    let plan = parse(&text, "s.yaml", &Overrides::default()).unwrap();
    assert_eq!(plan.networks[0].name, "link/none");
}

#[test]
fn the_shorthand_is_a_two_class_mix_of_public_viewers_assigned_as_before() {
    let text = GOOD.replace(
        "    latency_ms: 500\n",
        "    latency_ms: 500\n  alt_network:\n    share: 0.25\n    profile: {download_kbps: 20000, upload_kbps: 5000}\n",
    );
    let plan = parse(&text, "s.yaml", &Overrides::default()).unwrap();
    assert!(plan.networks_from_shorthand && !plan.emulates_internet());
    let names: Vec<&str> = plan.networks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["network", "alt_network"]);
    let viewers = plan.viewer_plans();
    // Every fourth viewer (3, 7) has the alternative link, as `alt_network` always picked.
    let alt: Vec<u32> = viewers
        .iter()
        .filter(|v| v.access.class == Some(1))
        .map(|v| v.index)
        .collect();
    assert_eq!(alt, [3, 7]);
    assert_eq!(viewers[3].network.unwrap().link.download_kbps, Some(20_000));
    assert_eq!(viewers[3].access.nat, crate::kinds::NatKind::None);
    assert_eq!(viewers[3].access.stack, None);
}

#[test]
fn under_tc_the_scenarios_packing_is_not_applied_unless_asked_on_the_command_line() {
    let packed = GOOD
        .replace("  p2p_off_share: 0.5\n", "  per_browser: 4\n")
        .replace("  kind: local\n", "  kind: netns\n");
    let over = |apply: Throttling, per_browser: Option<u32>| Overrides {
        apply: Some(apply),
        per_browser,
        ..Default::default()
    };
    // The 2023 conditions (WebRTC not shaped): packed as written.
    let plan = parse(&packed, "s.yaml", &over(Throttling::HttpOnly, None)).unwrap();
    assert_eq!((plan.per_browser, plan.per_browser_not_applied), (4, None));
    // tc: one viewer per browser, and the plan says which value it left out.
    let plan = parse(&packed, "s.yaml", &over(Throttling::Tc, None)).unwrap();
    assert_eq!(
        (plan.per_browser, plan.per_browser_not_applied),
        (1, Some(4))
    );
    assert!(plan.yaml.contains("Not applied: viewers.per_browser = 4"));
    // `--per-browser` packs a tc run on purpose.
    let plan = parse(&packed, "s.yaml", &over(Throttling::Tc, Some(2))).unwrap();
    assert_eq!((plan.per_browser, plan.per_browser_not_applied), (2, None));
}

#[test]
fn under_tc_light_peers_get_a_page_and_a_link_each() {
    let swarm = GOOD
        .replace("  kind: local\n", "  kind: netns\n")
        .replace("fleet:", "swarm:\n  light_peers: 6\n  per_page: 3\nfleet:");
    let with = |apply: Throttling| Overrides {
        apply: Some(apply),
        ..Default::default()
    };
    // The 2023 conditions (WebRTC not shaped): pages as written.
    let plan = parse(&swarm, "s.yaml", &with(Throttling::HttpOnly)).unwrap();
    let light = plan.light.unwrap();
    assert_eq!((light.per_page, light.per_page_not_applied), (3, None));
    assert_eq!(light.groups().len(), 2);
    // tc: one light peer per page, so P2P between them crosses their shaped links.
    let plan = parse(&swarm, "s.yaml", &with(Throttling::Tc)).unwrap();
    let light = plan.light.as_ref().unwrap();
    assert_eq!((light.per_page, light.per_page_not_applied), (1, Some(3)));
    assert_eq!(light.groups().len(), 6);
    assert!(
        light.describe().contains("one per page under tc"),
        "{}",
        light.describe()
    );
    assert!(
        plan.yaml.contains("Not applied: swarm.per_page = 3"),
        "{}",
        plan.yaml
    );
}

#[test]
fn abort_on_fail_is_refused_where_it_could_never_be_judged_while_the_run_goes() {
    let err = parse_err(&format!(
        "{GOOD}thresholds:\n  failed_viewers:\n    - condition: \"<= 0\"\n      abort_on_fail: true\n      delay_abort_eval: 7d\n"
    ));
    assert_eq!(err.field, "thresholds.failed_viewers", "{err}");
    assert!(err.message.contains("not shorter than the run"), "{err}");
    let err = parse_err(&format!(
        "{GOOD}thresholds:\n  ttff:\n    - condition: \"p95 < 4s\"\n      abort_on_fail: true\n"
    ));
    assert!(
        err.message.contains(
            "abort_on_fail is not available for metric `ttff_p95`: it is only known after the run"
        ),
        "{err}"
    );
    assert!(err.line.is_some(), "{err}");
    let plan = parse(
        &format!(
            "{GOOD}thresholds:\n  failed_viewers:\n    - condition: \"<= 0\"\n      abort_on_fail: true\n      delay_abort_eval: 10s\n    - \"< 50%\"\n"
        ),
        "s.yaml",
        &Overrides::default(),
    )
    .unwrap();
    let aborts: Vec<bool> = plan.thresholds.iter().map(|t| t.abort.is_some()).collect();
    assert_eq!(aborts, [true, false]);
}
