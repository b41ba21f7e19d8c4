// Returns the probe's figures plus the video element's state, as viewerfleet's PlayerStats
// (src/target/mod.rs): the one object a stats read brings back.
const vf = window.__vf;
const v = document.querySelector('video');
if (!vf) return { hasVideo: !!v, lastError: 'stats probe not installed' };
let stalledMs = vf.stalledMs;
if (vf.waitingSince !== null) stalledMs += performance.now() - vf.waitingSince;
const q = v && v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : null;
const useNetInfo = vf.netinfo && vf.http > 0;
const s = vf.seg, e = vf.engine, f = vf.frags;
// The rendition playing: the player's current level (with the decode lever the element's
// videoHeight stays at the first frame's), else the element's own size.
const p = window.videojsPlayer, hls = p && p.hls;
const level = hls && hls.levels && hls.currentLevel >= 0 ? hls.levels[hls.currentLevel] : null;
// How far behind the live edge the playhead is, as hls.js estimates it (its playlist's edge
// plus the time since it advanced, minus currentTime); live streams of a page exposing hls.js.
const liveLatency = level && level.details && level.details.live && v && v.currentTime > 0
  ? hls.latency : null;
const tracks = v && v.videoTracks;
// The worst lateness is since the previous read.
const lag = vf.lag ? Object.assign({}, vf.lag) : null;
if (vf.lag) vf.lag.maxMs = 0;
return {
  httpBytes: Math.round(useNetInfo ? vf.http : vf.rtBytes),
  httpSource: useNetInfo ? 'network-info' : 'resource-timing',
  p2pDownBytes: Math.round(vf.p2pDown), p2pUpBytes: Math.round(vf.p2pUp), peers: vf.peers,
  networkInfoSeen: vf.netinfo,
  // Nested figures use the raw data's own field names (ViewerSample's http, rtc, engine).
  http: {
    completed_bytes: s.completed, responses: s.responses, aborted_announced_bytes: s.abortedAnnounced,
    aborted_delivered_bytes: s.abortedDelivered, in_flight_bytes: Math.max(0, s.inFlight),
    waiting_requests: Math.max(0, s.waiting), aborts: s.aborts, aborted_waiting: s.abortedWaiting,
  },
  rtc: { received_bytes: vf.rtc.received, sent_bytes: vf.rtc.sent, connections: vf.rtc.connections },
  ice: vf.ice ? { links: vf.ice.links.map((l) => ({
    at_s: Math.round(l.at_s * 10) / 10, state: l.state, remote: l.remote.slice(0, 8),
    local_type: l.local_type || null, remote_type: l.remote_type || null, family: l.family || null,
    protocol: l.protocol || null, remote_address: l.remote_address || null,
    connected_after_s: l.connected_after_s === undefined ? null : l.connected_after_s,
  })) } : null,
  engine: e.hooked ? {
    peer_closes: e.peerCloses, peer_errors: e.peerErrors,
    p2p_timeouts: e.p2pTimeouts, p2p_failures: e.p2pFailures,
  } : null,
  hasVideo: !!v,
  playing: !!v && !v.paused && !v.ended && v.readyState >= 3 && vf.waitingSince === null,
  currentTime: v ? v.currentTime : 0,
  liveLatencyS: typeof liveLatency === 'number' && liveLatency > 0 ? liveLatency : null,
  firstFrameMs: vf.firstFrameMs,
  stalls: vf.stalls, stalledMs: stalledMs,
  resolution: level && level.height ? level.height : (v && v.videoHeight ? v.videoHeight : null),
  // Meaningless with the decode lever (nothing is decoded, nothing dropped): see videoTrackOff.
  droppedFrames: q ? q.droppedVideoFrames : 0,
  videoTrackOff: tracks ? (tracks.length > 0 && Array.from(tracks).every((t) => !t.selected)) : null,
  segments: f && f.hooked ? {
    requested: f.requested, loaded: f.loaded, bytes: f.bytes, byHeight: f.byHeight,
  } : null,
  lag: lag ? {
    ticks: lag.ticks, late_ms: Math.round(lag.lateMs), late_ticks: lag.lateTicks,
    max_ms: Math.round(lag.maxMs), hidden_ticks: lag.hiddenTicks,
  } : null,
  errors: vf.errors, lastError: vf.lastError,
};
