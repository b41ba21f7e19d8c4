//! Connectivity: who could reach whom over P2P, by network class. From the raw data only:
//! each viewer's class and public addresses (`raw/viewer_networks.jsonl`) and each page's
//! peer connections as its probe followed them (`ice` in the viewer samples): answered,
//! connected over which candidate pair (host, srflx, prflx, relay; IPv4 or IPv6), failed.
//!
//! A connection's peer is told by the remote candidates' addresses: an IPv6 address is one
//! viewer's, a public IPv4 address is its NAT's (a CGN's is shared by all behind it — the
//! same class), a private LAN address is nobody's in particular and is skipped.
//!
//! Counts are per side: a connection between two viewers appears once in each viewer's
//! row (from → to), as each page saw it.

use super::load::RunData;
use crate::model::kinds::NatKind;
use crate::model::rawdata::{self, IceLink, IceState, ViewerNetwork};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The `via` of an established connection whose selected candidate pair the page could not
/// read (it closed too soon).
pub const PAIR_NOT_READ: &str = "pair not read";

/// The report's connectivity section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connectivity {
    /// One row per (class of the viewer, class of its peer), in class order.
    pub pairs: Vec<ClassPair>,
    /// One row per class: its viewers and how much of what they played came over P2P.
    pub classes: Vec<ClassShare>,
    /// P2P bytes / (HTTP + P2P bytes) of the whole swarm, each viewer's whole watch.
    pub swarm_p2p_share: Option<f64>,
    /// Sentences for the reader: pairs that never connected and why, what the figure is
    /// between.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassPair {
    pub from: String,
    pub to: String,
    /// Connections that got an answer (their peer is known).
    pub attempted: u32,
    pub established: u32,
    pub failed: u32,
    /// Still checking when the viewer's last sample was read.
    pub pending: u32,
    /// Established connections by selected pair, e.g. `srflx↔srflx ipv4` → 3.
    pub via: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassShare {
    pub class: String,
    /// The NAT of the class's viewers, by its name; `None` (written `""`) for viewers with
    /// no network record (class `unknown`).
    #[serde(with = "nat_or_empty")]
    pub nat: Option<NatKind>,
    pub viewers: u32,
    pub http_bytes: u64,
    pub p2p_bytes: u64,
    pub p2p_share: Option<f64>,
    /// Viewers of the class with at least one established P2P connection.
    pub viewers_connected: u32,
}

/// `ClassShare::nat` as `report.json` has always written it: the NAT's name, or `""` where
/// the class is not known.
mod nat_or_empty {
    use super::NatKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(nat: &Option<NatKind>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(nat.map_or("", NatKind::as_str))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NatKind>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// The class label of a network record: its class of `viewers.networks`, else its NAT.
fn label(n: &ViewerNetwork) -> String {
    n.class.clone().unwrap_or_else(|| match n.nat {
        NatKind::None => "public".to_string(),
        nat => format!("behind {nat} NAT"),
    })
}

/// Builds the section; `None` when the run recorded neither networks nor connections.
pub(crate) fn analyse(run: &RunData) -> Option<Connectivity> {
    let networks: Vec<ViewerNetwork> =
        rawdata::read_jsonl::<ViewerNetwork>(&run.dir.join(rawdata::VIEWER_NETWORKS))
            .map(|c| c.records)
            .unwrap_or_default();
    // Each viewer's latest connection list and its last cumulative bytes.
    let mut links: HashMap<u32, Vec<IceLink>> = HashMap::new();
    let mut bytes: HashMap<u32, (u64, u64)> = HashMap::new();
    for s in &run.viewer_samples {
        if let Some(ice) = &s.ice {
            links.insert(s.viewer, ice.links.clone());
        }
        bytes.insert(s.viewer, (s.http_down_bytes, s.p2p_down_bytes));
    }
    if networks.is_empty() && links.is_empty() {
        return None;
    }
    Some(build(&networks, &links, &bytes))
}

/// The section from records already read (pure, for tests).
pub fn build(
    networks: &[ViewerNetwork],
    links: &HashMap<u32, Vec<IceLink>>,
    bytes: &HashMap<u32, (u64, u64)>,
) -> Connectivity {
    let mut class_of: HashMap<u32, String> = HashMap::new();
    let mut nat_of: BTreeMap<String, NatKind> = BTreeMap::new();
    let mut by_address: HashMap<String, BTreeSet<String>> = HashMap::new();
    for n in networks {
        let class = label(n);
        class_of.insert(n.viewer, class.clone());
        nat_of.insert(class.clone(), n.nat);
        for a in &n.addresses {
            by_address
                .entry(a.clone())
                .or_default()
                .insert(class.clone());
        }
    }
    let peer_class = |link: &IceLink| -> String {
        let candidates = link.remote.iter().chain(link.remote_address.iter());
        let mut ambiguous = None;
        for a in candidates {
            match by_address.get(a) {
                Some(set) if set.len() == 1 => {
                    return set.iter().next().cloned().unwrap_or_default()
                }
                Some(set) => ambiguous = Some(set.iter().cloned().collect::<Vec<_>>().join(" or ")),
                None => {}
            }
        }
        ambiguous.unwrap_or_else(|| "unknown".to_string())
    };
    let mut pairs: BTreeMap<(String, String), ClassPair> = BTreeMap::new();
    let mut connected_viewers: BTreeSet<u32> = BTreeSet::new();
    let mut viewers: Vec<&u32> = links.keys().collect();
    viewers.sort();
    for viewer in viewers {
        let from = class_of
            .get(viewer)
            .cloned()
            .unwrap_or_else(|| "unknown".to_string());
        for link in &links[viewer] {
            let to = peer_class(link);
            let row = pairs
                .entry((from.clone(), to.clone()))
                .or_insert_with(|| ClassPair {
                    from: from.clone(),
                    to,
                    attempted: 0,
                    established: 0,
                    failed: 0,
                    pending: 0,
                    via: BTreeMap::new(),
                });
            row.attempted += 1;
            match link.state {
                IceState::Connected => {
                    row.established += 1;
                    connected_viewers.insert(*viewer);
                    let via = match (&link.local_type, &link.remote_type) {
                        (Some(local), Some(remote)) => {
                            format!("{local}↔{remote} {}", link.family.as_deref().unwrap_or("?"))
                        }
                        _ => PAIR_NOT_READ.to_string(),
                    };
                    *row.via.entry(via).or_default() += 1;
                }
                IceState::Failed => row.failed += 1,
                IceState::Pending => row.pending += 1,
            }
        }
    }
    let mut shares: BTreeMap<String, ClassShare> = BTreeMap::new();
    let (mut http_all, mut p2p_all) = (0u64, 0u64);
    let mut all_viewers: BTreeSet<u32> = class_of.keys().copied().collect();
    all_viewers.extend(bytes.keys().copied());
    for viewer in all_viewers {
        let class = class_of
            .get(&viewer)
            .cloned()
            .unwrap_or_else(|| "unknown".to_string());
        let (http, p2p) = bytes.get(&viewer).copied().unwrap_or_default();
        http_all += http;
        p2p_all += p2p;
        let row = shares.entry(class.clone()).or_insert_with(|| ClassShare {
            nat: nat_of.get(&class).copied(),
            class,
            viewers: 0,
            http_bytes: 0,
            p2p_bytes: 0,
            p2p_share: None,
            viewers_connected: 0,
        });
        row.viewers += 1;
        row.http_bytes += http;
        row.p2p_bytes += p2p;
        if connected_viewers.contains(&viewer) {
            row.viewers_connected += 1;
        }
    }
    let share = |http: u64, p2p: u64| (http + p2p > 0).then(|| p2p as f64 / (http + p2p) as f64);
    for row in shares.values_mut() {
        row.p2p_share = share(row.http_bytes, row.p2p_bytes);
    }
    let pairs: Vec<ClassPair> = pairs.into_values().collect();
    let classes: Vec<ClassShare> = shares.into_values().collect();
    let notes = notes(&pairs, &classes, &nat_of);
    Connectivity {
        pairs,
        classes,
        swarm_p2p_share: share(http_all, p2p_all),
        notes,
    }
}

fn notes(
    pairs: &[ClassPair],
    classes: &[ClassShare],
    nat_of: &BTreeMap<String, NatKind>,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut noted: BTreeSet<(String, String)> = BTreeSet::new();
    for p in pairs {
        if p.attempted == 0 || p.established > 0 || p.to == "unknown" {
            continue;
        }
        // One sentence per pair of classes, with what both sides saw.
        let key = if p.from <= p.to {
            (p.from.clone(), p.to.clone())
        } else {
            (p.to.clone(), p.from.clone())
        };
        if !noted.insert(key) {
            continue;
        }
        let back = pairs
            .iter()
            .find(|q| q.from == p.to && q.to == p.from && p.from != p.to);
        if back.is_some_and(|q| q.established > 0) {
            continue;
        }
        let (attempted, failed, pending) = back.map_or((p.attempted, p.failed, p.pending), |q| {
            (
                p.attempted + q.attempted,
                p.failed + q.failed,
                p.pending + q.pending,
            )
        });
        use NatKind::{Cgnat, Home, Symmetric};
        let nat = |c: &str| nat_of.get(c).copied();
        let why = match (nat(&p.from), nat(&p.to)) {
            (Some(Symmetric), Some(Symmetric | Home | Cgnat))
            | (Some(Home | Cgnat), Some(Symmetric)) => {
                " — a symmetric NAT gives every destination a new port and the other side's NAT admits only the address and port it sent to, so hole punching cannot work: only a TURN relay would connect them, and this run offered none"
            }
            (Some(Cgnat), Some(Cgnat)) if p.from == p.to => {
                " — behind one carrier-grade NAT that does not hairpin, and without IPv6 between them"
            }
            _ => "",
        };
        let who = if p.from == p.to {
            format!("{} viewers never connected to each other", p.from)
        } else {
            format!("{} and {} viewers never connected", p.from, p.to)
        };
        out.push(format!(
            "{who} over P2P ({attempted} answered connection(s) seen from both sides, {failed} failed, {pending} still checking){why}."
        ));
    }
    let isolated: Vec<String> = classes
        .iter()
        .filter(|c| c.viewers > 0 && c.viewers_connected == 0)
        .map(|c| format!("{} ({} viewers)", c.class, c.viewers))
        .collect();
    if !isolated.is_empty() {
        out.push(format!(
            "No viewer of {} had a single P2P connection: they played from HTTP only.",
            isolated.join(", ")
        ));
    }
    out.push(
        "For scale: lab figures with every viewer public and nobody leaving (PeerTube's 2023 test: 98% P2P for VOD) are an upper bound; published production offload is 77–88% (CDN77's WebRTC demo 77%, a vendor's 30-day average 86%, a BBC trace study up to 88%). Run the same scenario with every viewer public (`nat: none`) to see what this mix costs (benches/internet.rs does both).".to_string(),
    );
    out
}

/// The pair table, for every renderer.
pub(crate) fn pair_table(c: &Connectivity) -> super::text_table::Table {
    let mut t = super::text_table::Table::new(&[
        "viewer class",
        "peer class",
        "answered",
        "established",
        "failed",
        "checking",
        "established over",
    ])
    .with_left(2)
    .with_last_left();
    for p in &c.pairs {
        let via = p
            .via
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        t.row(vec![
            p.from.clone(),
            p.to.clone(),
            p.attempted.to_string(),
            p.established.to_string(),
            p.failed.to_string(),
            p.pending.to_string(),
            if via.is_empty() { "—".into() } else { via },
        ]);
    }
    t
}

/// The per-class table.
pub(crate) fn class_table(c: &Connectivity) -> super::text_table::Table {
    let mut t = super::text_table::Table::new(&[
        "class",
        "NAT",
        "viewers",
        "with a P2P connection",
        "HTTP MB",
        "P2P MB",
        "P2P share",
    ])
    .with_left(2);
    let mb = |b: u64| format!("{:.1}", b as f64 / 1e6);
    for k in &c.classes {
        t.row(vec![
            k.class.clone(),
            k.nat.map(|n| n.to_string()).unwrap_or_default(),
            k.viewers.to_string(),
            k.viewers_connected.to_string(),
            mb(k.http_bytes),
            mb(k.p2p_bytes),
            k.p2p_share
                .map(|s| format!("{:.1}%", s * 100.0))
                .unwrap_or_else(|| "—".into()),
        ]);
    }
    t
}

/// The lines above the tables.
pub fn lines(c: &Connectivity) -> Vec<String> {
    let mut out = vec![format!(
        "Whole swarm: {} of the bytes the players got came over P2P (each viewer's whole watch).",
        c.swarm_p2p_share
            .map(|s| format!("{:.1}%", s * 100.0))
            .unwrap_or_else(|| "none".into())
    )];
    out.push(
        "Each row counts the connections a viewer of the first class made that got an answer from a viewer of the second (as its page saw them; a connection between two viewers is in both their rows). \"established over\": the selected candidate pair — host (the peer's own address), srflx (its NAT's public address, from STUN), prflx (learnt during the checks), relay (TURN).".to_string(),
    );
    out.extend(c.notes.iter().cloned());
    out
}

/// `## Connectivity` for Markdown.
pub(crate) fn markdown_section(out: &mut String, c: &Connectivity) {
    out.push_str("## Connectivity: who reached whom over P2P\n\n");
    for line in lines(c) {
        out.push_str(&format!("- {line}\n"));
    }
    out.push('\n');
    out.push_str(&class_table(c).markdown());
    out.push('\n');
    out.push_str(&pair_table(c).markdown());
    out.push('\n');
}

/// The same for HTML.
pub(crate) fn html_section(out: &mut String, c: &Connectivity) {
    use super::svg::esc;
    out.push_str("<h2>Connectivity: who reached whom over P2P</h2>\n<ul>");
    for line in lines(c) {
        out.push_str(&format!("<li>{}</li>", esc(&line)));
    }
    out.push_str("</ul>\n");
    out.push_str(&class_table(c).html());
    out.push_str(&pair_table(c).html());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(viewer: u32, class: &str, nat: NatKind, addresses: &[&str]) -> ViewerNetwork {
        ViewerNetwork {
            t: 0.0,
            viewer,
            class: Some(class.into()),
            profile: None,
            nat,
            stack: None,
            node: None,
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn link(state: IceState, remote: &[&str], via: Option<(&str, &str)>) -> IceLink {
        IceLink {
            at_s: 1.0,
            state,
            remote: remote.iter().map(|a| a.to_string()).collect(),
            local_type: via.map(|v| v.0.to_string()),
            remote_type: via.map(|v| v.1.to_string()),
            family: via.map(|_| "ipv4".to_string()),
            protocol: None,
            remote_address: None,
            connected_after_s: None,
        }
    }

    #[test]
    fn pairs_are_counted_by_class_and_symmetric_pairs_are_explained() {
        let networks = vec![
            net(0, "dsl/home", NatKind::Home, &["198.18.0.3"]),
            net(1, "dsl/home", NatKind::Home, &["198.18.0.4"]),
            net(2, "office/symmetric", NatKind::Symmetric, &["198.18.0.5"]),
            net(3, "office/symmetric", NatKind::Symmetric, &["198.18.0.6"]),
        ];
        let mut links = HashMap::new();
        links.insert(
            0,
            vec![link(
                IceState::Connected,
                &["192.168.1.2", "198.18.0.4"],
                Some(("srflx", "srflx")),
            )],
        );
        links.insert(
            2,
            vec![
                link(IceState::Failed, &["192.168.1.2", "198.18.0.6"], None),
                link(IceState::Failed, &["198.18.0.6"], None),
            ],
        );
        let mut bytes = HashMap::new();
        bytes.insert(0, (100, 300));
        bytes.insert(1, (200, 200));
        bytes.insert(2, (400, 0));
        bytes.insert(3, (400, 0));
        let c = build(&networks, &links, &bytes);
        let home = &c.pairs[0];
        assert_eq!(
            (home.from.as_str(), home.to.as_str()),
            ("dsl/home", "dsl/home")
        );
        assert_eq!((home.attempted, home.established), (1, 1));
        assert_eq!(home.via.get("srflx↔srflx ipv4"), Some(&1));
        let sym = c
            .pairs
            .iter()
            .find(|p| p.from == "office/symmetric")
            .unwrap();
        assert_eq!((sym.attempted, sym.established, sym.failed), (2, 0, 2));
        assert!(
            c.notes[0].contains("never connected") && c.notes[0].contains("TURN"),
            "{:?}",
            c.notes
        );
        assert!(c
            .notes
            .iter()
            .any(|n| n.contains("office/symmetric (2 viewers)")));
        let home_share = c.classes.iter().find(|k| k.class == "dsl/home").unwrap();
        assert_eq!(home_share.p2p_share, Some(0.625));
        assert_eq!(home_share.viewers_connected, 1);
        assert_eq!(c.swarm_p2p_share, Some(500.0 / 1600.0));
        let md = {
            let mut s = String::new();
            markdown_section(&mut s, &c);
            s
        };
        assert!(
            md.contains("| dsl/home | dsl/home | 1 | 1 | 0 | 0 | srflx↔srflx ipv4: 1 |"),
            "{md}"
        );
    }

    #[test]
    fn a_class_nat_is_written_by_its_name_and_empty_when_unknown() {
        for (nat, text) in [(Some(NatKind::Cgnat), "cgnat"), (None, "")] {
            let share = ClassShare {
                class: "c".into(),
                nat,
                viewers: 1,
                http_bytes: 2,
                p2p_bytes: 3,
                p2p_share: None,
                viewers_connected: 0,
            };
            let json = serde_json::to_string(&share).unwrap();
            assert!(json.contains(&format!(r#""nat":"{text}""#)), "{json}");
            assert_eq!(serde_json::from_str::<ClassShare>(&json).unwrap(), share);
        }
        let wrong = r#"{"class":"c","nat":"carrier","viewers":1,"http_bytes":2,"p2p_bytes":3,"p2p_share":null,"viewers_connected":0}"#;
        assert!(serde_json::from_str::<ClassShare>(wrong).is_err());
    }
}
