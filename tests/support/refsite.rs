//! refsite started inside a test: its media cache shared by the tiers' tests (encoded once
//! per target folder) and a live-only site with a short playback-report interval.

use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use viewerfleet::refsite::{self, RefsiteConfig, RefsiteHandle};

/// The media every in-test refsite encodes into and reuses.
pub fn media_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("refsite-media")
}

/// The configuration of an in-test refsite: the shared media cache, the project's web/.
pub fn config() -> RefsiteConfig {
    RefsiteConfig::new(media_cache(), refsite::default_web_dir())
}

/// Starts a refsite as configured.
pub async fn start(config: RefsiteConfig) -> RefsiteHandle {
    refsite::start(config, CancellationToken::new())
        .await
        .expect("refsite starts (ffmpeg, web/ installed)")
}

/// A refsite with its live stream only, players reporting playback every 2 s.
pub async fn start_live() -> RefsiteHandle {
    let mut config = config();
    config.vod = false;
    config.metrics_interval = Duration::from_secs(2);
    start(config).await
}
