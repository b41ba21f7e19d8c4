//! Starting the target: refsite as a child process (in the fleet's namespace if it has
//! one), ready when it prints its `READY {json}` line; or a remote PeerTube checked for
//! reachability before any browser starts.

use crate::fleet::TargetPlacement;
use crate::scenario::{Latency, Plan, TargetKind, VideoKind};
use crate::target::peertube::PeerTubeTarget;
use crate::target::Target;
use anyhow::Context;
use serde::Deserialize;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// What refsite prints when it is ready.
#[derive(Debug, Deserialize)]
pub struct RefsiteReady {
    pub base_url: String,
    pub metrics_url: String,
    pub videos: Vec<RefsiteVideo>,
}

#[derive(Debug, Deserialize)]
pub struct RefsiteVideo {
    pub id: String,
    pub kind: String,
    pub embed_url: String,
}

/// A started target: the adapter viewers use, plus the refsite child if we own one.
pub struct StartedTarget {
    pub adapter: PeerTubeTarget,
    pub viewer_url_example: String,
    pub child: Option<Child>,
}

impl StartedTarget {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// Stops refsite (SIGTERM, so it stops its encoder; SIGKILL after a grace period).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
            {
                tracing::warn!("refsite did not stop within 10s; killing it");
                let _ = child.kill().await;
            }
        }
    }
}

/// Starts (refsite) or checks (peertube) the target.
pub async fn start(plan: &Plan, placement: &TargetPlacement) -> anyhow::Result<StartedTarget> {
    match plan.target.kind {
        TargetKind::Refsite => start_refsite(plan, placement).await,
        TargetKind::Peertube => {
            let url = plan.target.url.clone().context("target.url is required")?;
            let adapter = PeerTubeTarget::from_video_url(&url, plan.target.exporter.clone())?;
            let viewer_url_example = adapter.viewer_url(true);
            Ok(StartedTarget {
                adapter,
                viewer_url_example,
                child: None,
            })
        }
    }
}

async fn start_refsite(plan: &Plan, placement: &TargetPlacement) -> anyhow::Result<StartedTarget> {
    let exe = std::env::current_exe().context("locating the viewerfleet binary")?;
    let video = match plan.target.video {
        VideoKind::Vod => "vod",
        VideoKind::Live => "live",
    };
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
    // SAFETY: prctl is async-signal-safe; refsite (and its encoder) then die with us even on
    // `kill -9` of the controller.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
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
        .find(|v| v.kind == video)
        .with_context(|| format!("refsite serves no {video} video"))?;
    let mut adapter =
        PeerTubeTarget::from_video_url(&video.embed_url, Some(ready.metrics_url.clone()))?;
    if plan.target.video == VideoKind::Live {
        let latency = match plan.target.latency {
            Latency::Normal => "normal",
            Latency::High => "high",
        };
        adapter = adapter.with_param("latency", latency);
    }
    let viewer_url_example = adapter.viewer_url(true);
    tracing::info!(
        "refsite ready at {} (video {}, {})",
        ready.base_url,
        video.id,
        video.kind
    );
    Ok(StartedTarget {
        adapter,
        viewer_url_example,
        child: Some(child),
    })
}
