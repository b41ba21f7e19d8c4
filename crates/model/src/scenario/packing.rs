//! `viewers.per_browser`: several viewers in one browser. Viewer `i` plays in browser
//! `i / per_browser` (consecutive viewers share a browser, so a browser fills along the ramp
//! and its first viewer creates it); each viewer keeps its own browser context, tab, probe,
//! throttling and lifecycle. The default, 1, is one browser (one WebDriver session) per
//! viewer.

use super::plan::{Plan, ViewerPlan};
use super::spec::{LinkProfile, NetworkProfile};

/// Viewers one browser may hold. Beyond 16 a browser process crash takes too many viewers
/// at once, and the measured saving per viewer has flattened out (BENCHMARKS.md).
pub const MAX_PER_BROWSER: u32 = 16;

/// The browser of viewer `index` when `per_browser` viewers share one.
pub(crate) fn browser_of(index: u32, per_browser: u32) -> u32 {
    index / per_browser.max(1)
}

/// Checks `viewers.per_browser` (or `--per-browser`, which wins); the message names the fix.
pub(super) fn per_browser(written: Option<u32>, over: Option<u32>) -> Result<u32, String> {
    let value = over.or(written).unwrap_or(1);
    if !(1..=MAX_PER_BROWSER).contains(&value) {
        return Err(format!(
            "{value} is out of range; use 1 (one browser per viewer, the default) to \
             {MAX_PER_BROWSER} viewers per browser"
        ));
    }
    Ok(value)
}

/// The packing a run gets: the scenario's `per_browser`, except under `tc` (`tc_shaped`),
/// where viewers of one browser share one network namespace and so exchange P2P over no
/// link at all: the swarm would look better connected than the links it was given (8
/// viewers on 300 kbit/s uplinks: 67–79% P2P savings packed 4 to a browser, 8.5% one per
/// browser; RESULTS.md). There the plan uses one viewer per browser, and says which value
/// it left out (second field); `--per-browser` (`over`) still packs a tc run on purpose.
pub(crate) fn unshaped_under_tc(
    written: u32,
    over: Option<u32>,
    tc_shaped: bool,
) -> (u32, Option<u32>) {
    if tc_shaped && over.is_none() && written > 1 {
        (1, Some(written))
    } else {
        (written, None)
    }
}

/// The one rule for the link of a browser that carries several viewers (a viewer slot
/// holds one browser, so this is the slot's link): the links its viewers would have alone,
/// pooled.
///
/// - Rates, each way: the sum of the viewers' rates, as a shared link carries what their
///   links together would; a viewer whose rate is not limited (`None`) leaves the pooled
///   rate unlimited too, since no sum of limits gives it what it had alone.
/// - Latency: the largest of the viewers' latencies. A link has one delay, and none of its
///   viewers gets a shorter one than its own profile says (the price: those with a shorter
///   one wait longer on the shared link).
///
/// No viewers: an unlimited link. Each viewer's HTTP is still held to its own profile in its
/// tab (`Viewer::throttle`); only WebRTC shares the pooled link.
pub fn shared_link(links: impl IntoIterator<Item = LinkProfile>) -> LinkProfile {
    fn sum(a: Option<u32>, b: Option<u32>) -> Option<u32> {
        Some(a?.saturating_add(b?))
    }
    let mut links = links.into_iter();
    let Some(first) = links.next() else {
        return LinkProfile::UNLIMITED;
    };
    links.fold(first, |pooled, l| LinkProfile {
        download_kbps: sum(pooled.download_kbps, l.download_kbps),
        upload_kbps: sum(pooled.upload_kbps, l.upload_kbps),
        latency_ms: pooled.latency_ms.max(l.latency_ms),
    })
}

/// The profile of a browser holding `viewers` viewers of `profile`: [`shared_link`] of
/// that many of its links (the rates that many times, its latency), applied as `profile`
/// says.
pub fn link_profile(profile: &NetworkProfile, viewers: u32) -> NetworkProfile {
    NetworkProfile {
        link: shared_link(std::iter::repeat_n(profile.link, viewers.max(1) as usize)),
        apply: profile.apply,
    }
}

/// One browser's viewers: `per_browser` of them (fewer in the last browser).
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserPlan {
    /// 0-based; viewer `i` is in browser `i / per_browser`.
    pub index: u32,
    /// Its viewers in arrival order.
    pub viewers: Vec<ViewerPlan>,
}

impl BrowserPlan {
    /// A browser of one viewer (`per_browser: 1`): it carries the viewer's index.
    pub fn single(viewer: &ViewerPlan) -> Self {
        Self {
            index: viewer.browser,
            viewers: vec![viewer.clone()],
        }
    }

    /// `first–last` viewer indexes, for messages.
    pub fn viewer_range(&self) -> String {
        match (self.viewers.first(), self.viewers.last()) {
            (Some(a), Some(b)) if a.index != b.index => format!("{}–{}", a.index, b.index),
            (Some(a), _) => a.index.to_string(),
            _ => "none".into(),
        }
    }
}

impl Plan {
    /// The browsers of the run and the viewers each holds.
    pub fn browser_plans(&self) -> Vec<BrowserPlan> {
        let mut out: Vec<BrowserPlan> = Vec::new();
        for viewer in self.viewer_plans() {
            match out.last_mut() {
                Some(b) if b.index == viewer.browser => b.viewers.push(viewer),
                _ => out.push(BrowserPlan {
                    index: viewer.browser,
                    viewers: vec![viewer],
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, Overrides};
    use super::*;

    fn plan(viewers: u32, per_browser: Option<u32>, over: Option<u32>) -> Result<Plan, String> {
        let line = per_browser
            .map(|n| format!("  per_browser: {n}\n"))
            .unwrap_or_default();
        let yaml = format!(
            "name: p\ntarget: {{kind: refsite, video: live}}\nviewers:\n  count: {viewers}\n  ramp: 10s\n{line}duration: 60s\nfleet: {{kind: local}}\n"
        );
        let overrides = Overrides {
            per_browser: over,
            ..Default::default()
        };
        parse(&yaml, "p.yaml", &overrides).map_err(|e| e.to_string())
    }

    #[test]
    fn consecutive_viewers_share_a_browser_and_the_last_takes_the_rest() {
        let p = plan(10, Some(4), None).unwrap();
        assert_eq!(p.per_browser, 4);
        let browsers = p.browser_plans();
        let sizes: Vec<usize> = browsers.iter().map(|b| b.viewers.len()).collect();
        assert_eq!(sizes, [4, 4, 2]);
        assert_eq!(browsers[1].viewer_range(), "4–7");
        for b in &browsers {
            assert!(b.viewers.iter().all(|v| v.browser == b.index), "{b:?}");
        }
        // Arrival order is kept: a browser's first viewer arrives first and creates it.
        assert!(browsers[2].viewers[0].start_after > browsers[1].viewers[3].start_after);
        assert_eq!(browser_of(7, 4), 1);
        assert_eq!(browser_of(7, 1), 7);
    }

    #[test]
    fn one_per_browser_is_the_default_and_gives_each_viewer_its_own() {
        let p = plan(3, None, None).unwrap();
        assert_eq!(p.per_browser, 1);
        let browsers = p.browser_plans();
        assert_eq!(browsers.len(), 3);
        assert_eq!(browsers[2], BrowserPlan::single(&p.viewer_plans()[2]));
        assert_eq!(browsers[2].viewer_range(), "2");
    }

    fn link(down: Option<u32>, up: Option<u32>, latency: Option<u32>) -> LinkProfile {
        LinkProfile {
            download_kbps: down,
            upload_kbps: up,
            latency_ms: latency,
        }
    }

    #[test]
    fn a_shared_link_sums_the_rates_and_keeps_the_largest_latency() {
        let dsl = link(Some(2_000), Some(300), Some(500));
        let fibre = link(Some(270_600), Some(18_400), Some(32));
        let no_latency = link(Some(10_000), Some(1_000), None);
        let mixed = [dsl, fibre, fibre, no_latency];
        let pooled = shared_link(mixed);
        assert_eq!(
            pooled,
            link(Some(553_200), Some(38_100), Some(500)),
            "{pooled:?}"
        );
        // The order of the viewers and how they are grouped do not matter: the packing
        // path (one profile times its viewers) pooled again gives the same link.
        let mut reversed = mixed;
        reversed.reverse();
        assert_eq!(shared_link(reversed), pooled);
        let by_profile = |p: LinkProfile, n| {
            link_profile(
                &NetworkProfile {
                    link: p,
                    apply: None,
                },
                n,
            )
            .link
        };
        assert_eq!(
            shared_link([
                by_profile(dsl, 1),
                by_profile(fibre, 2),
                by_profile(no_latency, 1)
            ]),
            pooled
        );
        // One viewer: its own link.
        assert_eq!(shared_link([dsl]), dsl);
        assert_eq!(by_profile(dsl, 1), dsl);
        assert_eq!(by_profile(dsl, 0), dsl);
        assert_eq!(
            by_profile(dsl, 4),
            link(Some(8_000), Some(1_200), Some(500))
        );
    }

    #[test]
    fn an_unlimited_rate_leaves_the_shared_link_unlimited_that_way() {
        let dsl = link(Some(2_000), Some(300), Some(500));
        let upload_only = link(None, Some(300), None);
        assert_eq!(
            shared_link([dsl, upload_only]),
            link(None, Some(600), Some(500))
        );
        assert_eq!(
            shared_link([dsl, LinkProfile::UNLIMITED]),
            link(None, None, Some(500))
        );
        assert!(shared_link([]).is_unlimited());
        assert!(shared_link([LinkProfile::UNLIMITED; 3]).is_unlimited());
        assert_eq!(
            shared_link([link(Some(u32::MAX), None, None); 2]),
            link(Some(u32::MAX), None, None)
        );
    }

    #[test]
    fn out_of_range_values_name_the_field_and_the_fix() {
        for bad in [0, 17, 1000] {
            let err = plan(4, Some(bad), None).unwrap_err();
            assert!(
                err.starts_with("p.yaml:6: viewers.per_browser: ")
                    && err.contains("use 1 (one browser per viewer, the default) to 16"),
                "{err}"
            );
        }
        // The command line wins over the file, and is checked the same way.
        assert_eq!(plan(4, Some(2), Some(8)).unwrap().per_browser, 8);
        let err = plan(4, None, Some(0)).unwrap_err();
        assert!(
            err.contains("viewers.per_browser: 0 is out of range"),
            "{err}"
        );
        assert!(plan(4, Some(-1i32 as u32), None).is_err());
    }
}
