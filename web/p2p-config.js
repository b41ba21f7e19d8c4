// The P2P engine's configuration, shared by the player page (player.js) and the light peers'
// page (light.js): a light peer runs the same p2p-media-loader-core with the same settings as
// a real viewer, so both join one swarm and behave alike.

/** The tracker's WebSocket URL on the page's own origin. */
export function trackerUrl(cfg) {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + cfg.trackerPath;
}

/** The HLS master playlist's absolute URL. */
export function masterPlaylistUrl(cfg) {
  return new URL(cfg.playlistPath, location.href).href;
}

/** p2p-media-loader-core's configuration, as PeerTube's player sets it. */
export function coreConfig(cfg, p2pEnabled) {
  return {
    // A PeerTube instance names its trackers (VideoDetails.trackerUrls); refsite's is on
    // the page's own origin.
    announceTrackers: cfg.announceTrackers ?? [trackerUrl(cfg)],
    // As PeerTube's player: the instance's webrtc.stun_servers, one iceServer each.
    rtcConfig: { iceServers: (cfg.stunServers || []).map((s) => ({ urls: s })) },
    // PeerTube's swarm: the HLS playlist's URL (p2p-media-loader's default, the manifest's
    // URL), so every page of one video meets in one swarm.
    swarmId: masterPlaylistUrl(cfg),
    isP2PDisabled: !p2pEnabled,
    // PeerTube's settings: a short high-demand window for live, the default for VOD.
    highDemandTimeWindow: cfg.isLive ? 4 : 15,
  };
}

/** hls.js's segments behind the live edge: PeerTube's 5 (normal latency), 10 (high). */
export function liveSyncDurationCount(latency) {
  return latency === "high" ? 10 : 5;
}
