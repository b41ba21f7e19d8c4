//! The controller's own Prometheus metrics (`viewerfleet_*`), served on `--metrics-listen`
//! while a run is going, so a long run can be watched in Grafana like the target itself.
//! Hot paths only touch atomics inside the `prometheus` types.
//!
//! Every series carries the run's `run` label (the run folder's name, e.g.
//! `live-normal-20261201T101500Z`), so one Prometheus can keep many runs apart and the
//! dashboards' `run` variable picks one. Beside its own series the endpoint relays the last
//! successful scrape of the target's exporter (`relay`), so Prometheus needs to scrape the
//! controller only.

use super::relay;
use super::scrape::KEPT_PREFIXES;
use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The label every series of the endpoint carries: the run folder's name.
pub(crate) const RUN_LABEL: &str = "run";

/// Viewer states as exported (`viewerfleet_viewers{state=…}`).
pub(crate) const VIEWER_STATES: &[&str] = &[
    "starting", "playing", "stalled", "failed", "lost", "stopped",
];

/// Kinds of `viewerfleet_webdriver_errors_total`.
pub(crate) const WEBDRIVER_ERROR_KINDS: &[&str] = &[
    "session_not_created",
    "timeout",
    "command",
    "never_played",
    "profile",
];

/// Buckets of `viewerfleet_session_create_seconds`: a quarter second to two minutes, steps
/// growing about like Fibonacci numbers.
const SESSION_CREATE_BUCKETS: [f64; 12] = [
    0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 60.0, 120.0,
];

#[derive(Clone)]
pub struct ControllerMetrics {
    registry: Registry,
    run: Arc<str>,
    /// The target's last successful scrape, rewritten for relaying (empty: nothing to relay).
    relayed: Arc<RwLock<String>>,
    pub viewers_requested: IntGauge,
    pub viewers: IntGaugeVec,
    pub session_create_seconds: Histogram,
    pub webdriver_errors: IntCounterVec,
    pub player_http_bytes: IntCounter,
    pub player_p2p_down_bytes: IntCounter,
    pub player_p2p_up_bytes: IntCounter,
    pub player_peers: IntGauge,
    pub player_stalls: IntCounter,
    pub scrapes: IntCounterVec,
    pub scrape_duration_seconds: Gauge,
    pub scrape_up: IntGauge,
    pub fleet_nodes: IntGaugeVec,
    pub run_elapsed_seconds: Gauge,
    pub host_cpu_busy_ratio: Gauge,
    pub node_cpu_busy_ratio: GaugeVec,
    pub target_cpu_seconds: Gauge,
    pub target_resident_memory_bytes: Gauge,
}

/// Makes metrics and registers each in the registry as it is made (names are fixed and
/// unique, so neither step can fail).
struct Registrar(Registry);

impl Registrar {
    fn add<M: Collector + Clone + 'static>(&self, metric: prometheus::Result<M>) -> M {
        let metric = metric.expect("valid metric");
        self.0
            .register(Box::new(metric.clone()))
            .expect("unique metric names");
        metric
    }

    fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.add(Histogram::with_opts(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        ))
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help))
    }

    fn gauge(&self, name: &str, help: &str) -> Gauge {
        self.add(Gauge::new(name, help))
    }

    fn int_gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help))
    }

    fn counter_vec(&self, name: &str, help: &str, label: &str) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), &[label]))
    }

    fn int_gauge_vec(&self, name: &str, help: &str, label: &str) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), &[label]))
    }

    fn gauge_vec(&self, name: &str, help: &str, label: &str) -> GaugeVec {
        self.add(GaugeVec::new(Opts::new(name, help), &[label]))
    }
}

/// The `run` label of a run written to `out`: the run folder's name (the whole path as
/// given when it has none, e.g. `..`).
pub fn run_label(out: &Path) -> String {
    std::path::absolute(out)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| out.display().to_string())
}

impl ControllerMetrics {
    /// The metrics of one run; `run` labels every series (see `run_label`).
    pub fn new(run: &str) -> Self {
        let labels = HashMap::from([(RUN_LABEL.to_string(), run.to_string())]);
        let registry =
            Registry::new_custom(None, Some(labels)).expect("`run` is a valid label name");
        let r = Registrar(registry);
        let m = Self {
            run: run.into(),
            relayed: Arc::default(),
            // The viewers and their WebDriver sessions.
            viewers_requested: r.int_gauge(
                "viewerfleet_viewers_requested",
                "Viewers the scenario asks for.",
            ),
            viewers: r.int_gauge_vec("viewerfleet_viewers", "Viewers by state.", "state"),
            session_create_seconds: r.histogram(
                "viewerfleet_session_create_seconds",
                "Time to create one WebDriver session.",
                &SESSION_CREATE_BUCKETS,
            ),
            webdriver_errors: r.counter_vec(
                "viewerfleet_webdriver_errors_total",
                "WebDriver errors by kind.",
                "kind",
            ),
            // What the players report, summed over viewers.
            player_http_bytes: r.counter(
                "viewerfleet_player_http_downloaded_bytes_total",
                "Bytes the players downloaded over HTTP, summed over viewers.",
            ),
            player_p2p_down_bytes: r.counter(
                "viewerfleet_player_p2p_downloaded_bytes_total",
                "Bytes the players downloaded from peers, summed over viewers.",
            ),
            player_p2p_up_bytes: r.counter(
                "viewerfleet_player_p2p_uploaded_bytes_total",
                "Bytes the players uploaded to peers, summed over viewers.",
            ),
            player_peers: r.int_gauge(
                "viewerfleet_player_p2p_peers",
                "P2P connections the players report, summed over viewers.",
            ),
            player_stalls: r.counter(
                "viewerfleet_player_stalls_total",
                "Rebuffering events after the first frame, summed over viewers.",
            ),
            // The controller's scrapes of the target's exporter.
            scrapes: r.counter_vec(
                "viewerfleet_exporter_scrapes_total",
                "Scrapes of the target's exporter by result.",
                "result",
            ),
            scrape_duration_seconds: r.gauge(
                "viewerfleet_exporter_scrape_duration_seconds",
                "Duration of the last scrape of the target's exporter.",
            ),
            scrape_up: r.int_gauge(
                "viewerfleet_exporter_up",
                "1 when the last scrape of the target's exporter succeeded.",
            ),
            // The fleet, the run and the machines' resources.
            fleet_nodes: r.int_gauge_vec(
                "viewerfleet_fleet_nodes",
                "Fleet nodes by state.",
                "state",
            ),
            run_elapsed_seconds: r.gauge(
                "viewerfleet_run_elapsed_seconds",
                "Seconds since the run started.",
            ),
            host_cpu_busy_ratio: r.gauge(
                "viewerfleet_host_cpu_busy_ratio",
                "Busy share of all cores of the load generator, 0 to 1.",
            ),
            node_cpu_busy_ratio: r.gauge_vec(
                "viewerfleet_node_cpu_busy_ratio",
                "Busy share of what a viewer node's browsers may use (its CPU quota, else its cores), 0 to 1, from its load endpoint.",
                "node",
            ),
            target_cpu_seconds: r.gauge(
                "viewerfleet_target_cpu_seconds",
                "CPU seconds used by the target's processes (local targets).",
            ),
            target_resident_memory_bytes: r.gauge(
                "viewerfleet_target_resident_memory_bytes",
                "Resident memory of the target's processes (local targets).",
            ),
            registry: r.0,
        };
        m.zero_known_labels();
        m
    }

    /// Known label values start at 0, so dashboards and rate() see them from the start.
    fn zero_known_labels(&self) {
        for state in VIEWER_STATES {
            self.viewers.with_label_values(&[state]).set(0);
        }
        for kind in WEBDRIVER_ERROR_KINDS {
            self.webdriver_errors.with_label_values(&[kind]);
        }
        for result in ["ok", "error"] {
            self.scrapes.with_label_values(&[result]);
        }
        for state in ["up", "starting", "lost"] {
            self.fleet_nodes.with_label_values(&[state]).set(0);
        }
    }

    /// Moves one viewer from one state to another (either may be absent).
    pub fn move_viewer(&self, from: Option<&str>, to: Option<&str>) {
        if let Some(from) = from {
            self.viewers.with_label_values(&[from]).dec();
        }
        if let Some(to) = to {
            self.viewers.with_label_values(&[to]).inc();
        }
    }

    /// The run's label value.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// Relays the last scrape of the target's exporter at `exporter_url`: its body when the
    /// scrape succeeded, `None` when it failed (then nothing is relayed until the next
    /// success, as Prometheus shows nothing of a target it fails to scrape).
    pub fn relay_target(&self, exporter_url: &str, body: Option<&str>) {
        let text = body
            .and_then(|body| {
                let instance = relay::instance_of(exporter_url);
                let labels = [
                    ("job", relay::TARGET_JOB),
                    ("instance", instance.as_str()),
                    (RUN_LABEL, &*self.run),
                ];
                let relayed = relay::relay(body, KEPT_PREFIXES, &labels).ok()?;
                Some(format!(
                    "# Relayed from the target's exporter at {instance} (its last scrape by this controller).\n{relayed}"
                ))
            })
            .unwrap_or_default();
        *self.relayed.write().unwrap_or_else(|e| e.into_inner()) = text;
    }

    /// The text exposition of every metric, then the target's relayed series.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("encoding to a Vec cannot fail");
        let mut text = String::from_utf8(out).expect("the text format is UTF-8");
        text.push_str(&self.relayed.read().unwrap_or_else(|e| e.into_inner()));
        text
    }
}

/// Serves `/metrics` on a loopback address until `stop`. Non-loopback addresses are
/// refused: the controller's endpoint describes a run and must not face the internet.
pub async fn serve(
    metrics: ControllerMetrics,
    listen: std::net::SocketAddr,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<std::net::SocketAddr> {
    if !listen.ip().is_loopback() {
        anyhow::bail!(
            "--metrics-listen {listen}: only loopback addresses are allowed (e.g. 127.0.0.1:9464); put a reverse proxy in front to expose it"
        );
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-listen {listen}: cannot listen: {e}"))?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    metrics.render(),
                )
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    });
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::prom_text;

    #[test]
    fn exposition_parses_and_follows_conventions() {
        let m = ControllerMetrics::new("live-20261201T101500Z");
        m.viewers_requested.set(4);
        m.move_viewer(None, Some("starting"));
        m.move_viewer(Some("starting"), Some("playing"));
        m.player_http_bytes.inc_by(1000);
        m.webdriver_errors.with_label_values(&["timeout"]).inc();
        let samples = prom_text::parse(&m.render()).unwrap();
        let get = |name: &str, label: Option<(&str, &str)>| {
            samples
                .iter()
                .find(|s| s.name == name && label.is_none_or(|(k, v)| s.label(k) == Some(v)))
                .map(|s| s.value)
        };
        assert_eq!(
            get("viewerfleet_viewers", Some(("state", "playing"))),
            Some(1.0)
        );
        assert_eq!(
            get("viewerfleet_viewers", Some(("state", "starting"))),
            Some(0.0)
        );
        assert_eq!(
            get("viewerfleet_player_http_downloaded_bytes_total", None),
            Some(1000.0)
        );
        for s in &samples {
            assert!(s.name.starts_with("viewerfleet_"), "{}", s.name);
            assert_eq!(s.label("run"), Some("live-20261201T101500Z"), "{}", s.name);
        }
    }

    #[test]
    fn the_targets_last_good_scrape_is_relayed_and_a_failed_one_clears_it() {
        let m = ControllerMetrics::new("r1");
        let body = "# TYPE refsite_origin_segment_bytes_total counter\n\
                    refsite_origin_segment_bytes_total{video=\"v\"} 42\ngo_gc 1\n";
        m.relay_target("http://[fd00::2]:8080/metrics", Some(body));
        let text = m.render();
        let samples = prom_text::parse(&text).unwrap();
        let relayed: Vec<_> = samples
            .iter()
            .filter(|s| !s.name.starts_with("viewerfleet_"))
            .collect();
        assert_eq!(relayed.len(), 1, "{text}");
        let s = relayed[0];
        assert_eq!(s.name, "refsite_origin_segment_bytes_total");
        assert_eq!(s.value, 42.0);
        assert_eq!(
            s.labels,
            [
                ("video".to_string(), "v".to_string()),
                ("job".to_string(), "target".to_string()),
                ("instance".to_string(), "[fd00::2]:8080".to_string()),
                ("run".to_string(), "r1".to_string()),
            ]
        );
        assert!(text.contains("# Relayed from the target's exporter at [fd00::2]:8080"));
        // A failed scrape: the target's series go, the controller's stay.
        m.relay_target("http://[fd00::2]:8080/metrics", None);
        let text = m.render();
        assert!(!text.contains("refsite_"), "{text}");
        assert!(text.contains("viewerfleet_viewers"));
    }

    #[test]
    fn the_run_label_is_the_run_folders_name() {
        assert_eq!(
            run_label(Path::new("runs/live-20261201T101500Z")),
            "live-20261201T101500Z"
        );
        assert_eq!(run_label(Path::new("/tmp/x/step-8/")), "step-8");
        assert!(!run_label(Path::new(".")).is_empty());
    }

    #[tokio::test]
    async fn refuses_non_loopback() {
        let stop = tokio_util::sync::CancellationToken::new();
        let err = serve(
            ControllerMetrics::new("r"),
            "0.0.0.0:0".parse().unwrap(),
            stop,
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("only loopback"), "{err}");
    }
}
