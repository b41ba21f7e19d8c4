//! Targets: adapters for video platforms. An adapter knows the viewer page URL (and how to
//! turn P2P off for one viewer), the JavaScript that reads the player's stats, and the
//! exporter to scrape. PeerTube's adapter also serves refsite, which speaks the same
//! interfaces.
