//! refsite with real headless Chromium viewers (Debian chromium + chromedriver): P2P works
//! on the VOD and on the live video, a `p2p=0` viewer stays on HTTP and never reaches the
//! tracker, the players' HTTP bytes (summed on `/metrics`) match the origin's ground truth,
//! and P2P downloaded ≈ P2P uploaded across the swarm.
//!
//! Every resource is released on every path: sessions are closed, chromedriver is killed
//! and reaped, refsite (and its ffmpeg) is shut down, before any assertion fails the test.

use crate::support::poll;
use anyhow::{anyhow, ensure, Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use viewerfleet::model::kinds::VideoKind;
use viewerfleet::refsite::{self, RefsiteConfig, RefsiteHandle};

/// Browser tests share two cores with everything else: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CHROMIUM: &str = "/usr/lib/chromium/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a free loopback port, killed and reaped on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start chromedriver: apt-get install -y chromium chromium-driver")?;
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = reqwest::get(format!("{}status", driver.url))
                .await
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ok {
                return Ok(driver);
            }
            ensure!(
                Instant::now() < deadline,
                "chromedriver did not answer in 20 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One headless viewer.
struct Viewer {
    name: String,
    client: fantoccini::Client,
    _profile: tempfile::TempDir,
}

impl Viewer {
    async fn open(driver: &Driver, name: &str, url: &str) -> Result<Self> {
        let started = Instant::now();
        let profile = tempfile::tempdir()?;
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--mute-audio".into(),
            "--autoplay-policy=no-user-gesture-required".into(),
            "--allow-loopback-in-peer-connection".into(),
            "--disable-features=WebRtcHideLocalIpsWithMdns".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--no-first-run".into(),
            "--window-size=640,360".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        });
        let caps = caps.as_object().cloned().unwrap_or_default();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = tokio::time::timeout(
            Duration::from_secs(120),
            fantoccini::ClientBuilder::new(connector)
                .capabilities(caps)
                .connect(&driver.url),
        )
        .await
        .context("session creation timed out")?
        .with_context(|| format!("cannot open a Chromium session for {name}"))?;
        let viewer = Viewer {
            name: name.to_string(),
            client,
            _profile: profile,
        };
        let session_secs = started.elapsed().as_secs_f64();
        let loaded = tokio::time::timeout(Duration::from_secs(90), viewer.client.goto(url)).await;
        eprintln!(
            "{name}: session in {session_secs:.1} s, page loaded at {:.1} s",
            started.elapsed().as_secs_f64()
        );
        match loaded {
            Ok(Ok(())) => Ok(viewer),
            // Close the session on every path: a leaked one keeps its browser running.
            Ok(Err(e)) => {
                viewer.close().await;
                Err(e).with_context(|| format!("{name}: page load failed"))
            }
            Err(_) => {
                viewer.close().await;
                Err(anyhow!("{name}: page load timed out"))
            }
        }
    }

    async fn js(&self, script: &str) -> Result<Value> {
        tokio::time::timeout(Duration::from_secs(60), self.client.execute(script, vec![]))
            .await
            .with_context(|| format!("{}: script timed out", self.name))?
            .with_context(|| format!("{}: script failed", self.name))
    }

    /// `network-info` payload plus the video element's state.
    async fn stats(&self) -> Result<Value> {
        self.js(
            "const p = window.videojsPlayer; if (!p) return null;
             const v = document.querySelector('video');
             return {info: p.networkInfo(), time: v.currentTime, paused: v.paused,
                     errors: p.errors, videos: document.querySelectorAll('video').length,
                     sync: p.hls.config.liveSyncDurationCount,
                     hdw: (c => c.mainStream?.highDemandTimeWindow ?? c.highDemandTimeWindow)(p.p2pEngine.getConfig().core),
                     rt: performance.getEntriesByType('resource').filter(e => e.name.endsWith('.ts'))
                        .map(e => [e.name.split('/').slice(-2).join('/'), e.encodedBodySize, e.initiatorType])};",
        )
        .await
    }

    async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(20), self.client.close()).await;
    }
}

fn num(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_u64().unwrap_or(0)
}

/// Sum of a Prometheus family's samples whose labels contain all `filters`.
fn metric_sum(text: &str, name: &str, filters: &[&str]) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.starts_with(name) && matches!(l.as_bytes().get(name.len()), Some(b'{') | Some(b' '))
        })
        .filter(|l| filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

async fn scrape(site: &RefsiteHandle) -> Result<String> {
    Ok(reqwest::get(site.metrics_url()).await?.text().await?)
}

use crate::support::refsite::media_cache;

async fn start_site(kind: VideoKind) -> Result<RefsiteHandle> {
    let mut config = RefsiteConfig::new(media_cache(), refsite::default_web_dir());
    config.vod = kind == VideoKind::Vod;
    config.live = kind == VideoKind::Live;
    config.vod_length = Duration::from_secs(30);
    config.metrics_interval = Duration::from_secs(1);
    Ok(refsite::start(config, CancellationToken::new()).await?)
}

/// Runs a scenario body, then releases viewers, driver and site whatever happened.
async fn with_fleet<F>(kind: VideoKind, body: F)
where
    F: for<'a> AsyncFnOnce(&'a RefsiteHandle, &'a Driver, &'a mut Vec<Viewer>) -> Result<()>,
{
    let _serial = SERIAL.lock().await;
    let site = start_site(kind).await.expect("refsite starts");
    let driver = match Driver::start().await {
        Ok(d) => d,
        Err(e) => {
            site.shutdown().await;
            panic!("{e:#}");
        }
    };
    let mut viewers = Vec::new();
    let result = body(&site, &driver, &mut viewers).await;
    for v in viewers {
        v.close().await;
    }
    drop(driver);
    site.shutdown().await;
    if let Err(e) = result {
        panic!("{e:#}");
    }
}

/// Opens the p2p=0 viewer, checks it plays over HTTP without touching the tracker, then
/// opens `p2p_viewers` P2P viewers `stagger` apart.
async fn open_fleet(
    site: &RefsiteHandle,
    driver: &Driver,
    viewers: &mut Vec<Viewer>,
    kind: VideoKind,
    p2p_viewers: usize,
    stagger: Duration,
) -> Result<()> {
    let embed = site.video(kind).context("video served")?.embed_url.clone();
    let base = format!("{embed}?autoplay=1&muted=1&api=1");
    viewers.push(Viewer::open(driver, "http-only", &format!("{base}&p2p=0")).await?);
    let first = &viewers[0];
    let s = poll::try_value(
        "the p2p=0 viewer to play",
        Duration::from_secs(90),
        || async {
            let s = first.stats().await?;
            Ok((num(&s, &["info", "http", "downloaded"]) > 0
                && s["time"].as_f64().unwrap_or(0.0) > 1.0)
                .then_some(s))
        },
    )
    .await?;
    ensure!(s["videos"] == 1, "the page has exactly one <video>: {s}");
    let text = scrape(site).await?;
    ensure!(
        metric_sum(&text, "refsite_tracker_announces_total", &[]) == 0,
        "a p2p=0 viewer announced to the tracker"
    );
    for i in 0..p2p_viewers {
        // The last one asks for PeerTube's high-latency live mode.
        let latency = if i + 1 == p2p_viewers {
            "&latency=high"
        } else {
            ""
        };
        viewers.push(
            Viewer::open(
                driver,
                &format!("p2p-{i}"),
                &format!("{base}&p2p=1{latency}"),
            )
            .await?,
        );
        tokio::time::sleep(stagger).await;
    }
    Ok(())
}

async fn all_stats(viewers: &[Viewer]) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for v in viewers {
        out.push(v.stats().await?);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vod_p2p_with_ground_truth() {
    with_fleet(VideoKind::Vod, async |site, driver, viewers| {
        let vod = site.video(VideoKind::Vod).context("vod")?.id.clone();
        open_fleet(site, driver, viewers, VideoKind::Vod, 3, Duration::from_secs(4)).await?;

        // P2P happens: in the players' stats and on /metrics.
        let vs = &*viewers;
        poll::try_value("P2P bytes in the players' stats", Duration::from_secs(120), || async {
            let stats = all_stats(vs).await?;
            let p2p: u64 = stats.iter().map(|s| num(s, &["info", "p2p", "downloaded"])).sum();
            Ok((p2p > 0).then_some(()))
        })
        .await?;

        // The players buffer the whole (short) video: wait until their counters settle,
        // then flush their reports. (Stopping them instead would abort transfers in flight,
        // whose bytes the origin sent but the players never received.)
        let mut previous: Vec<Value> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        let final_stats = loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now: Vec<Value> = all_stats(vs).await?;
            let infos: Vec<Value> = now.iter().map(|s| s["info"]["http"]["downloaded"].clone())
                .chain(now.iter().map(|s| s["info"]["p2p"]["downloaded"].clone()))
                .chain(now.iter().map(|s| s["info"]["p2p"]["uploaded"].clone()))
                .collect();
            if infos == previous {
                break now;
            }
            ensure!(Instant::now() < deadline, "players' counters never settled");
            previous = infos;
        };
        for v in vs {
            v.client
                .execute_async(
                    "const done = arguments[arguments.length - 1];
                     window.videojsPlayer.flushMetrics().then(() => done(true));",
                    vec![],
                )
                .await
                .with_context(|| format!("{}: flush", v.name))?;
        }

        let text = scrape(site).await?;
        let uuid = format!("videoUUID=\"{vod}\"");
        let metrics_http = metric_sum(&text, "peertube_playback_http_downloaded_bytes_total", &[&uuid]);
        let metrics_p2p_down = metric_sum(&text, "peertube_playback_p2p_downloaded_bytes_total", &[&uuid]);
        let metrics_p2p_up = metric_sum(&text, "peertube_playback_p2p_uploaded_bytes_total", &[&uuid]);
        let origin = metric_sum(&text, "refsite_origin_segment_bytes_total", &[&format!("video=\"{vod}\"")]);
        let aborted = metric_sum(&text, "refsite_origin_aborted_responses_total", &["kind=\"segment\""]);
        let players_http: u64 = final_stats.iter().map(|s| num(s, &["info", "http", "downloaded"])).sum();
        let players_p2p_down: u64 = final_stats.iter().map(|s| num(s, &["info", "p2p", "downloaded"])).sum();
        let players_p2p_up: u64 = final_stats.iter().map(|s| num(s, &["info", "p2p", "uploaded"])).sum();
        let share = players_p2p_down as f64 / (players_p2p_down + players_http).max(1) as f64;
        eprintln!(
            "VOD: origin segments {origin} B, players HTTP {players_http} B (metrics {metrics_http}), \
             P2P down {players_p2p_down} (metrics {metrics_p2p_down}), P2P up {players_p2p_up} \
             (metrics {metrics_p2p_up}), P2P share {:.1}%, aborted segment responses {aborted}",
            share * 100.0
        );
        for (v, s) in vs.iter().zip(&final_stats) {
            eprintln!("  {}: {}", v.name, s);
        }

        // The p2p=0 viewer: HTTP only, no peers.
        let http_only = &final_stats[0]["info"];
        ensure!(num(http_only, &["http", "downloaded"]) > 0, "p2p=0 viewer downloaded nothing");
        ensure!(
            num(http_only, &["p2p", "downloaded"]) == 0 && num(http_only, &["p2p", "uploaded"]) == 0
                && num(http_only, &["p2p", "peersP2POnly"]) == 0,
            "p2p=0 viewer used P2P: {http_only}"
        );
        ensure!(
            metric_sum(&text, "peertube_playback_p2p_downloaded_bytes_total", &["p2pEnabled=\"false\""]) == 0,
            "P2P bytes reported by a p2p=0 player"
        );

        ensure!(players_p2p_down > 0 && metrics_p2p_down > 0, "no P2P bytes: {players_p2p_down}/{metrics_p2p_down}");
        ensure!(metrics_http == players_http, "/metrics HTTP {metrics_http} != players' {players_http}");
        let http_err = (metrics_http as f64 - origin as f64).abs() / origin.max(1) as f64;
        ensure!(http_err <= 0.02, "players' HTTP {metrics_http} vs origin {origin}: {:.2}% apart", http_err * 100.0);
        let p2p_err = (metrics_p2p_down as f64 - metrics_p2p_up as f64).abs() / metrics_p2p_down.max(1) as f64;
        ensure!(p2p_err <= 0.05, "P2P down {metrics_p2p_down} vs up {metrics_p2p_up}: {:.2}% apart", p2p_err * 100.0);
        for (v, s) in vs.iter().zip(&final_stats) {
            ensure!(s["hdw"] == 15, "{}: VOD high-demand window {}", v.name, s["hdw"]);
            ensure!(s["errors"].as_array().is_none_or(|e| e.is_empty()), "{}: page errors {}", v.name, s["errors"]);
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_p2p_and_http_only_viewer() {
    with_fleet(VideoKind::Live, async |site, driver, viewers| {
        let live = site.video(VideoKind::Live).context("live")?.id.clone();
        open_fleet(
            site,
            driver,
            viewers,
            VideoKind::Live,
            3,
            Duration::from_secs(1),
        )
        .await?;
        let vs = &*viewers;
        let uuid = format!("videoUUID=\"{live}\"");
        let (stats, text) = poll::try_value(
            "live P2P bytes in players' stats and /metrics",
            Duration::from_secs(150),
            || async {
                let stats = all_stats(vs).await?;
                let p2p: u64 = stats
                    .iter()
                    .map(|s| num(s, &["info", "p2p", "downloaded"]))
                    .sum();
                let text = scrape(site).await?;
                let reported = metric_sum(
                    &text,
                    "peertube_playback_p2p_downloaded_bytes_total",
                    &[&uuid],
                );
                Ok((p2p > 0 && reported > 0).then_some((stats, text)))
            },
        )
        .await?;
        let mut by_viewer = BTreeMap::new();
        for (v, s) in vs.iter().zip(&stats) {
            eprintln!("  {}: {}", v.name, s);
            by_viewer.insert(v.name.clone(), s.clone());
        }
        let http_only = &by_viewer["http-only"]["info"];
        ensure!(
            num(http_only, &["http", "downloaded"]) > 0,
            "p2p=0 viewer downloaded nothing"
        );
        ensure!(
            num(http_only, &["p2p", "downloaded"]) == 0
                && num(http_only, &["p2p", "uploaded"]) == 0,
            "p2p=0 viewer used P2P: {http_only}"
        );
        ensure!(
            text.contains("fps=\"undefined\""),
            "live series carry fps=\"undefined\" like PeerTube's"
        );
        let p2p: u64 = stats
            .iter()
            .map(|s| num(s, &["info", "p2p", "downloaded"]))
            .sum();
        let http: u64 = stats
            .iter()
            .map(|s| num(s, &["info", "http", "downloaded"]))
            .sum();
        eprintln!("live: players HTTP {http} B, P2P {p2p} B");
        for (v, s) in vs.iter().zip(&stats) {
            ensure!(
                s["time"].as_f64().unwrap_or(0.0) > 0.0,
                "{} is not playing: {s}",
                v.name
            );
        }
        Ok(())
    })
    .await;
}
