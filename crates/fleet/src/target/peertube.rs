//! PeerTube (and refsite, which speaks PeerTube's interfaces): the embed page with
//! `p2p=0|1`, the player's `network-info` event, and the OpenTelemetry exporter.

use super::Target;

#[derive(Debug, Clone)]
pub struct PeerTubeTarget {
    /// `https://host/videos/embed/<uuid>`
    embed_url: String,
    /// Extra query parameters (e.g. refsite's `latency=high`).
    extra_params: Vec<(String, String)>,
    exporter_url: Option<String>,
}

impl PeerTubeTarget {
    /// From a watch URL (`/w/<id>`, `/videos/watch/<id>`) or an embed URL.
    pub fn from_video_url(url: &str, exporter_url: Option<String>) -> anyhow::Result<Self> {
        let parsed =
            url::Url::parse(url).map_err(|e| anyhow::anyhow!("`{url}` is not a URL: {e}"))?;
        let segments: Vec<&str> = parsed
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        let id = match segments.as_slice() {
            ["w", id] | ["videos", "watch", id] | ["videos", "embed", id] => *id,
            _ => anyhow::bail!(
                "`{url}` is not a PeerTube video URL; expected …/w/<id>, …/videos/watch/<id> or …/videos/embed/<id>"
            ),
        };
        let origin = parsed.origin().ascii_serialization();
        Ok(Self {
            embed_url: format!("{origin}/videos/embed/{id}"),
            extra_params: Vec::new(),
            exporter_url,
        })
    }

    /// PeerTube's API for this video (`/api/v1/videos/<id>`): 404 when it does not exist.
    pub(crate) fn video_api_url(&self) -> String {
        self.embed_url
            .replacen("/videos/embed/", "/api/v1/videos/", 1)
    }

    pub(crate) fn with_param(mut self, key: &str, value: &str) -> Self {
        self.extra_params.push((key.to_string(), value.to_string()));
        self
    }
}

impl Target for PeerTubeTarget {
    fn viewer_url(&self, p2p: bool) -> String {
        let mut url = format!(
            "{}?autoplay=1&muted=1&api=1&p2p={}",
            self.embed_url,
            if p2p { 1 } else { 0 }
        );
        for (key, value) in &self.extra_params {
            url.push_str(&format!("&{key}={value}"));
        }
        url
    }

    fn probe_script(&self) -> &'static str {
        PROBE
    }

    fn read_script(&self) -> &'static str {
        READ
    }

    fn exporter_url(&self) -> Option<String> {
        self.exporter_url.clone()
    }

    /// refsite's light peers' page, beside the embed page, with the same parameters (the
    /// live latency mode). A PeerTube instance has none: plans refuse light peers there.
    fn light_url(&self) -> Option<String> {
        Some(
            self.viewer_url(true)
                .replacen("/videos/embed/", "/videos/light/", 1),
        )
    }
}

/// The probe, for other adapters whose pages expose the same player interface.
pub fn probe_script() -> &'static str {
    PROBE
}

/// The stats reader matching `probe_script`.
pub fn read_script() -> &'static str {
    READ
}

/// Installed before the page's own scripts (see the file's header for what it counts).
const PROBE: &str = include_str!("probe.js");

/// Returns the probe's figures plus the video element's state, as `PlayerStats`.
const READ: &str = include_str!("read.js");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_and_embed_urls_become_embed_urls() {
        for url in [
            "https://pt.example/w/abc",
            "https://pt.example/videos/watch/abc",
            "https://pt.example/videos/embed/abc?x=1",
        ] {
            let t = PeerTubeTarget::from_video_url(url, None).unwrap();
            assert_eq!(
                t.viewer_url(false),
                "https://pt.example/videos/embed/abc?autoplay=1&muted=1&api=1&p2p=0"
            );
        }
        let t = PeerTubeTarget::from_video_url("http://[fd00::1]:8080/w/x", None)
            .unwrap()
            .with_param("latency", "high");
        assert_eq!(
            t.viewer_url(true),
            "http://[fd00::1]:8080/videos/embed/x?autoplay=1&muted=1&api=1&p2p=1&latency=high"
        );
    }

    #[test]
    fn other_urls_are_rejected_with_the_expected_shape() {
        let err = PeerTubeTarget::from_video_url("https://pt.example/c/channel", None)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("/w/<id>"), "{err}");
        assert!(PeerTubeTarget::from_video_url("not a url", None).is_err());
    }
}
