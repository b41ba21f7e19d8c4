//! The Grafana dashboards and the bundle that shows them, checked offline: valid JSON in
//! the current schema with the datasource and the run as template variables; every query
//! filters by `run`; every metric a panel queries is one the controller really exposes with
//! the run's label — its own, or the target's it relays (refsite scraped live here and
//! relayed through a live controller endpoint), or, for exporters that do not run here,
//! one that stands in a committed real-format scrape (PeerTube's, relayed the same way;
//! node_exporter's, scraped directly and shown while the selected run was live). The compose
//! files and Prometheus configurations connect as shipped. A renamed metric breaks this test.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use viewerfleet::metrics::controller::{self, ControllerMetrics};
use viewerfleet::metrics::prom_text;
use viewerfleet::metrics::scrape::KEPT_PREFIXES;
use viewerfleet::refsite::{self, RefsiteConfig};

const DASHBOARDS: &[&str] = &["target-bandwidth", "run", "target-resources"];
const RUN: &str = "dashboards-check";
/// The selector every query carries.
const RUN_MATCHER: &str = "run=\"$run\"";
const PROMQL_WORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "le",
    "inf",
    "nan",
];
/// Words followed by a parenthesised label list, not a call.
const GROUPING_WORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn load(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(format!("dashboards/{name}.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("dashboards/{name}.json: {e}"))
}

/// The vector selectors of a PromQL expression: each metric name (an identifier that is
/// not a function, keyword or label list) with its label matchers (`{…}`, empty when none).
/// Ranges `[…]` and strings are skipped.
fn selectors(expr: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = expr.chars().collect();
    // The index after the first `close` from `from` that is not inside a quoted string.
    let skip_to = |from: usize, close: char| -> usize {
        let mut quoted = false;
        let mut j = from;
        while j < chars.len() {
            match chars[j] {
                '\\' if quoted => j += 1,
                '"' => quoted = !quoted,
                c if c == close && !quoted => return j + 1,
                _ => {}
            }
            j += 1;
        }
        chars.len()
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '[' {
            i = skip_to(i, ']');
        } else if c == '{' {
            i = skip_to(i, '}');
        } else if c == '"' {
            // A string: past its closing quote (skip_to would take this quote as the close).
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = (i..chars.len()).find(|&j| !chars[j].is_whitespace());
            let next_char = next.map(|j| chars[j]);
            let next_word: String = next
                .map(|j| {
                    chars[j..]
                        .iter()
                        .take_while(|c| c.is_ascii_alphabetic())
                        .collect()
                })
                .unwrap_or_default();
            let lower = word.to_lowercase();
            if GROUPING_WORDS.contains(&lower.as_str()) && next_char == Some('(') {
                i = skip_to(next.unwrap(), ')');
            } else if next_char == Some('(')
                || PROMQL_WORDS.contains(&lower.as_str())
                || ["by", "without"].contains(&next_word.as_str())
            {
                // A function, a keyword, or an aggregation (`sum by (…) (…)`).
            } else if next_char == Some('{') {
                let open = next.unwrap();
                let close = skip_to(open, '}');
                found.push((word, chars[open + 1..close - 1].iter().collect()));
                i = close;
            } else {
                found.push((word, String::new()));
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Metric names a PromQL expression reads.
fn metric_names(expr: &str) -> Vec<String> {
    selectors(expr).into_iter().map(|(name, _)| name).collect()
}

/// A histogram is queried through `_bucket`/`_sum`/`_count` series.
fn base_name(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

#[test]
fn promql_names_are_extracted() {
    assert_eq!(
        metric_names("histogram_quantile(0.95, sum by (le) (rate(a_bucket{x=\"y\"}[1m]))) / b"),
        vec!["a_bucket", "b"]
    );
    assert_eq!(
        metric_names("1 - avg(rate(node_cpu_seconds_total{mode=\"idle\"}[1m]))"),
        vec!["node_cpu_seconds_total"]
    );
    assert_eq!(
        selectors("sum(rate(x_total{run=\"$run\",a=\"{b}\"}[1m])) * 8 and on () group(up_ratio{run=\"$run\"}) offset 5m"),
        vec![
            ("x_total".to_string(), "run=\"$run\",a=\"{b}\"".to_string()),
            ("up_ratio".to_string(), "run=\"$run\"".to_string()),
        ]
    );
    assert_eq!(
        metric_names("label_replace(a, \"d\", \"$1 \\\" b\", \"s\", \"(c)\")"),
        vec!["a"]
    );
}

/// The `run` and `job` labels of one sample.
type RunAndJob = (Option<String>, Option<String>);

/// Metrics a scrape of `text` exposes (histograms by their base name), each with its
/// samples' `run` and `job` labels.
fn exposed(text: &str) -> BTreeMap<String, Vec<RunAndJob>> {
    let mut names: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for s in prom_text::parse(text).unwrap() {
        names
            .entry(base_name(&s.name).to_string())
            .or_default()
            .push((
                s.label("run").map(str::to_string),
                s.label("job").map(str::to_string),
            ));
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_queries_by_run_a_metric_the_controller_really_exposes() {
    // refsite, after one playback report so the peertube_* series exist.
    let media = tempfile::tempdir().unwrap();
    let mut config = RefsiteConfig::new(media.path().to_path_buf(), refsite::default_web_dir());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.live = false;
    config.vod_length = Duration::from_secs(10);
    let cancel = tokio_util::sync::CancellationToken::new();
    let site = refsite::start(config, cancel.clone()).await.unwrap();
    let video = site.videos[0].id.clone();
    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "playerMode": "p2p-media-loader", "resolution": 240, "fps": 25, "p2pEnabled": true,
        "p2pPeers": 2, "resolutionChanges": 0, "errors": 0, "bufferStalled": 1,
        "downloadedBytesP2P": 10, "downloadedBytesHTTP": 20, "uploadedBytesP2P": 5, "videoId": video
    });
    let posted = client
        .post(format!("{}/api/v1/metrics/playback", site.base_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success(), "{}", posted.status());
    // A segment fetch makes the ground-truth series appear.
    let segment = client
        .get(format!(
            "{}/static/streaming-playlists/hls/{video}/v0/seg_000.ts",
            site.base_url
        ))
        .send()
        .await
        .unwrap();
    assert!(
        segment.status().is_success(),
        "segment: {}",
        segment.status()
    );
    segment.bytes().await.unwrap();
    let exporter_url = format!("{}/metrics", site.base_url);
    let refsite_text = client
        .get(&exporter_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    site.shutdown().await;

    // The controller relays that scrape, as a run's exporter sampler does; its endpoint is
    // scraped live, as Prometheus does.
    let metrics = ControllerMetrics::new(RUN);
    metrics.relay_target(&exporter_url, Some(&refsite_text));
    let stop = tokio_util::sync::CancellationToken::new();
    let addr = controller::serve(metrics, "127.0.0.1:0".parse().unwrap(), stop.clone())
        .await
        .unwrap();
    let controller_text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    stop.cancel();

    // One endpoint, every series labelled with the run; the target's as job="target".
    let controller = exposed(&controller_text);
    for (name, samples) in &controller {
        for (run, job) in samples {
            assert_eq!(run.as_deref(), Some(RUN), "{name} lacks the run label");
            let relayed = !name.starts_with("viewerfleet_");
            assert_eq!(
                job.as_deref() == Some("target"),
                relayed,
                "{name}: job {job:?}"
            );
        }
    }
    // What only a live run produces must be there without the fixtures' help.
    for must in [
        "viewerfleet_viewers",
        "peertube_playback_http_downloaded_bytes_total",
        "peertube_playback_p2p_downloaded_bytes_total",
        "refsite_origin_segment_bytes_total",
    ] {
        assert!(controller.contains_key(must), "{must} not exposed");
    }
    // PeerTube's exporter does not run here: its committed scrape stands in, for the
    // families the controller relays.
    let peertube_fixture = include_str!("../fixtures/prom/peertube-playback.txt");
    let peertube: BTreeSet<String> = exposed(peertube_fixture)
        .into_keys()
        .filter(|name| KEPT_PREFIXES.iter().any(|p| name.starts_with(p)))
        .collect();
    // node_exporter on the target host is scraped directly (job node): no run label.
    let node: BTreeSet<String> = exposed(include_str!("../fixtures/prom/node-exporter.txt"))
        .into_keys()
        .collect();

    for name in DASHBOARDS {
        let d = load(name);
        assert!(
            d["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{name}: uid"
        );
        assert!(d["schemaVersion"].as_u64().unwrap() >= 36, "{name}: schema");
        let vars = d["templating"]["list"].as_array().unwrap();
        assert!(
            vars.iter()
                .any(|v| v["type"] == "datasource" && v["name"] == "datasource"),
            "{name}: datasource variable"
        );
        let run = vars
            .iter()
            .find(|v| v["name"] == "run")
            .unwrap_or_else(|| panic!("{name}: no run variable"));
        assert_eq!(run["type"], "query", "{name}: run variable");
        assert_eq!(run["datasource"]["uid"], "${datasource}", "{name}");
        let query = run["query"].as_str().unwrap();
        let from = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(", run)"))
            .unwrap_or_else(|| panic!("{name}: run variable query `{query}`"));
        assert!(
            controller.contains_key(from) && from.starts_with("viewerfleet_"),
            "{name}: the run variable reads `{from}`, which the controller does not export"
        );
        let panels = d["panels"].as_array().unwrap();
        assert!(!panels.is_empty());
        for panel in panels {
            let title = panel["title"].as_str().unwrap();
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{name}/{title}: datasource must be the variable"
            );
            for key in ["x", "y", "w", "h"] {
                assert!(
                    panel["gridPos"][key].is_u64(),
                    "{name}/{title}: gridPos.{key}"
                );
            }
            let targets = panel["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{name}/{title}: no query");
            for t in targets {
                let expr = t["expr"].as_str().unwrap();
                let found = selectors(expr);
                assert!(
                    !found.is_empty(),
                    "{name}/{title}: `{expr}` reads no metric"
                );
                assert!(
                    expr.contains(RUN_MATCHER),
                    "{name}/{title}: `{expr}` does not filter by run"
                );
                for (m, matchers) in found {
                    let m = base_name(&m);
                    if node.contains(m) {
                        // Shown while the selected run was live.
                        assert!(
                            expr.contains(
                                "and on () group(viewerfleet_run_elapsed_seconds{run=\"$run\"})"
                            ),
                            "{name}/{title}: `{expr}` shows node_exporter's `{m}` outside the run"
                        );
                        continue;
                    }
                    assert!(
                        controller.contains_key(m) || peertube.contains(m),
                        "{name}/{title}: `{m}` is not exposed by the controller (its own, or relayed from refsite or PeerTube)"
                    );
                    assert!(
                        matchers.contains(RUN_MATCHER),
                        "{name}/{title}: `{m}{{{matchers}}}` in `{expr}` does not select the run"
                    );
                }
            }
        }
    }
}

/// The bundle connects as shipped: on Linux both containers on the host's network, so
/// Prometheus reaches the loopback-only controller; both listen on loopback; Prometheus
/// scrapes the address GUIDE.md's `--metrics-listen` gives, honouring the relayed labels;
/// Docker Desktop's variant differs only in how the host is reached.
#[test]
fn the_compose_bundle_reaches_the_controller_as_shipped() {
    type Yaml = yaml_serde::Value;
    let read = |file: &str| -> Yaml {
        let text = std::fs::read_to_string(format!("dashboards/{file}")).unwrap();
        yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("dashboards/{file}: {e}"))
    };
    let strings = |v: &Yaml| -> Vec<String> {
        v.as_sequence()
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let guide = std::fs::read_to_string("GUIDE.md").unwrap();
    assert!(
        guide.contains("--metrics-listen 127.0.0.1:9464"),
        "GUIDE.md's address"
    );

    let linux = read("docker-compose.yml");
    let desktop = read("docker-compose.desktop.yml");
    for service in ["prometheus", "grafana"] {
        let s = &linux["services"][service];
        assert_eq!(s["network_mode"].as_str(), Some("host"), "{service}");
        assert!(
            s["ports"].is_null(),
            "{service}: ports mean nothing on the host's network"
        );
        let d = &desktop["services"][service];
        assert!(d["network_mode"].is_null(), "{service}");
        for port in strings(&d["ports"]) {
            assert!(
                port.starts_with("127.0.0.1:"),
                "{service}: {port} not on loopback"
            );
        }
    }
    let command = strings(&linux["services"]["prometheus"]["command"]);
    assert!(
        command.contains(&"--web.listen-address=127.0.0.1:9090".to_string()),
        "{command:?}"
    );
    let grafana = &linux["services"]["grafana"]["environment"];
    assert_eq!(grafana["GF_SERVER_HTTP_ADDR"].as_str(), Some("127.0.0.1"));
    assert_eq!(
        grafana["PROMETHEUS_URL"].as_str(),
        Some("http://127.0.0.1:9090")
    );
    assert_eq!(
        desktop["services"]["grafana"]["environment"]["PROMETHEUS_URL"].as_str(),
        Some("http://prometheus:9090")
    );
    let datasource = read("provisioning/datasources/prometheus.yml");
    assert_eq!(
        datasource["datasources"][0]["url"].as_str(),
        Some("${PROMETHEUS_URL}")
    );
    for (compose, config) in [
        (&linux, "prometheus.yml"),
        (&desktop, "prometheus.desktop.yml"),
    ] {
        let volumes = strings(&compose["services"]["prometheus"]["volumes"]);
        assert!(
            volumes.contains(&format!("./{config}:/etc/prometheus/prometheus.yml:ro")),
            "{volumes:?}"
        );
    }

    let scrape_jobs = |config: &Yaml| -> BTreeMap<String, (bool, Vec<String>)> {
        config["scrape_configs"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|job| {
                let targets = job["static_configs"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .flat_map(|c| strings(&c["targets"]))
                    .collect();
                (
                    job["job_name"].as_str().unwrap().to_string(),
                    (job["honor_labels"].as_bool() == Some(true), targets),
                )
            })
            .collect()
    };
    let jobs = scrape_jobs(&read("prometheus.yml"));
    assert_eq!(
        jobs["viewerfleet"],
        (true, vec!["127.0.0.1:9464".to_string()]),
        "the controller, honouring the relayed job and instance"
    );
    assert!(
        !jobs
            .values()
            .any(|(_, t)| t.iter().any(|t| t.ends_with(":8080"))),
        "the target comes through the controller: {jobs:?}"
    );
    // Docker Desktop: the same jobs, the host through host.docker.internal.
    let desktop_jobs = scrape_jobs(&read("prometheus.desktop.yml"));
    let moved: BTreeMap<_, _> = jobs
        .iter()
        .map(|(name, (honor, targets))| {
            let targets = targets
                .iter()
                .map(|t| t.replace("127.0.0.1:", "host.docker.internal:"))
                .collect();
            (name.clone(), (*honor, targets))
        })
        .collect();
    assert_eq!(desktop_jobs, moved);
}
