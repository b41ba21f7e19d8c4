//! How the viewers' browsers are started: Chromium's flags and the decode lever. Runs use
//! viewerfleet's own set-up (`BrowserSetup::project`); `calibrate` runs the same plan with
//! other set-ups to measure what each costs. A scenario file does not name it, so the
//! manifest records the set-up a run used.

use serde::{Deserialize, Serialize};

/// Chromium flags that play video headless here (see FACTS.md), one fresh profile each.
///
/// Beyond what playing needs, they leave out what a headless viewer never uses, each
/// change measured with `viewerfleet calibrate` (BENCHMARKS.md): the omnibox popup's WebUI
/// renderer (≈47 MB), the spare renderer, and the separate audio, network and GPU processes
/// (their work moves into the browser process; requests and CDP throttling are unchanged).
/// `AudioVideoTracks` exposes `HTMLMediaElement.videoTracks`, which the decode lever
/// (`viewer::NO_VIDEO_TRACK_SCRIPT`) needs to deselect the video track.
pub const CHROMIUM_FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--in-process-gpu",
    "--mute-audio",
    "--autoplay-policy=no-user-gesture-required",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns,WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,SpareRendererForSitePerProcess,AudioServiceOutOfProcess",
    "--enable-features=NetworkServiceInProcess2",
    "--enable-blink-features=AudioVideoTracks",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--window-size=640,360",
];

/// The name of viewerfleet's own set-up.
pub const PROJECT_SETUP: &str = "project";

/// How viewers' browsers are started: base flags, and whether the video track is
/// deselected (the decode lever).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowserSetup {
    /// `project` for viewerfleet's own; a `calibrate` profile's name otherwise.
    pub name: String,
    pub flags: Vec<String>,
    pub no_video_track: bool,
}

impl BrowserSetup {
    /// What viewerfleet's viewers use: `CHROMIUM_FLAGS` and the decode lever.
    pub fn project() -> Self {
        Self {
            name: PROJECT_SETUP.into(),
            flags: CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect(),
            no_video_track: true,
        }
    }

    /// Exactly viewerfleet's own set-up (whatever it is called).
    pub fn is_project(&self) -> bool {
        let project = Self::project();
        self.flags == project.flags && self.no_video_track == project.no_video_track
    }
}

impl Default for BrowserSetup {
    fn default() -> Self {
        Self::project()
    }
}
