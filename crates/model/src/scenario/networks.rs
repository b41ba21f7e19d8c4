//! `viewers.networks`: the swarm as a mix of the networks real viewers have — each a share
//! of the viewers with its link profile (a name from [`PROFILES`] or written out), the NAT
//! it sits behind and its address families. `viewers.network` + `viewers.alt_network` are
//! the shorthand of a two-class mix of public viewers (and keep assigning viewers as they
//! always did).
//!
//! The classes are assigned per browser, spread evenly over the ramp: the k-th browser
//! takes the class furthest behind its share so far, so every part of the ramp has each.

use super::spec::{LinkProfile, NetworkProfile};
use crate::kinds::{IpStack, NatKind, Throttling};
use serde::{Deserialize, Serialize};

/// One entry of `viewers.networks`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkShare {
    /// Share of the viewers, 0 < share ≤ 1; the shares add up to 1.
    pub share: f64,
    /// A profile of the library (`fibre`, `dsl`, `mobile-4g`, …) or a link written out
    /// (`{download_kbps, upload_kbps, latency_ms}`) [default: no link limits].
    #[serde(default)]
    pub profile: Option<ProfileRef>,
    /// `none`, `home`, `cgnat` or `symmetric` [default: none].
    #[serde(default)]
    pub nat: Option<NatKind>,
    /// `dual`, `ipv4` or `ipv6` [default: dual].
    #[serde(default)]
    pub stack: Option<IpStack>,
    /// How the profile is applied (`tc`, `http-only`, `cdp-all`) [default: the fleet's].
    #[serde(default)]
    pub apply: Option<Throttling>,
    /// The class's name in reports [default: `<profile>/<nat>`].
    #[serde(default)]
    pub name: Option<String>,
}

/// A link profile: a name from the library, or one written out.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ProfileRef {
    Named(String),
    Link(NetworkProfile),
}

/// By hand, so a wrong value is told both forms.
impl<'de> Deserialize<'de> for ProfileRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RefVisitor;
        impl<'de> serde::de::Visitor<'de> for RefVisitor {
            type Value = ProfileRef;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "a profile name ({}) or a link written out ({{download_kbps, upload_kbps, latency_ms}})",
                    profile_names()
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ProfileRef, E> {
                Ok(ProfileRef::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ProfileRef, A::Error> {
                NetworkProfile::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ProfileRef::Link)
            }
        }
        deserializer.deserialize_any(RefVisitor)
    }
}

/// A named link profile of the library, with where its figures come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LibraryProfile {
    pub name: &'static str,
    /// Every figure set; the latency is applied by netem where the kernel has it, else to
    /// HTTP in the browser.
    pub link: LinkProfile,
    /// Where each figure comes from (GUIDE.md, "Link profiles").
    pub source: &'static str,
}

/// A library entry's link: rates in kbit/s, round trip in ms.
const fn link(download_kbps: u32, upload_kbps: u32, latency_ms: u32) -> LinkProfile {
    LinkProfile {
        download_kbps: Some(download_kbps),
        upload_kbps: Some(upload_kbps),
        latency_ms: Some(latency_ms),
    }
}

/// The profile library. Jitter and loss are not emulated (no netem here; tbf drops only
/// when its queue is full), so the library carries none.
pub(crate) const PROFILES: &[LibraryProfile] = &[
    LibraryProfile {
        name: "peertube-2023",
        link: link(2_000, 300, 500),
        source: "the PeerTube team's 2023 stress test (every viewer throttled alike)",
    },
    LibraryProfile {
        name: "dsl",
        link: link(10_000, 1_000, 49),
        source: "down: Ofcom, UK Home Broadband Performance, November 2017 (standard ADSL services averaged around 10 Mbit/s); up: assumed (an ADSL2+ upstream tops out near 1 Mbit/s); RTT: FCC Measuring Broadband America 2011, DSL peak-period average 49 ms",
    },
    LibraryProfile {
        name: "cable",
        link: link(270_600, 18_400, 32),
        source: "down: Ofcom, UK Home Broadband Performance, March 2023 (cable average 270.6 Mbit/s); up: the same report's UK median over all technologies (18.4 Mbit/s), cable's own not published there; RTT: FCC MBA 2011, cable 32 ms",
    },
    LibraryProfile {
        name: "fibre",
        link: link(149_200, 18_400, 24),
        source: "down: Ofcom, March 2023 (full-fibre average 149.2 Mbit/s); up: the same report's UK median over all technologies (18.4 Mbit/s); RTT: FCC MBA 2011, fibre-to-the-home 24 ms",
    },
    LibraryProfile {
        name: "uk-median",
        link: link(69_400, 18_400, 32),
        source: "Ofcom, March 2023: UK median 69.4 Mbit/s down, 18.4 Mbit/s up; RTT: FCC MBA 2011 average over terrestrial technologies (34.9 ms), rounded to cable's 32 ms",
    },
    LibraryProfile {
        name: "mobile-4g",
        link: link(23_600, 7_300, 53),
        source: "Opensignal, US Mobile Network Experience, July 2019 (T-Mobile: 23.6 Mbit/s down, 7.3 Mbit/s up, 52.6 ms latency)",
    },
];

/// `peertube-2023`, `dsl`, … for messages.
pub(crate) fn profile_names() -> String {
    let names: Vec<String> = PROFILES.iter().map(|p| format!("`{}`", p.name)).collect();
    names.join(", ")
}

pub(crate) fn library_profile(name: &str) -> Option<&'static LibraryProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Where a viewer's browser sits on the emulated internet (its class of `viewers.networks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ViewerAccess {
    /// Its class in `Plan::networks`; `None` without `viewers.networks`.
    pub class: Option<u32>,
    pub nat: NatKind,
    /// `None`: the fleet's default (IPv6 only on the netns fleet without `networks`).
    pub stack: Option<IpStack>,
}

/// One class of viewers, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkClass {
    /// Its name in reports, e.g. `fibre/home`.
    pub name: String,
    pub share: f64,
    /// The library profile's name, if it names one.
    pub profile_name: Option<String>,
    pub profile: Option<NetworkProfile>,
    pub nat: NatKind,
    pub stack: IpStack,
}

/// Validates `viewers.networks` (without the fleet's throttling default, which the plan
/// fills in). Errors: (field, message).
pub fn classes(shares: &[NetworkShare]) -> Result<Vec<NetworkClass>, (String, String)> {
    if shares.is_empty() {
        return Err((
            "viewers.networks".into(),
            "is empty; list at least one network with its `share`, or remove it".into(),
        ));
    }
    if shares.len() > 32 {
        return Err((
            "viewers.networks".into(),
            format!("{} networks; at most 32", shares.len()),
        ));
    }
    let mut classes = Vec::new();
    for (i, s) in shares.iter().enumerate() {
        let field = |name: &str| format!("viewers.networks[{i}].{name}");
        if !(s.share > 0.0 && s.share <= 1.0) {
            return Err((
                field("share"),
                format!(
                    "{} is not a share; use a number above 0 and at most 1",
                    s.share
                ),
            ));
        }
        let (profile_name, profile) = match &s.profile {
            None => (None, None),
            Some(ProfileRef::Named(name)) => {
                let p = library_profile(name).ok_or_else(|| {
                    (
                        field("profile"),
                        format!(
                            "`{name}` is not a profile of the library; use one of {} or write the link out ({{download_kbps, upload_kbps, latency_ms}})",
                            profile_names()
                        ),
                    )
                })?;
                (
                    Some(p.name.to_string()),
                    Some(NetworkProfile {
                        link: p.link,
                        apply: None,
                    }),
                )
            }
            Some(ProfileRef::Link(link)) => (None, Some(*link)),
        };
        let profile = profile.map(|mut p| {
            if s.apply.is_some() {
                p.apply = s.apply;
            }
            p
        });
        let nat = s.nat.unwrap_or(NatKind::None);
        let name = match &s.name {
            Some(n) => {
                if n.trim().is_empty() || n.len() > 40 {
                    return Err((field("name"), "must be 1 to 40 characters".into()));
                }
                n.clone()
            }
            None => format!(
                "{}/{nat}",
                profile_name.clone().unwrap_or_else(|| match profile {
                    Some(_) => "link".into(),
                    None => "unshaped".into(),
                })
            ),
        };
        classes.push(NetworkClass {
            name,
            share: s.share,
            profile_name,
            profile,
            nat,
            stack: s.stack.unwrap_or(IpStack::Dual),
        });
    }
    let total: f64 = shares.iter().map(|s| s.share).sum();
    if (total - 1.0).abs() > 0.001 {
        return Err((
            "viewers.networks".into(),
            format!("the shares add up to {total:.3}; they must add up to 1"),
        ));
    }
    // Two classes with one name would merge in reports: number them.
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    for c in &mut classes {
        let n = seen.entry(c.name.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            c.name = format!("{} #{n}", c.name);
        }
    }
    Ok(classes)
}

/// The class of each of `count` browsers: the k-th takes the class furthest behind its
/// share (ties: the first listed).
pub fn spread(shares: &[f64], count: u32) -> Vec<usize> {
    let mut taken = vec![0u32; shares.len()];
    (0..count)
        .map(|k| {
            let due = |i: usize| shares[i] * f64::from(k + 1) - f64::from(taken[i]);
            let mut best = 0;
            for i in 1..shares.len() {
                if due(i) > due(best) + 1e-9 {
                    best = i;
                }
            }
            taken[best] += 1;
            best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(share: f64, profile: &str, nat: NatKind) -> NetworkShare {
        NetworkShare {
            share,
            profile: Some(ProfileRef::Named(profile.into())),
            nat: Some(nat),
            stack: None,
            apply: None,
            name: None,
        }
    }

    #[test]
    fn the_library_names_its_sources_and_classes_get_names() {
        for p in PROFILES {
            assert!(
                !p.source.is_empty() && p.link.upload_kbps > Some(0),
                "{}",
                p.name
            );
        }
        let c = classes(&[
            share(0.5, "fibre", NatKind::Home),
            share(0.3, "dsl", NatKind::Home),
            share(0.2, "mobile-4g", NatKind::Cgnat),
        ])
        .unwrap();
        assert_eq!(c[0].name, "fibre/home");
        assert_eq!(c[2].nat, NatKind::Cgnat);
        assert_eq!(c[1].profile.unwrap().link.upload_kbps, Some(1_000));
        assert_eq!(c[0].stack, IpStack::Dual);
    }

    #[test]
    fn bad_mixes_are_named() {
        let err = classes(&[share(0.5, "fibre", NatKind::Home)]).unwrap_err();
        assert!(err.1.contains("add up to 0.500"), "{err:?}");
        let err = classes(&[share(1.0, "satellite", NatKind::None)]).unwrap_err();
        assert_eq!(err.0, "viewers.networks[0].profile");
        assert!(err.1.contains("`mobile-4g`"), "{err:?}");
        let err = classes(&[share(0.0, "dsl", NatKind::None)]).unwrap_err();
        assert_eq!(err.0, "viewers.networks[0].share");
        let twins = classes(&[
            share(0.5, "dsl", NatKind::Home),
            share(0.5, "dsl", NatKind::Home),
        ])
        .unwrap();
        assert_eq!(twins[1].name, "dsl/home #2");
    }

    #[test]
    fn classes_are_spread_evenly_and_keep_their_shares() {
        assert_eq!(spread(&[0.5, 0.5], 4), [0, 1, 0, 1]);
        let ten = spread(&[0.5, 0.3, 0.2], 10);
        let count = |k| ten.iter().filter(|&&c| c == k).count();
        assert_eq!((count(0), count(1), count(2)), (5, 3, 2));
        // The first browsers already hold every class.
        assert!(ten[..4].contains(&1) && ten[..5].contains(&2), "{ten:?}");
    }

    #[test]
    fn profiles_read_as_names_or_links() {
        let named: NetworkShare = yaml_serde::from_str("share: 1\nprofile: dsl\n").unwrap();
        assert_eq!(named.profile, Some(ProfileRef::Named("dsl".into())));
        let link: NetworkShare =
            yaml_serde::from_str("share: 1\nprofile: {download_kbps: 2000, upload_kbps: 300}\n")
                .unwrap();
        assert!(
            matches!(link.profile, Some(ProfileRef::Link(p)) if p.link.upload_kbps == Some(300))
        );
        assert!(yaml_serde::from_str::<NetworkShare>("share: 1\nprofile: {speed: 3}\n").is_err());
    }
}
