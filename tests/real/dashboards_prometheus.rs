//! The Grafana bundle's Prometheus side against a real Prometheus: Debian's `prometheus`
//! 2.42 (its binary only, with its own configuration, storage folder and port; the
//! package's service stays off). A short run on the `local` fleet (refsite live, real
//! Chromium) with `--metrics-listen`, and Prometheus started on `dashboards/prometheus.yml`
//! as shipped but for the controller's port (a free one instead of 9464, so the test never
//! meets a run of the machine's user). Then, through Prometheus's HTTP API:
//!
//! - it scraped the controller (`up{job="viewerfleet"} == 1` while the run went);
//! - the controller's own series and the target's it relays carry the run's `run` label,
//!   the relayed ones as `job="target"` with the exporter's address as `instance`
//!   (federation's labels, kept by the configuration's `honor_labels`); no series of either
//!   job lacks the run;
//! - the dashboards' `run` variable (`label_values(…, run)`, asked the way Grafana asks it)
//!   lists the run;
//! - every panel query of every dashboard, with `$run` set to the run, returns data over the
//!   run — but for queries of metrics that cannot exist in this run, named in
//!   `ABSENT_HERE` with the reason.

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";
const DASHBOARDS: &[&str] = &["run", "target-bandwidth", "target-resources"];
/// Metrics a dashboard reads that a `local` run with refsite cannot have.
const ABSENT_HERE: &[(&str, &str)] = &[
    (
        "process_cpu_seconds_total",
        "PeerTube's process metrics; refsite has none",
    ),
    ("nodejs_memory_usage_bytes", "PeerTube's Node.js metrics"),
    ("node_cpu_seconds_total", "node_exporter, not running here"),
    (
        "node_network_transmit_bytes_total",
        "node_exporter, not running here",
    ),
    (
        "peertube_playback_buffer_stalled_count_total",
        "appears after a first stall (PeerTube's behaviour, which refsite copies)",
    ),
];

/// A child killed (SIGTERM, then waited for) when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: plain kill(2) on our own child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.0.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The repository's Prometheus configuration, the controller's address moved to `port`.
fn render_config(dir: &Path, port: u16) -> std::path::PathBuf {
    let shipped = std::fs::read_to_string("dashboards/prometheus.yml").unwrap();
    assert_eq!(
        shipped.matches("\"127.0.0.1:9464\"").count(),
        1,
        "dashboards/prometheus.yml scrapes the controller at 127.0.0.1:9464"
    );
    let path = dir.join("prometheus.yml");
    std::fs::write(
        &path,
        shipped.replace("\"127.0.0.1:9464\"", &format!("\"127.0.0.1:{port}\"")),
    )
    .unwrap();
    path
}

fn scenario(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("live.yaml");
    std::fs::write(
        &path,
        "name: dashboards-live\ntarget:\n  kind: refsite\n  video: live\n  latency: normal\n  metrics_interval: 2s\nviewers:\n  count: 3\n  ramp: 4s\nduration: 45s\nsampling_interval: 1s\nsteady_window: 10s\nfleet:\n  kind: local\n",
    )
    .unwrap();
    path
}

struct Api {
    base: String,
    client: reqwest::Client,
}

impl Api {
    async fn get(&self, path: &str, params: &[(&str, String)]) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .query(params)
            .send()
            .await
            .unwrap_or_else(|e| panic!("Prometheus {path}: {e}"));
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert!(
            status.is_success() && body["status"] == "success",
            "Prometheus {path} {params:?}: {status} {body}"
        );
        body["data"].clone()
    }

    async fn instant(&self, query: &str) -> Vec<Value> {
        let data = self
            .get("/api/v1/query", &[("query", query.to_string())])
            .await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    async fn range(&self, query: &str, start: f64, end: f64) -> Vec<Value> {
        let data = self
            .get(
                "/api/v1/query_range",
                &[
                    ("query", query.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                    ("step", "2".to_string()),
                ],
            )
            .await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    async fn series(&self, selector: &str, start: f64, end: f64) -> Vec<Value> {
        let data = self
            .get(
                "/api/v1/series",
                &[
                    ("match[]", selector.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                ],
            )
            .await;
        data.as_array().cloned().unwrap_or_default()
    }
}

/// The finite values of a range query's result.
fn finite_values(result: &[Value]) -> Vec<f64> {
    result
        .iter()
        .flat_map(|s| s["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v[1].as_str().and_then(|x| x.parse::<f64>().ok()))
        .filter(|v| v.is_finite())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_controller_and_every_dashboard_query_finds_the_run() {
    assert!(
        Path::new(PROMETHEUS).exists(),
        "{PROMETHEUS} missing: `make system-deps` installs Debian's prometheus"
    );
    let dir = tempfile::tempdir().unwrap();
    let (controller_port, prometheus_port) = (free_port(), free_port());
    let config = render_config(dir.path(), controller_port);
    for file in [
        config.as_path(),
        Path::new("dashboards/prometheus.desktop.yml"),
    ] {
        let check = Command::new(PROMTOOL)
            .args(["check", "config"])
            .arg(file)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "promtool check config {}: {}{}",
            file.display(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }

    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prometheus = Reaped(
        Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let api = Api {
        base: format!("http://127.0.0.1:{prometheus_port}"),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = api
            .client
            .get(format!("{}/-/ready", api.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never became ready: {}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The run; its folder's name is the run label.
    let run = format!("dashboards-{}", std::process::id());
    let start = now();
    let mut viewerfleet = Reaped(
        Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
            .args(["--quiet", "run"])
            .arg(scenario(dir.path()))
            .arg("--out")
            .arg(dir.path().join(&run))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{controller_port}"))
            .arg("--no-report")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );

    // Prometheus scrapes the controller while the run goes.
    let deadline = Instant::now() + Duration::from_secs(120);
    let up = loop {
        let up = api.instant("up{job=\"viewerfleet\"}").await;
        if up.first().is_some_and(|s| s["value"][1] == "1") {
            break up;
        }
        assert!(
            Instant::now() < deadline && viewerfleet.0.try_wait().unwrap().is_none(),
            "Prometheus never scraped the controller: {up:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(
        up[0]["metric"]["instance"],
        format!("127.0.0.1:{controller_port}")
    );

    let status = loop {
        if let Some(status) = viewerfleet.0.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(status.code(), Some(0), "the run failed");
    // The samples of the last scrapes are in; leave a margin for the final one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let end = now();

    // The controller's series and the relayed ones carry the run.
    let labelled = api.series(&format!("{{run=\"{run}\"}}"), start, end).await;
    let name = |s: &Value| s["__name__"].as_str().unwrap_or_default().to_string();
    let own: Vec<&Value> = labelled
        .iter()
        .filter(|s| name(s).starts_with("viewerfleet_"))
        .collect();
    let relayed: Vec<&Value> = labelled
        .iter()
        .filter(|s| !name(s).starts_with("viewerfleet_"))
        .collect();
    assert!(
        own.iter().all(|s| s["job"] == "viewerfleet"),
        "the controller's own series: {own:?}"
    );
    for needed in [
        "viewerfleet_viewers",
        "viewerfleet_run_elapsed_seconds",
        "viewerfleet_exporter_up",
    ] {
        assert!(
            own.iter().any(|s| name(s) == needed),
            "{needed} lacks the run"
        );
    }
    for needed in [
        "peertube_playback_http_downloaded_bytes_total",
        "refsite_origin_segment_bytes_total",
    ] {
        let series: Vec<_> = relayed.iter().filter(|s| name(s) == needed).collect();
        assert!(!series.is_empty(), "{needed} was not relayed with the run");
        for s in series {
            assert_eq!(s["job"], "target", "{s}");
            let instance = s["instance"].as_str().unwrap();
            assert!(
                instance.starts_with("127.0.0.1:")
                    && instance != format!("127.0.0.1:{controller_port}"),
                "the relayed series name refsite's address: {s}"
            );
        }
    }
    assert!(
        relayed.iter().all(|s| s["job"] == "target"),
        "relayed series keep job=\"target\""
    );
    let unlabelled = api
        .series(
            "{job=~\"viewerfleet|target\",run=\"\",__name__!~\"up|scrape_.+\"}",
            start,
            end,
        )
        .await;
    assert!(
        unlabelled.is_empty(),
        "series without the run label: {unlabelled:?}"
    );
    let requested = api
        .range(
            &format!("viewerfleet_viewers_requested{{run=\"{run}\"}}"),
            start,
            end,
        )
        .await;
    assert!(
        finite_values(&requested).contains(&3.0),
        "viewers requested: {requested:?}"
    );

    // The dashboards: their run variable lists the run, and every query finds it.
    let mut checked = 0;
    for dashboard in DASHBOARDS {
        let text = std::fs::read_to_string(format!("dashboards/{dashboard}.json")).unwrap();
        let d: Value = serde_json::from_str(&text).unwrap();
        let variable = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "run")
            .unwrap();
        let query = variable["query"].as_str().unwrap();
        let metric = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(", run)"))
            .unwrap();
        let runs = api
            .get(
                "/api/v1/label/run/values",
                &[
                    ("match[]", metric.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                ],
            )
            .await;
        assert!(
            runs.as_array().unwrap().iter().any(|r| r == &run),
            "{dashboard}: `{query}` gives {runs}"
        );
        for panel in d["panels"].as_array().unwrap() {
            let title = panel["title"].as_str().unwrap();
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                if let Some((metric, why)) = ABSENT_HERE.iter().find(|(m, _)| expr.contains(m)) {
                    eprintln!("{dashboard}/{title}: `{expr}` not checked here ({metric}: {why})");
                    continue;
                }
                let query = expr.replace("$run", &run);
                let result = api.range(&query, start, end).await;
                assert!(
                    !finite_values(&result).is_empty(),
                    "{dashboard}/{title}: `{query}` returned no data over the run: {result:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} queries checked");
}
