//! refsite: the built-in reference P2P video site. It speaks PeerTube's interfaces (embed
//! URL and parameters, `network-info` player stats, `/api/v1/metrics/playback`, Prometheus
//! names, `/tracker/socket`) so the whole loop runs offline, and it counts what it really
//! served (ground truth).
//!
//! Parts: `media` (ffmpeg: VOD ladder, supervised live encoder), `routes` (HTTP), `serve`
//! (accept loop with small connection buffers), `page`
//! (embed and index pages), `counting` (bytes really sent), `stats` (counters and their
//! Prometheus rendering), `playback` (players' reports), `tracker` (WebTorrent tracker).
//! `start` runs everything in-process and returns a handle; `cli_refsite` is the command.

mod counting;
pub mod media;
mod page;
mod playback;
mod routes;
mod serve;
mod stats;
mod tracker;
pub(crate) mod web;

use viewerfleet_model as model;
use viewerfleet_stun as stun;
use viewerfleet_sys as sys;

pub use serve::ServeLimits;
pub use web::WebFiles;

use crate::model::kinds::VideoKind;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One served video.
#[derive(Debug, Clone)]
pub(crate) struct Video {
    /// UUID (random per start).
    pub id: String,
    pub kind: VideoKind,
    /// Folder holding its playlists and segments.
    pub dir: PathBuf,
}

/// Validated configuration of one refsite.
#[derive(Debug, Clone)]
pub struct RefsiteConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Cache folder for generated media.
    pub media_dir: PathBuf,
    /// The player page's files (built in, or a `web/` folder).
    pub web: WebFiles,
    /// Interval of the players' playback-metrics POSTs.
    pub metrics_interval: Duration,
    /// Serve the VOD video.
    pub vod: bool,
    /// Serve the live video (runs an encoder all the time).
    pub live: bool,
    /// Length of the VOD video.
    pub vod_length: Duration,
    /// Tracker tuning.
    pub tracker: tracker::TrackerConfig,
    /// Further addresses to serve the same site on (e.g. its IPv4 beside its IPv6).
    pub also_listen: Vec<SocketAddr>,
    /// Where to run a STUN Binding server (RFC 5389), as on a PeerTube instance's public side.
    pub stun: Vec<SocketAddr>,
    /// The STUN servers handed to players, as PeerTube's `webrtc.stun_servers`
    /// (`stun:host:port`) [default: one per `stun` address; none without].
    pub stun_servers: Option<Vec<String>>,
    /// What one client may hold: header and idle timeouts, open connections.
    pub limits: ServeLimits,
    /// Networks (address, prefix length) whose playback reports and tracker announces are
    /// taken; everyone's when empty. A cloud run's site names its fleet's, so strangers who
    /// find a video id cannot change the ground truth or join the swarm.
    pub reports_from: Vec<(IpAddr, u8)>,
}

impl RefsiteConfig {
    /// Defaults: loopback port 0, both videos, 2 min VOD, 15 s metrics interval.
    /// `web_dir`: the front-end folder (`embed.html`, `player.js`, `node_modules/`).
    pub fn new(media_dir: PathBuf, web_dir: PathBuf) -> Self {
        Self::with_web(media_dir, WebFiles::Dir(web_dir))
    }

    /// The same with the player page's files from wherever `web` says.
    pub fn with_web(media_dir: PathBuf, web: WebFiles) -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            media_dir,
            web,
            metrics_interval: Duration::from_secs(15),
            vod: true,
            live: true,
            vod_length: Duration::from_secs(120),
            tracker: tracker::TrackerConfig::default(),
            also_listen: Vec::new(),
            stun: Vec::new(),
            stun_servers: None,
            limits: ServeLimits::default(),
            reports_from: Vec::new(),
        }
    }
}

/// Configuration and start-up errors, each naming the flag or the fix.
#[derive(Debug, thiserror::Error)]
pub enum RefsiteError {
    #[error("--videos: `{0}` is not a video kind; use vod, live or vod,live")]
    VideoKind(String),
    #[error("--videos: choose at least one of vod, live")]
    NoVideo,
    #[error("--{flag}: {reason}")]
    Range { flag: &'static str, reason: String },
    #[error("front-end files missing: {0} not found; run `make web-deps` (cd web && npm ci --ignore-scripts) or point --web / VIEWERFLEET_WEB at the web/ folder")]
    WebDeps(PathBuf),
    #[error("cannot run the STUN server on {addr} (choose another with --stun): {source}")]
    Stun {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr} (choose another with --listen): {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Media(#[from] media::MediaError),
}

/// One entry of the READY line.
#[derive(Debug, Clone, Serialize)]
pub struct VideoInfo {
    pub id: String,
    pub kind: VideoKind,
    pub embed_url: String,
}

/// The READY line's payload.
#[derive(Debug, Clone, Serialize)]
pub struct ReadyInfo {
    pub base_url: String,
    pub metrics_url: String,
    pub videos: Vec<VideoInfo>,
}

/// A running refsite.
#[derive(Debug)]
pub struct RefsiteHandle {
    /// URL to reach the site, e.g. `http://127.0.0.1:41234`.
    pub base_url: String,
    /// The bound address.
    pub addr: SocketAddr,
    /// The videos served.
    pub videos: Vec<VideoInfo>,
    /// Counters (the same as on `/metrics`).
    pub stats: Arc<stats::SiteStats>,
    /// The tracker.
    pub tracker: Arc<tracker::Tracker>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    live_dir: Option<PathBuf>,
}

impl RefsiteHandle {
    /// `/metrics` URL.
    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.base_url)
    }

    /// The READY payload.
    pub fn ready_info(&self) -> ReadyInfo {
        ReadyInfo {
            base_url: self.base_url.clone(),
            metrics_url: self.metrics_url(),
            videos: self.videos.clone(),
        }
    }

    /// The first video of a kind.
    pub fn video(&self, kind: VideoKind) -> Option<&VideoInfo> {
        self.videos.iter().find(|v| v.kind == kind)
    }

    /// Stops the server, the tracker connections and the live encoder (killed and reaped),
    /// and removes the live segments.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        if let Some(dir) = self.live_dir.take() {
            let _ = tokio::fs::remove_dir_all(&dir).await;
        }
    }
}

impl Drop for RefsiteHandle {
    fn drop(&mut self) {
        // Without an explicit shutdown, still stop everything (ffmpeg is killed on drop).
        self.cancel.cancel();
        if let Some(dir) = self.live_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// URL host for a bound address (wildcards become loopback).
fn base_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

fn new_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Starts refsite in-process: checks, media, live encoder, tracker, HTTP server. Returns
/// once the site is ready (media generated, live playlist produced, listening).
/// `cancel` stops everything too (e.g. the process-wide shutdown token).
pub async fn start(
    config: RefsiteConfig,
    cancel: CancellationToken,
) -> Result<RefsiteHandle, RefsiteError> {
    if !config.vod && !config.live {
        return Err(RefsiteError::NoVideo);
    }
    config.web.check()?;
    media::check_ffmpeg()?;
    let cancel = cancel.child_token();
    // Listening first: a taken port fails before any media is made.
    let (listener, addr) = bind(config.listen).await?;
    let mut more_listeners = Vec::new();
    for extra in &config.also_listen {
        more_listeners.push(bind(*extra).await?.0);
    }
    let mut stun_sockets = Vec::new();
    for addr in &config.stun {
        let bound = crate::stun::server::bind(crate::stun::server::StunAddresses {
            primary: *addr,
            alternate: None,
        })
        .map_err(|source| RefsiteError::Stun {
            addr: *addr,
            source,
        })?;
        stun_sockets.push(bound);
    }
    let stun_servers = config.stun_servers.clone().unwrap_or_else(|| {
        stun_sockets
            .iter()
            .flat_map(|b| b.local_addrs())
            .map(|a| format!("stun:{a}"))
            .collect()
    });

    let mut videos = Vec::new();
    let mut tasks = Vec::new();
    let mut live_dir = None;
    if config.vod {
        let dir = media::ensure_vod(&config.media_dir, config.vod_length, &cancel).await?;
        videos.push(Video {
            id: new_uuid(),
            kind: VideoKind::Vod,
            dir,
        });
    }
    if config.live {
        let (dir, encoder) = start_live(&config.media_dir, &cancel).await?;
        live_dir = Some(dir.clone());
        tasks.push(encoder);
        videos.push(Video {
            id: new_uuid(),
            kind: VideoKind::Live,
            dir,
        });
    }

    let stats = Arc::new(stats::SiteStats::default());
    for bound in stun_sockets {
        tasks.push(tokio::spawn(crate::stun::server::serve(
            bound,
            stats.stun.clone(),
            cancel.clone(),
        )));
    }
    let tracker = Arc::new(tracker::Tracker::new(config.tracker.clone(), stats.clone()));
    tasks.push(spawn_expiry(
        tracker.clone(),
        config.tracker.peer_ttl,
        cancel.clone(),
    ));
    let base = base_url(addr);
    let infos = videos
        .iter()
        .map(|v| VideoInfo {
            id: v.id.clone(),
            kind: v.kind,
            embed_url: format!("{base}/videos/embed/{}", v.id),
        })
        .collect();
    let state = routes::AppState {
        stats: stats.clone(),
        tracker: tracker.clone(),
        videos: Arc::new(videos),
        web: config.web.clone(),
        metrics_interval: config.metrics_interval,
        cancel: cancel.clone(),
        stun_servers: Arc::new(stun_servers),
        reports_from: Arc::new(config.reports_from.clone()),
    };
    let app = routes::app(state);
    for extra in more_listeners {
        tasks.push(tokio::spawn(serve::serve(
            extra,
            app.clone(),
            config.limits,
            cancel.clone(),
        )));
    }
    tasks.push(tokio::spawn(serve::serve(
        listener,
        app,
        config.limits,
        cancel.clone(),
    )));

    Ok(RefsiteHandle {
        base_url: base,
        addr,
        videos: infos,
        stats,
        tracker,
        cancel,
        tasks,
        live_dir,
    })
}

/// The listening socket and the address it got (port 0 picks one).
async fn bind(listen: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), RefsiteError> {
    let bind_error = |source| RefsiteError::Bind {
        addr: listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    Ok((listener, addr))
}

/// Starts the live encoder in a folder of its own (named after this process, so a later
/// refsite can tell it is stale) and waits for its first segments. Returns the folder and
/// the encoder's supervisor; on failure stops the encoder and removes the folder.
async fn start_live(
    media_dir: &Path,
    cancel: &CancellationToken,
) -> Result<(PathBuf, JoinHandle<()>), RefsiteError> {
    remove_stale_live_dirs(media_dir);
    let dir = media_dir.join(format!(
        "live-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).map_err(|source| media::MediaError::Folder {
        path: dir.clone(),
        source,
    })?;
    let encoder = tokio::spawn(media::supervise_live(dir.clone(), cancel.clone()));
    let ready = media::wait_live_ready(&dir, 3, Duration::from_secs(60), cancel).await;
    if let Err(e) = ready {
        cancel.cancel();
        let _ = encoder.await;
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.into());
    }
    Ok((dir, encoder))
}

/// Drops peers that stopped announcing, four times per peer TTL (at most every 100 ms).
fn spawn_expiry(
    tracker: Arc<tracker::Tracker>,
    peer_ttl: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let every = (peer_ttl / 4).max(Duration::from_millis(100));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(every) => tracker.expire(std::time::Instant::now()),
            }
        }
    })
}

/// Removes live segment folders left by refsite processes that no longer exist (killed
/// with SIGKILL: their encoder died with them, their folder did not).
fn remove_stale_live_dirs(media_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(media_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("live-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!("removing stale live folder {}", entry.path().display());
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Default media cache: `$XDG_CACHE_HOME/viewerfleet/media` or `~/.cache/viewerfleet/media`.
pub fn default_media_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("viewerfleet/media")
}

/// The source tree's `web/` folder (used when neither --web nor VIEWERFLEET_WEB is given
/// and the binary carries no front-end of its own).
pub fn default_web_dir() -> PathBuf {
    // This crate lies in `crates/refsite` of the workspace.
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .unwrap_or(crate_dir)
        .join("web")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_shape() {
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn base_url_for_ipv6_and_wildcards() {
        assert_eq!(
            base_url("[fd00::1]:8080".parse().unwrap()),
            "http://[fd00::1]:8080"
        );
        assert_eq!(
            base_url("0.0.0.0:80".parse().unwrap()),
            "http://127.0.0.1:80"
        );
    }
}
