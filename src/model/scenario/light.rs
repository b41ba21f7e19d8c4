//! `swarm:` — light peers beside the viewers. A light peer runs the page's own P2P engine
//! (tracker, WebRTC data channels, HTTP to the origin) against a simulated playhead, with
//! nothing decoded, so one machine carries a swarm of hundreds where it carries a handful of
//! real viewers. Many light peers share one page (one browser session): a group.

use serde::{Deserialize, Serialize};

/// Light peers per page unless `swarm.per_page` says otherwise.
pub const DEFAULT_PER_PAGE: u32 = 25;
/// At most this many per page: Chromium caps a page at 500 peer connections, and each light
/// peer may hold about ten.
pub const MAX_PER_PAGE: u32 = 50;
/// At most this many light peers in one run.
pub const MAX_LIGHT_PEERS: u32 = 10_000;

/// The scenario's `swarm:` section.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmSpec {
    /// Light peers that join the viewers' swarm [default: 0].
    #[serde(default)]
    pub light_peers: u32,
    /// Light peers per page (one browser session each) [default: 25, at most 50].
    #[serde(default)]
    pub per_page: Option<u32>,
}

/// The light peers of a run, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LightPlan {
    pub peers: u32,
    pub per_page: u32,
}

/// One page of light peers: its number, and the peers it holds (`first..first + count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LightGroup {
    pub index: u32,
    pub first: u32,
    pub count: u32,
}

impl LightPlan {
    /// Validates `swarm:` (with `--light-peers` instead of its count when given); `None`
    /// without light peers. Errors are `(field, message)`.
    pub fn from_spec(
        spec: Option<&SwarmSpec>,
        override_peers: Option<u32>,
    ) -> Result<Option<Self>, (String, String)> {
        let peers = override_peers.unwrap_or(spec.map_or(0, |s| s.light_peers));
        if peers > MAX_LIGHT_PEERS {
            return Err((
                "swarm.light_peers".into(),
                format!("{peers} is more than the {MAX_LIGHT_PEERS} one run may hold; split the swarm over several machines"),
            ));
        }
        let per_page = spec.and_then(|s| s.per_page).unwrap_or(DEFAULT_PER_PAGE);
        if !(1..=MAX_PER_PAGE).contains(&per_page) {
            return Err((
                "swarm.per_page".into(),
                format!("{per_page} is out of range: 1 to {MAX_PER_PAGE} light peers per page (Chromium caps a page's peer connections)"),
            ));
        }
        Ok((peers > 0).then_some(Self { peers, per_page }))
    }

    /// The pages, each as full as `per_page` allows, the last one holding the rest.
    pub fn groups(&self) -> Vec<LightGroup> {
        (0..self.peers.div_ceil(self.per_page))
            .map(|index| {
                let first = index * self.per_page;
                LightGroup {
                    index,
                    first,
                    count: self.per_page.min(self.peers - first),
                }
            })
            .collect()
    }

    /// In words, for the plan's summary line.
    pub fn describe(&self) -> String {
        let pages = self.peers.div_ceil(self.per_page);
        format!(
            "{} light peers in {pages} page{} of up to {}",
            self.peers,
            if pages == 1 { "" } else { "s" },
            self.per_page
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fill_pages_and_the_last_holds_the_rest() {
        let plan = LightPlan {
            peers: 60,
            per_page: 25,
        };
        let groups = plan.groups();
        assert_eq!(
            groups,
            vec![
                LightGroup {
                    index: 0,
                    first: 0,
                    count: 25
                },
                LightGroup {
                    index: 1,
                    first: 25,
                    count: 25
                },
                LightGroup {
                    index: 2,
                    first: 50,
                    count: 10
                },
            ]
        );
        assert_eq!(plan.describe(), "60 light peers in 3 pages of up to 25");
    }

    #[test]
    fn no_section_or_zero_means_no_light_peers_and_the_override_wins() {
        assert_eq!(LightPlan::from_spec(None, None), Ok(None));
        let spec = SwarmSpec {
            light_peers: 10,
            per_page: Some(5),
        };
        assert_eq!(
            LightPlan::from_spec(Some(&spec), Some(0)),
            Ok(None),
            "--light-peers 0 turns them off"
        );
        assert_eq!(
            LightPlan::from_spec(Some(&spec), None),
            Ok(Some(LightPlan {
                peers: 10,
                per_page: 5
            }))
        );
        assert_eq!(
            LightPlan::from_spec(None, Some(30)),
            Ok(Some(LightPlan {
                peers: 30,
                per_page: DEFAULT_PER_PAGE
            }))
        );
    }

    #[test]
    fn out_of_range_sizes_name_the_field() {
        let page = SwarmSpec {
            light_peers: 10,
            per_page: Some(MAX_PER_PAGE + 1),
        };
        let (field, message) = LightPlan::from_spec(Some(&page), None).unwrap_err();
        assert_eq!(field, "swarm.per_page");
        assert!(message.contains("1 to 50"), "{message}");
        let (field, _) = LightPlan::from_spec(None, Some(MAX_LIGHT_PEERS + 1)).unwrap_err();
        assert_eq!(field, "swarm.light_peers");
    }
}
