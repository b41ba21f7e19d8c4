//! The Grafana dashboards, checked offline: valid JSON in the current schema with the
//! datasource as a template variable, and every metric a panel queries is one that the
//! controller or refsite really exports (scraped live here), or — for exporters that do
//! not run here (PeerTube's Node.js metrics, node_exporter) — one that stands in a committed
//! real-format scrape. A renamed metric breaks this test.

use std::collections::BTreeSet;
use std::time::Duration;
use viewerfleet::metrics::controller::{self, ControllerMetrics};
use viewerfleet::metrics::prom_text;
use viewerfleet::refsite::{self, RefsiteConfig};

const DASHBOARDS: &[&str] = &["target-bandwidth", "run", "target-resources"];
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

fn load(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(format!("dashboards/{name}.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("dashboards/{name}.json: {e}"))
}

/// Metric names a PromQL expression reads: identifiers that are not functions (followed
/// by `(`), not keywords, not inside label matchers `{…}`, `by (…)` lists or ranges `[…]`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut cleaned = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    for c in expr.chars() {
        match c {
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            _ => cleaned.push(c),
        }
    }
    let cleaned = regex_lite_strip_grouping(&cleaned);
    let mut names = Vec::new();
    let chars: Vec<char> = cleaned.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_alphabetic() || chars[i] == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if next != Some(&'(') && !PROMQL_WORDS.contains(&word.to_lowercase().as_str()) {
                names.push(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// Removes `by (...)` / `without (...)` label lists.
fn regex_lite_strip_grouping(expr: &str) -> String {
    let mut out = expr.to_string();
    for kw in ["by", "without"] {
        while let Some(pos) = out.find(&format!("{kw} (")) {
            let end = out[pos..]
                .find(')')
                .map(|e| pos + e + 1)
                .unwrap_or(out.len());
            out.replace_range(pos..end, "");
        }
    }
    out
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_queries_a_metric_that_is_really_exported() {
    // Live scrape 1: the controller's own endpoint.
    let stop = tokio_util::sync::CancellationToken::new();
    let addr = controller::serve(
        ControllerMetrics::new(),
        "127.0.0.1:0".parse().unwrap(),
        stop.clone(),
    )
    .await
    .unwrap();
    let controller_text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    stop.cancel();

    // Live scrape 2: refsite, after one playback report so the peertube_* series exist.
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
    let refsite_text = client
        .get(format!("{}/metrics", site.base_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    site.shutdown().await;

    let mut exported = BTreeSet::new();
    for text in [
        controller_text.as_str(),
        refsite_text.as_str(),
        include_str!("../fixtures/prom/peertube-playback.txt"),
        include_str!("../fixtures/prom/node-exporter.txt"),
    ] {
        for s in prom_text::parse(text).unwrap() {
            exported.insert(base_name(&s.name).to_string());
        }
    }
    // What only a live run produces must be there without the fixtures' help.
    for must in [
        "viewerfleet_viewers",
        "peertube_playback_http_downloaded_bytes_total",
        "peertube_playback_p2p_downloaded_bytes_total",
    ] {
        assert!(exported.contains(must), "{must} not exported");
    }

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
                let names = metric_names(expr);
                assert!(
                    !names.is_empty(),
                    "{name}/{title}: `{expr}` reads no metric"
                );
                for m in names {
                    assert!(exported.contains(base_name(&m)), "{name}/{title}: `{m}` is not exported by the controller, refsite, PeerTube or node_exporter");
                }
            }
        }
    }
}
