//! The pages: the embed page (template `web/embed.html` with the video's settings injected
//! as JSON) and the index listing the videos. Also decides which files under `web/` may be
//! served: the player script and the `dist/` folders of the three npm packages, nothing else.

use super::media::FPS;
use super::{Video, VideoKind};
use std::time::Duration;

/// The npm packages whose `dist/` files the page loads.
pub(crate) const NPM_PACKAGES: [&str; 3] =
    ["hls.js", "p2p-media-loader-core", "p2p-media-loader-hlsjs"];

/// The project's own scripts under `web/`: the player, the light peers' page, and the P2P
/// configuration both share.
pub(crate) const SCRIPTS: [&str; 3] = ["player.js", "light.js", "p2p-config.js"];

/// Content type of a servable `web/` path, or `None` if it must not be served.
pub(crate) fn servable_web_path(path: &str) -> Option<&'static str> {
    if path
        .split('/')
        .any(|c| c.is_empty() || c == ".." || c.starts_with('.'))
    {
        return None;
    }
    let allowed = SCRIPTS.contains(&path)
        || NPM_PACKAGES
            .iter()
            .any(|p| path.starts_with(&format!("node_modules/{p}/dist/")));
    if !allowed {
        return None;
    }
    if path.ends_with(".js") || path.ends_with(".mjs") {
        Some("text/javascript; charset=utf-8")
    } else if path.ends_with(".map") {
        Some("application/json")
    } else {
        None
    }
}

/// The settings the page's script reads from `<script id="refsite-config">`.
fn page_config(
    video: &Video,
    metrics_interval: Duration,
    stun_servers: &[String],
) -> serde_json::Value {
    serde_json::json!({
        "videoId": video.id,
        "isLive": video.kind == VideoKind::Live,
        "playlistPath": format!("/static/streaming-playlists/hls/{}/master.m3u8", video.id),
        "trackerPath": "/tracker/socket",
        "metricsPath": "/api/v1/metrics/playback",
        "metricsIntervalMs": metrics_interval.as_millis() as u64,
        // PeerTube's player does not know a live stream's frame rate.
        "fps": if video.kind == VideoKind::Vod { Some(FPS) } else { None },
        // PeerTube's player: rtcConfig.iceServers = stunServers.map(s => ({ urls: s })).
        "stunServers": stun_servers,
    })
}

/// A page of the site: the player (`embed.html`) or the light peers (`light.html`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    Embed,
    Light,
}

impl PageKind {
    fn template(self) -> &'static str {
        match self {
            PageKind::Embed => "embed.html",
            PageKind::Light => "light.html",
        }
    }
}

/// Renders the embed page from `web/embed.html`, or the light peers' page from
/// `web/light.html`: the same settings injected into each.
pub(crate) async fn page_html(
    kind: PageKind,
    web: &super::web::WebFiles,
    video: &Video,
    metrics_interval: Duration,
    stun_servers: &[String],
) -> std::io::Result<String> {
    let template = String::from_utf8(web.read(kind.template()).await?.into_owned())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    // `<` escaped so the JSON cannot close the script element.
    let config = page_config(video, metrics_interval, stun_servers)
        .to_string()
        .replace('<', "\\u003c");
    Ok(template.replace("{{CONFIG}}", &config).replace(
        "{{TITLE}}",
        &format!("refsite {} video", video.kind.as_str()),
    ))
}

/// The index page listing the videos.
pub(crate) fn index_html(videos: &[Video]) -> String {
    let mut items = String::new();
    for v in videos {
        items.push_str(&format!(
            "<li>{kind}: <a href=\"/videos/embed/{id}?autoplay=1&amp;muted=1\">/videos/embed/{id}</a></li>\n",
            kind = v.kind.as_str(),
            id = v.id
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>viewerfleet refsite</title></head>\n<body><h1>viewerfleet reference site</h1>\n<ul>\n{items}</ul>\n<p><a href=\"/metrics\">/metrics</a> · tracker at <code>/tracker/socket</code></p>\n</body></html>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_player_and_dist_files_are_served() {
        assert!(servable_web_path("player.js").is_some());
        assert!(servable_web_path("node_modules/hls.js/dist/hls.mjs").is_some());
        assert!(servable_web_path("node_modules/ws/index.js").is_none());
        assert!(servable_web_path("node_modules/hls.js/dist/../../ws/x.js").is_none());
        assert!(servable_web_path("package.json").is_none());
        assert!(servable_web_path("embed.html").is_none());
    }
}
