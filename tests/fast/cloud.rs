//! Hetzner Cloud fleets against the fake API (kit/src/fake_hcloud.rs), in-process: what the
//! requests carry, teardown on every exit path, gc, pagination and retries, `plan` figures,
//! cloud-init validity and the Terraform module's declarations.

use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use viewerfleet::cloud::api::HcloudApi;
use viewerfleet::cloud::token::ApiToken;
use viewerfleet::cloud::up::{CloudFleet, UpOptions};
use viewerfleet::cloud::{cloudinit, gc, guard, pricing, provision, sizing, CloudError};
use viewerfleet::fleet::hcloud::HcloudFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::scenario::{self, Overrides, Plan};
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud};

const TOKEN: &str = "test-token-5f1d9c0e7a";

async fn fake(config: FakeConfig) -> (FakeHcloud, HcloudApi) {
    let config = FakeConfig {
        token: Some(TOKEN.into()),
        ..config
    };
    let fake = FakeHcloud::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut api = HcloudApi::new(&fake.endpoint(), &ApiToken::new(TOKEN).unwrap());
    api.poll_interval = Duration::from_millis(10);
    api.backoff = Duration::from_millis(20);
    (fake, api)
}

fn ssh_key_file() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        f.path(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKeyForViewerfleet test@example\n",
    )
    .unwrap();
    f
}

/// A scenario with `fleet: kind: hcloud`; `fleet_extra` is appended under `fleet:`.
fn plan(viewers: u32, key: &std::path::Path, fleet_extra: &str) -> Plan {
    let yaml = format!(
        "name: cloud-test\ntarget:\n  kind: peertube\n  video: live\n  url: https://peertube.example/w/x\nviewers:\n  count: {viewers}\n  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx32\n  viewers_per_node: 4\n{fleet_extra}",
        key.display()
    );
    scenario::parse(&yaml, "test.yaml", &Overrides::default()).unwrap()
}

fn spec(plan: &Plan) -> viewerfleet::model::scenario::fleet::HcloudFleetSpec {
    match &plan.fleet {
        viewerfleet::model::scenario::fleet::FleetPlan::Hcloud(s) => (**s).clone(),
        _ => unreachable!(),
    }
}

fn opts(fake: &FakeHcloud) -> UpOptions {
    UpOptions {
        keep: false,
        viewer_slots_script: Some("#!/bin/sh\necho viewer slots \"$@\"\n".into()),
        hub_poll: Some(Duration::from_millis(50)),
        hub_url: Some(fake.hub_url()),
    }
}

fn run_servers(fake: &FakeHcloud) -> Vec<Value> {
    fake.state.servers_matching("viewerfleet-run")
}

fn posts(fake: &FakeHcloud, path: &str) -> Vec<Value> {
    fake.state
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == path)
        .map(|r| r.body)
        .collect()
}

fn rule<'a>(rules: &'a Value, port: &str) -> &'a Value {
    rules
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["port"] == port)
        .unwrap_or_else(|| panic!("no rule for port {port} in {rules}"))
}

#[tokio::test]
async fn success_requests_carry_ipv6_only_labels_user_data_firewalls_and_shutdown_deletes_all() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let plan = plan(10, key.path(), "  register_timeout: 5s\n");
    let cancel = CancellationToken::new();
    let fleet = CloudFleet::up(&api, &plan, &spec(&plan), opts(&fake), &cancel)
        .await
        .unwrap();
    assert_eq!(fleet.nodes.len(), 3, "10 viewers at 4 per node");
    assert_eq!(fleet.capacity(), 12);

    let servers = posts(&fake, "/v1/servers");
    assert_eq!(servers.len(), 4);
    let hub = servers
        .iter()
        .find(|s| s["labels"]["viewerfleet-role"] == "hub")
        .unwrap();
    assert_eq!(
        hub["public_net"],
        json!({"enable_ipv4": true, "enable_ipv6": true})
    );
    let hub_v6 = fleet.hub.ipv6_host().unwrap().to_string();
    for node in servers
        .iter()
        .filter(|s| s["labels"]["viewerfleet-role"] == "node")
    {
        assert_eq!(
            node["public_net"],
            json!({"enable_ipv4": false, "enable_ipv6": true}),
            "nodes are IPv6-only"
        );
        assert_eq!(node["labels"]["viewerfleet-run"], fleet.run_id.as_str());
        assert_eq!(node["labels"]["viewerfleet-scenario"], "cloud-test");
        let expires: i64 = node["labels"]["viewerfleet-expires"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            expires > chrono::Utc::now().timestamp() + 3600,
            "expiry covers the run and the TTL"
        );
        assert_eq!(node["server_type"], "cx32");
        assert_eq!(node["location"], "fsn1");
        assert_eq!(node["image"], "debian-12");
        assert_eq!(node["ssh_keys"].as_array().unwrap().len(), 1);
        let ud = node["user_data"].as_str().unwrap();
        assert!(ud.starts_with("#cloud-config\n"));
        assert!(
            ud.contains(&format!("HUB_ADDR=[{hub_v6}]")),
            "node user data names the hub"
        );
        assert!(ud.contains("MAX_SESSIONS=4"));
        assert!(
            ud.contains("SLOT_DOWN_KBIT=2000")
                && ud.contains("SLOT_UP_KBIT=300")
                && ud.contains("SLOT_DELAY_MS=500")
        );
        let files = cloudinit::delivered_files(ud).unwrap();
        assert!(
            files
                .iter()
                .any(|(p, c)| p == "/usr/local/lib/viewerfleet/viewer-slots.sh"
                    && c.contains("echo viewer slots")),
            "viewer-slot script delivered"
        );
        assert!(files
            .iter()
            .any(|(p, _)| p == "/usr/local/lib/viewerfleet/slot-chromium.sh"));
        assert!(!ud.contains(TOKEN));
    }
    assert!(hub["user_data"].as_str().unwrap().contains("ROLE=hub"));

    // Firewalls: controller → hub 4444 and 22 only; hub → nodes 5555 only; nodes → hub bus.
    let firewalls = posts(&fake, "/v1/firewalls");
    let hub_fw = firewalls
        .iter()
        .find(|f| f["name"].as_str().unwrap().ends_with("-hub"))
        .unwrap();
    assert_eq!(
        rule(&hub_fw["rules"], "4444")["source_ips"],
        json!(["198.51.100.7/32"])
    );
    assert_eq!(
        rule(&hub_fw["rules"], "22")["source_ips"],
        json!(["198.51.100.7/32"])
    );
    let node_fw = firewalls
        .iter()
        .find(|f| f["name"].as_str().unwrap().ends_with("-nodes"))
        .unwrap();
    assert_eq!(
        rule(&node_fw["rules"], "5555")["source_ips"],
        json!([fleet.hub.ipv6_net.clone().unwrap()])
    );
    assert_eq!(
        rule(&node_fw["rules"], "22")["source_ips"],
        json!(["198.51.100.7/32"])
    );
    let set = fake
        .state
        .recorded()
        .into_iter()
        .find(|r| r.path.ends_with("/actions/set_rules"))
        .unwrap();
    let bus = rule(&set.body["rules"], "4442-4443");
    let mut nets: Vec<String> = fleet
        .nodes
        .iter()
        .map(|n| n.ipv6_net.clone().unwrap())
        .collect();
    let mut got: Vec<String> = bus["source_ips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    nets.sort();
    got.sort();
    assert_eq!(got, nets, "only the nodes reach the event bus");
    for n in posts(&fake, "/v1/servers")
        .iter()
        .filter(|s| s["labels"]["viewerfleet-role"] == "node")
    {
        assert_eq!(n["firewalls"].as_array().unwrap().len(), 1);
    }

    // Slots point at the hub; beyond capacity is an error naming it.
    let fleet = HcloudFleet::new(fleet);
    let viewers = plan.viewer_plans();
    let slot = fleet.open_viewer(&viewers[9]).await.unwrap();
    assert_eq!(slot.webdriver_url, fake.hub_url());
    let mut beyond = viewers[9].clone();
    beyond.index = 12;
    assert!(fleet
        .open_viewer(&beyond)
        .await
        .unwrap_err()
        .to_string()
        .contains("holds 12 viewers"));
    let desc = fleet.description(&plan);
    assert_eq!(desc.kind, viewerfleet::model::kinds::FleetKind::Hcloud);
    assert!(
        !format!("{fleet:?} {desc:?}").contains(TOKEN),
        "token never in Debug output"
    );

    assert_eq!(run_servers(&fake).len(), 4);
    fleet.shutdown().await.unwrap();
    fleet.shutdown().await.unwrap(); // idempotent
    assert!(
        run_servers(&fake).is_empty(),
        "success: zero servers of the run"
    );
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
}

#[tokio::test]
async fn error_during_provisioning_deletes_what_was_created() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let plan = plan(8, key.path(), "");
    // A viewer-slot script too big for Hetzner's 32 KiB user data even gzip-compressed
    // (pseudo-random text): fails after the hub exists.
    let mut o = opts(&fake);
    let mut x: u32 = 1;
    let noise: String = (0..48 * 1024)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            char::from(b'!' + ((x >> 16) % 90) as u8)
        })
        .collect();
    o.viewer_slots_script = Some(format!("#!/bin/sh\n# {noise}\n"));
    let err = CloudFleet::up(&api, &plan, &spec(&plan), o, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("32 KiB"), "{err}");
    assert_eq!(
        posts(&fake, "/v1/servers").len(),
        1,
        "the hub was created before the error"
    );
    assert!(
        run_servers(&fake).is_empty(),
        "error: zero servers of the run"
    );
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
}

#[tokio::test]
async fn resource_limit_exceeded_at_server_k_of_n_tears_down_or_runs_with_what_exists() {
    // Limit 3: the hub and 2 of the 4 nodes fit.
    let (fake, api) = fake(FakeConfig {
        server_limit: 3,
        ..FakeConfig::default()
    })
    .await;
    let key = ssh_key_file();
    let plan1 = plan(16, key.path(), "  parallel_creates: 1\n");
    let err = CloudFleet::up(
        &api,
        &plan1,
        &spec(&plan1),
        opts(&fake),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CloudError::LimitExceeded { .. }), "{err}");
    assert!(err.to_string().contains("node 3 of 4"), "{err}");
    assert!(err.to_string().contains("request an increase"), "{err}");
    assert!(
        run_servers(&fake).is_empty(),
        "limit: zero servers of the run"
    );

    let plan2 = plan(
        16,
        key.path(),
        "  parallel_creates: 1\n  on_limit: run_with_what_exists\n",
    );
    let fleet = CloudFleet::up(
        &api,
        &plan2,
        &spec(&plan2),
        opts(&fake),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(fleet.nodes.len(), 2);
    assert!(fleet
        .shortfall
        .as_deref()
        .unwrap()
        .contains("resource_limit_exceeded"));
    let fleet = HcloudFleet::new(fleet);
    assert!(fleet
        .description(&plan2)
        .notes
        .iter()
        .any(|n| n.contains("running with 2 nodes")));
    fleet.shutdown().await.unwrap();
    assert!(run_servers(&fake).is_empty());
}

#[tokio::test]
async fn nodes_that_never_register_are_dropped_and_then_everything_goes() {
    let (fake, api) = fake(FakeConfig {
        node_boot: None,
        ..FakeConfig::default()
    })
    .await;
    let key = ssh_key_file();
    let plan = plan(
        8,
        key.path(),
        "  register_timeout: 300ms\n  on_node_failure: replace\n",
    );
    let err = CloudFleet::up(
        &api,
        &plan,
        &spec(&plan),
        opts(&fake),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("register"), "{err}");
    let nodes_created = posts(&fake, "/v1/servers")
        .iter()
        .filter(|s| s["labels"]["viewerfleet-role"] == "node")
        .count();
    assert_eq!(nodes_created, 4, "2 nodes, then 2 replacements");
    assert!(run_servers(&fake).is_empty());
}

#[tokio::test]
async fn cancel_while_waiting_for_nodes_tears_down() {
    let (fake, api) = fake(FakeConfig {
        node_boot: None,
        ..FakeConfig::default()
    })
    .await;
    let key = ssh_key_file();
    let plan = plan(8, key.path(), "  register_timeout: 10m\n");
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let state = fake.state.clone();
    tokio::spawn(async move {
        // Cancel once both nodes exist (the fleet is then waiting for registration).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while state.servers_matching("viewerfleet-role=node").len() < 2
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        c.cancel();
    });
    let err = CloudFleet::up(&api, &plan, &spec(&plan), opts(&fake), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Cancelled), "{err}");
    assert!(run_servers(&fake).is_empty());
}

#[tokio::test]
async fn panic_during_provisioning_tears_down() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let p = plan(8, key.path(), "");
    let req = provision::ProvisionRequest {
        run_id: provision::new_run_id("panic-test"),
        scenario: "panic-test".into(),
        location: "fsn1".into(),
        image: "debian-12".into(),
        hub_type: "cx32".into(),
        node_type: "cx32".into(),
        nodes: 2,
        viewers_per_node: 4,
        expires_at: chrono::Utc::now().timestamp() + 3600,
        ssh_public_key: std::fs::read_to_string(key.path()).unwrap(),
        controller_ips: spec(&p).controller_ips,
        shaping: Default::default(),
        viewer_slots_script: None,
        parallel_creates: 2,
    };
    let (api2, req2) = (api.clone(), req.clone());
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let result: Result<(), CloudError> =
        guard::teardown_unless_ok(&api, &req.run_id, &cancel, async move {
            let (hub, _fw, key) = provision::create_hub(&api2, &req2, &c2).await?;
            let fw = 0;
            let _ = (hub, fw, key);
            panic!("injected bug after the hub was created");
        })
        .await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, CloudError::Panicked(ref m) if m.contains("injected bug")),
        "{err}"
    );
    assert_eq!(posts(&fake, "/v1/servers").len(), 1);
    assert!(
        run_servers(&fake).is_empty(),
        "panic: zero servers of the run"
    );
}

#[tokio::test]
async fn gc_removes_planted_orphans_and_nothing_else() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let past = (chrono::Utc::now().timestamp() - 60).to_string();
    let future = (chrono::Utc::now().timestamp() + 3600).to_string();
    let orphan = json!({"viewerfleet-run": "crashed-1", "viewerfleet-role": "node", "viewerfleet-expires": past});
    fake.state.plant_server("vf-crashed-1-hub", orphan.clone());
    fake.state
        .plant_server("vf-crashed-1-node-001", orphan.clone());
    fake.state
        .plant_firewall("vf-crashed-1-nodes", orphan.clone());
    fake.state.plant_ssh_key("vf-crashed-1", orphan);
    let live = json!({"viewerfleet-run": "running-2", "viewerfleet-expires": future});
    fake.state
        .plant_server("vf-running-2-node-001", live.clone());
    fake.state.plant_firewall("vf-running-2-nodes", live);
    fake.state
        .plant_server("someone-elses-database", json!({"app": "db"}));
    fake.state.plant_ssh_key("admin", json!({}));
    let terraform = json!({"viewerfleet-run": "tf-3", "viewerfleet-managed-by": "terraform", "viewerfleet-expires": past});
    fake.state.plant_server("vf-tf-3-node-001", terraform);

    let (runs, deleted) = gc::gc(&api, None, true).await.unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run.as_str()).collect::<Vec<_>>(),
        vec!["crashed-1"]
    );
    assert!(deleted.servers.is_empty(), "dry run deletes nothing");
    assert_eq!(fake.state.servers().len(), 5);

    let (_, deleted) = gc::gc(&api, None, false).await.unwrap();
    let mut gone = deleted.servers.clone();
    gone.sort();
    assert_eq!(gone, vec!["vf-crashed-1-hub", "vf-crashed-1-node-001"]);
    assert_eq!(deleted.firewalls, vec!["vf-crashed-1-nodes"]);
    assert_eq!(deleted.ssh_keys, vec!["vf-crashed-1"]);
    let mut left: Vec<String> = fake
        .state
        .servers()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "someone-elses-database",
            "vf-running-2-node-001",
            "vf-tf-3-node-001"
        ]
    );
    assert_eq!(fake.state.firewalls().len(), 1);
    assert_eq!(fake.state.ssh_keys().len(), 1);

    // --older-than takes runs still within their TTL.
    let (_, deleted) = gc::gc(&api, Some(Duration::ZERO), false).await.unwrap();
    assert_eq!(deleted.servers, vec!["vf-running-2-node-001"]);
    assert_eq!(fake.state.servers().len(), 2);
}

#[tokio::test]
async fn pagination_rate_limits_and_transient_errors_are_handled() {
    let (fake, mut api) = fake(FakeConfig {
        rate_limit: 15,
        rate_window: Duration::from_millis(300),
        fail_every: 5,
        ..FakeConfig::default()
    })
    .await;
    // Ten deletions in parallel compete for 15 requests per 300 ms, one in five failing:
    // give each request room to retry (the default suits Hetzner's 3600 requests/hour).
    api.attempts = 30;
    api.max_backoff = Duration::from_millis(400);
    for i in 0..60 {
        fake.state
            .plant_server(&format!("s{i}"), json!({"viewerfleet-run": "many"}));
    }
    let listed = provision::list_servers(&api, Some("viewerfleet-run=many"))
        .await
        .unwrap();
    assert_eq!(listed.len(), 60, "two pages of 50");
    let deleted = provision::teardown(&api, "many").await.unwrap();
    assert_eq!(deleted.servers.len(), 60);
    assert!(fake.state.servers().is_empty());
    let (limited, transient) = fake.state.injected_failures();
    assert!(
        limited > 0 && transient > 0,
        "the fake did inject 429s ({limited}) and 503s ({transient})"
    );
}

#[tokio::test]
async fn wrong_token_is_a_clear_error() {
    let (fake, _) = fake(FakeConfig::default()).await;
    let api = HcloudApi::new(&fake.endpoint(), &ApiToken::new("wrong").unwrap());
    let err = pricing::fetch(&api, "fsn1").await.unwrap_err();
    assert!(matches!(err, CloudError::Unauthorized), "{err}");
    assert!(err.to_string().contains("HCLOUD_TOKEN"));
}

/// The four PeerTube 1000-viewer scenarios against the fake's prices.
#[tokio::test]
async fn plan_sizes_the_four_1000_viewer_scenarios_from_fake_pricing() {
    let (_fake, api) = fake(FakeConfig::default()).await;
    let cat = pricing::fetch(&api, "fsn1").await.unwrap();
    assert_eq!(cat.currency, "EUR");
    let hub = cat.offer("cx32").unwrap().hourly_net;
    let ipv4 = cat.ipv4_hourly_net;
    assert!((ipv4 - 0.5 / 730.0).abs() < 1e-6);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/peertube-1000");
    for (file, nodes, node_type, per_node) in [
        ("live-normal.yaml", 63, "cx32", 16),
        ("live-high.yaml", 63, "cx32", 16),
        ("live-high-half-p2p-off.yaml", 63, "cx32", 16),
        ("vod.yaml", 84, "cx52", 12),
    ] {
        let plan = scenario::load(&root.join(file), &Overrides::default()).unwrap();
        let spec = spec(&plan);
        let p = sizing::plan(&spec, plan.viewers, plan.duration, &cat).unwrap();
        assert_eq!(
            (
                p.chosen.nodes,
                p.chosen.offer.name.as_str(),
                p.chosen.viewers_per_node
            ),
            (nodes, node_type, per_node),
            "{file}"
        );
        let node_price = cat.offer(node_type).unwrap().hourly_net;
        let expected = nodes as f64 * node_price + hub + ipv4;
        assert!(
            (p.hourly_net - expected).abs() < 1e-9,
            "{file}: {} vs {expected}",
            p.hourly_net
        );
        assert_eq!(
            p.billed_hours, 1,
            "{file}: 10 min provisioning + 10 min run"
        );
        assert!(p.over_limit(), "{file}: above a new project's 10 servers");
        let mut out = Vec::new();
        sizing::render(&mut out, file, &p, &spec.budget).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!("nodes: {nodes} × {node_type}")),
            "{text}"
        );
        assert!(
            text.contains("WARNING") && text.contains("resource_limit_exceeded"),
            "{text}"
        );
    }
}

#[test]
fn cloud_init_user_data_validates_with_cloud_init_schema() {
    let dir = tempfile::tempdir().unwrap();
    let roles = [
        ("hub", cloudinit::Role::Hub),
        (
            "node",
            cloudinit::Role::Node {
                hub_addr: "[2001:db8::1]".into(),
                max_sessions: 16,
                shaping: cloudinit::SlotShaping {
                    down_kbit: Some(2000),
                    up_kbit: Some(300),
                    delay_ms: Some(500),
                },
            },
        ),
    ];
    for (name, role) in roles {
        let text = cloudinit::user_data(&role, Some("#!/bin/sh\nset -eu\necho \"$@\"\n")).unwrap();
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, &text).unwrap();
        let out = std::process::Command::new("cloud-init")
            .args(["schema", "--config-file"])
            .arg(&path)
            .output()
            .expect("cloud-init is installed");
        assert!(
            out.status.success(),
            "{name}: {}\n{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let parsed: Value = yaml_serde::from_str(&text).unwrap();
        let files = cloudinit::delivered_files(&text).unwrap();
        let bootstrap = files
            .iter()
            .find(|(p, _)| p == "/usr/local/lib/viewerfleet/node-bootstrap.sh")
            .unwrap();
        assert_eq!(bootstrap.1, include_str!("../../grid/node-bootstrap.sh"));
        assert_eq!(
            parsed["runcmd"],
            json!([["/usr/local/lib/viewerfleet/node-bootstrap.sh"]])
        );
    }
}

#[test]
fn grid_node_config_is_offline_safe() {
    let toml = include_str!("../../grid/node.toml");
    for needle in [
        "detect-drivers = false",
        "selenium-manager = false",
        "[[node.driver-configuration]]",
        "webdriver-executable = \"/usr/bin/chromedriver\"",
        "goog:chromeOptions",
    ] {
        assert!(toml.contains(needle), "node.toml lacks {needle}");
    }
    let bootstrap = include_str!("../../grid/node-bootstrap.sh");
    assert!(bootstrap.contains("@nightwatch/selenium-server@4.20.0"));
    assert!(
        bootstrap.contains("viewer-slots.sh")
            && bootstrap.contains("--prefix")
            && bootstrap.contains("--count")
    );
    let sh = std::process::Command::new("sh")
        .args([
            "-n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/grid/node-bootstrap.sh"),
        ])
        .status()
        .unwrap();
    assert!(sh.success(), "node-bootstrap.sh has a syntax error");
}

mod terraform {
    use hcl_edit::expr::Expression;
    use hcl_edit::structure::{Block, Body};

    fn body(file: &str) -> Body {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("terraform")
            .join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        hcl_edit::parser::parse_body(&text).unwrap_or_else(|e| panic!("{file} does not parse: {e}"))
    }

    fn blocks<'a>(body: &'a Body, ident: &str) -> Vec<&'a Block> {
        body.blocks()
            .filter(|b| b.ident.as_str() == ident)
            .collect()
    }

    fn labels(b: &Block) -> Vec<String> {
        b.labels.iter().map(|l| l.as_str().to_string()).collect()
    }

    fn resource<'a>(body: &'a Body, kind: &str, name: &str) -> &'a Block {
        blocks(body, "resource")
            .into_iter()
            .find(|b| labels(b) == [kind, name])
            .unwrap_or_else(|| panic!("no resource {kind}.{name}"))
    }

    fn attr(b: &Body, key: &str) -> String {
        b.get_attribute(key)
            .map(|a| a.value.to_string().trim().to_string())
            .unwrap_or_else(|| panic!("no attribute {key}"))
    }

    #[test]
    fn module_parses_and_declares_hub_ipv6_only_nodes_firewalls_and_inventory() {
        for f in ["versions.tf", "variables.tf", "outputs.tf"] {
            body(f);
        }
        let main = body("main.tf");
        let hub = resource(&main, "hcloud_server", "hub");
        let node = resource(&main, "hcloud_server", "node");
        let net = |b: &Block| -> (String, String) {
            let pn = b
                .body
                .blocks()
                .find(|x| x.ident.as_str() == "public_net")
                .expect("public_net block");
            (
                attr(&pn.body, "ipv4_enabled"),
                attr(&pn.body, "ipv6_enabled"),
            )
        };
        assert_eq!(
            net(node),
            ("false".into(), "true".into()),
            "nodes are IPv6-only"
        );
        assert_eq!(net(hub), ("true".into(), "true".into()));
        assert_eq!(attr(&node.body, "count"), "var.node_count");
        for b in [hub, node] {
            let ud = attr(&b.body, "user_data");
            assert!(
                ud.contains("templatefile(\"${local.grid}/cloud-init.yaml.tftpl\""),
                "{ud}"
            );
            assert!(attr(&b.body, "labels").contains("viewerfleet-role"));
        }
        assert!(attr(&node.body, "firewall_ids").contains("hcloud_firewall.nodes.id"));

        let rules = |b: &Block| -> Vec<(String, String)> {
            b.body
                .blocks()
                .filter(|x| x.ident.as_str() == "rule")
                .map(|r| (attr(&r.body, "port"), attr(&r.body, "source_ips")))
                .collect()
        };
        let node_rules = rules(resource(&main, "hcloud_firewall", "nodes"));
        assert!(
            node_rules.contains(&("\"5555\"".into(), "[hcloud_server.hub.ipv6_network]".into())),
            "{node_rules:?}"
        );
        assert!(node_rules.contains(&("\"22\"".into(), "var.controller_ips".into())));
        let hub_rules = rules(resource(&main, "hcloud_firewall", "hub"));
        assert!(
            hub_rules.contains(&("\"4444\"".into(), "var.controller_ips".into())),
            "{hub_rules:?}"
        );
        assert!(
            hub_rules.contains(&(
                "\"4442-4444\"".into(),
                "hcloud_server.node[*].ipv6_network".into()
            )),
            "{hub_rules:?}"
        );
        resource(&main, "hcloud_firewall_attachment", "hub");
        resource(&main, "hcloud_ssh_key", "run");

        let locals = blocks(&main, "locals");
        let grid = attr(&locals[0].body, "grid");
        assert_eq!(grid, "\"${path.module}/../grid\"");
        for f in [
            "node-bootstrap.sh",
            "hub.toml",
            "node.toml",
            "slot-chromium.sh",
            "viewerfleet-slots.service",
        ] {
            assert!(
                main.to_string().contains(&format!("${{local.grid}}/{f}")),
                "main.tf reads grid/{f}"
            );
        }

        let outputs = body("outputs.tf");
        let inventory = blocks(&outputs, "output")
            .into_iter()
            .find(|b| labels(b) == ["inventory"])
            .expect("output inventory");
        let value = inventory.body.get_attribute("value").unwrap();
        let Expression::Object(obj) = &value.value else {
            panic!("inventory is an object")
        };
        let keys: Vec<String> = obj
            .iter()
            .filter_map(|(k, _)| k.as_ident().map(|i| i.as_str().to_string()))
            .collect();
        for k in [
            "run",
            "hub_url",
            "hub",
            "nodes",
            "viewers_per_node",
            "capacity",
        ] {
            assert!(keys.iter().any(|x| x == k), "inventory lacks {k}: {keys:?}");
        }

        let vars = body("variables.tf");
        let names: Vec<String> = blocks(&vars, "variable")
            .iter()
            .map(|b| labels(b)[0].clone())
            .collect();
        for v in [
            "run_name",
            "node_count",
            "node_type",
            "viewers_per_node",
            "controller_ips",
            "ssh_public_key",
            "viewer_slots_script",
        ] {
            assert!(names.iter().any(|n| n == v), "variables.tf lacks {v}");
        }
        assert!(
            !names.iter().any(|n| n.contains("token")),
            "the token never goes through a variable"
        );
        let versions = body("versions.tf");
        assert!(versions.to_string().contains("hetznercloud/hcloud"));
    }
}
