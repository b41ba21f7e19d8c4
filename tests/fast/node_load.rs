//! The nodes' load endpoint (`grid/node-load.py`, run with this machine's python3) as the
//! controller reads it: one exposition holds every metric, in the format the controller's
//! parser takes, with HELP and TYPE lines; a served endpoint answers its allowed clients
//! only, and only on `GET /metrics`.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use viewerfleet::grid::load::{self, LoadReading};
use viewerfleet::metrics::prom_text;
use viewerfleet::sys::cgroup::{self, CpuCgroup};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/grid/node-load.py");

fn once(cgroup: &str) -> String {
    let out = Command::new("python3")
        .args([SCRIPT, "--once", "--cgroup", cgroup])
        .output()
        .expect("python3 is installed (make system-deps)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every metric of the exposition is documented, parses, and the reading has it.
fn check(text: &str, quota: bool) -> LoadReading {
    let samples = prom_text::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for s in &samples {
        let family = s.name.as_str();
        assert!(
            text.contains(&format!("# HELP {family} "))
                && text.contains(&format!("# TYPE {family} ")),
            "{family} has HELP and TYPE lines"
        );
        assert_eq!(
            text.contains(&format!("# TYPE {family} counter")),
            family.ends_with("_total"),
            "{family}: counters, and only they, end in _total"
        );
    }
    let r = LoadReading::parse(text).unwrap();
    let mut present = vec![
        ("cpus", r.cpus),
        ("busy", r.busy_s),
        ("steal", r.steal_s),
        ("idle", r.idle_s),
        ("cgroup usage", r.cgroup_usage_s),
        ("periods", r.periods),
        ("throttled periods", r.throttled_periods),
        ("pressure", r.pressure_s),
        ("memory total", r.mem_total),
        ("memory available", r.mem_available),
        ("load1", r.load1),
        ("browsers' PSS", r.browsers_pss),
        ("browser processes", r.browser_processes),
    ];
    if quota {
        present.push(("quota", r.quota_cores));
    }
    for (what, value) in present {
        assert!(value.is_some(), "{what} missing from:\n{text}");
    }
    r
}

#[test]
fn one_exposition_holds_every_metric_the_controller_reads() {
    if !cgroup::available() {
        // No cgroup on this machine: the machine's metrics only.
        let r = LoadReading::parse(&once("none")).unwrap();
        assert!(r.busy_s.is_some() && r.mem_total.is_some() && r.cgroup_usage_s.is_none());
        return;
    }
    // Its own cgroup: no quota there, so no quota metric.
    let r = check(&once("auto"), false);
    assert!(r.cpus.unwrap() >= 1.0 && r.mem_available <= r.mem_total);
    // A cgroup with a quota, where this test may make one (as root).
    if nix::unistd::geteuid().is_root() {
        let rel = format!("viewerfleet/test-node-load-{}", std::process::id());
        let cg = CpuCgroup::create(std::path::Path::new(&rel), Some(0.5)).unwrap();
        let text = once(&cg.dir().to_string_lossy());
        let errors = cg.remove();
        assert!(errors.is_empty() && !cg.exists(), "{errors:?}");
        let r = check(&text, true);
        assert_eq!(r.quota_cores, Some(0.5));
        assert_eq!(r.browser_processes, Some(0.0), "nothing runs in it");
    }
}

/// A served endpoint, stopped when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(listen: &str, allow: &str) -> Self {
        let mut child = Command::new("python3")
            .args([SCRIPT, "--listen", listen, "--allow", allow])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 is installed (make system-deps)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Self {
            child,
            url: line.trim().to_string(),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn status(method: reqwest::Method, url: &str) -> u16 {
    reqwest::Client::new()
        .request(method, url)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn only_allowed_clients_read_it_and_only_get_metrics_is_served() {
    let other = Served::start("127.0.0.1:0", "192.0.2.7,2001:db8::/32");
    assert!(other.url.starts_with("http://127.0.0.1:"), "{}", other.url);
    assert_eq!(status(reqwest::Method::GET, &other.url).await, 403);

    let ours = Served::start("[::1]:0", "127.0.0.1,::1");
    assert!(ours.url.starts_with("http://[::1]:"), "{}", ours.url);
    assert_eq!(status(reqwest::Method::GET, &ours.url).await, 200);
    let elsewhere = ours.url.replace("/metrics", "/");
    assert_eq!(status(reqwest::Method::GET, &elsewhere).await, 404);
    assert_eq!(status(reqwest::Method::POST, &ours.url).await, 404);
    // What the controller's sampler reads from it.
    let reading = load::read_endpoint(&load::client(std::time::Duration::from_secs(5)), &ours.url)
        .await
        .unwrap();
    assert!(reading.busy_s.is_some() && reading.browser_processes.is_some());
    let refused = load::read_endpoint(&load::client(std::time::Duration::from_secs(5)), &other.url)
        .await
        .unwrap_err();
    assert!(refused.contains("HTTP status 403"), "{refused}");
}
