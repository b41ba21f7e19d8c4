//! Hetzner Cloud fleets against the fake API (kit/src/fake_hcloud.rs), in-process: what the
//! requests carry, today's server types and deprecations, fitting the server limit, the
//! hourly request budget, lost answers, teardown on every exit path and its reporting, the
//! heartbeat, gc, cloud-init validity and the Terraform module's declarations.

use axum::http::Method;
use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use viewerfleet::cloud::api::HcloudApi;
use viewerfleet::cloud::gc::{self, Disposal, GcOptions};
use viewerfleet::cloud::token::ApiToken;
use viewerfleet::cloud::up::{CloudFleet, UpOptions};
use viewerfleet::cloud::{cloudinit, guard, pricing, provision, sizing, CloudError};
use viewerfleet::fleet::grid::GridFleet;
use viewerfleet::fleet::hcloud::HcloudFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::scenario::fleet::{GridFleetPlan, HcloudFleetSpec};
use viewerfleet::model::scenario::{self, Overrides, Plan};
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud, Fault, RateBucket};

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
    api.max_poll_interval = Duration::from_millis(40);
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
        "name: cloud-test\ntarget:\n  kind: peertube\n  video: live\n  url: https://peertube.example/w/x\nviewers:\n  count: {viewers}\n  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx33\n  viewers_per_node: 4\n{fleet_extra}",
        key.display()
    );
    scenario::parse(&yaml, "test.yaml", &Overrides::default()).unwrap()
}

fn spec(plan: &Plan) -> HcloudFleetSpec {
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
        canary: None,
        confirm: None,
    }
}

fn run_servers(fake: &FakeHcloud) -> Vec<Value> {
    fake.state.servers_matching("viewerfleet-run")
}

fn posts(fake: &FakeHcloud, path: &str) -> Vec<Value> {
    fake.state
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == path && r.status < 300)
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

fn names(values: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = values
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

/// The labels viewerfleet gives a resource of `run` (expiring at `expires`).
fn ours(run: &str, role: &str, expires: i64) -> Value {
    json!({"viewerfleet-run": run, "viewerfleet-role": role, "viewerfleet-expires": expires.to_string()})
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `CloudFleet::up` of `plan` with its own spec and no cancellation: what most tests start.
async fn up(api: &HcloudApi, plan: &Plan, opts: UpOptions) -> Result<CloudFleet, CloudError> {
    CloudFleet::up(api, plan, &spec(plan), opts, &CancellationToken::new()).await
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
    assert_eq!(
        hub["server_type"], "cx23",
        "the cheapest current type that holds 10 viewers' hub in fsn1 (2 cores, 4 GB at least)"
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
        assert!(expires > now() + 3600, "expiry covers the run and the TTL");
        assert_eq!(node["server_type"], "cx33");
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
        assert!(ud.contains("CONTROLLER_IPS=198.51.100.7/32\n") && ud.contains("LOAD_PORT=9465\n"));
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
        // The registration secret, in node.env (0600) only; never the router's password.
        assert!(!ud.contains(fleet.credentials.password.expose()));
        let env = files
            .iter()
            .find(|(p, _)| p == "/etc/viewerfleet/node.env")
            .unwrap();
        let secret_line = env
            .1
            .lines()
            .find(|l| l.starts_with("GRID_REGISTRATION_SECRET="))
            .expect("the node gets the registration secret");
        let secret = secret_line.split_once('=').unwrap().1;
        assert_eq!(secret.len(), 64);
        assert_eq!(
            ud.matches(secret).count(),
            1,
            "the secret appears in node.env only"
        );
        let parsed: Value = yaml_serde::from_str(ud).unwrap();
        let env_file = parsed["write_files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "/etc/viewerfleet/node.env")
            .unwrap();
        assert_eq!(env_file["permissions"], "0600");
    }
    let hub_ud = hub["user_data"].as_str().unwrap();
    assert!(hub_ud.contains("ROLE=hub"));
    // The hub gets the registration secret and the controller's credentials, in node.env.
    let hub_env = cloudinit::delivered_files(hub_ud)
        .unwrap()
        .into_iter()
        .find(|(p, _)| p == "/etc/viewerfleet/node.env")
        .unwrap()
        .1;
    assert!(hub_env.contains(&format!(
        "GRID_USERNAME={}\nGRID_PASSWORD={}\n",
        fleet.credentials.username,
        fleet.credentials.password.expose()
    )));
    assert_eq!(
        hub_ud.matches(fleet.credentials.password.expose()).count(),
        1
    );
    assert!(!format!("{fleet:?}").contains(fleet.credentials.password.expose()));

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
        json!([
            format!("{hub_v6}/128"),
            format!("{}/32", fleet.hub.ipv4.clone().unwrap())
        ]),
        "the hub's host addresses, not its /64"
    );
    assert_eq!(
        rule(&node_fw["rules"], "22")["source_ips"],
        json!(["198.51.100.7/32"])
    );
    assert_eq!(
        rule(&node_fw["rules"], "9465")["source_ips"],
        json!(["198.51.100.7/32"]),
        "the nodes' load endpoints answer the controller only"
    );
    let set = fake
        .state
        .recorded()
        .into_iter()
        .find(|r| r.path.ends_with("/actions/set_rules"))
        .unwrap();
    let bus = rule(&set.body["rules"], "4442-4443");
    // The nodes' host addresses (…::1/128), not their /64s, which hold their viewer slots.
    let mut nets: Vec<String> = fleet
        .nodes
        .iter()
        .map(|n| format!("{}/128", n.ipv6_host().unwrap()))
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
    assert!(got.iter().all(|s| s.ends_with("/128")), "{got:?}");
    assert_eq!(
        rule(&set.body["rules"], "4444")["source_ips"],
        json!(["198.51.100.7/32"]),
        "the controller's rule stays first for 4444"
    );

    // The engine's view is the Grid fleet on the hub: slots point at it, capacity is kept.
    let credentials = fleet.credentials.clone();
    let fleet = HcloudFleet::on(fleet).await.unwrap();
    let viewers = plan.viewer_plans();
    let slot = fleet.open_viewer(&viewers[9]).await.unwrap();
    assert_eq!(slot.webdriver_url, fake.hub_url());
    // No session is requested here: tell the Grid fleet, as the engine does after a refusal,
    // so its shutdown does not wait for a late session.
    fleet.session_refused();
    assert_eq!(
        fleet.start_policy().session_retries,
        6,
        "the Grid fleet's retries"
    );
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
    // What the measurements may claim is what the Grid's nodes report, as for any Grid. The
    // hub asks for the run's password: without it, the Grid fleet is refused.
    let mut grid_plan = GridFleetPlan::with_url(&fake.hub_url()).unwrap();
    let refused = GridFleet::start(&grid_plan).await.err().unwrap();
    assert!(
        format!("{refused:#}").contains("asks for a user name and password"),
        "{refused:#}"
    );
    grid_plan.credentials = Some(credentials);
    let grid = GridFleet::start(&grid_plan).await.unwrap();
    let grid_desc = grid.description(&plan);
    grid.shutdown().await.unwrap();
    assert_eq!(
        (
            desc.own_address_per_viewer,
            desc.p2p_shaped,
            desc.http_shaped
        ),
        (
            grid_desc.own_address_per_viewer,
            grid_desc.p2p_shaped,
            grid_desc.http_shaped
        )
    );
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
    // Not a comment: nodes get scripts without their comment lines.
    o.viewer_slots_script = Some(format!("#!/bin/sh\n: '{noise}'\n"));
    let err = up(&api, &plan, o).await.unwrap_err();
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
    let err = up(&api, &plan1, opts(&fake)).await.unwrap_err();
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
    let fleet = up(&api, &plan2, opts(&fake)).await.unwrap();
    assert_eq!(fleet.nodes.len(), 2);
    assert!(fleet
        .shortfall
        .as_deref()
        .unwrap()
        .contains("resource_limit_exceeded"));
    let fleet = HcloudFleet::on(fleet).await.unwrap();
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
    let err = up(&api, &plan, opts(&fake)).await.unwrap_err();
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
        // Cancel once the hub's firewall names the nodes (the fleet is then waiting for them).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !state
            .recorded()
            .iter()
            .any(|r| r.path.ends_with("/actions/set_rules"))
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

fn request(key: &std::path::Path, run_id: &str) -> provision::ProvisionRequest {
    provision::ProvisionRequest {
        run_id: run_id.into(),
        scenario: "panic-test".into(),
        location: "fsn1".into(),
        image: "debian-12".into(),
        hub_type: "cx33".into(),
        hubs: 1,
        node_type: "cx33".into(),
        nodes: 2,
        viewers_per_node: 4,
        browsers_per_node: 4,
        sessions: 8,
        expires_at: now() + 3600,
        ssh_public_key: std::fs::read_to_string(key).unwrap(),
        controller_ips: vec!["198.51.100.7/32".into()],
        slot_link: Default::default(),
        viewer_slots_script: None,
        parallel_creates: 2,
        secrets: viewerfleet::grid::auth::GridSecrets::generate(),
    }
}

#[tokio::test]
async fn panic_during_provisioning_tears_down() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let req = request(key.path(), &provision::new_run_id("panic-test"));
    let (api2, req2) = (api.clone(), req.clone());
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let result: Result<(), CloudError> =
        guard::teardown_unless_ok(&api, &req.run_id, &cancel, None, async move {
            let base = provision::create_base(&api2, &req2, &c2).await?;
            let _ = base;
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
async fn creates_whose_answers_were_lost_are_adopted_not_duplicated() {
    // The first answers to creating the SSH key, a firewall, the hub and a node are lost
    // after Hetzner executed them: each retry is refused 409 and the resource adopted.
    let (fake, api) = fake(FakeConfig {
        faults: vec![
            Fault::drop_answer(Method::POST, "/v1/ssh_keys", 1),
            Fault::drop_answer(Method::POST, "/v1/firewalls", 1),
            Fault::drop_answer(Method::POST, "/v1/servers", 2),
        ],
        ..FakeConfig::default()
    })
    .await;
    let key = ssh_key_file();
    let plan = plan(8, key.path(), "  parallel_creates: 1\n");
    let fleet = up(&api, &plan, opts(&fake)).await.unwrap();
    assert_eq!(fake.state.counts().dropped, 4, "four answers were lost");
    let conflicts = fake
        .state
        .recorded()
        .iter()
        .filter(|r| r.status == 409)
        .count();
    assert_eq!(conflicts, 4, "each retry met uniqueness_error");
    assert_eq!(fleet.nodes.len(), 2);
    assert_eq!(
        run_servers(&fake).len(),
        3,
        "one hub, two nodes: no duplicate"
    );
    assert_eq!(fake.state.firewalls().len(), 2);
    assert_eq!(fake.state.ssh_keys().len(), 1);
    fleet.teardown().await.unwrap();
    assert!(run_servers(&fake).is_empty() && fake.state.firewalls().is_empty());
}

#[tokio::test]
async fn a_name_taken_by_something_else_is_an_error_not_adopted() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let req = request(key.path(), "taken-run");
    fake.state
        .plant_server("vf-taken-run-hub", ours("another-run", "hub", now() + 3600));
    let err = provision::create_base(&api, &req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("vf-taken-run-hub")
            && err
                .to_string()
                .contains("not labelled viewerfleet-run=taken-run"),
        "{err}"
    );
    assert_eq!(
        fake.state.servers().len(),
        1,
        "the other run's server is untouched"
    );
}

#[tokio::test]
async fn a_delete_whose_answer_was_lost_counts_as_deleted_exactly_once() {
    let (fake, api) = fake(FakeConfig {
        faults: vec![Fault::drop_answer(Method::DELETE, "/v1/servers/*", 2)],
        ..FakeConfig::default()
    })
    .await;
    let expires = now() + 3600;
    for i in 0..4 {
        fake.state
            .plant_server(&format!("vf-lost-node-{i}"), ours("lost", "node", expires));
    }
    fake.state
        .plant_firewall("vf-lost-nodes", ours("lost", "node-firewall", expires));
    let deleted = provision::teardown(&api, "lost").await.unwrap();
    assert_eq!(fake.state.counts().dropped, 2);
    assert_eq!(deleted.servers.len(), 4, "{deleted:?}");
    assert_eq!(deleted.firewalls, vec!["vf-lost-nodes"]);
    assert!(fake.state.servers().is_empty());
}

#[tokio::test]
async fn a_server_that_refuses_deletion_is_named_and_keeps_its_firewalls_and_key() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let mut api = api;
    api.attempts = 3;
    let expires = now() + 3600;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(fake.state.plant_server(
            &format!("vf-stuck-node-{i}"),
            ours("stuck", "node", expires),
        ));
    }
    fake.state
        .plant_firewall("vf-stuck-nodes", ours("stuck", "node-firewall", expires));
    fake.state
        .plant_ssh_key("vf-stuck", ours("stuck", "ssh-key", expires));
    // Deleting node 2 answers 500, forever.
    let stuck = format!("/v1/servers/{}", ids[2]);
    fake.state
        .set_config(|c| c.faults = vec![Fault::status(Method::DELETE, &stuck, 500, None)]);
    let err = provision::teardown(&api, "stuck").await.unwrap_err();
    let CloudError::TeardownIncomplete { deleted, left, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        deleted.servers.len(),
        3,
        "the three others went: {deleted:?}"
    );
    assert!(deleted.firewalls.is_empty() && deleted.ssh_keys.is_empty());
    let text = err.to_string();
    assert!(
        text.contains("server vf-stuck-node-2")
            && text.contains("status 500")
            && text.contains("firewall vf-stuck-nodes")
            && text.contains("SSH key vf-stuck")
            && text.contains("viewerfleet down stuck"),
        "{text}"
    );
    assert_eq!(left.len(), 3, "{left:?}");
    assert_eq!(
        fake.state.ssh_keys().len(),
        1,
        "no key goes while a server exists"
    );
    assert_eq!(fake.state.firewalls().len(), 1);
    // Once Hetzner answers again, `down` finishes the job and counts only what it deleted.
    fake.state.set_config(|c| c.faults.clear());
    let deleted = provision::teardown(&api, "stuck").await.unwrap();
    assert_eq!(
        (
            deleted.servers.len(),
            deleted.firewalls.len(),
            deleted.ssh_keys.len()
        ),
        (1, 1, 1)
    );
    assert!(fake.state.servers().is_empty());
}

#[tokio::test]
async fn teardown_counts_are_exact_across_retry_passes() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let mut api = api;
    api.attempts = 2;
    let expires = now() + 3600;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(fake.state.plant_server(
            &format!("vf-flaky-node-{i}"),
            ours("flaky", "node", expires),
        ));
    }
    // Two servers fail their whole first pass (both attempts), then delete fine.
    fake.state.set_config(|c| {
        c.faults = ids[..2]
            .iter()
            .map(|id| Fault::status(Method::DELETE, &format!("/v1/servers/{id}"), 503, Some(2)))
            .collect()
    });
    let deleted = provision::teardown(&api, "flaky").await.unwrap();
    assert_eq!(deleted.servers.len(), 6, "{deleted:?}");
    assert_eq!(fake.state.counts().faulted, 4);
    assert!(fake.state.servers().is_empty());
}

#[tokio::test]
async fn gc_deletes_expired_resources_one_by_one_and_nothing_else() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let (past, future) = (now() - 60, now() + 3600);
    fake.state
        .plant_server("vf-crashed-1-hub", ours("crashed-1", "hub", past));
    fake.state
        .plant_server("vf-crashed-1-node-001", ours("crashed-1", "node", past));
    fake.state.plant_firewall(
        "vf-crashed-1-nodes",
        ours("crashed-1", "node-firewall", past),
    );
    fake.state
        .plant_ssh_key("vf-crashed-1", ours("crashed-1", "ssh-key", past));
    fake.state
        .plant_server("vf-running-2-node-001", ours("running-2", "node", future));
    fake.state.plant_firewall(
        "vf-running-2-nodes",
        ours("running-2", "node-firewall", future),
    );
    fake.state
        .plant_server("someone-elses-database", json!({"app": "db"}));
    fake.state.plant_ssh_key("admin", json!({}));
    // A run label alone is not viewerfleet's mark.
    fake.state
        .plant_server("handmade", json!({"viewerfleet-run": "crashed-1"}));
    // Terraform's server shares the expired run's label: it stays (terraform destroy's job).
    let mut tf = ours("crashed-1", "node", past);
    tf["viewerfleet-managed-by"] = json!("terraform");
    fake.state.plant_server("vf-tf-node-001", tf);

    let dry = gc::gc(
        &api,
        &GcOptions {
            dry_run: true,
            ..GcOptions::default()
        },
    )
    .await
    .unwrap();
    let crashed = dry.runs.iter().find(|r| r.run == "crashed-1").unwrap();
    assert_eq!(
        crashed.summary(),
        "2 server(s), 1 firewall(s), 1 SSH key(s)"
    );
    let kept: Vec<(&str, &Disposal)> = crashed
        .kept()
        .map(|r| (r.name.as_str(), &r.disposal))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept.iter().any(|(n, v)| *n == "vf-tf-node-001"
        && matches!(v, Disposal::Keep(m) if m.contains("terraform"))));
    assert!(kept.iter().any(|(n, v)| *n == "handmade"
        && matches!(v, Disposal::Keep(m) if m.contains("lacks viewerfleet's labels"))));
    assert_eq!(
        dry.runs
            .iter()
            .find(|r| r.run == "running-2")
            .unwrap()
            .to_delete()
            .count(),
        0
    );
    assert!(dry.deleted.is_empty(), "dry run deletes nothing");
    assert_eq!(fake.state.servers().len(), 6);

    let report = gc::gc(&api, &GcOptions::default()).await.unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let mut gone = report.deleted.servers.clone();
    gone.sort();
    assert_eq!(
        gone,
        vec!["vf-crashed-1-hub", "vf-crashed-1-node-001"],
        "as announced"
    );
    assert_eq!(report.deleted.firewalls, vec!["vf-crashed-1-nodes"]);
    assert_eq!(report.deleted.ssh_keys, vec!["vf-crashed-1"]);
    assert_eq!(
        names(&fake.state.servers()),
        vec![
            "handmade",
            "someone-elses-database",
            "vf-running-2-node-001",
            "vf-tf-node-001"
        ]
    );
    assert_eq!(fake.state.firewalls().len(), 1);
    assert_eq!(fake.state.ssh_keys().len(), 1);
    // `down crashed-1` leaves Terraform's server and the unlabelled one alone too.
    let deleted = provision::teardown(&api, "crashed-1").await.unwrap();
    assert!(deleted.is_empty(), "{deleted:?}");
    assert_eq!(fake.state.servers().len(), 4);

    // --older-than takes runs still within their TTL; a huge one takes nothing.
    for huge in [Duration::MAX, Duration::from_secs(i64::MAX as u64 + 1)] {
        let report = gc::gc(
            &api,
            &GcOptions {
                older_than: Some(huge),
                ..GcOptions::default()
            },
        )
        .await
        .unwrap();
        assert!(report.deleted.is_empty(), "{huge:?}: {:?}", report.deleted);
    }
    let report = gc::gc(
        &api,
        &GcOptions {
            older_than: Some(Duration::ZERO),
            ..GcOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(report.deleted.servers, vec!["vf-running-2-node-001"]);
    assert_eq!(fake.state.servers().len(), 3);
}

#[tokio::test]
async fn gc_deletes_a_run_whose_heartbeat_stopped_without_waiting_for_its_ttl() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let ttl = now() + 4 * 3600;
    let with_beat = |run: &str, role: &str, beat: Option<i64>| {
        let mut l = ours(run, role, ttl);
        if let Some(b) = beat {
            l["viewerfleet-heartbeat"] = json!(b.to_string());
        }
        l
    };
    // Controller killed 11 minutes ago: its hub's heartbeat is stale.
    let dead = now() - 11 * 60;
    fake.state
        .plant_server("vf-dead-hub", with_beat("dead", "hub", Some(dead)));
    fake.state.plant_server(
        "vf-dead-node-001",
        with_beat("dead", "node", Some(dead - 60)),
    );
    // A live controller beat a minute ago.
    fake.state
        .plant_server("vf-live-hub", with_beat("live", "hub", Some(now() - 60)));
    fake.state.plant_server(
        "vf-live-node-001",
        with_beat("live", "node", Some(now() - 3600)),
    );
    // Handed over (`viewerfleet up`): no heartbeat on the hub, the TTL decides.
    fake.state
        .plant_server("vf-kept-hub", with_beat("kept", "hub", None));
    fake.state.plant_server(
        "vf-kept-node-001",
        with_beat("kept", "node", Some(now() - 3600)),
    );
    let report = gc::gc(&api, &GcOptions::default()).await.unwrap();
    let mut gone = report.deleted.servers.clone();
    gone.sort();
    assert_eq!(gone, vec!["vf-dead-hub", "vf-dead-node-001"]);
    let dead_run = report.runs.iter().find(|r| r.run == "dead").unwrap();
    assert!(dead_run
        .to_delete()
        .all(|r| matches!(&r.disposal, Disposal::Delete(m) if m.contains("heartbeat stopped"))));
    assert_eq!(fake.state.servers().len(), 4);
}

#[tokio::test]
async fn a_live_fleet_keeps_its_heartbeat_and_hands_over_to_its_ttl() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let plan = plan(4, key.path(), "  heartbeat_interval: 1s\n");
    let fleet = up(&api, &plan, opts(&fake)).await.unwrap();
    let hub_path = format!("/v1/servers/{}", fleet.hub.id);
    let beats = |fake: &FakeHcloud| {
        fake.state
            .recorded()
            .iter()
            .filter(|r| r.method == "PUT" && r.path == hub_path)
            .count()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while fleet.heartbeats().await < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no heartbeat in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(beats(&fake) >= 2);
    let hub = |fake: &FakeHcloud| fake.state.servers_matching("viewerfleet-role=hub")[0].clone();
    let beat: i64 = hub(&fake)["labels"]["viewerfleet-heartbeat"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(now() - beat <= 2, "fresh heartbeat");
    // A live heartbeat keeps the run even with no grace to speak of... until it stops.
    let strict = GcOptions {
        heartbeat_grace: Duration::from_secs(3),
        dry_run: true,
        ..GcOptions::default()
    };
    let found = gc::find(&api, &strict).await.unwrap();
    assert_eq!(found[0].to_delete().count(), 0);
    fleet.hand_over().await.unwrap();
    let sent = beats(&fake);
    assert!(
        hub(&fake)["labels"].get("viewerfleet-heartbeat").is_none(),
        "handed over: no heartbeat label"
    );
    assert_eq!(
        hub(&fake)["labels"]["viewerfleet-run"],
        fleet.run_id.as_str()
    );
    let found = gc::find(
        &api,
        &GcOptions {
            heartbeat_grace: Duration::ZERO,
            dry_run: true,
            ..GcOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(found[0].to_delete().count(), 0, "the TTL decides now");
    provision::teardown(&api, &fleet.run_id).await.unwrap();
    assert_eq!(beats(&fake), sent, "no heartbeat after the hand-over");
}

#[tokio::test]
async fn pagination_and_transient_errors_under_a_small_bucket_are_handled() {
    let (fake, mut api) = fake(FakeConfig {
        rate_limit: Some(RateBucket {
            limit: 20,
            refill_every: Duration::from_millis(5),
            initial: None,
        }),
        fail_every: 7,
        ..FakeConfig::default()
    })
    .await;
    api.attempts = 30;
    api.max_backoff = Duration::from_millis(100);
    let expires = now() + 3600;
    for i in 0..60 {
        fake.state
            .plant_server(&format!("s{i}"), ours("many", "node", expires));
    }
    let listed: Vec<Value> =
        provision::list(&api, provision::Kind::Server, Some("viewerfleet-run=many"))
            .await
            .unwrap();
    assert_eq!(listed.len(), 60, "two pages of 50");
    let deleted = provision::teardown(&api, "many").await.unwrap();
    assert_eq!(deleted.servers.len(), 60);
    assert!(fake.state.servers().is_empty());
    let counts = fake.state.counts();
    assert!(counts.transient > 0, "the fake did inject 503s: {counts:?}");
}

#[tokio::test]
async fn a_429_from_an_empty_bucket_is_waited_out_and_the_rest_is_paced() {
    // The project spent its whole hour before we came: the first answer is a 429.
    let (fake, api) = fake(FakeConfig {
        rate_limit: Some(RateBucket {
            limit: 60,
            refill_every: Duration::from_millis(20),
            initial: Some(0),
        }),
        ..FakeConfig::default()
    })
    .await;
    let expires = now() + 3600;
    for i in 0..20 {
        fake.state.plant_server(
            &format!("vf-broke-node-{i:02}"),
            ours("broke", "node", expires),
        );
    }
    let deleted = provision::teardown(&api, "broke").await.unwrap();
    assert_eq!(deleted.servers.len(), 20);
    assert!(fake.state.servers().is_empty());
    let limited = fake.state.counts().rate_limited;
    assert!(limited >= 1, "the empty bucket answered 429");
    assert_eq!(api.rate_limited(), limited, "the client saw each 429");
    assert!(
        limited <= 3,
        "after the first 429 the headers pace the requests: {limited}"
    );
    assert_eq!(fake.state.recorded()[0].status, 429);
}

#[tokio::test]
async fn a_hub_that_does_not_answer_as_a_grid_gets_the_fleet_deleted_even_with_keep() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let plan = plan(4, key.path(), "");
    let mut o = opts(&fake);
    o.keep = true;
    let mut fleet = up(&api, &plan, o).await.unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    fleet.hub_urls = vec![format!("http://{}/", closed.local_addr().unwrap())];
    drop(closed);
    let err = HcloudFleet::on(fleet).await.unwrap_err();
    assert!(format!("{err:#}").contains("is not usable"), "{err:#}");
    assert!(
        run_servers(&fake).is_empty(),
        "an unusable fleet is not kept"
    );
}

#[tokio::test]
async fn run_keep_leaves_the_fleet_to_its_ttl() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let plan = plan(4, key.path(), "");
    let mut o = opts(&fake);
    o.keep = true;
    let fleet = up(&api, &plan, o).await.unwrap();
    fleet.teardown().await.unwrap();
    let servers = run_servers(&fake);
    assert_eq!(servers.len(), 2, "--keep: the hub and its node stay");
    let hub = servers
        .iter()
        .find(|s| s["labels"]["viewerfleet-role"] == "hub")
        .unwrap();
    assert!(hub["labels"].get("viewerfleet-heartbeat").is_none());
    let found = gc::find(
        &api,
        &GcOptions {
            heartbeat_grace: Duration::ZERO,
            dry_run: true,
            ..GcOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(found[0]
        .resources
        .iter()
        .all(|r| matches!(&r.disposal, Disposal::Keep(m) if m.contains("within its lifetime"))));
    provision::teardown(&api, &fleet.run_id).await.unwrap();
}

#[tokio::test]
async fn wrong_token_is_a_clear_error() {
    let (fake, _) = fake(FakeConfig::default()).await;
    let api = HcloudApi::new(&fake.endpoint(), &ApiToken::new("wrong").unwrap());
    let err = pricing::fetch(&api, "fsn1").await.unwrap_err();
    assert!(matches!(err, CloudError::Unauthorized), "{err}");
    assert!(err.to_string().contains("HCLOUD_TOKEN"));
}

/// A 1000-viewer ramp of 3 minutes read every 5 s, for plans that are not about the hubs.
fn pace() -> sizing::Pace {
    sizing::Pace {
        ramp: Duration::from_secs(180),
        sampling: Duration::from_secs(5),
    }
}

fn pace_of(plan: &Plan) -> sizing::Pace {
    sizing::Pace {
        ramp: plan.ramp,
        sampling: plan.sampling_interval,
    }
}

fn shipped(file: &str) -> Plan {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/peertube-1000");
    scenario::load(&root.join(file), &Overrides::default()).unwrap()
}

#[tokio::test]
async fn only_current_types_orderable_in_the_location_are_offered() {
    let (_fake, api) = fake(FakeConfig::default()).await;
    let cat = pricing::fetch(&api, "fsn1").await.unwrap();
    for withdrawn in ["cx22", "cx32", "cx42", "cx52"] {
        assert!(cat.offer(withdrawn).is_none(), "{withdrawn} is withdrawn");
        let why = &cat
            .not_orderable
            .iter()
            .find(|n| n.name == withdrawn)
            .unwrap()
            .why;
        assert!(why.contains("unavailable since"), "{why}");
    }
    for current in [
        "cx23", "cx33", "cx43", "cx53", "cpx22", "cpx62", "ccx13", "ccx63",
    ] {
        let o = cat.offer(current).unwrap();
        assert!(o.default_choice(), "{current}");
    }
    let retiring = cat.offer("cpx41").unwrap();
    assert!(
        retiring.unavailable_after.is_some() && !retiring.default_choice(),
        "deprecated in fsn1, still orderable, never chosen by default"
    );
    assert!(
        !cat.offer("cax31").unwrap().default_choice(),
        "Arm: not by default"
    );
    // Elsewhere other rules: no cx in Ashburn, cpx41 current there.
    let ash = pricing::fetch(&api, "ash").await.unwrap();
    assert!(ash.offer("cx33").is_none());
    assert!(ash.offer("cpx41").unwrap().default_choice());

    // Forcing a type that cannot be ordered names why and lists what can.
    let mut spec = spec(&shipped("live-normal.yaml"));
    spec.hub_type = Some("cx32".into());
    let err = sizing::plan(&spec, 1000, 1, Duration::from_secs(600), pace(), &cat).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("fleet.hub_type")
            && text.contains("`cx32` cannot be ordered in fsn1")
            && text.contains("unavailable since")
            && text.contains("cx33 (4 shared cores, 8 GB"),
        "{text}"
    );
    spec.hub_type = None;
    spec.node_type = Some("cx33".into());
    let err = sizing::plan(&spec, 1000, 1, Duration::from_secs(600), pace(), &ash).unwrap_err();
    assert!(err.to_string().contains("not offered there"), "{err}");
    // A listed type that cannot be ordered is skipped with a note; a retiring one warns.
    spec.node_type = None;
    spec.node_types = Some(vec!["cx32".into(), "cpx41".into()]);
    spec.server_limit = 100;
    let p = sizing::plan(&spec, 1000, 1, Duration::from_secs(600), pace(), &cat).unwrap();
    assert_eq!(p.chosen.offer.name, "cpx41");
    assert!(
        p.notes.iter().any(|n| n.contains("`cx32` skipped")),
        "{:?}",
        p.notes
    );
    assert!(
        p.notes.iter().any(|n| n.contains("`cpx41` is deprecated")),
        "{:?}",
        p.notes
    );
    // The hub's type follows the location.
    spec.node_types = None;
    let p = sizing::plan(&spec, 100, 1, Duration::from_secs(600), pace(), &ash).unwrap();
    assert_eq!(
        p.hub.name, "cpx22",
        "no cx in ash: the cheapest current type that holds the hub of 100 viewers"
    );
}

/// The four PeerTube 1000-viewer scenarios against the fake's prices.
#[tokio::test]
async fn plan_fits_the_four_1000_viewer_scenarios_into_the_server_limit() {
    let (_fake, api) = fake(FakeConfig::default()).await;
    let cat = pricing::fetch(&api, "fsn1").await.unwrap();
    assert_eq!(cat.currency, "EUR");
    let hub = cat.offer("cx33").unwrap().hourly_net;
    let ipv4 = cat.ipv4_hourly_net;
    assert!((ipv4 - 0.5 / 730.0).abs() < 1e-6);
    for (file, limit, nodes, node_type, per_node, cheapest) in [
        // Within a new project's 10 servers: bigger types; the cheapest needs 32 servers.
        ("live-normal.yaml", 10, 7, "cx53", 153, Some((31, "cx33"))),
        ("live-high.yaml", 10, 7, "cx53", 153, Some((31, "cx33"))),
        (
            "live-high-half-p2p-off.yaml",
            10,
            7,
            "cx53",
            153,
            Some((31, "cx33")),
        ),
        // With the limit raised the cheapest fleet is chosen.
        ("live-normal.yaml", 40, 31, "cx33", 33, None),
        // 720p viewers at 0.4 cores: nothing fits 10 servers; the cheapest fleet, with a warning.
        ("vod.yaml", 10, 167, "cx33", 6, None),
    ] {
        let plan = shipped(file);
        let mut spec = spec(&plan);
        spec.server_limit = limit;
        let p = sizing::plan(
            &spec,
            plan.viewers,
            plan.per_browser,
            plan.duration,
            pace_of(&plan),
            &cat,
        )
        .unwrap();
        assert_eq!(
            (
                p.chosen.nodes,
                p.chosen.offer.name.as_str(),
                p.chosen.viewers_per_node
            ),
            (nodes, node_type, per_node),
            "{file} with limit {limit}"
        );
        assert_eq!(p.hub.name, "cx33", "{file}");
        let node_price = cat.offer(node_type).unwrap().hourly_net;
        let expected = nodes as f64 * node_price + hub + ipv4;
        assert!(
            (p.hourly_net - expected).abs() < 1e-9,
            "{file}: {} vs {expected}",
            p.hourly_net
        );
        assert_eq!(
            p.cheapest_over_limit
                .as_ref()
                .map(|c| (c.nodes, c.offer.name.as_str())),
            cheapest,
            "{file}"
        );
        assert_eq!(
            p.billed_hours, 1,
            "{file}: 10 min provisioning + 10 min run"
        );
        let mut out = Vec::new();
        sizing::render(&mut out, file, &p, &spec.budget).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!("nodes: {nodes} × {node_type}")),
            "{text}"
        );
        assert_eq!(text.contains("WARNING"), p.over_limit(), "{text}");
        if let Some((n, t)) = cheapest {
            assert!(
                text.contains(&format!(
                    "chosen to fit fleet.server_limit ({limit}): {} servers",
                    nodes + 1
                )) && text.contains(&format!(
                    "The cheapest fleet, {n} × {t} ({} servers)",
                    n + 1
                )),
                "{text}"
            );
        }
    }
    // The same viewers arriving within one minute: 16.7 sessions/s, more than one hub
    // creates (hub_sizing::MEASURED): three hubs, within the server limit with the nodes.
    let mut spec = spec(&shipped("live-normal.yaml"));
    let fast = sizing::Pace {
        ramp: Duration::from_secs(60),
        sampling: Duration::from_secs(2),
    };
    let p = sizing::plan(&spec, 1000, 1, Duration::from_secs(600), fast, &cat).unwrap();
    assert_eq!((p.hubs.count, p.hubs.limited_by), (3, "rate"));
    assert_eq!((p.chosen.nodes, p.servers), (7, 10));
    assert!(
        p.hubs.max_parallel_starts >= 256,
        "{}",
        p.hubs.max_parallel_starts
    );
    let mut out = Vec::new();
    sizing::render(&mut out, "fast", &p, &spec.budget).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("hubs: 3 × ") && text.contains("split by rate"),
        "{text}"
    );
    // The cheapest live fleet: 32 servers for 0.2791 EUR/h.
    spec.server_limit = 70;
    let live = pace_of(&shipped("live-normal.yaml"));
    let p = sizing::plan(&spec, 1000, 1, Duration::from_secs(600), live, &cat).unwrap();
    assert!((p.hourly_net - 0.2791).abs() < 1e-3, "{}", p.hourly_net);
    let vod = shipped("vod.yaml");
    let p = sizing::plan(
        &self::spec(&vod),
        1000,
        1,
        vod.duration,
        pace_of(&vod),
        &cat,
    )
    .unwrap();
    assert!(p.over_limit());
}

/// The live 1000-viewer fleet on the cheapest type with the limit raised, at 16 viewers per
/// node (a 720p-sized budget): 63 nodes and the hub, the largest fleet the pacing must carry.
fn live_fleet(key: &std::path::Path) -> (Plan, HcloudFleetSpec) {
    let plan = shipped("live-normal.yaml");
    let mut spec = spec(&plan);
    spec.server_limit = 70;
    spec.node_type = Some("cx33".into());
    spec.viewers_per_node = Some(16);
    spec.controller_ips = vec!["198.51.100.7/32".into()];
    spec.ssh_public_key = Some(key.display().to_string());
    spec.register_timeout = "30s".into();
    (plan, spec)
}

/// `up` then teardown of the live fleet; returns (requests of up, of teardown).
async fn up_and_down(fake: &FakeHcloud, api: &HcloudApi, key: &std::path::Path) -> (u64, u64) {
    let (plan, spec) = live_fleet(key);
    let fleet = CloudFleet::up(api, &plan, &spec, opts(fake), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(fleet.nodes.len(), 63);
    assert_eq!(run_servers(fake).len(), 64);
    let up = fleet.up_requests;
    let before = api.requests();
    fleet.teardown().await.unwrap();
    assert!(run_servers(fake).is_empty());
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    (up, api.requests() - before)
}

#[tokio::test]
async fn up_and_teardown_of_the_1000_viewer_live_fleet_fit_the_hourly_bucket() {
    let (fake, api) = fake(FakeConfig::default()).await;
    let key = ssh_key_file();
    let (up, down) = up_and_down(&fake, &api, key.path()).await;
    println!("1000-viewer live fleet (64 servers), Hetzner's 3600/h bucket: up {up} requests, teardown {down} requests");
    assert_eq!(fake.state.counts().rate_limited, 0, "no 429");
    assert_eq!(
        fake.state.counts().requests,
        up + down,
        "every request counted by the client"
    );
    assert!(up <= sizing::up_requests(64) as u64, "up: {up}");
    assert!(
        down <= sizing::teardown_requests(64) as u64,
        "teardown: {down}"
    );
    // One poll request covers many actions.
    let polls: Vec<_> = fake
        .state
        .recorded()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/actions")
        .collect();
    let most = polls
        .iter()
        .map(|r| r.query.matches("id=").count())
        .max()
        .unwrap();
    assert!(most >= 50, "up to 50 actions per poll, got {most}");
    assert!(
        !fake
            .state
            .recorded()
            .iter()
            .any(|r| r.path.starts_with("/v1/actions/")),
        "no action polled on its own"
    );
}

#[tokio::test]
async fn with_a_minute_of_budget_left_up_and_teardown_pace_themselves_instead_of_failing() {
    // 60 requests in the bucket (one minute of Hetzner's refill), refilled one per 10 ms:
    // Hetzner's bucket with its clock sped up 100 times.
    let (fake, api) = fake(FakeConfig {
        rate_limit: Some(RateBucket {
            limit: 60,
            refill_every: Duration::from_millis(10),
            initial: None,
        }),
        ..FakeConfig::default()
    })
    .await;
    let key = ssh_key_file();
    let (up, down) = up_and_down(&fake, &api, key.path()).await;
    let limited = fake.state.counts().rate_limited;
    println!("1000-viewer live fleet, a 60-request bucket: up {up} requests, teardown {down}, {limited} answered 429");
    assert!(
        up + down > 60,
        "the fleet needs more than the bucket holds: pacing carried it"
    );
    assert!(limited <= 4, "paced by the headers, not by 429s: {limited}");
}

#[test]
fn cloud_init_user_data_validates_with_cloud_init_schema() {
    let dir = tempfile::tempdir().unwrap();
    let roles = [
        (
            "hub",
            cloudinit::Role::Hub {
                secrets: viewerfleet::grid::auth::GridSecrets::generate(),
            },
        ),
        (
            "node",
            cloudinit::Role::Node {
                hub_addr: "[2001:db8::1]".into(),
                max_sessions: 16,
                slot_link: scenario::LinkProfile {
                    download_kbps: Some(2000),
                    upload_kbps: Some(300),
                    latency_ms: Some(500),
                },
                controller_ips: vec!["198.51.100.7/32".into()],
                registration_secret: viewerfleet::grid::auth::Secret::new("0123abcd"),
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
        assert_eq!(
            bootstrap.1,
            cloudinit::shipped_shell(include_str!("../../grid/node-bootstrap.sh"))
        );
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
    // Its fallback names the Selenium server of grid/package.json, as cloud-init does.
    let selenium = viewerfleet::grid::selenium::server();
    assert!(bootstrap.contains(&selenium.npm_spec()));
    assert!(bootstrap.contains(&selenium.jar_in_package));
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
            node_rules.contains(&(
                "\"5555\"".into(),
                "[\"${hcloud_server.hub.ipv6_address}/128\"]".into()
            )),
            "the hub's host address, not its /64: {node_rules:?}"
        );
        assert!(node_rules.contains(&("\"22\"".into(), "var.controller_ips".into())));
        assert!(
            node_rules.contains(&("\"9465\"".into(), "var.controller_ips".into())),
            "the load endpoint answers the controller only: {node_rules:?}"
        );
        assert!(
            main.to_string()
                .contains("\"CONTROLLER_IPS=${join(\",\", var.controller_ips)}\""),
            "node.env names the load endpoint's clients"
        );
        let hub_rules = rules(resource(&main, "hcloud_firewall", "hub"));
        assert!(
            hub_rules.contains(&("\"4444\"".into(), "var.controller_ips".into())),
            "{hub_rules:?}"
        );
        assert!(
            hub_rules
                .iter()
                .all(|(_, sources)| sources == "var.controller_ips"),
            "the hub's own firewall admits the controller only: {hub_rules:?}"
        );
        // The hub is created behind it, before any node exists.
        assert_eq!(attr(&hub.body, "firewall_ids"), "[hcloud_firewall.hub.id]");
        let node_rules_at_hub = rules(resource(&main, "hcloud_firewall", "hub_nodes"));
        assert_eq!(
            node_rules_at_hub,
            vec![(
                "\"4442-4444\"".into(),
                "[for n in hcloud_server.node : \"${n.ipv6_address}/128\"]".into()
            )],
            "the nodes' host addresses, not their /64s"
        );
        let attachment = resource(&main, "hcloud_firewall_attachment", "hub_nodes");
        assert_eq!(
            attr(&attachment.body, "firewall_id"),
            "hcloud_firewall.hub_nodes.id"
        );
        // The Grid's secrets: sensitive variables, in node.env (0600) only, the password
        // on the hub only.
        let text = main.to_string();
        assert!(text.contains("\"GRID_PASSWORD=${var.grid_password}\""));
        assert_eq!(text.matches("var.grid_password").count(), 1, "hub only");
        assert_eq!(
            text.matches("var.registration_secret").count(),
            2,
            "hub and nodes"
        );
        assert!(!text.contains("permissions = \"0644\"\n      content     = \"${join"));
        assert_eq!(
            text.matches("/etc/viewerfleet/node.env").count(),
            text.matches("permissions = \"0600\"").count(),
            "node.env files are 0600"
        );
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
            "node-load.py",
            // The Selenium server's package and jar, as viewerfleet's own cloud-init.
            "package.json",
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
            "registration_secret",
            "grid_username",
            "grid_password",
            "webdriver_open_to_the_internet",
        ] {
            assert!(names.iter().any(|n| n == v), "variables.tf lacks {v}");
        }
        for secret in ["registration_secret", "grid_password"] {
            let block = blocks(&vars, "variable")
                .into_iter()
                .find(|b| labels(b)[0] == secret)
                .unwrap();
            assert_eq!(attr(&block.body, "sensitive"), "true", "{secret}");
        }
        let controller = blocks(&vars, "variable")
            .into_iter()
            .find(|b| labels(b)[0] == "controller_ips")
            .unwrap()
            .body
            .to_string();
        assert!(
            controller.contains("var.webdriver_open_to_the_internet")
                && controller.contains("? 16 : 8"),
            "too-wide controller_ips are refused as `up` refuses them: {controller}"
        );
        assert!(
            !names.iter().any(|n| n.contains("token")),
            "the token never goes through a variable"
        );
        // Its default server types are ones Hetzner still sells.
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform/variables.tf"),
        )
        .unwrap();
        for withdrawn in ["\"cx22\"", "\"cx32\"", "\"cx42\"", "\"cx52\""] {
            assert!(
                !text.contains(withdrawn),
                "variables.tf defaults to {withdrawn}"
            );
        }
        let versions = body("versions.tf");
        assert!(versions.to_string().contains("hetznercloud/hcloud"));
    }

    fn string(expr: &Expression) -> String {
        match expr {
            Expression::String(s) => s.value().clone(),
            other => panic!("expected a string, found `{other}`"),
        }
    }

    /// `~> X.Y` (X.Y or later within X) or `~> X.Y.Z` (X.Y.Z or later within X.Y).
    fn satisfies_pessimistic(version: &str, constraint: &str) -> bool {
        let parse = |v: &str| -> Vec<u64> {
            v.trim()
                .split('.')
                .map(|n| n.parse().unwrap_or_else(|_| panic!("version `{v}`")))
                .collect()
        };
        let bound = parse(constraint.strip_prefix("~>").expect("a ~> constraint"));
        let mut v = parse(version);
        v.resize(3, 0);
        let kept = bound.len() - 1;
        let mut lower = bound.clone();
        lower.resize(3, 0);
        v >= lower && v[..kept] == bound[..kept]
    }

    #[test]
    fn pessimistic_constraints() {
        assert!(satisfies_pessimistic("1.68.0", "~> 1.68"));
        assert!(satisfies_pessimistic("1.70.2", "~> 1.68"));
        assert!(!satisfies_pessimistic("2.0.0", "~> 1.68"));
        assert!(!satisfies_pessimistic("1.67.9", "~> 1.68"));
        assert!(satisfies_pessimistic("1.68.3", "~> 1.68.0"));
        assert!(!satisfies_pessimistic("1.69.0", "~> 1.68.0"));
    }

    /// The hcloud provider is held to one major version (`~>`) and locked: the committed
    /// lock file names a release that constraint allows, records the constraint as written
    /// (as `terraform init` does), and carries well-formed hashes: `zh:` for each of the 13
    /// archives a release of terraform-provider-hcloud ships (freebsd, linux, windows: 386,
    /// amd64, arm, arm64 but windows/arm; darwin: amd64, arm64) and at least one `h1:`.
    #[test]
    fn the_provider_is_pinned_to_a_minor_range_and_locked() {
        let versions = body("versions.tf");
        let terraform = blocks(&versions, "terraform")[0];
        let required = terraform
            .body
            .blocks()
            .find(|b| b.ident.as_str() == "required_providers")
            .expect("required_providers");
        let hcloud = required.body.get_attribute("hcloud").expect("hcloud");
        let Expression::Object(obj) = &hcloud.value else {
            panic!("hcloud is an object")
        };
        let field = |key: &str| -> String {
            obj.iter()
                .find(|(k, _)| k.as_ident().is_some_and(|i| i.as_str() == key))
                .map(|(_, v)| string(v.expr()))
                .unwrap_or_else(|| panic!("hcloud.{key}"))
        };
        assert_eq!(field("source"), "hetznercloud/hcloud");
        let constraint = field("version");
        assert!(
            constraint.starts_with("~> 1."),
            "`{constraint}`: an upper bound within major version 1"
        );

        let lock = body(".terraform.lock.hcl");
        let providers = blocks(&lock, "provider");
        assert_eq!(providers.len(), 1, "one provider locked");
        let p = providers[0];
        assert_eq!(labels(p), ["registry.terraform.io/hetznercloud/hcloud"]);
        let version = string(&p.body.get_attribute("version").unwrap().value);
        assert!(
            satisfies_pessimistic(&version, &constraint),
            "the lock's {version} is outside versions.tf's `{constraint}`"
        );
        assert_eq!(
            string(&p.body.get_attribute("constraints").unwrap().value),
            constraint,
            "the lock records versions.tf's constraint"
        );
        let Expression::Array(hashes) = &p.body.get_attribute("hashes").unwrap().value else {
            panic!("hashes is a list")
        };
        let hashes: Vec<String> = hashes.iter().map(string).collect();
        let zh: Vec<&String> = hashes.iter().filter(|h| h.starts_with("zh:")).collect();
        let h1: Vec<&String> = hashes.iter().filter(|h| h.starts_with("h1:")).collect();
        assert_eq!(zh.len() + h1.len(), hashes.len(), "{hashes:?}");
        assert_eq!(zh.len(), 13, "one zh: per platform archive");
        assert!(!h1.is_empty());
        for h in &zh {
            let hex = &h[3..];
            assert!(
                hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()),
                "{h}"
            );
        }
        for h in &h1 {
            let b64 = &h[3..];
            assert!(
                b64.len() == 44
                    && b64.ends_with('=')
                    && b64[..43]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/'),
                "{h}"
            );
        }
        let mut sorted = hashes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            sorted, hashes,
            "sorted and unique, as terraform writes them"
        );
    }

    /// `terraform fmt -check` works offline: the module and the example variables file are
    /// formatted as Terraform formats them. Skipped (with a note) where Terraform is absent.
    #[test]
    fn terraform_fmt_finds_nothing_to_change() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform");
        let scratch = tempfile::tempdir().unwrap();
        let example = scratch.path().join("example.tfvars");
        std::fs::copy(root.join("terraform.tfvars.example"), &example).unwrap();
        for target in [root.as_path(), example.as_path()] {
            let out = match std::process::Command::new("terraform")
                .args(["fmt", "-check", "-diff", "-no-color"])
                .arg(target)
                .output()
            {
                Ok(out) => out,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    eprintln!("terraform is not installed: `terraform fmt -check` not run");
                    return;
                }
                Err(e) => panic!("terraform fmt: {e}"),
            };
            assert!(
                out.status.success(),
                "terraform fmt -check {}: {}",
                target.display(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}
