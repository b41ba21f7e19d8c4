//! Starting the target: refsite as a child process (in the fleet's namespace if it has
//! one), ready when it prints its `READY {json}` line; or a remote PeerTube checked for
//! reachability before any browser starts.

use super::peertube::PeerTubeTarget;
use super::{Target, TargetPlacement};
use crate::model::exit::{bad_input, unavailable};
use crate::model::kinds::{FleetKind, TargetKind, VideoKind};
use crate::model::scenario::Plan;
use crate::sys::process::{self, Scope};
use anyhow::Context;
use nix::sys::signal::Signal;
use serde::Deserialize;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Time refsite gets to stop its encoder and remove its live segments after SIGTERM.
const REFSITE_GRACE: Duration = Duration::from_secs(10);

/// What refsite prints when it is ready.
#[derive(Debug, Deserialize)]
pub(crate) struct RefsiteReady {
    pub base_url: String,
    pub metrics_url: String,
    pub videos: Vec<RefsiteVideo>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RefsiteVideo {
    pub id: String,
    pub kind: VideoKind,
    pub embed_url: String,
}

/// A started target: the adapter viewers use, plus the refsite child if we own one.
pub struct StartedTarget {
    target: Arc<dyn Target>,
    child: Option<Child>,
}

impl StartedTarget {
    /// The platform as viewers and the scraper see it.
    pub fn target(&self) -> Arc<dyn Target> {
        self.target.clone()
    }

    /// The page a P2P viewer opens (for the manifest and logs).
    pub fn viewer_url(&self) -> String {
        self.target.viewer_url(true)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// Stops refsite (SIGTERM, so it stops its encoder; SIGKILL after a grace period).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::terminate(&mut child, Scope::Process, REFSITE_GRACE).await;
        }
    }
}

/// Starts (refsite) or checks (peertube) the target.
pub async fn start(plan: &Plan, placement: &TargetPlacement) -> anyhow::Result<StartedTarget> {
    match plan.target.kind {
        TargetKind::Refsite => start_refsite(plan, placement).await,
        TargetKind::Peertube => {
            let target = remote_target(plan)?;
            check_reachable(&target.viewer_url(true)).await?;
            Ok(StartedTarget {
                target: Arc::new(target),
                child: None,
            })
        }
    }
}

fn remote_target(plan: &Plan) -> anyhow::Result<PeerTubeTarget> {
    let url = plan.target.url.clone().context("target.url is required")?;
    PeerTubeTarget::from_video_url(&url, plan.target.exporter.clone())
}

/// A remote target must answer before anything costly (a fleet, a browser, a cloud server)
/// starts: its viewer page, the video itself (PeerTube's API knows it) and the exporter, if
/// one is configured. Refsite is started later, where the fleet says its viewers reach it.
pub async fn check_before_fleet(plan: &Plan) -> anyhow::Result<()> {
    match plan.target.kind {
        TargetKind::Refsite => Ok(()),
        TargetKind::Peertube => {
            let target = remote_target(plan)?;
            check_reachable(&target.viewer_url(true)).await?;
            let api = target.video_api_url();
            let status = get(&api)
                .await
                .with_context(|| format!("the target's API did not answer at {api}"))
                .map_err(unavailable)?;
            match status {
                s if s.is_success() => {}
                // The instance answers and knows no such video: the URL is what is wrong.
                reqwest::StatusCode::NOT_FOUND => return Err(bad_input(anyhow::anyhow!(
                    "target.url: the target has no such video ({api} answered 404 Not Found); check the video's id in the URL"
                ))),
                s => return Err(unavailable(anyhow::anyhow!(
                    "the target answered {s} at {api}, where PeerTube describes the video"
                ))),
            }
            if let Some(exporter) = target.exporter_url() {
                let status = get(&exporter)
                    .await
                    .with_context(|| {
                        format!("target.exporter did not answer at {exporter}; fix the address or remove target.exporter")
                    })
                    .map_err(unavailable)?;
                if !status.is_success() {
                    return Err(unavailable(anyhow::anyhow!(
                        "target.exporter answered {status} at {exporter}"
                    )));
                }
            }
            if plan.fleet.kind() == FleetKind::Hcloud {
                warn_unless_reachable_over_ipv6(&target.viewer_url(true)).await;
            }
            Ok(())
        }
    }
}

/// Cloud nodes are IPv6-only: a target they cannot reach would cost every server's time for
/// nothing, so `up` and `run` say so before buying them (see `ipv6`).
async fn warn_unless_reachable_over_ipv6(url: &str) {
    match super::ipv6::check_reachable_over_ipv6(url).await {
        Ok(reach) => tracing::info!("the target answers over IPv6 at {}", reach.address),
        Err(err) => tracing::warn!("{err}"),
    }
}

async fn get(url: &str) -> anyhow::Result<reqwest::StatusCode> {
    let client = crate::sys::tls::http_client_builder()
        .timeout(Duration::from_secs(15))
        .build()?;
    Ok(client.get(url).send().await?.status())
}

/// The viewer page answers; if not, the outside world failed (exit code 69).
async fn check_reachable(url: &str) -> anyhow::Result<()> {
    let status = get(url)
        .await
        .with_context(|| format!("the target did not answer at {url}"))
        .map_err(unavailable)?;
    if !status.is_success() {
        return Err(unavailable(anyhow::anyhow!(
            "the target answered {status} at {url}"
        )));
    }
    Ok(())
}

async fn start_refsite(plan: &Plan, placement: &TargetPlacement) -> anyhow::Result<StartedTarget> {
    let exe = own_binary()?;
    let video = plan.target.video.as_str();
    let mut args: Vec<String> = vec![
        "refsite".into(),
        "--listen".into(),
        placement.listen.to_string(),
        "--videos".into(),
        video.into(),
        "--metrics-interval".into(),
        humantime::format_duration(plan.target.metrics_interval).to_string(),
        "--vod-length".into(),
        humantime::format_duration(plan.target.vod_length).to_string(),
    ];
    for net in &placement.reports_from {
        args.extend(["--reports-from".to_string(), net.clone()]);
    }
    if let Some(internet) = &placement.internet {
        for addr in &internet.also_listen {
            args.extend(["--also-listen".to_string(), addr.to_string()]);
        }
        for addr in &internet.stun {
            args.extend(["--stun".to_string(), addr.to_string()]);
        }
    }
    let mut cmd = match &placement.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(args.drain(..))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // refsite (and its encoder) die with us even on `kill -9` of the controller.
    process::die_with_parent(cmd.as_std_mut(), Signal::SIGTERM);
    let mut child = cmd.spawn().context("starting refsite")?;
    let stdout = child.stdout.take().context("refsite stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    // First use generates media with ffmpeg: allow minutes, but stop as soon as it exits.
    let ready = tokio::time::timeout(Duration::from_secs(600), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(json) = line.strip_prefix("READY ") {
                return Ok::<_, anyhow::Error>(Some(serde_json::from_str::<RefsiteReady>(json)?));
            }
        }
        Ok(None)
    })
    .await;
    let ready = match ready {
        Ok(Ok(Some(ready))) => ready,
        Ok(Ok(None)) => {
            let status = child.wait().await.ok();
            anyhow::bail!(
                "refsite exited before it was ready ({}); see its messages above",
                status.map(|s| s.to_string()).unwrap_or_default()
            )
        }
        Ok(Err(err)) => {
            let _ = child.kill().await;
            return Err(err.context("reading refsite's ready line"));
        }
        Err(_) => {
            let _ = child.kill().await;
            anyhow::bail!("refsite was not ready within 10 minutes")
        }
    };
    // Keep draining stdout so refsite never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let video = ready
        .videos
        .iter()
        .find(|v| v.kind == plan.target.video)
        .with_context(|| format!("refsite serves no {} video", plan.target.video))?;
    // On an emulated internet viewers open the site by name (each resolves it to a family
    // its slot has); the controller still scrapes it at its own address.
    let embed_url = match placement
        .internet
        .as_ref()
        .and_then(|i| i.viewer_host.as_deref())
    {
        Some(host) => viewer_url_by_name(&video.embed_url, host)?,
        None => video.embed_url.clone(),
    };
    let mut adapter = PeerTubeTarget::from_video_url(&embed_url, Some(ready.metrics_url.clone()))?;
    if plan.target.video == VideoKind::Live {
        adapter = adapter.with_param("latency", plan.target.latency.as_str());
    }
    tracing::info!(
        "refsite ready at {} (video {}, {})",
        ready.base_url,
        video.id,
        video.kind
    );
    Ok(StartedTarget {
        target: Arc::new(adapter),
        child: Some(child),
    })
}

/// `url` with its host replaced by `host` (the port and path kept).
fn viewer_url_by_name(url: &str, host: &str) -> anyhow::Result<String> {
    let mut parsed = url::Url::parse(url).with_context(|| format!("refsite's URL `{url}`"))?;
    parsed
        .set_host(Some(host))
        .with_context(|| format!("`{host}` as the viewers' host name"))?;
    Ok(parsed.to_string())
}

/// This program's path, for starting refsite as a child. A rebuild replaces the file while
/// a long suite runs; the kernel then reports the old path with " (deleted)", and the new
/// file at the same path is the one to start.
fn own_binary() -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("locating the viewerfleet binary")?;
    let text = exe.to_string_lossy();
    Ok(match text.strip_suffix(" (deleted)") {
        Some(path) => std::path::PathBuf::from(path),
        None => exe,
    })
}
