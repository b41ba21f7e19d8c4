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

/// Serves the clip page at `page_path` and the clip beside it on loopback, and answers
/// PeerTube's `/api/v1/videos/<id>` for it (the engine checks the video exists before a run);
/// returns the base URL and the server task (abort it when done).
pub async fn serve_clip(
    dir: &Path,
    page_path: &str,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    use axum::routing::get;
    let clip = make_clip(dir);
    let app = axum::Router::new()
        .route(page_path, get(|| async { axum::response::Html(CLIP_PAGE) }))
        .route(
            "/api/v1/videos/{id}",
            get(|| async { axum::Json(serde_json::json!({"name": "clip", "isLive": false})) }),
        )
        .route(
            "/clip.mp4",
            get(move || {
                let clip = clip.clone();
                async move { ([("content-type", "video/mp4")], clip) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    (
        base,
        tokio::spawn(async move { axum::serve(listener, app).await }),
    )
}

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
