//! Light peers in a run (`swarm.light_peers`): pages of the target's light-peer page, one
//! browser session each, that join the viewers' swarm with the player's own P2P engine and a
//! simulated playhead (`web/light.js`). Each page is opened in a slot of the run's fleet (so
//! on `netns` its peers share one address and, under `tc`, where the plan keeps one light
//! peer per page, each has its own tc-shaped link; on a Grid they run on its nodes), its peers
//! arriving over the ramp interleaved with the other pages' ([`page_schedule`]), read every
//! sampling interval into `raw/light_samples.jsonl`, and closed with its session and slot on
//! every exit path.

use super::light_inject::Injection;
use super::recorder::Record;
use super::shared::Shared;
use crate::fleet::Fleet;
use crate::model::kinds::{TargetKind, Throttling};
use crate::model::rawdata::{
    FleetDescription, LightSample, LightSummary, PageLag, RunEventKind, ViewerSample,
};
use crate::model::scenario::fleet::netns::MAX_VIEWERS;
use crate::model::scenario::light::{LightGroup, LightRuntime};
use crate::model::scenario::{BrowserPlan, NetworkProfile, Plan, ViewerPlan};
use crate::report::stats::percentile;
use crate::viewer::light_host::{self, LightHostInstall, LightHostProcess};
use crate::viewer::{Viewer, ViewerSlot};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What the engine asks of a light-peer page: its read, with the live latency its peers
/// follow (a number of seconds, or `null`).
fn read_script(follow: Option<f64>) -> String {
    let follow = follow.map_or("null".to_string(), |s| format!("{s:.3}"));
    format!("return window.viewerfleetLight ? window.viewerfleetLight.read({follow}) : null;")
}
const STOP_SCRIPT: &str =
    "if (window.viewerfleetLight) window.viewerfleetLight.stop(); return true;";
/// Consecutive failed reads after which a page counts as lost.
const LOST_AFTER_FAILED_READS: u32 = 3;
/// The last read and the stop request at the end of the run may take this long.
const CLOSING_TIMEOUT: Duration = Duration::from_secs(10);

/// The pages of light peers, their peers arriving interleaved over the ramp (see
/// [`page_schedule`]; with `count: auto`, at once: the governed ramp then measures the host
/// with them).
/// `host` is what [`choose_host`] chose; each host process's log goes into `log_dir`.
pub(super) fn release(
    plan: &Plan,
    host: Option<&LightHost>,
    log_dir: &Path,
    shared: &Arc<Shared>,
) -> tokio::task::JoinSet<()> {
    let mut pages = tokio::task::JoinSet::new();
    let (Some(light), Some(host)) = (&plan.light, host) else {
        return pages;
    };
    let groups = light.groups();
    let n = groups.len() as u32;
    let profile = page_profile(plan);
    for group in groups {
        let (due, spread) = page_schedule(group, n, light.per_page, plan.ramp, plan.auto.is_some());
        let p2p_off = (group.first..group.first + group.count)
            .filter(|&peer| !plan.light_peer_p2p(peer))
            .collect();
        pages.spawn(light_page(
            PagePlan {
                group,
                due,
                spread,
                profile,
                p2p_off,
            },
            host.clone(),
            log_dir.to_path_buf(),
            shared.clone(),
        ));
    }
    pages
}

/// When a page opens (`due`) and over how long its peers start, evenly one after another
/// (`spread`, what the page's script spaces them by).
///
/// The peers of all pages arrive interleaved — page 0's first, page 1's first, …, then page
/// 0's second — so every page holds early and late members of the swarm alike. The swarm's
/// first members upload the most; a page holding all of them carried twice the upload of
/// the last page and ran its timer the latest (RESULTS.md, 4 + 100 in Node.js). With
/// `count: auto` every page opens at once and its peers start over the ramp's share of one
/// page, as before the governed ramp measures the host with them.
fn page_schedule(
    group: LightGroup,
    pages: u32,
    per_page: u32,
    ramp: Duration,
    auto: bool,
) -> (Duration, Duration) {
    if pages <= 1 {
        return (Duration::ZERO, ramp);
    }
    if auto {
        return (Duration::ZERO, ramp / pages);
    }
    // Peer i of page g takes arrival slot i * pages + g of the pages' full size (a smaller
    // last page leaves its later slots empty, so no peer arrives after the ramp).
    let slot = ramp.div_f64((pages * per_page.max(1)) as f64);
    (slot * group.index, slot * (pages * group.count))
}

/// The link profile light peers take: the run's `viewers.network`, else its first class's.
fn page_profile(plan: &Plan) -> Option<NetworkProfile> {
    plan.network
        .or_else(|| plan.networks.iter().find_map(|class| class.profile))
}

/// How the run's light peers are shaped, in words, for the manifest.
pub(super) fn summary(
    plan: &Plan,
    fleet: &FleetDescription,
    host: Option<&LightHost>,
) -> Option<LightSummary> {
    let light = plan.light.as_ref()?;
    Some(LightSummary {
        peers: light.peers,
        per_page: light.per_page,
        runtime: host.map(|h| h.name().to_string()),
        shaping: shaping_words(
            page_profile(plan).as_ref(),
            fleet.p2p_shaped,
            light.per_page,
        ),
        fidelity: plan.fidelity.clone(),
    })
}

fn shaping_words(profile: Option<&NetworkProfile>, slots_shape: bool, per_page: u32) -> String {
    let Some(p) = profile.filter(|p| !p.link.is_unlimited()) else {
        return "not shaped (the scenario has no network profile)".into();
    };
    let rate = |k: Option<u32>| k.map_or("-".into(), |k| k.to_string());
    let latency = p.link.latency_ms.unwrap_or(0);
    match p.apply.unwrap_or(Throttling::HttpOnly) {
        Throttling::HttpOnly | Throttling::CdpAll => format!(
            "each light peer's HTTP held to {} kbit/s down and {latency} ms in its page, as a real viewer's http-only throttle; their WebRTC is not shaped{}",
            rate(p.link.download_kbps),
            if p.apply == Some(Throttling::CdpAll) {
                " (cdp-all throttles real viewers' data channels, not light peers')"
            } else {
                ""
            }
        ),
        Throttling::Tc if slots_shape && per_page == 1 => format!(
            "each light peer in a page of its own with its own tc-shaped link ({} / {} kbit/s), as a real viewer's; P2P between light peers crosses their links",
            rate(p.link.download_kbps),
            rate(p.link.upload_kbps)
        ),
        Throttling::Tc if slots_shape => format!(
            "the light peers of a page (up to {per_page}) share one tc-shaped link at their number times the profile ({} / {} kbit/s each); P2P between light peers of one page crosses no link",
            rate(p.link.download_kbps),
            rate(p.link.upload_kbps)
        ),
        Throttling::Tc => {
            "tc asked for, but this fleet has no per-viewer interfaces: not applied".into()
        }
    }
}

/// One page's part of the plan.
#[derive(Debug, Clone)]
struct PagePlan {
    group: LightGroup,
    due: Duration,
    spread: Duration,
    profile: Option<NetworkProfile>,
    /// The page's peers with P2P off (the plan's P2P-off share), by number.
    p2p_off: Vec<u32>,
}

/// The HTTP link the page gives each of its peers (what the fleet's slot does not already).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct PageLink {
    down_kbps: u32,
    rtt_ms: u32,
}

fn page_link(profile: Option<&NetworkProfile>, slot: &ViewerSlot) -> PageLink {
    let Some(p) = profile else {
        return PageLink::default();
    };
    let latency = p.link.latency_ms.unwrap_or(0);
    match p.apply.unwrap_or(Throttling::HttpOnly) {
        Throttling::HttpOnly | Throttling::CdpAll => PageLink {
            down_kbps: p.link.download_kbps.unwrap_or(0),
            rtt_ms: latency,
        },
        // The slot's queues carry the rates; a slot without a delay queue leaves the
        // latency to the page, as it does for real viewers.
        Throttling::Tc if slot.tc.rates && !slot.tc.latency => PageLink {
            down_kbps: 0,
            rtt_ms: latency,
        },
        Throttling::Tc => PageLink::default(),
    }
}

/// The browser (slot) of page `index`: numbered from the top of the netns fleet's range
/// down, far from the viewers' browsers, which count up from 0.
fn browser_plan(page: &PagePlan) -> anyhow::Result<BrowserPlan> {
    let index = (MAX_VIEWERS - 1)
        .checked_sub(page.group.index)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "more pages of light peers than a fleet has slots; raise swarm.per_page"
            )
        })?;
    let viewer = ViewerPlan {
        index,
        start_after: Duration::ZERO,
        p2p: true,
        network: page.profile,
        browser: index,
        access: Default::default(),
    };
    // Each peer of the page counts once in the slot's link (the netns fleet sums them).
    Ok(BrowserPlan {
        index,
        viewers: vec![viewer; page.group.count as usize],
    })
}

/// `first–last`, for messages.
fn peer_range(group: &LightGroup) -> String {
    match group.count {
        1 => group.first.to_string(),
        n => format!("{}–{}", group.first, group.first + n - 1),
    }
}

/// What runs the run's pages of light peers: chosen once, before the manifest names it.
#[derive(Debug, Clone)]
pub(super) enum LightHost {
    /// A Node.js process per page (`light-host/`), in the page's slot.
    Node(LightHostInstall),
    /// A Chromium page per page, one WebDriver session.
    Browser,
    /// A Chromium page per page on a site without a light page (PeerTube): one of the
    /// site's own pages with the light peers' module loaded into it.
    Injected(Arc<Injection>),
}

impl LightHost {
    fn name(&self) -> &'static str {
        match self {
            LightHost::Node(_) => "node",
            LightHost::Browser | LightHost::Injected(_) => "browser",
        }
    }
}

/// On a PeerTube target, browser pages load the light peers' module into the instance's
/// own page ([`Injection`]), read from its API once here; refsite serves a light page.
pub(super) async fn for_target(
    host: Option<LightHost>,
    plan: &Plan,
    viewer_url: &str,
) -> anyhow::Result<Option<LightHost>> {
    if plan.target.kind == TargetKind::Refsite {
        return Ok(host);
    }
    Ok(match host {
        None => None,
        Some(LightHost::Node(_)) => anyhow::bail!(
            "swarm.runtime: node runs refsite's light page; on a `{}` target light peers run in browser pages: set `swarm.runtime: browser`",
            plan.target.kind
        ),
        Some(_) => Some(LightHost::Injected(Arc::new(
            Injection::prepare(viewer_url).await?,
        ))),
    })
}

/// Resolves `swarm.runtime` against the fleet: `node` where the fleet runs on this machine
/// and the host is installed, a browser page elsewhere (`auto`); an error names the fix
/// when `node` was asked for and cannot run.
pub(super) fn choose_host(plan: &Plan, fleet: &dyn Fleet) -> anyhow::Result<Option<LightHost>> {
    let Some(light) = &plan.light else {
        return Ok(None);
    };
    let local = fleet.runs_local_processes();
    Ok(Some(match light.runtime {
        LightRuntime::Browser => LightHost::Browser,
        LightRuntime::Node if !local => anyhow::bail!(
            "swarm.runtime: node runs light peers in Node.js processes on this machine, and this fleet's pages run elsewhere (or on the emulated internet, where only browsers reach the target by name); set `swarm.runtime: browser` (or auto)"
        ),
        LightRuntime::Node => LightHost::Node(
            light_host::locate().map_err(|e| anyhow::anyhow!("swarm.runtime: node: {e}"))?,
        ),
        LightRuntime::Auto if !local => LightHost::Browser,
        LightRuntime::Auto => match light_host::locate() {
            Ok(install) => LightHost::Node(install),
            Err(why) => {
                tracing::warn!("light peers run in browser pages: {why}");
                LightHost::Browser
            }
        },
    }))
}

/// One page of light peers while it runs: a browser session or a host process.
enum OpenPage {
    Browser(Viewer),
    Node(LightHostProcess),
}

impl OpenPage {
    async fn read(&mut self, follow: Option<f64>) -> anyhow::Result<serde_json::Value> {
        match self {
            OpenPage::Browser(viewer) => Ok(viewer
                .execute("reading light peers", &read_script(follow))
                .await?),
            OpenPage::Node(host) => host.read(follow).await,
        }
    }

    async fn stop(&mut self) {
        match self {
            OpenPage::Browser(viewer) => {
                let _ = viewer.execute("stopping light peers", STOP_SCRIPT).await;
            }
            OpenPage::Node(host) => host.stop().await,
        }
    }

    /// Releases the session or the process (after `stop`, or in its place).
    async fn close(self, shared: &Shared) {
        match self {
            OpenPage::Browser(viewer) => {
                let session = viewer.session_id.clone();
                viewer.close().await;
                if let Some(id) = session {
                    shared.fleet.session_closed(&id);
                }
            }
            OpenPage::Node(mut host) => host.kill().await,
        }
    }
}

async fn light_page(page: PagePlan, host: LightHost, log_dir: PathBuf, shared: Arc<Shared>) {
    tokio::select! {
        _ = tokio::time::sleep(page.due) => {}
        _ = shared.run_end.cancelled() => return,
    }
    let who = format!(
        "light page {} (peers {})",
        page.group.index,
        peer_range(&page.group)
    );
    let slot = tokio::select! {
        slot = open_slot(&page, &shared) => slot,
        _ = shared.run_end.cancelled() => return,
    };
    let mut slot = match slot {
        Ok(slot) => slot,
        Err(err) => {
            shared
                .rec
                .run_event(RunEventKind::LightFailed, Some(format!("{who}: {err:#}")));
            return;
        }
    };
    let url = match page_url(&page, &shared, page_link(page.profile.as_ref(), &slot)) {
        Ok(url) => url,
        Err(err) => {
            shared
                .rec
                .run_event(RunEventKind::LightFailed, Some(format!("{who}: {err:#}")));
            shared.fleet.close_viewer(&slot).await;
            return;
        }
    };
    let log = log_dir.join(format!("light_host_{}.log", page.group.index));
    let opened = tokio::select! {
        opened = open_page(&host, &mut slot, &url, &log, &shared) => opened,
        _ = shared.run_end.cancelled() => Err(anyhow::anyhow!("the run ended while the page opened")),
    };
    match opened {
        Ok(mut open) => {
            let where_ = format!(
                "{who} in {} on {}{}",
                host.name(),
                slot.node,
                slot.address
                    .as_ref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            );
            shared
                .rec
                .run_event(RunEventKind::LightStarted, Some(where_));
            if let Err(err) = drive(&page, &shared, &mut open).await {
                shared
                    .rec
                    .run_event(RunEventKind::LightFailed, Some(format!("{who}: {err:#}")));
            }
            open.close(&shared).await;
        }
        Err(err) if shared.run_end.is_cancelled() => {
            tracing::debug!("{who}: {err:#}");
        }
        Err(err) => {
            shared
                .rec
                .run_event(RunEventKind::LightFailed, Some(format!("{who}: {err:#}")));
        }
    }
    shared.fleet.close_viewer(&slot).await;
}

/// The page's slot in the fleet (its network, its link), within the limit on concurrent
/// starts.
async fn open_slot(page: &PagePlan, shared: &Shared) -> anyhow::Result<ViewerSlot> {
    let _permit = shared.starts.acquire().await?;
    shared.fleet.open_browser(&browser_plan(page)?).await
}

/// The target's light page for this group, with the page's peers, link and P2P-off list.
fn page_url(page: &PagePlan, shared: &Shared, link: PageLink) -> anyhow::Result<String> {
    let base = shared
        .target
        .light_url()
        .ok_or_else(|| anyhow::anyhow!("this target has no light-peer page"))?;
    let p2p_off: Vec<String> = page.p2p_off.iter().map(u32::to_string).collect();
    Ok(format!(
        "{base}&peers={}&first={}&down_kbps={}&rtt_ms={}&spread_ms={}&p2p_off={}",
        page.group.count,
        page.group.first,
        link.down_kbps,
        link.rtt_ms,
        page.spread.as_millis(),
        p2p_off.join(",")
    ))
}

/// Starts the page: a session that opens the URL, or a host process on it in the slot.
async fn open_page(
    host: &LightHost,
    slot: &mut ViewerSlot,
    url: &str,
    log: &Path,
    shared: &Shared,
) -> anyhow::Result<OpenPage> {
    match host {
        LightHost::Node(install) => {
            let prefix = shared.fleet.process_prefix(slot).ok_or_else(|| {
                anyhow::anyhow!("this fleet runs no processes of this machine in its slots")
            })?;
            Ok(OpenPage::Node(LightHostProcess::spawn(
                install, &prefix, url, log,
            )?))
        }
        LightHost::Browser | LightHost::Injected(_) => {
            let viewer = {
                let _permit = shared.starts.acquire().await?;
                match Viewer::create_with(slot, shared.timeouts.clone(), &shared.browser).await {
                    Ok(viewer) => viewer,
                    Err(err) => {
                        shared.fleet.session_refused();
                        return Err(err.into());
                    }
                }
            };
            if let Some(id) = &viewer.session_id {
                shared.fleet.session_placed(slot, id).await;
            }
            let opened = match host {
                LightHost::Injected(injection) => inject(&viewer, injection, url).await,
                _ => viewer.goto(url).await.map_err(anyhow::Error::from),
            };
            if let Err(err) = opened {
                OpenPage::Browser(viewer).close(shared).await;
                return Err(err);
            }
            Ok(OpenPage::Browser(viewer))
        }
    }
}

/// Opens the site's own page and loads the light peers into it, with `url`'s query.
async fn inject(viewer: &Viewer, injection: &Injection, url: &str) -> anyhow::Result<()> {
    viewer.goto(&injection.host_page).await?;
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let (script, args) = injection.script(query);
    viewer.execute_async(script, args).await?;
    Ok(())
}

/// Reads the page until the run ends; a last read and a stop request then.
async fn drive(page: &PagePlan, shared: &Shared, open: &mut OpenPage) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(shared.sampling_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failed_reads = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.run_end.cancelled() => break,
        }
        match read(open, page.group.index, shared).await {
            Ok(()) => failed_reads = 0,
            Err(err) => {
                failed_reads += 1;
                if failed_reads >= LOST_AFTER_FAILED_READS {
                    anyhow::bail!("lost after {failed_reads} failed reads: {err:#}");
                }
            }
        }
    }
    // The figures up to the end of the run, then the peers leave the swarm.
    let _ = tokio::time::timeout(CLOSING_TIMEOUT, async {
        let _ = read(open, page.group.index, shared).await;
        open.stop().await;
    })
    .await;
    Ok(())
}

/// One read of the page: a record per peer. The page's live peers are handed the real
/// viewers' latency to follow with it.
async fn read(open: &mut OpenPage, group: u32, shared: &Shared) -> anyhow::Result<()> {
    let follow = real_viewers_latency(&shared.live().latest);
    let value = open.read(follow).await?;
    let t = shared.rec.now();
    let Some(read) = parse_read(value)? else {
        return Ok(()); // the page's script has not run yet
    };
    for sample in read.samples(t, group) {
        shared.rec.send(Record::Light(sample));
    }
    Ok(())
}

/// How far behind the live edge the real viewers play: the median of the latest reads of
/// those playing (`None` before any plays, on VOD, or where the page does not say). Light
/// peers hold their playheads there, so the swarm's members stand where an all-real swarm's
/// would: a real player starts later than a light peer (its page, its decoder) and never
/// catches up, and which members ask the origin first decides who fetches over HTTP.
fn real_viewers_latency(latest: &HashMap<u32, ViewerSample>) -> Option<f64> {
    let latencies: Vec<f64> = latest
        .values()
        .filter(|s| s.playing)
        .filter_map(|s| s.live_latency_s)
        .filter(|l| *l > 0.0)
        .collect();
    percentile(&latencies, 50.0)
}

/// The page's answer; `None` before its script ran.
fn parse_read(value: serde_json::Value) -> anyhow::Result<Option<PageRead>> {
    if value.is_null() {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("the light-peer page answered in an unexpected form: {e}"))
}

/// What `window.viewerfleetLight.read()` returns.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PageRead {
    lag: Option<PageLagRead>,
    peers: Vec<PeerRead>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PageLagRead {
    ticks: u64,
    late_ms: f64,
    late_ticks: u64,
    max_ms: f64,
    hidden_ticks: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PeerRead {
    peer: u32,
    http_down_bytes: f64,
    p2p_down_bytes: f64,
    p2p_up_bytes: f64,
    peers: u32,
    playing: bool,
    position_s: f64,
    live_latency_s: Option<f64>,
    held_ms: Option<f64>,
    segments_loaded: u64,
    segments_late: u32,
    waited_ms: f64,
    errors: u32,
    last_error: Option<String>,
}

impl PageRead {
    fn samples(self, t: f64, group: u32) -> Vec<LightSample> {
        let lag = self.lag.map(|l| PageLag {
            ticks: l.ticks,
            late_ms: l.late_ms,
            late_ticks: l.late_ticks,
            max_ms: l.max_ms,
            hidden_ticks: l.hidden_ticks,
        });
        self.peers
            .into_iter()
            .map(|p| LightSample {
                t,
                peer: p.peer,
                group,
                http_down_bytes: p.http_down_bytes.max(0.0) as u64,
                p2p_down_bytes: p.p2p_down_bytes.max(0.0) as u64,
                p2p_up_bytes: p.p2p_up_bytes.max(0.0) as u64,
                peers: p.peers,
                playing: p.playing,
                position_s: p.position_s,
                live_latency_s: p.live_latency_s.filter(|l| l.is_finite()),
                held_ms: p.held_ms.filter(|h| *h > 0.0),
                segments_loaded: p.segments_loaded,
                segments_late: p.segments_late,
                waited_ms: p.waited_ms,
                errors: p.errors,
                lag,
                last_error: p.last_error,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scenario::LinkProfile;
    use crate::viewer::TcCoverage;

    /// Each peer's start: its page's opening plus its place in the page's spread, as the
    /// page's script spaces them (`spread * i / count`).
    fn starts(groups: &[LightGroup], per_page: u32, ramp: Duration, auto: bool) -> Vec<(u32, f64)> {
        let pages = groups.len() as u32;
        let mut starts: Vec<(u32, f64)> = groups
            .iter()
            .flat_map(|&g| {
                let (due, spread) = page_schedule(g, pages, per_page, ramp, auto);
                (0..g.count).map(move |i| {
                    let offset = if g.count > 1 {
                        spread.as_secs_f64() * i as f64 / g.count as f64
                    } else {
                        0.0
                    };
                    (g.first + i, due.as_secs_f64() + offset)
                })
            })
            .collect();
        starts.sort_by(|a, b| a.1.total_cmp(&b.1));
        starts
    }

    fn groups(peers: u32, per_page: u32) -> Vec<LightGroup> {
        crate::model::scenario::light::LightPlan {
            peers,
            per_page,
            per_page_not_applied: None,
            runtime: LightRuntime::Node,
        }
        .groups()
    }

    #[test]
    fn peers_of_all_pages_arrive_interleaved_within_the_ramp() {
        let ramp = Duration::from_secs(100);
        let starts = starts(&groups(100, 25), 25, ramp, false);
        // Page 0's first, page 1's first, …, page 3's first, then page 0's second: 1 s apart.
        let order: Vec<u32> = starts.iter().take(6).map(|s| s.0).collect();
        assert_eq!(order, vec![0, 25, 50, 75, 1, 26]);
        for (k, (_, at)) in starts.iter().enumerate() {
            assert!((at - k as f64).abs() < 1e-6, "arrival {k} at {at} s");
        }
        // Every page holds early and late members alike: its first peer within the first
        // pages' slots, its last within the last.
        for page in 0..4u32 {
            let mine: Vec<f64> = starts
                .iter()
                .filter(|s| s.0 / 25 == page)
                .map(|s| s.1)
                .collect();
            assert!(
                mine[0] < 4.0 && *mine.last().unwrap() >= 96.0,
                "page {page}: {mine:?}"
            );
        }
    }

    #[test]
    fn a_smaller_last_page_leaves_no_peer_after_the_ramp() {
        let ramp = Duration::from_secs(150);
        let starts = starts(&groups(60, 25), 25, ramp, false);
        assert_eq!(starts.len(), 60);
        let last = starts.last().unwrap().1;
        assert!(last < 150.0, "last arrival at {last} s");
        // The small page's 10 peers take the first 10 of its slots, interleaved with the others.
        let small: Vec<f64> = starts.iter().filter(|s| s.0 >= 50).map(|s| s.1).collect();
        assert_eq!(small.len(), 10);
        assert!(
            (small[0] - 4.0).abs() < 1e-6 && (small[9] - 58.0).abs() < 1e-6,
            "{small:?}"
        );
    }

    #[test]
    fn one_page_spreads_over_the_ramp_and_auto_opens_every_page_at_once() {
        let ramp = Duration::from_secs(120);
        let one = groups(20, 25);
        assert_eq!(
            page_schedule(one[0], 1, 25, ramp, false),
            (Duration::ZERO, ramp)
        );
        let many = groups(100, 25);
        for g in &many {
            assert_eq!(
                page_schedule(*g, 4, 25, ramp, true),
                (Duration::ZERO, ramp / 4)
            );
        }
    }

    fn profile(apply: Throttling) -> NetworkProfile {
        NetworkProfile {
            link: LinkProfile {
                download_kbps: Some(2000),
                upload_kbps: Some(300),
                latency_ms: Some(500),
            },
            apply: Some(apply),
        }
    }

    fn slot(rates: bool, latency: bool) -> ViewerSlot {
        ViewerSlot {
            webdriver_url: "http://127.0.0.1:1/".into(),
            grid_auth: None,
            chrome_binary: None,
            extra_args: Vec::new(),
            node: "local".into(),
            address: None,
            public_addresses: Vec::new(),
            nat: None,
            tc: TcCoverage { rates, latency },
            viewers: 1,
        }
    }

    #[test]
    fn http_only_peers_are_throttled_in_their_page_and_tc_peers_by_their_slot() {
        let http = profile(Throttling::HttpOnly);
        assert_eq!(
            page_link(Some(&http), &slot(false, false)),
            PageLink {
                down_kbps: 2000,
                rtt_ms: 500
            }
        );
        let tc = profile(Throttling::Tc);
        assert_eq!(page_link(Some(&tc), &slot(true, true)), PageLink::default());
        assert_eq!(
            page_link(Some(&tc), &slot(true, false)),
            PageLink {
                down_kbps: 0,
                rtt_ms: 500
            },
            "a slot without a delay queue leaves the latency to the page"
        );
        assert_eq!(page_link(None, &slot(false, false)), PageLink::default());
    }

    #[test]
    fn the_manifest_says_how_light_peers_were_shaped() {
        let words = shaping_words(Some(&profile(Throttling::Tc)), true, 25);
        assert!(
            words.contains("light peers of a page (up to 25) share one tc-shaped link"),
            "{words}"
        );
        let words = shaping_words(Some(&profile(Throttling::Tc)), true, 1);
        assert!(
            words.contains("each light peer in a page of its own with its own tc-shaped link"),
            "{words}"
        );
        let words = shaping_words(Some(&profile(Throttling::Tc)), false, 25);
        assert!(words.contains("not applied"), "{words}");
        let words = shaping_words(Some(&profile(Throttling::HttpOnly)), false, 25);
        assert!(words.contains("2000 kbit/s down and 500 ms"), "{words}");
        assert!(shaping_words(None, false, 25).starts_with("not shaped"));
    }

    #[test]
    fn a_page_read_becomes_one_record_per_peer_with_the_pages_lag() {
        let value = serde_json::json!({
            "lag": {"ticks": 40, "lateMs": 120.5, "lateTicks": 1, "maxMs": 101.0, "hiddenTicks": 0},
            "peers": [
                {"peer": 25, "httpDownBytes": 1000, "p2pDownBytes": 3000, "p2pUpBytes": 2000,
                 "peers": 4, "playing": true, "positionS": 12.5, "liveLatencyS": 13.2,
                 "heldMs": 4250.0, "segmentsLoaded": 7,
                 "segmentsLate": 1, "waitedMs": 250.0, "errors": 0, "lastError": null},
                {"peer": 26, "httpDownBytes": 0, "p2pDownBytes": 0, "p2pUpBytes": 0,
                 "peers": 0, "playing": false, "positionS": 0, "segmentsLoaded": 0,
                 "segmentsLate": 0, "waitedMs": 0, "errors": 1, "lastError": "start: TypeError"}
            ],
            "errors": []
        });
        let samples = parse_read(value).unwrap().unwrap().samples(10.0, 1);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].peer, 25);
        assert_eq!(samples[0].group, 1);
        assert_eq!(samples[0].p2p_down_bytes, 3000);
        assert_eq!(samples[0].lag.unwrap().late_ticks, 1);
        assert_eq!(samples[0].live_latency_s, Some(13.2));
        assert_eq!(samples[0].held_ms, Some(4250.0));
        assert_eq!(
            samples[1].held_ms, None,
            "a peer that never held says nothing"
        );
        assert_eq!(samples[1].last_error.as_deref(), Some("start: TypeError"));
        assert!(parse_read(serde_json::Value::Null).unwrap().is_none());
        assert!(parse_read(serde_json::json!({"peers": "x"})).is_err());
    }

    #[test]
    fn the_manifest_carries_the_fidelity_verdict_the_scenario_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("fidelity.json"),
            r#"{"document": "viewerfleet-light-fidelity", "schema_version": 1, "verdict": "fail",
                "created": "2026-12-04T10:00:00Z", "swarm": 8, "real": 2,
                "p2p_savings": {"all_real_pct": 68.1, "with_light_pct": 60.0}}"#,
        )
        .unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(
            &file,
            "name: s\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: 2\nswarm:\n  light_peers: 6\n  fidelity: fidelity.json\nduration: 2m\nfleet:\n  kind: local\n",
        )
        .unwrap();
        let plan = crate::model::scenario::load(&file, &Default::default()).unwrap();
        let fleet = crate::model::rawdata::Manifest::example().fleet;
        let light = summary(&plan, &fleet, Some(&LightHost::Browser)).unwrap();
        assert_eq!(light.runtime.as_deref(), Some("browser"));
        let f = light.fidelity.unwrap();
        assert_eq!(f.verdict.as_str(), "FAIL");
        assert_eq!((f.swarm, f.real), (8, 2));
        assert_eq!(f.with_light_p2p_savings_pct, Some(60.0));
        assert!(f.file.ends_with("fidelity.json"), "{}", f.file);
        // Without `swarm.fidelity`, none.
        let plan = crate::model::scenario::load(
            &file,
            &crate::model::scenario::Overrides {
                light_peers: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(summary(&plan, &fleet, None).is_none());
    }

    #[test]
    fn light_peers_follow_the_median_latency_of_the_real_viewers_playing() {
        let sample = |viewer, playing, latency| ViewerSample {
            viewer,
            playing,
            live_latency_s: latency,
            ..Default::default()
        };
        let mut latest = HashMap::new();
        assert_eq!(real_viewers_latency(&latest), None, "no viewer yet");
        latest.insert(0, sample(0, true, Some(14.0)));
        latest.insert(1, sample(1, true, Some(18.0)));
        latest.insert(2, sample(2, false, Some(2.0)));
        latest.insert(3, sample(3, true, None));
        assert_eq!(
            real_viewers_latency(&latest),
            Some(16.0),
            "the median of the two playing viewers that say; a stalled one and a silent one do not count"
        );
        latest.insert(4, sample(4, true, Some(15.0)));
        assert_eq!(real_viewers_latency(&latest), Some(15.0));
        assert_eq!(
            read_script(Some(15.0)),
            "return window.viewerfleetLight ? window.viewerfleetLight.read(15.000) : null;"
        );
        assert!(read_script(None).contains("read(null)"));
    }

    #[test]
    fn light_pages_take_browser_numbers_from_the_top_down() {
        let page = PagePlan {
            group: LightGroup {
                index: 2,
                first: 50,
                count: 25,
            },
            due: Duration::ZERO,
            spread: Duration::ZERO,
            profile: None,
            p2p_off: Vec::new(),
        };
        let browser = browser_plan(&page).unwrap();
        assert_eq!(browser.index, MAX_VIEWERS - 3);
        assert_eq!(browser.viewers.len(), 25);
    }
}
