//! Light peers on a site without a light page of its own (a PeerTube instance): a browser
//! page opens one of the site's own pages and the controller loads the light peers' module
//! (`web/light.js`, with the hls.js parser and the p2p-media-loader-core build the site's
//! player uses) into it, with the settings the site's API gives its player: the HLS playlist
//! (whose URL is the swarm's id), the trackers, the STUN servers and whether and how often
//! players report playback.

use crate::refsite::WebFiles;
use serde_json::{json, Value};

/// The async script that loads the module into the page (see its header).
const INJECT_SCRIPT: &str = include_str!("light_inject.js");

/// The module texts, `web/`-relative: light.js imports the three others.
const SOURCES: [(&str, &str); 4] = [
    ("light", "light.js"),
    ("p2pConfig", "p2p-config.js"),
    ("hls", "node_modules/hls.js/dist/hls.mjs"),
    (
        "engine",
        "node_modules/p2p-media-loader-core/dist/p2p-media-loader-core.es.min.js",
    ),
];

/// PeerTube's player reports playback every 15 s unless the instance says otherwise.
const DEFAULT_STATS_INTERVAL_MS: u64 = 15_000;

/// What every page of light peers on this site is loaded with.
#[derive(Debug)]
pub(super) struct Injection {
    /// The site's own page the module is loaded into (same origin as its media and API).
    pub(super) host_page: String,
    config: Value,
    sources: Value,
}

impl Injection {
    /// Reads the video's details and the instance's configuration from its API, and the
    /// module texts from the front-end files this binary carries.
    pub(super) async fn prepare(viewer_url: &str) -> anyhow::Result<Injection> {
        let (origin, id) = origin_and_id(viewer_url)?;
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(20))
            .build()?;
        let details = get_json(&client, &format!("{origin}/api/v1/videos/{id}"))
            .await
            .map_err(|e| anyhow::anyhow!("light peers: reading the video's details: {e:#}"))?;
        let config = get_json(&client, &format!("{origin}/api/v1/config"))
            .await
            .map_err(|e| {
                anyhow::anyhow!("light peers: reading the instance's configuration: {e:#}")
            })?;
        let config = page_config(&id, &details, &config)?;
        let web = WebFiles::built_in();
        let mut sources = serde_json::Map::new();
        for (name, path) in SOURCES {
            let bytes = web.read(path).await.map_err(|e| {
                anyhow::anyhow!(
                    "light peers: web/{path} ({}): {e}; run `make web-deps`",
                    web.describe()
                )
            })?;
            sources.insert(
                name.into(),
                Value::String(String::from_utf8_lossy(&bytes).into_owned()),
            );
        }
        Ok(Injection {
            host_page: format!("{origin}/api/v1/config"),
            config,
            sources: Value::Object(sources),
        })
    }

    /// The script that loads the module, and its argument for a page with `query`.
    pub(super) fn script(&self, query: &str) -> (&'static str, Vec<Value>) {
        (
            INJECT_SCRIPT,
            vec![json!({"config": self.config, "query": query, "sources": self.sources})],
        )
    }
}

async fn get_json(client: &reqwest::Client, url: &str) -> anyhow::Result<Value> {
    let response = client.get(url).send().await?.error_for_status()?;
    Ok(response.json::<Value>().await?)
}

/// `http(s)://host[:port]` and the video's id from the embed URL viewers open.
fn origin_and_id(viewer_url: &str) -> anyhow::Result<(String, String)> {
    let url = reqwest::Url::parse(viewer_url)
        .map_err(|e| anyhow::anyhow!("light peers: the video's URL {viewer_url}: {e}"))?;
    let id = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| anyhow::anyhow!("light peers: no video id in {viewer_url}"))?;
    let origin = url.origin().ascii_serialization();
    Ok((origin, id.to_string()))
}

/// The settings light.js reads (as refsite's page carries them), from PeerTube's
/// `VideoDetails` and server configuration.
fn page_config(id: &str, details: &Value, config: &Value) -> anyhow::Result<Value> {
    let playlist = details["streamingPlaylists"]
        .as_array()
        .and_then(|list| list.iter().find_map(|p| p["playlistUrl"].as_str()))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "light peers: video {id} has no HLS playlist (streamingPlaylists[].playlistUrl); light peers join HLS videos with P2P"
            )
        })?;
    // The player's trackers: the WebSocket ones (the HTTP announce is WebTorrent's).
    let trackers: Vec<&str> = details["trackerUrls"]
        .as_array()
        .map(|urls| {
            urls.iter()
                .filter_map(Value::as_str)
                .filter(|u| u.starts_with("ws://") || u.starts_with("wss://"))
                .collect()
        })
        .unwrap_or_default();
    if trackers.is_empty() {
        anyhow::bail!(
            "light peers: video {id} names no WebSocket tracker (trackerUrls); is the instance's tracker enabled?"
        );
    }
    let metrics = &config["openTelemetry"]["metrics"];
    let reports = metrics["enabled"].as_bool().unwrap_or(true);
    let interval = metrics["playbackStatsInterval"]
        .as_u64()
        .unwrap_or(DEFAULT_STATS_INTERVAL_MS);
    Ok(json!({
        "videoId": details["uuid"].as_str().unwrap_or(id),
        "isLive": details["isLive"].as_bool().unwrap_or(false),
        "playlistPath": playlist,
        "announceTrackers": trackers,
        "metricsPath": "/api/v1/metrics/playback",
        "metricsIntervalMs": interval,
        "sendMetrics": reports,
        "fps": Value::Null,
        "stunServers": config["webrtc"]["stunServers"].as_array().cloned().unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_and_id_come_from_the_embed_url() {
        let (origin, id) =
            origin_and_id("https://pt.example:8443/videos/embed/abc-1?autoplay=1&p2p=1").unwrap();
        assert_eq!(origin, "https://pt.example:8443");
        assert_eq!(id, "abc-1");
        assert!(origin_and_id("not a url").is_err());
    }

    #[test]
    fn the_page_takes_peertubes_playlist_trackers_and_reporting() {
        let details = json!({
            "uuid": "abc", "isLive": true,
            "streamingPlaylists": [{"type": 1, "playlistUrl": "https://pt.example/static/streaming-playlists/hls/abc/master.m3u8"}],
            "trackerUrls": ["https://pt.example/tracker/announce", "wss://pt.example/tracker/socket"],
        });
        let config = json!({
            "webrtc": {"stunServers": ["stun:stun.example:3478"]},
            "openTelemetry": {"metrics": {"enabled": false, "playbackStatsInterval": 20000}},
        });
        let page = page_config("abc", &details, &config).unwrap();
        assert_eq!(
            page["playlistPath"],
            "https://pt.example/static/streaming-playlists/hls/abc/master.m3u8"
        );
        assert_eq!(
            page["announceTrackers"],
            json!(["wss://pt.example/tracker/socket"])
        );
        assert_eq!(page["isLive"], true);
        assert_eq!(page["sendMetrics"], false);
        assert_eq!(page["metricsIntervalMs"], 20000);
        assert_eq!(page["stunServers"], json!(["stun:stun.example:3478"]));
    }

    #[test]
    fn a_video_without_hls_or_a_websocket_tracker_is_explained() {
        let err = page_config("x", &json!({"trackerUrls": ["wss://a/t"]}), &json!({}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no HLS playlist"), "{err}");
        let details = json!({"streamingPlaylists": [{"playlistUrl": "https://a/m.m3u8"}],
                             "trackerUrls": ["https://a/tracker/announce"]});
        let err = page_config("x", &details, &json!({}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no WebSocket tracker"), "{err}");
    }
}
