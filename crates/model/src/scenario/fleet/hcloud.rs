//! The `fleet: kind: hcloud` section of a scenario: where, on which server types, with which
//! per-viewer budget, and what to do when Hetzner says no. Validated before anything is created.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Hetzner Cloud fleet settings. Every field has a default; `plan` works with none set.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HcloudFleetSpec {
    /// Hetzner location for all servers, e.g. `fsn1`, `nbg1`, `hel1` [default: fsn1].
    #[serde(default = "default_location")]
    pub location: String,
    /// Server type of the viewer nodes; unset: the cheapest type for the run [default: unset].
    #[serde(default)]
    pub node_type: Option<String>,
    /// Server types `plan` may choose from when `node_type` is unset [default: every x86
    /// type orderable in the location and not deprecated, as `/server_types` lists them].
    #[serde(default)]
    pub node_types: Option<Vec<String>>,
    /// Server type of the Selenium hub (IPv4 + IPv6) [default: the cheapest x86 type
    /// orderable in the location, not deprecated, with at least 4 cores and 8 GB].
    #[serde(default)]
    pub hub_type: Option<String>,
    /// OS image [default: debian-12, what grid/node-bootstrap.sh is written for].
    #[serde(default = "default_image")]
    pub image: String,
    /// What one viewer costs on a node (CPU, memory) and what each node keeps for itself.
    #[serde(default)]
    pub budget: ViewerBudget,
    /// Force this many viewers per node instead of computing it from the budget.
    #[serde(default)]
    pub viewers_per_node: Option<u32>,
    /// Servers the Hetzner project may hold: the fleet (hub included) is sized to fit it,
    /// with bigger types if needed [default: 10, a new project's usual limit].
    #[serde(default = "default_server_limit")]
    pub server_limit: u32,
    /// Addresses (CIDR) of the machine running viewerfleet: only they reach the hub's port 4444
    /// and SSH. Needed for `up`/`run`, e.g. `["203.0.113.7/32", "2001:db8::/64"]`.
    #[serde(default)]
    pub controller_ips: Vec<String>,
    /// Accept `controller_ips` that open the hub's WebDriver port to (a large part of) the
    /// internet, e.g. `0.0.0.0/0`: whoever reaches it controls every browser of the run
    /// [default: false].
    #[serde(default)]
    pub webdriver_open_to_the_internet: bool,
    /// SSH public key file installed on every server [default: ~/.ssh/id_ed25519.pub, then id_rsa.pub].
    #[serde(default)]
    pub ssh_public_key: Option<String>,
    /// File holding the API token when `HCLOUD_TOKEN` is not set.
    #[serde(default)]
    pub token_file: Option<String>,
    /// When Hetzner answers `resource_limit_exceeded` part-way: `teardown` (default) or
    /// `run_with_what_exists`.
    #[serde(default)]
    pub on_limit: OnLimit,
    /// A node that has not registered with the hub in `register_timeout`: `drop` (default)
    /// or `replace` (one new server per missing node, once).
    #[serde(default)]
    pub on_node_failure: OnNodeFailure,
    /// How long nodes may take to boot, install and register [default: 15m].
    #[serde(default = "default_register_timeout")]
    pub register_timeout: String,
    /// Lifetime written into the servers' labels; `gc` deletes what outlived it [default: 4h
    /// after the run's planned end].
    #[serde(default = "default_ttl")]
    pub ttl: String,
    /// Servers created (and deleted) at once at most; fewer while the API's request budget
    /// is low [default: 10].
    #[serde(default = "default_parallel")]
    pub parallel_creates: u32,
    /// How often the controller refreshes the run's heartbeat label on the hub (one API
    /// request each); `gc` deletes runs whose heartbeat stopped [default: 1m].
    #[serde(default = "default_heartbeat")]
    pub heartbeat_interval: String,
    /// Make and measure one node first, then size the rest of the fleet from what a viewer
    /// costs there: `true`, or `{warmup: 30s, window: 60s}` [default: off; `--canary`].
    #[serde(default)]
    pub canary: Option<CanarySetting>,
}

/// `fleet.canary`: on or off, or on with its own timing.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum CanarySetting {
    On(bool),
    Timed(CanaryTimingSpec),
}

/// `fleet.canary: {warmup, window}`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryTimingSpec {
    /// After the canary's last viewer played, before the window [default: 30s].
    #[serde(default)]
    pub warmup: Option<String>,
    /// What the cost is measured over [default: 60s].
    #[serde(default)]
    pub window: Option<String>,
}

/// Defaults of `fleet.canary`.
pub(crate) const CANARY_WARMUP: Duration = Duration::from_secs(30);
pub(crate) const CANARY_WINDOW: Duration = Duration::from_secs(60);

/// What one viewer costs and what a node keeps for the OS, the JVM and the Selenium node.
/// With `viewers.per_browser: N`, a viewer costs `*_per_viewer + *_per_browser / N`: its
/// own tab (renderer, the player's work) plus its share of the browser it plays in.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ViewerBudget {
    /// CPU cores each viewer adds [default: measured for a 240p live viewer, BENCHMARKS.md].
    #[serde(default = "default_cpu")]
    pub cpu_per_viewer: f64,
    /// Memory (PSS) each viewer adds, in MB [default: measured for a 240p live viewer].
    #[serde(default = "default_mem")]
    pub memory_mb_per_viewer: f64,
    /// CPU cores of each browser, shared by its viewers [default: measured].
    #[serde(default = "default_cpu_browser")]
    pub cpu_per_browser: f64,
    /// Memory (PSS) of each browser in MB, shared by its viewers [default: measured].
    #[serde(default = "default_mem_browser")]
    pub memory_mb_per_browser: f64,
    /// Share of the node's cores the viewers may use, for headroom [default: 0.8].
    #[serde(default = "default_cpu_target")]
    pub cpu_target: f64,
    /// Cores kept for the OS and the Selenium node [default: 0.5].
    #[serde(default = "default_reserve_cpu")]
    pub node_reserve_cpu: f64,
    /// Memory kept for the OS and the JVM in MB [default: 1536].
    #[serde(default = "default_reserve_mem")]
    pub node_reserve_memory_mb: f64,
    /// CPU cores each light peer adds, in browser pages of 25 [default: 0.019, measured
    /// for a Chromium page of 25 live light peers, BENCHMARKS.md].
    #[serde(default = "default_cpu_light")]
    pub cpu_per_light_peer: f64,
    /// Memory (PSS) each light peer adds, in MB [default: 15, measured with the above].
    #[serde(default = "default_mem_light")]
    pub memory_mb_per_light_peer: f64,
}

impl Default for ViewerBudget {
    fn default() -> Self {
        ViewerBudget {
            cpu_per_viewer: default_cpu(),
            memory_mb_per_viewer: default_mem(),
            cpu_per_browser: default_cpu_browser(),
            memory_mb_per_browser: default_mem_browser(),
            cpu_target: default_cpu_target(),
            node_reserve_cpu: default_reserve_cpu(),
            node_reserve_memory_mb: default_reserve_mem(),
            cpu_per_light_peer: default_cpu_light(),
            memory_mb_per_light_peer: default_mem_light(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnLimit {
    #[default]
    Teardown,
    RunWithWhatExists,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnNodeFailure {
    #[default]
    Drop,
    Replace,
}

fn default_location() -> String {
    "fsn1".into()
}
fn default_image() -> String {
    "debian-12".into()
}
fn default_server_limit() -> u32 {
    10
}
fn default_register_timeout() -> String {
    "15m".into()
}
fn default_ttl() -> String {
    "4h".into()
}
fn default_parallel() -> u32 {
    10
}
fn default_heartbeat() -> String {
    "1m".into()
}
fn default_cpu() -> f64 {
    0.08
}
fn default_mem() -> f64 {
    140.0
}
fn default_cpu_light() -> f64 {
    0.019
}
fn default_mem_light() -> f64 {
    15.0
}
fn default_cpu_browser() -> f64 {
    0.0
}
fn default_mem_browser() -> f64 {
    55.0
}
fn default_cpu_target() -> f64 {
    0.8
}
fn default_reserve_cpu() -> f64 {
    0.5
}
fn default_reserve_mem() -> f64 {
    1536.0
}

impl Default for HcloudFleetSpec {
    fn default() -> Self {
        yaml_serde::from_str("{}").expect("every field has a default")
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A source range wider than a /8 (IPv4) or a /16 (IPv6): the whole internet at `/0`.
fn wide_open(addr: std::net::IpAddr, len: u8) -> bool {
    len < if addr.is_ipv4() { 8 } else { 16 }
}

/// A field below `fleet.` and a message naming the fix.
type FieldError = (String, String);

/// `Err((field, message))` unless `ok`.
fn ensure(ok: bool, field: &str, message: impl FnOnce() -> String) -> Result<(), FieldError> {
    if ok {
        Ok(())
    } else {
        Err((field.to_string(), message()))
    }
}

impl ViewerBudget {
    /// Per-viewer costs and node reserves within what a server can have.
    fn check(&self) -> Result<(), FieldError> {
        ensure(
            self.cpu_per_viewer > 0.0 && self.cpu_per_viewer <= 64.0,
            "budget.cpu_per_viewer",
            || {
                format!(
                    "{} must be above 0 and at most 64 cores (a 240p live viewer measured 0.071–0.079, BENCHMARKS.md)",
                    self.cpu_per_viewer
                )
            },
        )?;
        ensure(
            self.memory_mb_per_viewer >= 16.0 && self.memory_mb_per_viewer <= 65536.0,
            "budget.memory_mb_per_viewer",
            || {
                format!(
                    "{} must be between 16 and 65536 MB (a 240p live viewer measured 140 plus 55 per browser)",
                    self.memory_mb_per_viewer
                )
            },
        )?;
        ensure(
            self.cpu_target > 0.0 && self.cpu_target <= 1.0,
            "budget.cpu_target",
            || {
                format!(
                    "{} is not a share; use a number above 0 up to 1.0",
                    self.cpu_target
                )
            },
        )?;
        ensure(
            self.node_reserve_cpu >= 0.0 && self.node_reserve_memory_mb >= 0.0,
            "budget",
            || "node reserves cannot be negative".into(),
        )?;
        for (field, value, max) in [
            ("budget.cpu_per_light_peer", self.cpu_per_light_peer, 64.0),
            (
                "budget.memory_mb_per_light_peer",
                self.memory_mb_per_light_peer,
                65536.0,
            ),
        ] {
            ensure(value > 0.0 && value <= max, field, || {
                format!("{value} must be above 0 and at most {max} (a light peer in a Chromium page measured 0.016–0.019 cores and 14–15 MB, BENCHMARKS.md)")
            })?;
        }
        for (field, value, max) in [
            ("budget.cpu_per_browser", self.cpu_per_browser, 64.0),
            (
                "budget.memory_mb_per_browser",
                self.memory_mb_per_browser,
                65536.0,
            ),
        ] {
            ensure((0.0..=max).contains(&value), field, || {
                format!("{value} must be from 0 to {max} (what each browser costs besides its viewers; 0 puts the whole cost on the viewers)")
            })?;
        }
        Ok(())
    }
}

impl HcloudFleetSpec {
    /// Checks every field; errors are `(field below fleet., message naming the fix)`.
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        self.check_names()?;
        self.budget.check()?;
        self.check_counts()?;
        self.check_controller_ips()?;
        self.check_durations()?;
        self.check_canary()
    }

    /// Location, image and server types look like Hetzner names.
    fn check_names(&self) -> Result<(), FieldError> {
        ensure(is_name(&self.location), "location", || {
            format!(
                "`{}` is not a Hetzner location name; use e.g. fsn1, nbg1, hel1, ash, hil",
                self.location
            )
        })?;
        ensure(
            is_name(&self.image) || self.image.contains('.'),
            "image",
            || {
                format!(
                    "`{}` is not a Hetzner image name, e.g. debian-12",
                    self.image
                )
            },
        )?;
        let types = self.node_types.iter().flatten().enumerate();
        for (field, value) in [
            ("hub_type".to_string(), &self.hub_type),
            ("node_type".to_string(), &self.node_type),
        ]
        .into_iter()
        .filter_map(|(f, v)| v.as_ref().map(|v| (f, v)))
        .chain(types.map(|(i, t)| (format!("node_types[{i}]"), t)))
        {
            ensure(is_name(value), &field, || {
                format!("`{value}` is not a server type name, e.g. cx33 or ccx33 (see `viewerfleet plan` for what can be ordered)")
            })?;
        }
        ensure(
            !(self.node_type.is_none() && self.node_types.as_ref().is_some_and(|t| t.is_empty())),
            "node_types",
            || {
                "is empty; list server types to choose from, set node_type, or remove it to choose from every type on sale".into()
            },
        )
    }

    /// Viewers per node, servers in all, servers created at once.
    fn check_counts(&self) -> Result<(), FieldError> {
        ensure(self.viewers_per_node != Some(0), "viewers_per_node", || {
            "must be at least 1; remove it to compute it from the budget".into()
        })?;
        ensure(self.server_limit != 0, "server_limit", || {
            "must be at least 2 (a hub and a node)".into()
        })?;
        ensure(
            self.parallel_creates != 0 && self.parallel_creates <= 50,
            "parallel_creates",
            || format!("{} must be from 1 to 50", self.parallel_creates),
        )
    }

    /// Every controller address is a range, and none opens the hub to the internet unless
    /// that is asked for in so many words.
    fn check_controller_ips(&self) -> Result<(), FieldError> {
        for (i, cidr) in self.controller_ips.iter().enumerate() {
            let field = format!("controller_ips[{i}]");
            let Some((addr, len)) = crate::net::parse_cidr(cidr) else {
                return Err((field, format!("`{cidr}` is not an address range; write e.g. 203.0.113.7/32 or 2001:db8::/64")));
            };
            ensure(
                !wide_open(addr, len) || self.webdriver_open_to_the_internet,
                &field,
                || {
                    format!("`{cidr}` opens the hub's WebDriver port (4444) and SSH to {}: whoever reaches the port controls every browser of the run (their pages, cookies and network). List this machine's public address instead (e.g. 203.0.113.7/32; see `curl -4 ifconfig.co`), or, if you really mean it, set fleet.webdriver_open_to_the_internet: true", if len == 0 { "the whole internet" } else { "a large part of the internet" })
                },
            )?;
        }
        Ok(())
    }

    /// The timeouts are durations, and heartbeats neither flood the API nor look dead.
    fn check_durations(&self) -> Result<(), FieldError> {
        for (field, value) in [
            ("register_timeout", &self.register_timeout),
            ("ttl", &self.ttl),
            ("heartbeat_interval", &self.heartbeat_interval),
        ] {
            ensure(humantime::parse_duration(value).is_ok(), field, || {
                format!("`{value}` is not a duration; write e.g. 15m or 4h")
            })?;
        }
        let beat = self.heartbeat_interval();
        ensure(
            beat >= Duration::from_secs(1) && beat <= Duration::from_secs(300),
            "heartbeat_interval",
            || {
                format!("`{}` must be from 1s to 5m: each beat is one API request, and `gc` treats a heartbeat older than 10 minutes as a dead controller", self.heartbeat_interval)
            },
        )
    }

    /// The `controller_ips` that open the hub to (a large part of) the internet, accepted
    /// because `webdriver_open_to_the_internet` is set.
    pub fn open_to_the_internet(&self) -> Vec<String> {
        self.controller_ips
            .iter()
            .filter(|c| crate::net::parse_cidr(c).is_some_and(|(a, l)| wide_open(a, l)))
            .cloned()
            .collect()
    }

    pub fn heartbeat_interval(&self) -> Duration {
        humantime::parse_duration(&self.heartbeat_interval).unwrap_or(Duration::from_secs(60))
    }

    pub fn register_timeout(&self) -> Duration {
        humantime::parse_duration(&self.register_timeout).unwrap_or(Duration::from_secs(900))
    }

    pub fn ttl(&self) -> Duration {
        humantime::parse_duration(&self.ttl).unwrap_or(Duration::from_secs(4 * 3600))
    }

    /// The canary's warm-up and window, when the fleet starts with one.
    pub fn canary(&self) -> Option<(Duration, Duration)> {
        let parse = |v: &Option<String>, d: Duration| {
            v.as_deref()
                .and_then(|v| humantime::parse_duration(v).ok())
                .unwrap_or(d)
        };
        match &self.canary {
            None | Some(CanarySetting::On(false)) => None,
            Some(CanarySetting::On(true)) => Some((CANARY_WARMUP, CANARY_WINDOW)),
            Some(CanarySetting::Timed(t)) => Some((
                parse(&t.warmup, CANARY_WARMUP),
                parse(&t.window, CANARY_WINDOW),
            )),
        }
    }

    fn check_canary(&self) -> Result<(), FieldError> {
        let Some(CanarySetting::Timed(t)) = &self.canary else {
            return Ok(());
        };
        for (field, value, least) in [
            ("canary.warmup", &t.warmup, Duration::ZERO),
            ("canary.window", &t.window, Duration::from_secs(10)),
        ] {
            if let Some(value) = value {
                let parsed = humantime::parse_duration(value).map_err(|_| {
                    (
                        field.to_string(),
                        format!("`{value}` is not a duration; write e.g. 30s or 2m"),
                    )
                })?;
                ensure(
                    parsed >= least && parsed <= Duration::from_secs(3600),
                    field,
                    || {
                        format!(
                            "`{value}` must be from {} to 1h",
                            humantime::format_duration(least)
                        )
                    },
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canary_is_off_by_default_and_checked_when_timed() {
        let spec = |yaml: &str| -> HcloudFleetSpec { yaml_serde::from_str(yaml).unwrap() };
        assert_eq!(HcloudFleetSpec::default().canary(), None);
        assert_eq!(spec("canary: false").canary(), None);
        assert_eq!(
            spec("canary: true").canary(),
            Some((CANARY_WARMUP, CANARY_WINDOW))
        );
        let timed = spec("canary: {window: 2m}");
        assert_eq!(
            timed.canary(),
            Some((CANARY_WARMUP, Duration::from_secs(120)))
        );
        assert_eq!(timed.validate(10), Ok(()));
        let (field, message) = spec("canary: {window: 5s}").validate(10).unwrap_err();
        assert_eq!(field, "canary.window");
        assert!(message.contains("from 10s to 1h"), "{message}");
        assert!(yaml_serde::from_str::<HcloudFleetSpec>("canary: {windows: 1m}").is_err());
    }

    #[test]
    fn defaults_are_valid_and_measured() {
        let spec = HcloudFleetSpec::default();
        assert_eq!(spec.validate(1000), Ok(()));
        assert_eq!(spec.budget.cpu_per_viewer, 0.08);
        assert_eq!(spec.budget.memory_mb_per_viewer, 140.0);
        assert_eq!(spec.location, "fsn1");
    }

    #[test]
    fn errors_name_the_field() {
        let spec: HcloudFleetSpec =
            yaml_serde::from_str("controller_ips: [\"203.0.113.7\"]").unwrap();
        let (field, msg) = spec.validate(10).unwrap_err();
        assert_eq!(field, "controller_ips[0]");
        assert!(msg.contains("203.0.113.7/32"), "{msg}");
        let spec: HcloudFleetSpec = yaml_serde::from_str("budget: {cpu_per_viewer: 0}").unwrap();
        assert_eq!(spec.validate(10).unwrap_err().0, "budget.cpu_per_viewer");
        assert!(yaml_serde::from_str::<HcloudFleetSpec>("nodes: 3").is_err());
        let spec: HcloudFleetSpec = yaml_serde::from_str("node_types: [cx33, \"CX43\"]").unwrap();
        assert_eq!(spec.validate(10).unwrap_err().0, "node_types[1]");
        let spec: HcloudFleetSpec = yaml_serde::from_str("heartbeat_interval: 1h").unwrap();
        assert_eq!(spec.validate(10).unwrap_err().0, "heartbeat_interval");
    }

    #[test]
    fn no_server_type_is_built_in() {
        let spec = HcloudFleetSpec::default();
        assert_eq!(spec.hub_type, None, "the hub type comes from /server_types");
        assert_eq!(spec.node_types, None, "node types come from /server_types");
    }

    #[test]
    fn webdriver_open_to_the_world_is_refused_unless_opted_in() {
        for open in ["0.0.0.0/0", "::/0", "0.0.0.0/1", "2000::/3"] {
            let spec: HcloudFleetSpec =
                yaml_serde::from_str(&format!("controller_ips: [\"203.0.113.7/32\", \"{open}\"]"))
                    .unwrap();
            let (field, msg) = spec.validate(10).unwrap_err();
            assert_eq!(field, "controller_ips[1]", "{open}");
            assert!(
                msg.contains("controls every browser")
                    && msg.contains("webdriver_open_to_the_internet: true"),
                "{msg}"
            );
            let spec: HcloudFleetSpec = yaml_serde::from_str(&format!(
                "controller_ips: [\"{open}\"]\nwebdriver_open_to_the_internet: true"
            ))
            .unwrap();
            assert_eq!(spec.validate(10), Ok(()));
            assert_eq!(spec.open_to_the_internet(), vec![open.to_string()]);
        }
        let spec: HcloudFleetSpec =
            yaml_serde::from_str("controller_ips: [\"198.51.0.0/16\", \"2001:db8::/48\"]").unwrap();
        assert_eq!(spec.validate(10), Ok(()));
        assert!(spec.open_to_the_internet().is_empty());
    }
}
