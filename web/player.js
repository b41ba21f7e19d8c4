// Player of viewerfleet's reference site: hls.js + p2p-media-loader v2, configured like
// PeerTube's embed, exposing PeerTube's player interfaces:
//  - window.videojsPlayer.on('network-info', cb), fired every second with PeerTube's payload
//    (cumulative bytes); cb is called video.js-style as cb(event, data), and `event` also
//    carries the payload's fields, so cb(data) works as well;
//  - periodic POST /api/v1/metrics/playback with PeerTube's body (deltas since last POST).
// Query parameters: autoplay=1, muted=1, p2p=0|1, latency=normal|high (live), api=1.

import Hls from "hls.js";
import { HlsJsP2PEngine } from "p2p-media-loader-hlsjs";
import { coreConfig, liveSyncDurationCount } from "/web/p2p-config.js";

const cfg = JSON.parse(document.getElementById("refsite-config").textContent);
const query = new URLSearchParams(location.search);
const p2pEnabled = query.get("p2p") !== "0";
const autoplay = query.get("autoplay") === "1";
const muted = query.get("muted") === "1";
const latency = query.get("latency") === "high" ? "high" : "normal";
const video = document.getElementById("video");
video.muted = muted;

// --- a tiny video.js-like event emitter --------------------------------------------------
const listeners = new Map();
const player = {
  p2pEnabled,
  isLive: cfg.isLive,
  latency,
  hls: null,
  errors: [],
  on(type, cb) {
    if (!listeners.has(type)) listeners.set(type, new Set());
    listeners.get(type).add(cb);
    return player;
  },
  off(type, cb) {
    listeners.get(type)?.delete(cb);
    return player;
  },
  one(type, cb) {
    const once = (...args) => {
      player.off(type, once);
      cb(...args);
    };
    return player.on(type, once);
  },
  trigger(type, data) {
    const event = Object.assign({ type }, data);
    for (const cb of [...(listeners.get(type) ?? [])]) {
      try {
        cb(event, data);
      } catch (e) {
        console.error("network-info listener failed", e);
      }
    }
  },
  el: () => video,
  networkInfo: () => networkInfo(),
  // Flushes the playback metrics now (e.g. before closing the page).
  flushMetrics: () => sendMetrics(true),
};
window.videojsPlayer = player;
window.addEventListener("error", (e) => player.errors.push(String(e.message)));

// --- byte and event accounting -------------------------------------------------------------
const totals = { http: 0, p2pDown: 0, p2pUp: 0 };
const peers = new Set();
const counts = { errors: 0, stalls: 0, resolutionChanges: 0 };

const HlsWithP2P = HlsJsP2PEngine.injectMixin(Hls);
const hls = new HlsWithP2P({
  liveSyncDurationCount: liveSyncDurationCount(latency),
  p2p: { core: coreConfig(cfg, p2pEnabled) },
});
player.hls = hls;
player.p2pEngine = hls.p2pEngine;

// HTTP bytes: every media segment the browser received from the origin, from Resource
// Timing (the body size as it crossed the network). This counts the same whatever loaded
// the segment (p2p-media-loader's fetch, or hls.js itself when P2P is off or the loader
// hands a request back), and includes transfers the loader aborted after the bytes arrived.
const segmentPath = cfg.playlistPath.replace(/master\.m3u8$/, "");
function countResources(entries) {
  for (const e of entries) {
    let path;
    try {
      path = new URL(e.name).pathname;
    } catch {
      continue;
    }
    if (path.startsWith(segmentPath) && path.endsWith(".ts")) {
      totals.http += e.encodedBodySize || 0;
    }
  }
}
performance.setResourceTimingBufferSize(10000);
new PerformanceObserver((list) => countResources(list.getEntries())).observe({
  type: "resource",
  buffered: true,
});
// Observers keep receiving entries after a clear; the buffer must not fill up.
setInterval(() => performance.clearResourceTimings(), 30000);

if (p2pEnabled) {
  const engine = hls.p2pEngine;
  engine.addEventListener("onChunkDownloaded", (bytes, source) => {
    if (source !== "http") totals.p2pDown += bytes;
  });
  engine.addEventListener("onChunkUploaded", (bytes) => {
    totals.p2pUp += bytes;
  });
  engine.addEventListener("onPeerConnect", (d) => peers.add(d.peerId));
  engine.addEventListener("onPeerClose", (d) => peers.delete(d.peerId));
  engine.addEventListener("onTrackerError", (d) => player.errors.push("tracker: " + String(d.error)));
}

let levelSwitches = 0;
hls.on(Hls.Events.LEVEL_SWITCHED, () => {
  levelSwitches += 1;
  if (levelSwitches > 1) counts.resolutionChanges += 1;
});
hls.on(Hls.Events.ERROR, (_e, data) => {
  if (data.details === Hls.ErrorDetails.BUFFER_STALLED_ERROR) counts.stalls += 1;
  else if (data.fatal) {
    counts.errors += 1;
    player.errors.push("hls: " + data.details);
  }
});

function currentHeight() {
  const level = hls.levels?.[hls.currentLevel];
  return level?.height || video.videoHeight || undefined;
}

// --- network-info, every second -----------------------------------------------------------
let last = { http: 0, p2pDown: 0, p2pUp: 0 };
let speeds = { http: 0, p2pDown: 0, p2pUp: 0 };
function networkInfo() {
  return {
    source: "p2p-media-loader",
    bandwidthEstimate: Math.round(hls.bandwidthEstimate || 0),
    http: { downloadSpeed: speeds.http, downloaded: totals.http },
    p2p: {
      downloadSpeed: speeds.p2pDown,
      uploadSpeed: speeds.p2pUp,
      peersWithWebSeed: peers.size + 1,
      peersP2POnly: peers.size,
      downloaded: totals.p2pDown,
      uploaded: totals.p2pUp,
    },
  };
}
setInterval(() => {
  speeds = {
    http: totals.http - last.http,
    p2pDown: totals.p2pDown - last.p2pDown,
    p2pUp: totals.p2pUp - last.p2pUp,
  };
  last = { ...totals };
  player.trigger("network-info", networkInfo());
}, 1000);

// --- playback metrics (PeerTube's body, deltas) --------------------------------------------
let sent = { http: 0, p2pDown: 0, p2pUp: 0, errors: 0, stalls: 0, resolutionChanges: 0 };
let metricsTimer = null;
function sendMetrics(keepalive) {
  const now = { ...totals, ...counts };
  const body = {
    playerMode: "p2p-media-loader",
    resolution: currentHeight(),
    fps: cfg.fps ?? undefined,
    p2pEnabled,
    p2pPeers: peers.size,
    resolutionChanges: now.resolutionChanges - sent.resolutionChanges,
    errors: now.errors - sent.errors,
    bufferStalled: now.stalls - sent.stalls,
    downloadedBytesP2P: now.p2pDown - sent.p2pDown,
    downloadedBytesHTTP: now.http - sent.http,
    uploadedBytesP2P: now.p2pUp - sent.p2pUp,
    videoId: cfg.videoId,
  };
  sent = now;
  return fetch(cfg.metricsPath, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    keepalive: !!keepalive,
  }).catch((e) => player.errors.push("metrics: " + e));
}
video.addEventListener("playing", () => {
  if (metricsTimer === null) {
    metricsTimer = setInterval(() => sendMetrics(false), cfg.metricsIntervalMs);
  }
});
window.addEventListener("pagehide", () => {
  if (metricsTimer !== null) sendMetrics(true);
});

// --- start ---------------------------------------------------------------------------------
hls.on(Hls.Events.MANIFEST_PARSED, () => {
  if (autoplay) {
    video.play().catch((e) => player.errors.push("play: " + e));
  }
});
hls.loadSource(cfg.playlistPath);
hls.attachMedia(video);
