//! A page with a `<video>` playing a short ffmpeg clip, and its target adapter: the
//! viewer layer's stand-in page for tests that need a real browser but not refsite.

#![allow(dead_code)]

use std::path::Path;
use viewerfleet::target::Target;

/// A page with a `<video>` playing a short ffmpeg clip (fetched like a segment).
pub struct ClipTarget {
    pub base: String,
}

impl Target for ClipTarget {
    fn viewer_url(&self, _p2p: bool) -> String {
        format!("{}/", self.base)
    }
    fn probe_script(&self) -> &'static str {
        viewerfleet::target::peertube::probe_script()
    }
    fn read_script(&self) -> &'static str {
        viewerfleet::target::peertube::read_script()
    }
    fn exporter_url(&self) -> Option<String> {
        None
    }
}

pub const CLIP_PAGE: &str = r#"<!doctype html><title>clip</title><video autoplay muted loop playsinline></video>
<script>fetch('/clip.mp4').then(r => r.blob()).then(b => {
  document.querySelector('video').src = URL.createObjectURL(b); });</script>"#;

pub fn make_clip(dir: &Path) -> Vec<u8> {
    let out = dir.join("clip.mp4");
    let status = std::process::Command::new("ffmpeg")
        .args(["-loglevel", "error", "-f", "lavfi", "-i"])
        .args(["testsrc2=size=320x180:rate=25", "-t", "4"])
        .args([
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
        ])
        .args(["-movflags", "+faststart"])
        .arg(&out)
        .status()
        .expect("ffmpeg runs (apt-get install -y ffmpeg)");
    assert!(status.success());
    std::fs::read(out).unwrap()
}
