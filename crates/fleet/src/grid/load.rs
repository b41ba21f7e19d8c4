//! The load of the machines a Grid's browsers run on: every node set up by this
//! repository's `grid/` files (local Grid, cloud bootstrap, Terraform) serves
//! `grid/node-load.py` and names it in its stereotype (`"viewerfleet:load"`); the controller
//! reads it (`read_endpoint`) and turns two consecutive readings into a `NodeSample`
//! (`NodeLoadMeter`), so a starved node — which pushes its viewers' P2P traffic to HTTP —
//! shows in the raw data.

use crate::metrics::prom_text;
use crate::model::isolation::{BrowserIsolation, IsolationCount};
use crate::model::rawdata::NodeSample;
use std::time::Duration;

/// The load endpoint's script, as the local Grid writes it next to its nodes and the
/// cloud user data ships it.
pub(crate) const NODE_LOAD_SCRIPT: &str = include_str!("../../../../grid/node-load.py");

/// Port of the load endpoint on cloud nodes (`viewerfleet-load.service`).
pub(crate) const CLOUD_LOAD_PORT: u16 = 9465;

/// One node's load endpoint, as a fleet discovered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadEndpoint {
    /// The node as viewer events name it (its Grid URI).
    pub node: String,
    /// `http://…/metrics`.
    pub url: String,
}

/// What one read of an endpoint said; a metric the node could not read is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReading {
    pub cpus: Option<f64>,
    /// Machine-wide CPU seconds since boot (`mode="busy"|"steal"|"idle"`).
    pub busy_s: Option<f64>,
    pub steal_s: Option<f64>,
    pub idle_s: Option<f64>,
    pub quota_cores: Option<f64>,
    pub cgroup_usage_s: Option<f64>,
    pub periods: Option<f64>,
    pub throttled_periods: Option<f64>,
    pub pressure_s: Option<f64>,
    pub mem_total: Option<f64>,
    pub mem_available: Option<f64>,
    pub load1: Option<f64>,
    pub browsers_pss: Option<f64>,
    pub browser_processes: Option<f64>,
    /// Top-level browser processes by user and sandbox (`viewerfleet_node_browsers`).
    pub browsers_by_isolation: Vec<IsolationCount>,
}

impl LoadReading {
    /// Reads the exposition of `grid/node-load.py`. Unknown metrics are ignored.
    pub fn parse(text: &str) -> Result<Self, prom_text::ParseError> {
        let mut r = Self::default();
        for s in prom_text::parse(text)?
            .into_iter()
            .filter(|s| s.value.is_finite())
        {
            let v = Some(s.value);
            match (s.name.as_str(), s.label("mode")) {
                ("viewerfleet_node_cpu_seconds_total", Some("busy")) => r.busy_s = v,
                ("viewerfleet_node_cpu_seconds_total", Some("steal")) => r.steal_s = v,
                ("viewerfleet_node_cpu_seconds_total", Some("idle")) => r.idle_s = v,
                ("viewerfleet_node_cpus", _) => r.cpus = v,
                ("viewerfleet_node_cgroup_cpu_quota_cores", _) => r.quota_cores = v,
                ("viewerfleet_node_cgroup_cpu_usage_seconds_total", _) => r.cgroup_usage_s = v,
                ("viewerfleet_node_cgroup_cpu_periods_total", _) => r.periods = v,
                ("viewerfleet_node_cgroup_cpu_throttled_periods_total", _) => {
                    r.throttled_periods = v
                }
                ("viewerfleet_node_cpu_pressure_seconds_total", _) => r.pressure_s = v,
                ("viewerfleet_node_memory_total_bytes", _) => r.mem_total = v,
                ("viewerfleet_node_memory_available_bytes", _) => r.mem_available = v,
                ("viewerfleet_node_load1", _) => r.load1 = v,
                ("viewerfleet_node_browsers_pss_bytes", _) => r.browsers_pss = v,
                ("viewerfleet_node_browser_processes", _) => r.browser_processes = v,
                ("viewerfleet_node_browsers", _) => {
                    let sandbox = match s.label("sandbox") {
                        Some("on") => true,
                        Some("off") => false,
                        _ => continue,
                    };
                    match s.label("user") {
                        Some(user) if !user.is_empty() && s.value >= 0.0 => {
                            r.browsers_by_isolation.push(IsolationCount {
                                isolation: BrowserIsolation {
                                    user: user.to_string(),
                                    sandbox,
                                },
                                browsers: s.value.min(f64::from(u32::MAX)) as u32,
                            })
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Ok(r)
    }
}

/// A client for load endpoints: every request bounded by `timeout`.
pub fn client(timeout: Duration) -> reqwest::Client {
    crate::sys::tls::http_client_builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .unwrap_or_default()
}

/// `GET url` and parse it; the error says what went wrong in a line.
pub async fn read_endpoint(client: &reqwest::Client, url: &str) -> Result<LoadReading, String> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET {url}: HTTP status {}", status.as_u16()));
    }
    let text = response
        .text()
        .await
        .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
    LoadReading::parse(&text).map_err(|e| format!("GET {url}: unparsable exposition: {e}"))
}

/// reqwest's message and its causes (a bare "error sending request" says nothing).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// One node's samples from consecutive readings: shares cover the time since the previous
/// good reading (a failed one in between makes the next interval longer, never wrong).
#[derive(Debug, Clone)]
pub struct NodeLoadMeter {
    node: String,
    /// The previous good reading and when it arrived (seconds on the controller's clock).
    last: Option<(LoadReading, f64)>,
}

impl NodeLoadMeter {
    pub fn new(node: &str) -> Self {
        Self {
            node: node.to_string(),
            last: None,
        }
    }

    /// The node this meter is for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// A sample at run time `t` from a read that arrived at `at` (seconds, monotonic).
    /// The first good reading has no shares yet (nothing to compare with).
    pub fn sample(&mut self, t: f64, reading: Result<LoadReading, String>, at: f64) -> NodeSample {
        let now = match reading {
            Ok(now) => now,
            Err(error) => {
                return NodeSample {
                    t,
                    node: self.node.clone(),
                    ok: false,
                    error: Some(error),
                    ..Default::default()
                }
            }
        };
        let before = self.last.replace((now.clone(), at));
        let delta = |f: fn(&LoadReading) -> Option<f64>| -> Option<f64> {
            let (b, _) = before.as_ref()?;
            // A counter that went back (a restarted node, processes gone from a v1
            // cgroup without cpuacct) counts as no progress.
            Some((f(&now)? - f(b)?).max(0.0))
        };
        let wall = before.as_ref().map(|(_, t0)| at - t0).filter(|w| *w > 0.0);
        let machine_total = match (delta(|r| r.busy_s), delta(|r| r.idle_s)) {
            (Some(b), Some(i)) if b + i > 0.0 => Some(b + i),
            _ => None,
        };
        let machine_busy = machine_total.and_then(|total| Some(delta(|r| r.busy_s)? / total));
        let quota = now.quota_cores.filter(|q| *q > 0.0);
        let cpu_busy = match (quota, delta(|r| r.cgroup_usage_s), wall) {
            (Some(q), Some(used), Some(w)) => Some(used / (w * q)),
            _ => machine_busy,
        };
        let cpu_throttled = match (quota, delta(|r| r.periods), delta(|r| r.throttled_periods)) {
            (Some(_), Some(p), Some(th)) if p > 0.0 => Some((th / p).clamp(0.0, 1.0)),
            // A cgroup with a quota that ran nothing was never throttled.
            (Some(_), Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
        let mem_used = match (now.mem_total, now.mem_available) {
            (Some(total), Some(available)) => Some((total - available).max(0.0) as u64),
            _ => None,
        };
        NodeSample {
            t,
            node: self.node.clone(),
            ok: true,
            error: None,
            cores: quota.or(now.cpus),
            cpu_busy,
            cpu_steal: machine_total
                .and_then(|total| Some((delta(|r| r.steal_s)? / total).clamp(0.0, 1.0))),
            cpu_throttled,
            cpu_pressure: wall.and_then(|w| Some((delta(|r| r.pressure_s)? / w).clamp(0.0, 1.0))),
            mem_used_bytes: mem_used,
            mem_total_bytes: now.mem_total.map(|v| v as u64),
            load1: now.load1,
            browsers_pss_bytes: now.browsers_pss.map(|v| v as u64),
            browser_processes: now.browser_processes.map(|v| v as u32),
            browsers_by_isolation: now.browsers_by_isolation.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exposition as `node-load.py` writes it, with the counters given.
    fn text(
        busy: f64,
        idle: f64,
        steal: f64,
        usage: Option<f64>,
        periods: (f64, f64),
        psi: f64,
    ) -> String {
        let mut t = format!(
            "# HELP viewerfleet_node_cpu_seconds_total CPU time.\n# TYPE viewerfleet_node_cpu_seconds_total counter\n\
             viewerfleet_node_cpu_seconds_total{{mode=\"busy\"}} {busy}\n\
             viewerfleet_node_cpu_seconds_total{{mode=\"steal\"}} {steal}\n\
             viewerfleet_node_cpu_seconds_total{{mode=\"idle\"}} {idle}\n\
             viewerfleet_node_cpus 2.0\n\
             viewerfleet_node_cpu_pressure_seconds_total{{scope=\"cgroup\"}} {psi}\n\
             viewerfleet_node_memory_total_bytes 8000000000.0\n\
             viewerfleet_node_memory_available_bytes 6000000000.0\n\
             viewerfleet_node_load1 1.5\n\
             viewerfleet_node_browsers_pss_bytes 462000000.0\n\
             viewerfleet_node_browser_processes 20.0\n"
        );
        if let Some(u) = usage {
            t.push_str(&format!(
                "viewerfleet_node_cgroup_cpu_quota_cores 0.25\n\
                 viewerfleet_node_cgroup_cpu_usage_seconds_total {u}\n\
                 viewerfleet_node_cgroup_cpu_periods_total {}\n\
                 viewerfleet_node_cgroup_cpu_throttled_periods_total {}\n",
                periods.0, periods.1
            ));
        }
        t
    }

    fn reading(text: &str) -> Result<LoadReading, String> {
        LoadReading::parse(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_quota_makes_busy_the_cgroups_use_of_its_quota() {
        let mut m = NodeLoadMeter::new("http://127.0.0.1:5555");
        let first = m.sample(
            1.0,
            reading(&text(100.0, 300.0, 1.0, Some(10.0), (50.0, 10.0), 3.0)),
            10.0,
        );
        assert!(first.ok && first.cpu_busy.is_none() && first.cpu_pressure.is_none());
        assert_eq!(first.cores, Some(0.25));
        assert_eq!(first.mem_used_bytes, Some(2_000_000_000));
        assert_eq!(
            (first.browsers_pss_bytes, first.browser_processes),
            (Some(462_000_000), Some(20))
        );
        // 4 s later: the cgroup used 0.95 s of 4 × 0.25 = 1 s; 40 of 50 periods throttled;
        // the machine: 6 of 8 s busy, 1 s of it steal; 2 s of pressure.
        let s = m.sample(
            3.0,
            reading(&text(106.0, 302.0, 2.0, Some(10.95), (100.0, 50.0), 5.0)),
            14.0,
        );
        assert_eq!(s.node, "http://127.0.0.1:5555");
        assert!((s.cpu_busy.unwrap() - 0.95).abs() < 1e-9, "{s:?}");
        assert!((s.cpu_throttled.unwrap() - 0.8).abs() < 1e-9, "{s:?}");
        assert!((s.cpu_steal.unwrap() - 0.125).abs() < 1e-9, "{s:?}");
        assert!((s.cpu_pressure.unwrap() - 0.5).abs() < 1e-9, "{s:?}");
        assert_eq!(s.load1, Some(1.5));
    }

    #[test]
    fn without_a_quota_busy_is_the_machines() {
        let mut m = NodeLoadMeter::new("n");
        m.sample(
            0.0,
            reading(&text(100.0, 300.0, 0.0, None, (0.0, 0.0), 0.0)),
            0.0,
        );
        let s = m.sample(
            2.0,
            reading(&text(103.0, 304.0, 0.0, None, (0.0, 0.0), 0.0)),
            2.0,
        );
        assert!((s.cpu_busy.unwrap() - 3.0 / 7.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.cpu_throttled, None);
        assert_eq!(s.cores, Some(2.0));
        assert_eq!(s.cpu_pressure, Some(0.0));
    }

    #[test]
    fn a_failed_read_is_recorded_and_the_next_compares_with_the_last_good_one() {
        let mut m = NodeLoadMeter::new("n");
        m.sample(
            0.0,
            reading(&text(100.0, 300.0, 0.0, Some(1.0), (10.0, 0.0), 0.0)),
            0.0,
        );
        let failed = m.sample(2.0, Err("GET x: connection refused".into()), 2.0);
        assert!(!failed.ok && failed.cpu_busy.is_none());
        assert_eq!(failed.error.as_deref(), Some("GET x: connection refused"));
        let s = m.sample(
            4.0,
            reading(&text(102.0, 302.0, 0.0, Some(1.5), (10.0, 0.0), 0.0)),
            4.0,
        );
        // 0.5 s of 4 s × 0.25 cores; no period ran: not throttled.
        assert!((s.cpu_busy.unwrap() - 0.5).abs() < 1e-9, "{s:?}");
        assert_eq!(s.cpu_throttled, Some(0.0));
        // A counter that went back is no progress, not a negative share.
        let s = m.sample(
            6.0,
            reading(&text(1.0, 1.0, 0.0, Some(0.2), (1.0, 0.0), 0.0)),
            6.0,
        );
        assert_eq!(s.cpu_busy, Some(0.0));
    }

    #[test]
    fn malformed_text_is_an_error_and_missing_metrics_are_absent() {
        assert!(LoadReading::parse("viewerfleet_node_cpus{ 2").is_err());
        let r = LoadReading::parse("viewerfleet_node_cpus 4\nsomething_else 1\n").unwrap();
        assert_eq!(r.cpus, Some(4.0));
        let mut m = NodeLoadMeter::new("n");
        m.sample(0.0, Ok(r.clone()), 0.0);
        let s = m.sample(1.0, Ok(r), 1.0);
        assert!(
            s.ok && s.cpu_busy.is_none() && s.mem_used_bytes.is_none(),
            "{s:?}"
        );
    }

    #[test]
    fn browsers_are_counted_by_user_and_sandbox_and_kept_in_the_sample() {
        let exposition = "# TYPE viewerfleet_node_browsers gauge\n\
             viewerfleet_node_browsers{user=\"viewerfleet-browser\",sandbox=\"on\"} 3.0\n\
             viewerfleet_node_browsers{user=\"root\",sandbox=\"off\"} 1.0\n\
             viewerfleet_node_browsers{user=\"ann\"} 2.0\n\
             viewerfleet_node_browsers{user=\"\",sandbox=\"on\"} 2.0\n\
             viewerfleet_node_browsers{user=\"bob\",sandbox=\"maybe\"} 2.0\n";
        let r = LoadReading::parse(exposition).unwrap();
        let way = |user: &str, sandbox, browsers| IsolationCount {
            isolation: BrowserIsolation {
                user: user.into(),
                sandbox,
            },
            browsers,
        };
        let want = vec![way("viewerfleet-browser", true, 3), way("root", false, 1)];
        assert_eq!(
            r.browsers_by_isolation, want,
            "a series without both labels is left out"
        );
        let s = NodeLoadMeter::new("n").sample(1.0, Ok(r), 1.0);
        assert_eq!(s.browsers_by_isolation, want);
        // An endpoint that does not count them (an older node-load.py): nothing to say.
        let older = LoadReading::parse(&text(100.0, 300.0, 0.0, None, (0.0, 0.0), 0.0)).unwrap();
        assert!(older.browsers_by_isolation.is_empty());
    }
}
