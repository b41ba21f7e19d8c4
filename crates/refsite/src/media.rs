//! Media made with ffmpeg: the VOD ladder (generated once into the cache folder, reused while
//! its parameters match) and the live encoder (a supervised child writing a sliding-window
//! playlist, restarted if it dies, killed with refsite — also on SIGKILL, through
//! `PR_SET_PDEATHSIG`).
//!
//! Both are H.264 + AAC in MPEG-TS with 2 s segments (one keyframe per segment), which
//! Debian's Chromium plays through MSE. Encoding uses x264's `ultrafast` preset: the machine
//! also runs the browsers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// Segment length in seconds.
pub const SEGMENT_SECONDS: u32 = 2;
/// Frames per second of the test pattern.
pub(crate) const FPS: u32 = 25;
/// Bumped whenever the encoding recipe changes, so old caches are not reused.
const RECIPE_VERSION: u32 = 1;

/// One VOD rendition.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rendition {
    pub width: u32,
    pub height: u32,
    pub video_kbps: u32,
}

/// PeerTube-like ladder; the top rendition is ≈1.2 Mbit/s with audio.
pub(crate) const VOD_LADDER: [Rendition; 4] = [
    Rendition {
        width: 426,
        height: 240,
        video_kbps: 250,
    },
    Rendition {
        width: 640,
        height: 360,
        video_kbps: 450,
    },
    Rendition {
        width: 854,
        height: 480,
        video_kbps: 700,
    },
    Rendition {
        width: 1280,
        height: 720,
        video_kbps: 1100,
    },
];
/// Audio bitrate of every rendition.
pub(crate) const AUDIO_KBPS: u32 = 64;
/// The live rendition: ≈650 kbit/s on the wire (video + audio + MPEG-TS overhead).
pub(crate) const LIVE_RENDITION: Rendition = Rendition {
    width: 426,
    height: 240,
    video_kbps: 530,
};
/// Playlist window of the live stream, in segments.
pub(crate) const LIVE_LIST_SIZE: u32 = 6;

/// Errors of media generation and the live encoder.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("ffmpeg was not found on PATH; install it with `apt-get install -y ffmpeg`")]
    FfmpegMissing,
    #[error("cannot use media folder {path} (set another with --media): {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ffmpeg failed to {what} (exit {status}): {stderr}")]
    Ffmpeg {
        what: &'static str,
        status: String,
        stderr: String,
    },
    #[error("cannot start ffmpeg: {0}")]
    Spawn(std::io::Error),
    #[error("the live encoder produced no playlist within {0:?}; see the ffmpeg lines above")]
    LiveNotReady(Duration),
    #[error("stopped before the media was ready")]
    Cancelled,
}

/// Checks that ffmpeg can be run.
pub(crate) fn check_ffmpeg() -> Result<(), MediaError> {
    match std::process::Command::new("ffmpeg")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        _ => Err(MediaError::FfmpegMissing),
    }
}

/// An ffmpeg command that dies with its parent (PR_SET_PDEATHSIG) and is killed on drop.
fn ffmpeg() -> Command {
    let mut cmd = Command::new("ffmpeg");
    cmd.arg("-hide_banner")
        .args(["-loglevel", "error", "-nostdin", "-y"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    crate::sys::process::die_with_parent(cmd.as_std_mut(), nix::sys::signal::Signal::SIGKILL);
    cmd
}

fn pattern_inputs(cmd: &mut Command, size: &str, seconds: Option<u64>) {
    let dur = seconds
        .map(|s| format!(":duration={s}"))
        .unwrap_or_default();
    cmd.args(["-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={size}:rate={FPS}{dur}"))
        .args(["-f", "lavfi", "-i"])
        .arg(format!("sine=frequency=440:sample_rate=48000{dur}"));
}

fn x264_args(cmd: &mut Command) {
    let gop = (FPS * SEGMENT_SECONDS).to_string();
    cmd.args([
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-pix_fmt",
        "yuv420p",
    ])
    .args(["-g", &gop, "-keyint_min", &gop, "-sc_threshold", "0"])
    .args(["-x264-params", "nal-hrd=cbr"])
    .args(["-c:a", "aac", "-ac", "2", "-b:a", &format!("{AUDIO_KBPS}k")]);
}

fn cbr(cmd: &mut Command, spec: &str, kbps: u32) {
    cmd.arg(format!("-b:v{spec}"))
        .arg(format!("{kbps}k"))
        .arg(format!("-maxrate{spec}"))
        .arg(format!("{kbps}k"))
        .arg(format!("-minrate{spec}"))
        .arg(format!("{kbps}k"))
        .arg(format!("-bufsize{spec}"))
        .arg(format!("{}k", kbps * 2));
}

/// Runs a child to completion, killing it if `cancel` fires first.
async fn run_to_end(
    mut child: Child,
    what: &'static str,
    cancel: &CancellationToken,
) -> Result<(), MediaError> {
    let mut stderr = child.stderr.take();
    let collect = tokio::spawn(async move {
        let mut buf = String::new();
        if let Some(s) = stderr.as_mut() {
            use tokio::io::AsyncReadExt;
            let _ = s.read_to_string(&mut buf).await;
        }
        buf
    });
    let status = tokio::select! {
        s = child.wait() => s.map_err(MediaError::Spawn)?,
        _ = cancel.cancelled() => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(MediaError::Cancelled);
        }
    };
    let stderr = collect.await.unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        Err(MediaError::Ffmpeg {
            what,
            status: status.to_string(),
            stderr: stderr.trim().chars().take(2000).collect(),
        })
    }
}

/// Makes the VOD ladder under `cache` (or reuses it) and returns its folder, which holds
/// `master.m3u8` and `v<N>/index.m3u8` + segments.
pub(crate) async fn ensure_vod(
    cache: &Path,
    length: Duration,
    cancel: &CancellationToken,
) -> Result<PathBuf, MediaError> {
    let seconds = length.as_secs().max(u64::from(SEGMENT_SECONDS));
    let key = vod_key(seconds);
    let dir = cache.join(&key);
    if reusable(&dir) {
        return Ok(dir);
    }
    let folder_err = |source| MediaError::Folder {
        path: cache.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(cache).map_err(folder_err)?;
    // One generator at a time per recipe (other refsites, parallel tests): wait for it,
    // then reuse its result.
    let _lock = lock_file(cache.join(format!(".{key}.lock")))
        .await
        .map_err(folder_err)?;
    if reusable(&dir) {
        return Ok(dir);
    }
    let tmp = cache.join(format!(
        ".{key}.tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    for i in 0..VOD_LADDER.len() {
        std::fs::create_dir_all(tmp.join(format!("v{i}"))).map_err(folder_err)?;
    }
    tracing::info!(
        "generating {seconds} s VOD ({} renditions) into {} …",
        VOD_LADDER.len(),
        dir.display()
    );
    let child = vod_command(&tmp, seconds)
        .spawn()
        .map_err(MediaError::Spawn)?;
    let result = run_to_end(child, "generate the VOD video", cancel).await;
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::write(tmp.join(".complete"), key.as_bytes()).map_err(folder_err)?;
    publish(&tmp, &dir).map_err(folder_err)?;
    tracing::info!("VOD media ready in {}", dir.display());
    Ok(dir)
}

/// The cache folder's name: every parameter of the recipe, so that changing one makes a
/// new ladder instead of reusing the old.
fn vod_key(seconds: u64) -> String {
    let ladder: Vec<String> = VOD_LADDER
        .iter()
        .map(|r| format!("{}x{}@{}k", r.width, r.height, r.video_kbps))
        .collect();
    format!(
        "vod-r{RECIPE_VERSION}-{seconds}s-{}-a{AUDIO_KBPS}k",
        ladder.join("_")
    )
}

/// A complete ladder is already in `dir` (`.complete` is written last).
fn reusable(dir: &Path) -> bool {
    let complete = dir.join(".complete").is_file();
    if complete {
        tracing::info!("VOD media reused from {}", dir.display());
    }
    complete
}

/// ffmpeg encoding every rendition of the ladder at once, from one test pattern scaled to
/// each size, as HLS into `tmp`.
fn vod_command(tmp: &Path, seconds: u64) -> Command {
    let top = VOD_LADDER[VOD_LADDER.len() - 1];
    let mut cmd = ffmpeg();
    cmd.current_dir(tmp);
    pattern_inputs(
        &mut cmd,
        &format!("{}x{}", top.width, top.height),
        Some(seconds),
    );
    let mut graph = format!("[0:v]split={}", VOD_LADDER.len());
    for i in 0..VOD_LADDER.len() {
        graph.push_str(&format!("[s{i}]"));
    }
    for (i, r) in VOD_LADDER.iter().enumerate() {
        graph.push_str(&format!(";[s{i}]scale={}:{}[o{i}]", r.width, r.height));
    }
    cmd.args(["-filter_complex", &graph]);
    for i in 0..VOD_LADDER.len() {
        cmd.args(["-map", &format!("[o{i}]")]);
    }
    for _ in 0..VOD_LADDER.len() {
        cmd.args(["-map", "1:a"]);
    }
    x264_args(&mut cmd);
    for (i, r) in VOD_LADDER.iter().enumerate() {
        cbr(&mut cmd, &format!(":{i}"), r.video_kbps);
    }
    let map: Vec<String> = (0..VOD_LADDER.len())
        .map(|i| format!("v:{i},a:{i}"))
        .collect();
    cmd.args(["-f", "hls", "-hls_time", &SEGMENT_SECONDS.to_string()])
        .args([
            "-hls_playlist_type",
            "vod",
            "-hls_flags",
            "independent_segments",
        ])
        .args(["-hls_segment_filename", "v%v/seg_%03d.ts"])
        .args(["-master_pl_name", "master.m3u8"])
        .args(["-var_stream_map", &map.join(" ")])
        .arg("v%v/index.m3u8");
    cmd
}

/// Moves the generated ladder from `tmp` to `dir`. When another refsite finished the same
/// ladder first, its copy is used and ours removed.
fn publish(tmp: &Path, dir: &Path) -> std::io::Result<()> {
    if std::fs::rename(tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(tmp);
        if !dir.join(".complete").is_file() {
            return Err(std::io::Error::other(format!(
                "cannot move generated media into {}",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Takes an exclusive `flock` on `path` (released when the returned file is dropped).
async fn lock_file(path: PathBuf) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Master playlist of the live stream (one rendition; the encoder writes `index.m3u8`).
pub(crate) fn live_master_playlist() -> String {
    let r = LIVE_RENDITION;
    format!(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH={},RESOLUTION={}x{},CODECS=\"avc1.42c01e,mp4a.40.2\"\nindex.m3u8\n",
        (r.video_kbps + AUDIO_KBPS) * 1000,
        r.width,
        r.height
    )
}

fn live_command(dir: &Path) -> Command {
    let r = LIVE_RENDITION;
    let mut cmd = ffmpeg();
    cmd.current_dir(dir).arg("-re");
    pattern_inputs(&mut cmd, &format!("{}x{}", r.width, r.height), None);
    cmd.args(["-map", "0:v", "-map", "1:a"]);
    x264_args(&mut cmd);
    cbr(&mut cmd, "", r.video_kbps);
    cmd.args(["-f", "hls", "-hls_time", &SEGMENT_SECONDS.to_string()])
        .args(["-hls_list_size", &LIVE_LIST_SIZE.to_string()])
        .args([
            "-hls_flags",
            "delete_segments+temp_file+independent_segments",
        ])
        // Segment numbers from the clock keep increasing across encoder restarts.
        .args(["-hls_start_number_source", "epoch"])
        .args(["-hls_segment_filename", "seg_%d.ts"])
        .arg("index.m3u8");
    cmd
}

/// Number of segments listed in a media playlist.
pub(crate) fn playlist_segments(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("#EXTINF")).count()
}

/// Keeps the live encoder running in `dir` until `cancel` fires; restarts it when it dies.
/// Returns once the child is killed and reaped.
pub(crate) async fn supervise_live(dir: PathBuf, cancel: CancellationToken) {
    let mut restarts = 0u32;
    loop {
        let child = live_command(&dir).spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("live encoder: cannot start ffmpeg: {e}");
                if sleep_or_cancel(Duration::from_secs(2), &cancel).await {
                    return;
                }
                continue;
            }
        };
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::warn!("live encoder: {line}");
                }
            });
        }
        tokio::select! {
            status = child.wait() => {
                restarts += 1;
                tracing::warn!("live encoder exited ({}); restart #{restarts}",
                    status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string()));
                if sleep_or_cancel(Duration::from_secs(1), &cancel).await {
                    return;
                }
            }
            _ = cancel.cancelled() => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                tracing::info!("live encoder stopped");
                return;
            }
        }
    }
}

/// Sleeps; returns true if cancelled meanwhile.
async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = cancel.cancelled() => true,
    }
}

/// Waits until the live playlist lists at least `segments` segments.
pub(crate) async fn wait_live_ready(
    dir: &Path,
    segments: usize,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<(), MediaError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(text) = tokio::fs::read_to_string(dir.join("index.m3u8")).await {
            if playlist_segments(&text) >= segments {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(MediaError::LiveNotReady(timeout));
        }
        if sleep_or_cancel(Duration::from_millis(200), cancel).await {
            return Err(MediaError::Cancelled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_playlist_segments() {
        let p = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.000000,\nseg_1.ts\n#EXTINF:2.0,\nseg_2.ts\n";
        assert_eq!(playlist_segments(p), 2);
    }

    #[test]
    fn live_master_names_the_rendition() {
        let m = live_master_playlist();
        assert!(m.contains("RESOLUTION=426x240"));
        assert!(m.contains("BANDWIDTH=594000"));
    }
}
