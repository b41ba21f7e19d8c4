//! How many Selenium Grid hubs of which type a cloud fleet needs, from what a hub was
//! measured to cost and what the scenario asks of it: the sessions it holds (one per
//! browser), the rate its ramp asks for them (sessions / ramp), and how often the controller
//! reads every viewer through it (the sampling interval).
//!
//! A hub creates sessions one distributor thread each: with a browser's start-up on the
//! node (2–5 s for Chromium), `newsession-threadpool-size` threads (`grid/hub.toml`) give
//! at most threads / start-up sessions per second, and the hub's own work (the queue, the
//! distributor, proxying every WebDriver call) caps it further. When one hub cannot create
//! sessions as fast as the ramp asks, or hold them in its CPU or heap, the fleet is split
//! over several hubs, each with its share of the nodes; the Grid fleet spreads viewers over
//! them by capacity.

use super::pricing::Offer;
use super::CloudError;
use std::time::Duration;

/// What one hub costs, measured by `cargo bench --bench grid_hub` (BENCHMARKS.md, "One
/// Selenium hub"): a real Selenium 4.48 hub and four relay nodes in front of the kit's
/// WebDriver stub, so every WebDriver call of `viewerfleet run` crossed the hub.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HubCosts {
    /// Sessions one hub created per second over a ramp (sessions created as fast as it
    /// took them, 32 requests in flight).
    pub creations_per_s: f64,
    /// The hub's CPU per session created, ms: the creation and the viewer's start-up calls
    /// (throttling, page, first-frame reads) through the hub.
    pub cpu_ms_per_creation: f64,
    /// The hub's CPU per stats read it proxies, ms: every viewer is read once per sampling
    /// interval, so holding S sessions costs S / interval reads per second.
    pub cpu_ms_per_read: f64,
    /// The hub's live heap (after a full collection) with its nodes and no session, and
    /// what each session held adds, MB.
    pub base_heap_mb: f64,
    pub heap_mb_per_session: f64,
    /// Where and when it was measured.
    pub measured: &'static str,
}

/// The measured hub (BENCHMARKS.md, 2026-12-02): at 250, 500 and 1000 sessions it created
/// 10.3, 11.4 and 7.0 sessions/s, spent 40–66 ms of CPU per creation (net of the reads it
/// proxied meanwhile), 0.95–1.85 ms per stats read, and its live heap grew from 20 MB by
/// 0.04–0.07 MB per session. The figures taken are the worst of the three: the rate at 1000,
/// the CPU per creation at 1000, per read at 250, heap per session at 250 (rounded up). The
/// machine had 2 cores for the hub, four relay nodes, the stub and the controller, and other
/// builds ran (load 7–18): a dedicated hub does at least as well.
pub const MEASURED: HubCosts = HubCosts {
    creations_per_s: 7.0,
    cpu_ms_per_creation: 66.0,
    cpu_ms_per_read: 1.85,
    base_heap_mb: 20.0,
    heap_mb_per_session: 0.08,
    measured: "cargo bench --bench grid_hub on 2026-12-02: Selenium 4.48.0 hub, 4 relay nodes, 250/500/1000 sessions on a shared 2-core host",
};

/// A browser's start-up on its node, which holds one of the hub's distributor threads:
/// Chromium through ChromeDriver took 2–5 s on this kind of machine (FACTS.md).
pub(crate) const BROWSER_START_S: f64 = 5.0;

pub use crate::model::scenario::fleet::grid::START_HOLD_S;

/// Share of a hub's cores its measured work may use (bursts, garbage collection).
pub(crate) const HUB_CPU_TARGET: f64 = 0.6;

/// The JVM's default heap limit is a quarter of the machine's memory; of that, the sessions
/// may use this share.
pub(crate) const HEAP_SHARE_OF_RAM: f64 = 0.25;
pub(crate) const HEAP_TARGET: f64 = 0.8;

/// The smallest machine a hub runs on, and the most hubs one fleet is split over.
pub(crate) const HUB_MIN_CORES: u32 = 2;
pub(crate) const HUB_MIN_MEMORY_GB: f64 = 4.0;
pub(crate) const MAX_HUBS: u32 = 16;

/// `max_parallel_starts` of a cloud fleet stays within these.
pub(crate) const MIN_PARALLEL_STARTS: u32 = 4;
pub(crate) const MAX_PARALLEL_STARTS: u32 = 256;

/// `newsession-threadpool-size` of `grid/hub.toml` (the file cloud hubs run), if set.
pub(crate) fn distributor_threads(hub_toml: &str) -> Option<u32> {
    hub_toml.lines().find_map(|line| {
        let (key, value) = line.split('#').next()?.split_once('=')?;
        (key.trim() == "newsession-threadpool-size")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

const HUB_TOML: &str = include_str!("../../../../grid/hub.toml");

/// What the scenario asks of the hubs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HubDemand {
    /// Grid sessions: one per browser.
    pub sessions: u32,
    pub ramp: Duration,
    pub sampling: Duration,
}

impl HubDemand {
    /// Sessions per second the ramp asks for; `None`: all at once (as fast as the hubs go).
    pub fn asked_per_s(&self) -> Option<f64> {
        (!self.ramp.is_zero()).then(|| f64::from(self.sessions) / self.ramp.as_secs_f64())
    }
}

/// The hubs of a fleet and why.
#[derive(Debug, Clone, PartialEq)]
pub struct HubPlan {
    pub offer: Offer,
    pub count: u32,
    /// The type was chosen from the catalogue (not set in `fleet.hub_type`).
    pub default_type: bool,
    pub sessions_per_hub: u32,
    pub asked_per_s: Option<f64>,
    /// Sessions one hub of this type creates per second, and all of them together.
    pub rate_per_hub: f64,
    pub rate_all: f64,
    /// What bounds one hub's rate: `distributor threads` or `measured hub`.
    pub rate_bound: &'static str,
    /// Per hub: peak cores (creating at its share of the rate while holding its sessions)
    /// and live heap with its sessions.
    pub cores_per_hub: f64,
    pub heap_mb_per_hub: f64,
    /// Why this many hubs: `rate`, `CPU`, `memory` or `one hub suffices`.
    pub limited_by: &'static str,
    /// Session requests in flight: the rate the hubs can go × how long a start holds its
    /// permit.
    pub max_parallel_starts: u32,
    /// How long creating every session takes at the rate the hubs and the ramp allow.
    pub creation_takes_s: f64,
    pub costs: HubCosts,
}

/// One hub type's figures for a demand.
struct Fit {
    count: u32,
    limited_by: &'static str,
    rate_per_hub: f64,
    rate_bound: &'static str,
    cores_per_hub: f64,
    heap_mb_per_hub: f64,
}

fn fit(offer: &Offer, d: &HubDemand, c: &HubCosts, threads: Option<u32>) -> Option<Fit> {
    let threads = threads.unwrap_or(3 * offer.cores); // Selenium's default
    let by_threads = f64::from(threads) / BROWSER_START_S;
    let (rate_per_hub, rate_bound) = if by_threads < c.creations_per_s {
        (by_threads, "distributor threads")
    } else {
        (c.creations_per_s, "measured hub")
    };
    let sessions = f64::from(d.sessions.max(1));
    let sampling = d.sampling.as_secs_f64().max(0.1);
    let hold_cores_all = sessions / sampling * c.cpu_ms_per_read / 1000.0;
    let cores = f64::from(offer.cores) * HUB_CPU_TARGET;
    let heap = offer.memory_gb * 1024.0 * HEAP_SHARE_OF_RAM * HEAP_TARGET - c.base_heap_mb;
    if heap <= 0.0 {
        return None;
    }
    let k_rate = d
        .asked_per_s()
        .map_or(1.0, |asked| (asked / rate_per_hub).ceil());
    let k_heap = (sessions * c.heap_mb_per_session / heap).ceil();
    // Each hub creates at its share of the rate (at most its own) while it holds its
    // share of the sessions.
    let per_hub = |k: f64| {
        let rate = d
            .asked_per_s()
            .map_or(rate_per_hub, |a| (a / k).min(rate_per_hub));
        rate * c.cpu_ms_per_creation / 1000.0 + hold_cores_all / k
    };
    let mut k_cpu = 1.0;
    while per_hub(k_cpu) > cores && k_cpu < f64::from(MAX_HUBS) + 1.0 {
        k_cpu += 1.0;
    }
    let count = k_rate.max(k_heap).max(k_cpu).max(1.0);
    if count > f64::from(MAX_HUBS) || per_hub(count) > cores {
        return None;
    }
    let limited_by = if count <= 1.0 {
        "one hub suffices"
    } else if count == k_rate {
        "rate"
    } else if count == k_cpu {
        "CPU"
    } else {
        "memory"
    };
    Some(Fit {
        count: count as u32,
        limited_by,
        rate_per_hub,
        rate_bound,
        cores_per_hub: per_hub(count),
        heap_mb_per_hub: c.base_heap_mb + sessions / count * c.heap_mb_per_session,
    })
}

/// The hubs for `demand`: of `hub_type` when set, else the cheapest current x86 type (at
/// least `HUB_MIN_CORES` cores and `HUB_MIN_MEMORY_GB`) in the fewest hubs at that price.
pub fn plan(
    demand: &HubDemand,
    forced: Option<&Offer>,
    offers: &[Offer],
    ipv4_hourly: f64,
    costs: &HubCosts,
) -> Result<HubPlan, CloudError> {
    let threads = distributor_threads(HUB_TOML);
    plan_with(demand, forced, offers, ipv4_hourly, costs, threads)
}

/// `plan` for hubs whose distributor has `threads` (`None`: Selenium's default, three per
/// core).
fn plan_with(
    demand: &HubDemand,
    forced: Option<&Offer>,
    offers: &[Offer],
    ipv4_hourly: f64,
    costs: &HubCosts,
    threads: Option<u32>,
) -> Result<HubPlan, CloudError> {
    let candidates: Vec<&Offer> = match forced {
        Some(o) => vec![o],
        None => offers
            .iter()
            .filter(|o| {
                o.default_choice() && o.cores >= HUB_MIN_CORES && o.memory_gb >= HUB_MIN_MEMORY_GB
            })
            .collect(),
    };
    let best = candidates
        .into_iter()
        .filter_map(|o| fit(o, demand, costs, threads).map(|f| (o, f)))
        .min_by(|(a, fa), (b, fb)| {
            // Each hub has its IPv4 address too.
            let cost = |o: &Offer, f: &Fit| f64::from(f.count) * (o.hourly_net + ipv4_hourly);
            cost(a, fa)
                .total_cmp(&cost(b, fb))
                .then(fa.count.cmp(&fb.count))
        });
    let Some((offer, f)) = best else {
        return Err(CloudError::Invalid {
            field: "hub_type".into(),
            message: format!(
                "no {} holds {} sessions at a {:?} sampling interval and the ramp's rate in {MAX_HUBS} hubs or fewer (measured per hub: {:.1} sessions/s, {:.0} ms CPU per creation, {:.2} ms CPU per stats read, {:.2} MB heap per session); choose a bigger fleet.hub_type, a longer ramp, a longer sampling_interval or fewer viewers per run",
                forced.map_or_else(|| "current type".to_string(), |o| format!("hub of type {}", o.name)),
                demand.sessions,
                demand.sampling,
                costs.creations_per_s,
                costs.cpu_ms_per_creation,
                costs.cpu_ms_per_read,
                costs.heap_mb_per_session
            ),
        });
    };
    let rate_all = f.rate_per_hub * f64::from(f.count);
    let going = demand.asked_per_s().map_or(rate_all, |a| a.min(rate_all));
    let parallel = (going * START_HOLD_S).ceil() as u32;
    Ok(HubPlan {
        offer: offer.clone(),
        count: f.count,
        default_type: forced.is_none(),
        sessions_per_hub: demand.sessions.div_ceil(f.count),
        asked_per_s: demand.asked_per_s(),
        rate_per_hub: f.rate_per_hub,
        rate_all,
        rate_bound: f.rate_bound,
        cores_per_hub: f.cores_per_hub,
        heap_mb_per_hub: f.heap_mb_per_hub,
        limited_by: f.limited_by,
        max_parallel_starts: parallel
            .clamp(MIN_PARALLEL_STARTS, MAX_PARALLEL_STARTS)
            .min(demand.sessions.max(MIN_PARALLEL_STARTS)),
        creation_takes_s: f64::from(demand.sessions) / going.max(1e-9),
        costs: *costs,
    })
}

/// Nodes `0..nodes` spread over `hubs` evenly: node `i` registers with hub `i % hubs`.
pub(crate) fn hub_of_node(node: u32, hubs: u32) -> u32 {
    node % hubs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, cores: u32, mem: f64, hourly: f64) -> Offer {
        Offer {
            name: name.into(),
            cores,
            memory_gb: mem,
            cpu_type: "shared".into(),
            architecture: "x86".into(),
            unavailable_after: None,
            hourly_net: hourly,
            hourly_gross: hourly * 1.19,
            monthly_net: hourly * 730.0,
        }
    }

    fn costs() -> HubCosts {
        HubCosts {
            creations_per_s: 5.0,
            cpu_ms_per_creation: 100.0,
            cpu_ms_per_read: 2.5,
            base_heap_mb: 100.0,
            heap_mb_per_session: 0.5,
            measured: "test",
        }
    }

    fn demand(sessions: u32, ramp_s: u64, sampling_s: u64) -> HubDemand {
        HubDemand {
            sessions,
            ramp: Duration::from_secs(ramp_s),
            sampling: Duration::from_secs(sampling_s),
        }
    }

    #[test]
    fn the_hub_setting_is_read_from_hub_toml() {
        assert_eq!(
            distributor_threads("[distributor]\nnewsession-threadpool-size = 64 # x\n"),
            Some(64)
        );
        assert_eq!(distributor_threads("[server]\nport = 4444\n"), None);
    }

    /// 1000 sessions over 120 s ask 8.3/s; one hub creates 5/s: two hubs, split by rate.
    #[test]
    fn a_ramp_faster_than_one_hub_splits_the_fleet() {
        let offers = [offer("cx23", 2, 4.0, 0.005), offer("cx33", 4, 8.0, 0.008)];
        let p = plan_with(
            &demand(1000, 120, 5),
            None,
            &offers,
            0.0,
            &costs(),
            Some(64),
        )
        .unwrap();
        assert_eq!((p.count, p.limited_by), (2, "rate"));
        assert_eq!(p.offer.name, "cx23");
        assert_eq!(p.sessions_per_hub, 500);
        // Creating at 4.2/s (0.42 cores) while holding 500 (0.25 cores) on 2 × 0.6 cores.
        assert!(
            (p.cores_per_hub - 0.667).abs() < 0.01,
            "{}",
            p.cores_per_hub
        );
        // 8.3 sessions/s × 16 s a start holds its permit.
        assert_eq!(p.max_parallel_starts, 134);
        assert!((p.creation_takes_s - 120.0).abs() < 1e-6);
    }

    /// A slow ramp fits one hub; an idle one too, but a 1 s sampling interval multiplies
    /// the work of holding sessions by five.
    #[test]
    fn holding_sessions_read_often_needs_cores() {
        let offers = [offer("cx23", 2, 4.0, 0.005), offer("cx33", 4, 8.0, 0.008)];
        let slow = plan_with(&demand(400, 400, 5), None, &offers, 0.0, &costs(), Some(64)).unwrap();
        assert_eq!((slow.count, slow.limited_by), (1, "one hub suffices"));
        assert_eq!(slow.max_parallel_starts, 16);
        let often = plan_with(
            &demand(4000, 4000, 1),
            None,
            &offers,
            0.0,
            &costs(),
            Some(64),
        )
        .unwrap();
        // Holding 4000 read every second: 10 cores; cx33 gives 2.4 a hub → 5 hubs (cheaper
        // than 9 cx23).
        assert_eq!(
            (often.offer.name.as_str(), often.limited_by),
            ("cx33", "CPU")
        );
        assert_eq!(often.count, 5);
    }

    #[test]
    fn a_forced_type_too_small_says_what_to_change() {
        let tiny = offer("cx23", 2, 4.0, 0.005);
        let err = plan_with(
            &demand(40_000, 60, 1),
            Some(&tiny),
            &[],
            0.0,
            &costs(),
            Some(64),
        )
        .unwrap_err();
        assert!(err.to_string().contains("hub of type cx23"), "{err}");
    }

    #[test]
    fn all_at_once_goes_as_fast_as_the_hubs() {
        let offers = [offer("cx33", 4, 8.0, 0.008)];
        let p = plan_with(&demand(1000, 0, 5), None, &offers, 0.0, &costs(), Some(64)).unwrap();
        assert_eq!(p.count, 1);
        assert_eq!(p.asked_per_s, None);
        assert!((p.creation_takes_s - 200.0).abs() < 1e-6);
        assert_eq!(p.max_parallel_starts, 80);
    }

    /// Without `newsession-threadpool-size`, Selenium gives the distributor three threads per
    /// core: with 5 s browser start-ups a 2-core hub creates 1.2 sessions/s, a 4-core 2.4.
    #[test]
    fn the_distributors_threads_bound_a_hubs_rate() {
        let offers = [offer("cx23", 2, 4.0, 0.005), offer("cx33", 4, 8.0, 0.008)];
        let p = plan_with(&demand(1000, 120, 5), None, &offers, 0.0, &costs(), None).unwrap();
        assert_eq!(p.rate_bound, "distributor threads");
        assert_eq!((p.offer.name.as_str(), p.count), ("cx33", 4));
        assert!((p.rate_per_hub - 2.4).abs() < 1e-9);
        // The shipped hub.toml sets the threads, so the measured hub bounds the rate.
        assert!(
            distributor_threads(HUB_TOML).unwrap_or(0) as f64 / BROWSER_START_S
                >= MEASURED.creations_per_s
        );
    }

    #[test]
    fn nodes_are_spread_evenly() {
        let per_hub: Vec<u32> = (0..7).map(|n| hub_of_node(n, 2)).collect();
        assert_eq!(per_hub, [0, 1, 0, 1, 0, 1, 0]);
    }
}
