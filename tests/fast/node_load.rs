//! The nodes' load endpoint (`grid/node-load.py`, run with this machine's python3) as the
//! controller reads it: one exposition holds every metric, in the format the controller's
//! parser takes, with HELP and TYPE lines; a served endpoint answers its allowed clients
//! only, and only on `GET /metrics`; browsers are counted by the user they run as and
//! whether with Chromium's sandbox.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use viewerfleet::grid::load::{self, LoadReading};
use viewerfleet::metrics::prom_text;
use viewerfleet::sys::cgroup::{self, CpuCgroup};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/grid/node-load.py");

fn once(cgroup: &str) -> String {
    once_with(&["--cgroup", cgroup])
}

fn once_with(args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(SCRIPT)
        .arg("--once")
        .args(args)
        .output()
        .expect("python3 is installed (make system-deps)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every metric family of the exposition has HELP and TYPE lines, and counters are named so.
fn documented(text: &str) {
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
}

/// Every metric of the exposition is documented, parses, and the reading has it.
fn check(text: &str, quota: bool) -> LoadReading {
    documented(text);
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

/// Processes standing for browsers, killed when dropped.
struct Dummies(Vec<Child>);

impl Drop for Dummies {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Browsers are told from their helpers by `--type=`, their sandbox by `--no-sandbox` and
/// their user by their real uid: processes named as the `--browser-comm` given (a link to
/// this machine's python, sleeping) stand for a browser with and one without the sandbox and
/// a helper; as root, a copy of `sleep` of that name runs as `nobody` too.
#[test]
fn browsers_are_counted_by_user_and_sandbox() {
    let comm = format!("vfb-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let python = Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .expect("python3 is installed (make system-deps)");
    let python = String::from_utf8(python.stdout).unwrap();
    let browser = dir.path().join(&comm);
    std::os::unix::fs::symlink(python.trim(), &browser).unwrap();
    let sleeping = |extra: &str| {
        let mut cmd = Command::new(&browser);
        cmd.args(["-c", "import time; time.sleep(60)"]);
        if !extra.is_empty() {
            cmd.arg(extra);
        }
        cmd.spawn().unwrap()
    };
    let mut dummies = Dummies(vec![
        sleeping("--no-sandbox"),
        sleeping(""),
        sleeping("--type=renderer"),
    ]);
    let root = nix::unistd::geteuid().is_root();
    let other = tempfile::tempdir().unwrap();
    if root {
        use std::os::unix::fs::PermissionsExt;
        let sleep = other.path().join(&comm);
        std::fs::copy("/bin/sleep", &sleep).unwrap();
        std::fs::set_permissions(other.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        dummies.0.push(
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&sleep)
                .arg("60")
                .spawn()
                .expect("setpriv (util-linux)"),
        );
    }
    let me = Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8(me.stdout).unwrap().trim().to_string();
    // Each process has its name once it runs its program.
    let named = |c: &Child| {
        std::fs::read_to_string(format!("/proc/{}/comm", c.id())).unwrap_or_default()
            == format!("{comm}\n")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !dummies.0.iter().all(named) {
        assert!(
            std::time::Instant::now() < deadline,
            "the dummies did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let text = once_with(&["--cgroup", "none", "--browser-comm", &comm]);
    documented(&text);
    let mut want = vec![
        format!("viewerfleet_node_browsers{{user=\"{me}\",sandbox=\"off\"}} 1.0"),
        format!("viewerfleet_node_browsers{{user=\"{me}\",sandbox=\"on\"}} 1.0"),
    ];
    if root {
        want.push("viewerfleet_node_browsers{user=\"nobody\",sandbox=\"on\"} 1.0".into());
    }
    want.sort();
    let mut got: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("viewerfleet_node_browsers{"))
        .collect();
    got.sort();
    assert_eq!(got, want, "the helper (--type=) is not a browser:\n{text}");
    // The controller's reading: every process counted, the browsers by how they ran.
    let r = LoadReading::parse(&text).unwrap();
    assert_eq!(r.browser_processes, Some(dummies.0.len() as f64), "{text}");
    let ways: Vec<(String, bool, u32)> = r
        .browsers_by_isolation
        .iter()
        .map(|c| (c.isolation.user.clone(), c.isolation.sandbox, c.browsers))
        .collect();
    assert!(
        ways.contains(&(me.clone(), false, 1)) && ways.contains(&(me, true, 1)),
        "{ways:?}"
    );
    drop(dummies);
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
