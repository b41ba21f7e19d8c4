//! The fixed sets of the product, each an enum with one mapping to and from its name.
//!
//! `named_enum!` writes that mapping once: `as_str` (for humans, files and metrics labels),
//! `FromStr`, `Display`, and serde by the same names, so a name is never spelled in two
//! places. Unknown names are refused with the list of allowed ones, never a type name.

/// Declares an enum whose variants each have one name (see the module docs). Exported for
/// the report's own named sets (its verdicts and statuses).
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every name, in declaration order.
            pub(crate) const NAMES: &'static [&'static str] = &[$($text),+];

            /// The one name of this value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::kinds::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::kinds::UnknownName {
                        got: s.to_string(),
                        allowed: Self::NAMES,
                    }),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct NameVisitor;
                impl serde::de::Visitor<'_> for NameVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "one of {}", $crate::kinds::one_of($name::NAMES))
                    }
                    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<$name, E> {
                        text.parse()
                            .map_err(|_| E::unknown_variant(text, $name::NAMES))
                    }
                }
                // Inside the deserializer, so its errors carry the field's path and line.
                deserializer.deserialize_str(NameVisitor)
            }
        }
    };
}
pub use crate::named_enum;

/// A name outside a fixed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{got}` is not allowed; use {}", one_of(allowed))]
pub struct UnknownName {
    pub got: String,
    pub allowed: &'static [&'static str],
}

/// "`a`", "`a` or `b`", "`a`, `b` or `c`".
pub fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

named_enum! {
    /// Where the browsers run.
    pub enum FleetKind {
        /// chromedriver on this machine.
        Local = "local",
        /// Viewers in network namespaces on this machine.
        Netns = "netns",
        /// Any Selenium Grid 4.
        Grid = "grid",
        /// Hetzner Cloud servers made for the run.
        Hcloud = "hcloud",
    }
}

impl FleetKind {
    /// Whether this kind of fleet runs its browsers on the controller's own machine.
    pub fn browsers_on_this_host(self) -> bool {
        matches!(self, FleetKind::Local | FleetKind::Netns)
    }
}

named_enum! {
    /// The platform the viewers watch.
    pub enum TargetKind {
        /// The built-in reference site, started by the run.
        Refsite = "refsite",
        /// A PeerTube instance (or anything speaking its interfaces).
        Peertube = "peertube",
    }
}

named_enum! {
    /// Live stream or video on demand.
    pub enum VideoKind {
        Live = "live",
        Vod = "vod",
    }
}

named_enum! {
    /// PeerTube's live latency modes.
    pub enum Latency {
        Normal = "normal",
        High = "high",
    }
}

named_enum! {
    /// How a viewer's network profile is applied (GUIDE.md, "Throttling modes").
    pub enum Throttling {
        /// HTTP(S) and WebSocket requests throttled in the browser, per request (CDP
        /// `Network.emulateNetworkConditionsByRule`); WebRTC not throttled: the PeerTube
        /// 2023 test's conditions.
        HttpOnly = "http-only",
        /// Kernel queues (tc) on each viewer's own interface: HTTP and P2P alike, as a real
        /// access link would; needs a fleet with one interface per viewer.
        Tc = "tc",
        /// Chromium's whole-browser network emulation (CDP `Network.emulateNetworkConditions`):
        /// HTTP, and WebRTC data channels far harder than the configured link.
        CdpAll = "cdp-all",
    }
}

named_enum! {
    /// What runs a page of light peers (`swarm.runtime`).
    pub enum LightRuntime {
        /// Node.js where the fleet runs on this machine (`local`, `netns` without NAT
        /// emulation) and the host is installed, else a browser page.
        Auto = "auto",
        /// A Node.js process (`light-host/`): WebRTC from node-datachannel, a fraction of a
        /// browser page's CPU per peer; only on fleets of this machine.
        Node = "node",
        /// A Chromium page, one WebDriver session: runs on every fleet.
        Browser = "browser",
    }
}

named_enum! {
    /// Where a run's traffic rates were read.
    pub enum RateSource {
        /// The platform's Prometheus exporter.
        Exporter = "exporter",
        /// The players' own stats.
        Players = "players",
        /// Neither had data.
        None = "none",
    }
}

named_enum! {
    /// How a player's HTTP bytes were counted.
    pub enum HttpByteSource {
        /// The player's `network-info` event (P2P engine on).
        NetworkInfo = "network-info",
        /// The page's Resource Timing entries (P2P engine off: it fires no byte events).
        ResourceTiming = "resource-timing",
    }
}

named_enum! {
    /// A viewer's state as exported on the controller's `/metrics`.
    pub(crate) enum ViewerState {
        Starting = "starting",
        Playing = "playing",
        Stalled = "stalled",
        Failed = "failed",
        Lost = "lost",
        Stopped = "stopped",
    }
}

named_enum! {
    /// What stands between a viewer and the internet (GUIDE.md, "NAT types"): the slot's router
    /// (`grid/viewer-slots.sh --nat`), as RFC 4787 classifies its mapping and filtering.
    #[derive(Default)]
    pub enum NatKind {
        /// A public address, reachable by anyone: the lab's upper bound.
        #[default]
        None = "none",
        /// A home router: NAT44 with endpoint-independent mapping and address- and
        /// port-dependent filtering; an IPv6 firewall that drops unsolicited inbound traffic.
        Home = "home",
        /// A home router behind a carrier-grade NAT shared by many viewers.
        Cgnat = "cgnat",
        /// Endpoint-dependent mapping: a new external port for every destination.
        Symmetric = "symmetric",
    }
}

named_enum! {
    /// The address families a viewer has.
    pub enum IpStack {
        /// IPv4 and IPv6.
        Dual = "dual",
        /// IPv4 only.
        Ipv4 = "ipv4",
        /// IPv6 only.
        Ipv6 = "ipv6",
    }
}

impl IpStack {
    pub fn has_ipv4(self) -> bool {
        matches!(self, IpStack::Dual | IpStack::Ipv4)
    }

    pub fn has_ipv6(self) -> bool {
        matches!(self, IpStack::Dual | IpStack::Ipv6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_str_and_serde() {
        for kind in FleetKind::ALL {
            assert_eq!(kind.as_str().parse::<FleetKind>(), Ok(*kind));
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(serde_json::from_str::<FleetKind>(&json).unwrap(), *kind);
        }
        assert_eq!(
            HttpByteSource::ResourceTiming.to_string(),
            "resource-timing"
        );
    }

    #[test]
    fn unknown_names_list_the_allowed_ones() {
        let err = "grids".parse::<FleetKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "`grids` is not allowed; use `local`, `netns`, `grid` or `hcloud`"
        );
        let err = serde_json::from_str::<VideoKind>("\"dvd\"").unwrap_err();
        assert!(
            err.to_string().contains("expected `live` or `vod`"),
            "{err}"
        );
    }
}
