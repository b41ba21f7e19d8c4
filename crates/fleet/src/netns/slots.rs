//! Slots on one bridge: `SlotNetwork` names them, computes their addresses and brings them
//! up and down by running `grid/viewer-slots.sh` (embedded), the one place that turns a
//! prefix and a count into namespaces, veths, addresses, routes and qdiscs.

use super::NetnsError;
use crate::model::kinds::{IpStack, NatKind};
use crate::model::scenario::LinkProfile;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// The slot script, as shipped in `grid/`.
pub const SLOT_SCRIPT: &str = include_str!("../../../../grid/viewer-slots.sh");

/// The script's shaping arguments for `link`: `--down-kbit`, `--up-kbit`, `--delay-ms`, 0
/// where the link does not limit (the round trip's half is added each way; needs netem).
fn shaping_args(link: &LinkProfile) -> Vec<String> {
    [
        ("--down-kbit", link.download_kbps),
        ("--up-kbit", link.upload_kbps),
        ("--delay-ms", link.latency_ms),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value.unwrap_or(0).to_string()])
    .collect()
}

/// How a slot reaches the emulated internet (`viewer-slots.sh --nat --stack --alternate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotAccess {
    pub nat: NatKind,
    /// `None`: the script's default (dual with an IPv4 segment, else IPv6 only).
    pub stack: Option<IpStack>,
    /// A second address on a public slot, for a STUN server's changed address.
    pub alternate: bool,
}

impl Default for SlotAccess {
    fn default() -> Self {
        Self {
            nat: NatKind::None,
            stack: None,
            alternate: false,
        }
    }
}

/// What the script set up for one slot, as it reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    pub index: u32,
    /// Namespace name.
    pub name: String,
    /// The slot's IPv6 address; `None` for an IPv4-only slot.
    pub address: Option<Ipv6Addr>,
    /// The bridge-side veth (download qdisc).
    pub host_veth: String,
    /// Download shaping, e.g. `tbf:2000kbit` or `none`.
    pub down: String,
    /// Upload shaping.
    pub up: String,
    /// Delay, e.g. `netem:250ms`, `none` or `not-applied(netem-missing)`.
    pub delay: String,
    /// The slot's own IPv4 address (behind a NAT: its LAN address).
    pub ipv4: Option<Ipv4Addr>,
    /// The IPv4 address the internet sees it as (its router's, or the CGN's).
    pub public_ipv4: Option<Ipv4Addr>,
    pub nat: NatKind,
    pub stack: IpStack,
    /// A public slot's second addresses (`--alternate`).
    pub alt_ipv4: Option<Ipv4Addr>,
    pub alt_address: Option<Ipv6Addr>,
}

impl SlotInfo {
    /// A rate limit is in place in at least one direction.
    pub fn rate_shaped(&self) -> bool {
        self.down != "none" || self.up != "none"
    }

    /// Whether the slot's latency (netem) was applied; `false` also when none was asked.
    pub(crate) fn delay_applied(&self) -> bool {
        self.delay.contains("netem:")
    }

    /// One line for logs and the report.
    pub fn describe(&self) -> String {
        let address = match (self.address, self.ipv4) {
            (Some(v6), Some(v4)) => format!("{v6}, {v4}"),
            (Some(v6), None) => v6.to_string(),
            (None, Some(v4)) => v4.to_string(),
            (None, None) => "no address".into(),
        };
        let nat = match (self.nat, self.public_ipv4) {
            (NatKind::None, _) => String::new(),
            (nat, Some(public)) => format!(" nat={nat} (as {public})"),
            (nat, None) => format!(" nat={nat}"),
        };
        format!(
            "{} [{address}] down={} up={} delay={}{nat}",
            self.name, self.down, self.up, self.delay
        )
    }

    /// Where a browser in this slot reaches a server at `v6`/`v4`: IPv6 when the slot has it.
    pub fn reaches(&self, v6: Option<Ipv6Addr>, v4: Option<Ipv4Addr>) -> Option<std::net::IpAddr> {
        match (self.stack.has_ipv6(), v6, self.stack.has_ipv4(), v4) {
            (true, Some(v6), _, _) => Some(v6.into()),
            (_, _, true, Some(v4)) => Some(v4.into()),
            _ => None,
        }
    }
}

/// Slots `<name_prefix><i>` with addresses `<prefix>::<i+2>` behind bridge `<name_prefix>br`.
#[derive(Debug, Clone)]
pub struct SlotNetwork {
    prefix: String,
    base: Ipv6Addr,
    name_prefix: String,
    bash: PathBuf,
    owner: Option<u32>,
    /// The bridge's IPv4 segment (`--ipv4`), if the slots have IPv4.
    ipv4: Option<String>,
}

/// The emulated internet's public IPv4 segment: RFC 2544's benchmarking range, which no
/// real network routes. Slot i is 198.18.0.(i+2); the CGN is 198.19.255.254.
pub const EMULATED_PUBLIC_IPV4: &str = "198.18.0.0/15";

impl SlotNetwork {
    /// `prefix` like `fd00:5f::/64` (ends in `::`, /48../112); `name_prefix` like `vf1a2b-`.
    /// `owner`: the PID whose death makes the slots leftovers for `gc` (None: manual).
    pub fn new(
        prefix: &str,
        name_prefix: &str,
        bash: PathBuf,
        owner: Option<u32>,
    ) -> Result<Self, NetnsError> {
        let base = crate::model::net::parse_prefix(prefix).map_err(NetnsError::BadPrefix)?;
        let valid_name = name_prefix.len() <= 8
            && name_prefix.starts_with(|c: char| c.is_ascii_lowercase())
            && name_prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid_name {
            return Err(NetnsError::BadPrefix(format!(
                "name prefix `{name_prefix}` must be 1-8 of [a-z0-9-] starting with a letter"
            )));
        }
        Ok(Self {
            prefix: prefix.to_string(),
            base,
            name_prefix: name_prefix.to_string(),
            bash,
            owner,
            ipv4: None,
        })
    }

    /// Gives the slots IPv4 on `cidr` (the bridge's segment, e.g. [`EMULATED_PUBLIC_IPV4`]).
    pub fn with_ipv4(mut self, cidr: &str) -> Self {
        self.ipv4 = Some(cidr.to_string());
        self
    }

    pub fn ipv4(&self) -> Option<&str> {
        self.ipv4.as_deref()
    }

    pub fn name_prefix(&self) -> &str {
        &self.name_prefix
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Namespace of slot `index`.
    pub fn ns_name(&self, index: u32) -> String {
        format!("{}{index}", self.name_prefix)
    }

    /// Address of slot `index`: the prefix's base plus `index + 2` (`::1` is the gateway).
    pub fn address(&self, index: u32) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.base) + u128::from(index) + 2)
    }

    /// Brings slots `first..first+count` up, each with tc shaping its link to `link`;
    /// creates the bridge if needed.
    pub async fn up(
        &self,
        first: u32,
        count: u32,
        link: LinkProfile,
    ) -> Result<Vec<SlotInfo>, NetnsError> {
        self.up_with(first, count, link, SlotAccess::default())
            .await
    }

    /// `up`, behind the NAT and with the address families `access` names.
    pub async fn up_with(
        &self,
        first: u32,
        count: u32,
        link: LinkProfile,
        access: SlotAccess,
    ) -> Result<Vec<SlotInfo>, NetnsError> {
        let mut args = self.range_args("up", first, count);
        if let Some(cidr) = &self.ipv4 {
            args.extend(["--ipv4".to_string(), cidr.clone()]);
        }
        args.extend(["--nat".to_string(), access.nat.to_string()]);
        if let Some(stack) = access.stack {
            args.extend(["--stack".to_string(), stack.to_string()]);
        }
        if access.alternate {
            args.push("--alternate".into());
        }
        args.extend(shaping_args(&link));
        let stdout = self.run_script(args).await?;
        let slots: Vec<SlotInfo> = stdout.lines().filter_map(parse_slot_line).collect();
        if slots.len() != count as usize {
            return Err(NetnsError::Script {
                action: "up".into(),
                code: 0,
                stderr: format!("expected {count} SLOT lines, got: {stdout}"),
            });
        }
        Ok(slots)
    }

    /// Removes slots `first..first+count`, and the bridge once no slot is left on it.
    pub async fn down(&self, first: u32, count: u32) -> Result<(), NetnsError> {
        self.run_script(self.range_args("down", first, count))
            .await
            .map(drop)
    }

    /// `down` for drop and panic paths, where no runtime may be available.
    pub fn down_blocking(&self, first: u32, count: u32) -> Result<(), NetnsError> {
        let output = self
            .command(self.range_args("down", first, count))
            .output()?;
        check_output("down", output).map(drop)
    }

    fn range_args(&self, action: &str, first: u32, count: u32) -> Vec<String> {
        vec![
            action.into(),
            "--prefix".into(),
            self.prefix.clone(),
            "--first".into(),
            first.to_string(),
            "--count".into(),
            count.to_string(),
            "--name-prefix".into(),
            self.name_prefix.clone(),
        ]
    }

    fn command(&self, args: Vec<String>) -> std::process::Command {
        let mut command = std::process::Command::new(&self.bash);
        command
            .arg("-c")
            .arg(SLOT_SCRIPT)
            .arg("viewer-slots.sh")
            .args(args)
            .stdin(std::process::Stdio::null());
        if let Some(pid) = self.owner {
            command.env("VF_SLOTS_OWNER", pid.to_string());
        }
        command
    }

    async fn run_script(&self, args: Vec<String>) -> Result<String, NetnsError> {
        let action = args[0].clone();
        let output = tokio::process::Command::from(self.command(args))
            .kill_on_drop(true)
            .output()
            .await?;
        check_output(&action, output)
    }
}

fn check_output(action: &str, output: std::process::Output) -> Result<String, NetnsError> {
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(NetnsError::Script {
        action: action.into(),
        code: output.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

/// Parses one `SLOT name=.. index=.. address=.. host_veth=.. down=.. up=.. delay=..
/// [ipv4=..] [nat=.. stack=..] [public_ipv4=..] [alt_ipv4=..] [alt_address=..]` line.
fn parse_slot_line(line: &str) -> Option<SlotInfo> {
    let rest = line.strip_prefix("SLOT ")?;
    let field = |key: &str| {
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    fn parsed<T: std::str::FromStr>(value: Option<String>) -> Option<T> {
        value.and_then(|v| v.parse().ok())
    }
    let address = match field("address")?.as_str() {
        "none" => None,
        text => Some(text.parse().ok()?),
    };
    let ipv4: Option<Ipv4Addr> = parsed(field("ipv4"));
    let default_stack = match (address.is_some(), ipv4.is_some()) {
        (true, true) => IpStack::Dual,
        (false, true) => IpStack::Ipv4,
        _ => IpStack::Ipv6,
    };
    Some(SlotInfo {
        index: field("index")?.parse().ok()?,
        name: field("name")?,
        address,
        host_veth: field("host_veth")?,
        down: field("down")?,
        up: field("up")?,
        delay: field("delay")?,
        ipv4,
        public_ipv4: parsed(field("public_ipv4")).or(ipv4),
        nat: parsed(field("nat")).unwrap_or(NatKind::None),
        stack: parsed(field("stack")).unwrap_or(default_stack),
        alt_ipv4: parsed(field("alt_ipv4")),
        alt_address: parsed(field("alt_address")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_addresses_and_names() {
        let net = SlotNetwork::new("fd00:5f::/64", "vfab12-", "/bin/bash".into(), None).unwrap();
        assert_eq!(net.address(0).to_string(), "fd00:5f::2");
        assert_eq!(net.address(14).to_string(), "fd00:5f::10");
        assert_eq!(net.ns_name(3), "vfab12-3");
        assert!(SlotNetwork::new("fd00:5f::/64", "VF_", "/bin/bash".into(), None).is_err());
    }

    #[test]
    fn a_link_becomes_the_scripts_shaping_arguments_with_0_for_no_limit() {
        let link = LinkProfile {
            download_kbps: Some(2000),
            upload_kbps: None,
            latency_ms: Some(500),
        };
        assert_eq!(
            shaping_args(&link),
            ["--down-kbit", "2000", "--up-kbit", "0", "--delay-ms", "500"]
        );
        assert_eq!(
            shaping_args(&LinkProfile::UNLIMITED),
            ["--down-kbit", "0", "--up-kbit", "0", "--delay-ms", "0"]
        );
    }

    #[test]
    fn slot_lines_parse() {
        let line = "SLOT name=vf-1 index=1 address=fd00:5f::3 host_veth=vf-1h down=tbf:2000kbit up=tbf:300kbit delay=not-applied(netem-missing)";
        let slot = parse_slot_line(line).unwrap();
        assert_eq!(slot.name, "vf-1");
        assert_eq!(slot.up, "tbf:300kbit");
        assert!(slot.rate_shaped());
        assert_eq!((slot.nat, slot.stack), (NatKind::None, IpStack::Ipv6));
        assert_eq!(parse_slot_line("something else"), None);
        let line = "SLOT name=vf-2 index=2 address=none host_veth=vf-2h down=none up=none delay=none ipv4=192.168.1.2 nat=symmetric stack=ipv4 public_ipv4=198.18.0.4";
        let slot = parse_slot_line(line).unwrap();
        assert_eq!(slot.address, None);
        assert_eq!(slot.nat, NatKind::Symmetric);
        assert_eq!(slot.public_ipv4, Some("198.18.0.4".parse().unwrap()));
        assert_eq!(
            slot.reaches(
                Some("fd00::2".parse().unwrap()),
                Some("198.18.0.2".parse().unwrap())
            ),
            Some("198.18.0.2".parse().unwrap())
        );
    }

    #[test]
    fn embedded_script_is_valid_bash() {
        let status = std::process::Command::new("bash")
            .args(["-n", "-c", SLOT_SCRIPT])
            .status()
            .unwrap();
        assert!(status.success());
    }
}
