// Light peers of viewerfleet's reference site: swarm members without a video element.
//
// Each light peer runs its own p2p-media-loader-core `Core` with the player page's own
// configuration (p2p-config.js): it announces itself to the tracker, opens real WebRTC data
// channels to other peers, and fetches from the origin over real HTTP. What a real viewer's
// hls.js does is simulated: the playlists are parsed by hls.js's own parser (so streams and
// segments get the ids the player gives them, and both join one swarm), a playhead starts where
// hls.js would (live: liveSyncDurationCount target durations behind the edge; VOD: 0), advances
// in real time while the next segment is there, and asks for one segment at a time while less
// than the engine's buffer length lies ahead. Nothing is decoded or rendered.
//
// Query parameters: peers=K (light peers in this page), first=F (the first one's number),
// latency=normal|high (live), down_kbps / rtt_ms (each peer's HTTP link, as a real viewer's
// http-only throttle: a rate shared by its requests and a delay before each), spread_ms (the
// peers start evenly over this time), metrics=0 (no playback reports).
//
// window.viewerfleetLight.read(follow) returns every peer's cumulative figures and the page's
// lag meter; stop() closes every peer (tracker, data channels, requests). `follow`, when the
// engine passes one, is how far behind the live edge the run's real viewers play (seconds,
// their median): a live peer closer to the edge than that holds its playhead until it is as
// far behind, as a player whose page and decoder started later would be. A real player never
// catches up (hls.js plays at rate 1), so neither does a light peer that is further behind.

import { M3U8Parser } from "hls.js";
import { generateStreamShortId } from "p2p-media-loader-core";
import { coreConfig, liveSyncDurationCount, masterPlaylistUrl } from "/web/p2p-config.js";

// On a site without this page (a PeerTube instance), the controller loads this module into
// one of the site's own pages and hands it the settings, the query and the engine's URL
// (light_inject.js): `window.viewerfleetLightSetup`.
const injected = window.viewerfleetLightSetup;
const cfg = injected?.config ?? JSON.parse(document.getElementById("refsite-config").textContent);
const query = new URLSearchParams(injected?.query ?? location.search);
const intParam = (name, fallback) => {
  const v = Number.parseInt(query.get(name) ?? "", 10);
  return Number.isFinite(v) && v >= 0 ? v : fallback;
};
const PEERS = intParam("peers", 1);
const FIRST = intParam("first", 0);
const DOWN_KBPS = intParam("down_kbps", 0);
const RTT_MS = intParam("rtt_ms", 0);
const SPREAD_MS = intParam("spread_ms", 0);
// A PeerTube instance can turn playback reports off (openTelemetry.metrics.enabled).
const SEND_METRICS = query.get("metrics") !== "0" && cfg.sendMetrics !== false;
// p2p_off=I,J,…: these peers (by number) have P2P off, as a viewer of the run's P2P-off share.
const P2P_OFF = new Set(
  (query.get("p2p_off") ?? "")
    .split(",")
    .filter((s) => s !== "")
    .map(Number),
);
const LATENCY = query.get("latency") === "high" ? "high" : "normal";
// debug=1: the engine's peer and tracker events on the console, for a person at the page.
const DEBUG = query.get("debug") === "1";

/** The playhead's and the loader's clock. */
const TICK_MS = 250;
/** hls.js's default ABR factor: a rendition is picked when its bitrate fits 70% of the link. */
const ABR_UP_FACTOR = 0.7;
/** After a failed segment, the next attempt waits this long (hls.js retries after ~1 s). */
const RETRY_MS = 1000;
/** A playhead within this much of the followed latency is where it should be. */
const FOLLOW_SLACK_S = 0.25;
/** The real viewers' live latency the peers follow (seconds); null: their own. */
let followLatencyS = null;

// p2p-media-loader keeps per-page state in its module: one peer id per stream for every
// engine of the page, and one tracker socket per announce URL. Each light peer therefore
// loads its own copy of the module (a URL of its own makes the browser evaluate it anew), so
// it has its own peer id and socket, as a viewer in a page of its own has.
const ENGINE_URL = "/web/node_modules/p2p-media-loader-core/dist/p2p-media-loader-core.es.min.js";
const engineModule = (number) =>
  import(injected ? injected.engineUrl(number) : `${ENGINE_URL}?light_peer=${number}`);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const nativeFetch = window.fetch.bind(window);

// --- each peer's HTTP link (the http-only throttle of a real viewer) -----------------------
/** One peer's downlink: a rate its requests share, and a delay before each request. */
class Link {
  constructor(kbps, rttMs) {
    this.bytesPerMs = kbps > 0 ? (kbps * 1000) / 8 / 1000 : 0;
    this.rttMs = rttMs;
    this.freeAt = 0;
  }
  /** Waits until `bytes` more have crossed the link. */
  async take(bytes) {
    if (!this.bytesPerMs) return;
    const now = performance.now();
    this.freeAt = Math.max(now, this.freeAt) + bytes / this.bytesPerMs;
    const wait = this.freeAt - now;
    if (wait > 1) await sleep(wait);
  }
  /** `fetch`, with the delay first and the body paced by the rate. */
  async fetch(request) {
    if (this.rttMs) await sleep(this.rttMs);
    const response = await nativeFetch(request);
    if (!this.bytesPerMs || !response.body) return response;
    const reader = response.body.getReader();
    const link = this;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        await link.take(value.byteLength);
        controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }
}

// The engine calls window.fetch with the Request its httpRequestSetup made: requests of a
// light peer cross that peer's link, anything else goes straight out.
const linkOf = new WeakMap();
window.fetch = (input, init) => {
  const link = input instanceof Request ? linkOf.get(input) : undefined;
  return link ? link.fetch(input) : nativeFetch(input, init);
};

// --- the page's lag meter, shared by its peers ---------------------------------------------
const lag = { ticks: 0, lateMs: 0, lateTicks: 0, maxMs: 0, hiddenTicks: 0 };
{
  let due = performance.now() + TICK_MS;
  setInterval(() => {
    const now = performance.now();
    if (document.visibilityState === "hidden") lag.hiddenTicks += 1;
    else {
      const late = Math.max(0, now - due);
      lag.ticks += 1;
      lag.lateMs += late;
      if (late > 100) lag.lateTicks += 1;
      lag.maxMs = Math.max(lag.maxMs, late);
    }
    due = now + TICK_MS;
  }, TICK_MS);
}

// --- one light peer ------------------------------------------------------------------------
class LightPeer {
  constructor(number) {
    this.number = number;
    this.p2p = !P2P_OFF.has(number);
    this.link = new Link(DOWN_KBPS, RTT_MS);
    this.totals = { http: 0, p2pDown: 0, p2pUp: 0 };
    this.sent = { http: 0, p2pDown: 0, p2pUp: 0, errors: 0, late: 0 };
    this.peers = new Set();
    this.errors = 0;
    this.lastError = null;
    this.segments = new Map(); // sn → { runtimeId, start, end }
    this.loaded = new Set(); // sn
    this.loading = null;
    this.retryAt = 0;
    this.position = 0;
    this.playing = false;
    this.waitingSince = null;
    this.late = 0;
    this.waitedMs = 0;
    this.heldMs = 0;
    this.advancedAt = 0; // when the live playlist last grew (performance.now())
    this.segmentsLoaded = 0;
    this.timers = [];
    this.stopped = false;
  }

  /** The engine, from this peer's own copy of its module (see `engineModule`). */
  async createCore() {
    const { Core } = await engineModule(this.number);
    const link = this.link;
    const engineConfig = coreConfig(cfg, this.p2p);
    this.core = new Core({
      ...engineConfig,
      // The peer's number rides with its WebRTC settings, so the Node.js host gives each
      // peer one UDP port for all its connections (light-host/host.mjs); a browser ignores
      // the member it does not know.
      rtcConfig: { ...engineConfig.rtcConfig, viewerfleetLightPeer: this.number },
      // The request the engine would make, tagged so window.fetch sends it over this link.
      httpRequestSetup: async (url, _range, signal, requestRange) => {
        const headers = new Headers(
          requestRange
            ? { Range: `bytes=${requestRange.start}-${requestRange.end ?? ""}` }
            : undefined,
        );
        const request = new Request(url, { headers, signal });
        linkOf.set(request, link);
        return request;
      },
    });
    this.core.addEventListener("onChunkDownloaded", (bytes, source) => {
      if (source === "http") this.totals.http += bytes;
      else this.totals.p2pDown += bytes;
    });
    this.core.addEventListener("onChunkUploaded", (bytes) => {
      this.totals.p2pUp += bytes;
    });
    this.core.addEventListener("onPeerConnect", (d) => this.peers.add(d.peerId));
    this.core.addEventListener("onPeerClose", (d) => this.peers.delete(d.peerId));
    this.core.addEventListener("onTrackerError", (d) => this.fail("tracker: " + String(d.error)));
    if (DEBUG) {
      console.log(`light peer ${this.number}: created`);
      for (const name of ["onPeerConnect", "onPeerClose", "onPeerError", "onTrackerWarning", "onTrackerError", "onSegmentError"]) {
        this.core.addEventListener(name, (d) => console.log(`light peer ${this.number}: ${name}`, JSON.stringify(d, (k, v) => (v instanceof Object && k ? String(v) : v))));
      }
    }
  }

  fail(message) {
    this.errors += 1;
    this.lastError = String(message).slice(0, 300);
  }

  async fetchText(url) {
    const response = await this.link.fetch(new Request(url));
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.text();
  }

  /** Master playlist, rendition, first media playlist, then the clocks. */
  async start() {
    if (!this.core) await this.createCore();
    const masterUrl = masterPlaylistUrl(cfg);
    const master = M3U8Parser.parseMasterPlaylist(await this.fetchText(masterUrl), masterUrl);
    this.core.setManifestResponseUrl(masterUrl);
    // As p2p-media-loader-hlsjs's SegmentManager.processMainManifest: one stream per level.
    for (const level of master.levels) {
      const missing = !level.bitrate;
      this.core.addStreamIfNoneExists({
        runtimeId: level.url,
        type: "main",
        index: generateStreamShortId({
          bitrate: level.bitrate,
          codecs: missing ? undefined : level.videoCodec,
          width: missing ? undefined : level.width,
          height: missing ? undefined : level.height,
          frameRate: missing ? undefined : level.attrs["FRAME-RATE"],
          videoRange: missing ? undefined : level.attrs["VIDEO-RANGE"],
        }),
      });
    }
    this.level = pickLevel(master.levels);
    this.core.setActiveLevelBitrate(this.level.bitrate);
    await this.refresh();
    const details = this.details;
    if (details.live) {
      const edge = this.lastEnd();
      this.position = Math.max(
        this.firstStart(),
        edge - liveSyncDurationCount(LATENCY) * details.targetduration,
      );
    } else {
      this.position = this.firstStart();
    }
    // p2p-media-loader-hlsjs: hls.js buffers only max(2 target durations, the high-demand
    // window) ahead and leaves the rest to the engine's background loader.
    this.maxBuffer = Math.max(
      2 * details.targetduration,
      this.core.getConfig().mainStream.highDemandTimeWindow,
    );
    this.core.updatePlayback(this.position, 1);
    this.lastTick = performance.now();
    this.timers.push(setInterval(() => this.tick(), TICK_MS));
    if (details.live) {
      this.timers.push(
        setInterval(
          () => this.refresh().catch((e) => this.fail("playlist: " + e)),
          details.targetduration * 1000,
        ),
      );
    }
    if (SEND_METRICS) {
      this.timers.push(setInterval(() => this.sendMetrics(false), cfg.metricsIntervalMs));
    }
  }

  /** Reads the media playlist and hands new and expired segments to the engine. */
  async refresh() {
    const url = this.level.url;
    const text = await this.fetchText(url);
    const details = M3U8Parser.parseLevelPlaylist(text, url, 0, "main", 0, null);
    if (this.stopped) return;
    this.details = details;
    const fragments = details.fragments;
    // One timeline across refreshes: a fragment already seen fixes the offset.
    const known = fragments.find((f) => this.segments.has(f.sn));
    const offset = known ? this.segments.get(known.sn).start - known.start : 0;
    const current = new Set();
    const added = [];
    fragments.forEach((fragment, index) => {
      const runtimeId = fragment.url;
      current.add(runtimeId);
      if (this.segments.has(fragment.sn)) return;
      const start = fragment.start + offset;
      const end = start + fragment.duration;
      this.segments.set(fragment.sn, { runtimeId, start, end });
      added.push({
        runtimeId,
        url: fragment.url,
        externalId: details.live ? fragment.sn : index,
        byteRange: undefined,
        startTime: start,
        endTime: end,
      });
    });
    const removed = [];
    for (const [sn, s] of this.segments) {
      if (!current.has(s.runtimeId) && !this.listedOut?.has(sn)) {
        removed.push(s.runtimeId);
        (this.listedOut ??= new Set()).add(sn);
      }
    }
    if (added.length) this.advancedAt = performance.now();
    this.core.setIsLive(details.live);
    if (added.length || removed.length) this.core.updateStream(url, added, removed);
  }

  firstStart() {
    let first = Infinity;
    for (const s of this.segments.values()) first = Math.min(first, s.start);
    return Number.isFinite(first) ? first : 0;
  }

  /** Seconds behind the live edge as hls.js estimates a player's: the playlist's end plus
   * the time since it last grew, minus the playhead. */
  liveLatency(now) {
    if (!this.details?.live || !this.playing) return null;
    return this.lastEnd() + (now - this.advancedAt) / 1000 - this.position;
  }

  lastEnd() {
    let last = 0;
    for (const s of this.segments.values()) last = Math.max(last, s.end);
    return last;
  }

  /** The segment number that holds time `t`, if the playlist had one. */
  snAt(t) {
    for (const [sn, s] of this.segments) if (s.start <= t + 1e-3 && t < s.end - 1e-3) return sn;
    return undefined;
  }

  /** Where the segments that arrived, contiguous from the playhead, end. */
  bufferedEnd() {
    let sn = this.snAt(this.position);
    let end = this.position;
    while (sn !== undefined && this.loaded.has(sn) && this.segments.has(sn)) {
      end = this.segments.get(sn).end;
      sn += 1;
    }
    return end;
  }

  tick() {
    if (this.stopped) return;
    const now = performance.now();
    const dt = (now - this.lastTick) / 1000;
    this.lastTick = now;
    const bufferedEnd = this.bufferedEnd();
    const latency = this.liveLatency(now);
    if (!this.playing) {
      this.playing = bufferedEnd > this.position;
    } else if (
      followLatencyS !== null &&
      latency !== null &&
      latency + dt < followLatencyS - FOLLOW_SLACK_S
    ) {
      // Closer to the edge than the real viewers: hold, as a later-starting player would.
      this.heldMs += dt * 1000;
    } else if (this.position + dt <= bufferedEnd) {
      this.position += dt;
      if (this.waitingSince !== null) {
        this.waitedMs += now - this.waitingSince;
        this.waitingSince = null;
      }
    } else {
      this.position = Math.max(this.position, bufferedEnd);
      if (this.waitingSince === null) {
        this.waitingSince = now;
        this.late += 1;
      }
      // A live playhead left behind the playlist jumps to its first segment, as hls.js does.
      if (this.details.live && this.snAt(this.position) === undefined) {
        const first = this.firstListed();
        if (first !== undefined && first > this.position) this.position = first;
      }
    }
    this.core.updatePlayback(this.position, 1);
    this.loadNext(now);
  }

  firstListed() {
    let first;
    for (const [sn, s] of this.segments) {
      if (this.listedOut?.has(sn)) continue;
      if (first === undefined || s.start < first) first = s.start;
    }
    return first;
  }

  /** Asks the engine for the next segment while less than the buffer length lies ahead. */
  loadNext(now) {
    if (this.loading !== null || now < this.retryAt) return;
    const bufferedEnd = this.bufferedEnd();
    if (bufferedEnd - this.position >= this.maxBuffer) return;
    const sn = this.snAt(bufferedEnd);
    if (sn === undefined || this.listedOut?.has(sn) || this.loaded.has(sn)) return;
    const segment = this.segments.get(sn);
    this.loading = sn;
    const done = () => {
      this.loaded.add(sn);
      this.segmentsLoaded += 1;
      this.loading = null;
      this.forgetOld();
    };
    const failed = (message) => {
      this.fail("segment: " + message);
      this.loading = null;
      this.retryAt = performance.now() + RETRY_MS;
    };
    // As p2p-media-loader-hlsjs's fragment loader: a segment the engine does not take (P2P
    // off) is loaded by the player itself, over HTTP, and never reaches the engine.
    if (!this.core.isSegmentLoadable(segment.runtimeId)) {
      this.httpLoad(segment.url).then(done, (e) => failed(e));
      return;
    }
    this.core
      .loadSegment(segment.runtimeId, {
        onSuccess: done,
        onError: (error) => failed(error?.type ?? error),
      })
      .catch((e) => failed(e));
  }

  /** A segment over this peer's HTTP link without the engine, its bytes counted as they come. */
  async httpLoad(url) {
    const response = await this.link.fetch(new Request(url));
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      this.totals.http += value.byteLength;
    }
  }

  /** Segments long behind the playhead and out of the playlist are no longer needed here. */
  forgetOld() {
    for (const [sn, s] of this.segments) {
      if (s.end < this.position - 60 && this.listedOut?.has(sn)) {
        this.segments.delete(sn);
        this.loaded.delete(sn);
        this.listedOut.delete(sn);
      }
    }
  }

  /** PeerTube's playback report (deltas since the last), as the player page sends it. */
  sendMetrics(keepalive) {
    if (!this.playing) return;
    const now = { ...this.totals, errors: this.errors, late: this.late };
    const body = {
      playerMode: "p2p-media-loader",
      resolution: this.level?.height,
      fps: cfg.fps ?? undefined,
      p2pEnabled: this.p2p,
      p2pPeers: this.peers.size,
      resolutionChanges: 0,
      errors: now.errors - this.sent.errors,
      bufferStalled: now.late - this.sent.late,
      downloadedBytesP2P: now.p2pDown - this.sent.p2pDown,
      downloadedBytesHTTP: now.http - this.sent.http,
      uploadedBytesP2P: now.p2pUp - this.sent.p2pUp,
      videoId: cfg.videoId,
    };
    this.sent = now;
    nativeFetch(new URL(cfg.metricsPath, location.href), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      keepalive: !!keepalive,
    }).catch((e) => this.fail("metrics: " + e));
  }

  read() {
    const waiting = this.waitingSince === null ? 0 : performance.now() - this.waitingSince;
    return {
      peer: this.number,
      httpDownBytes: this.totals.http,
      p2pDownBytes: this.totals.p2pDown,
      p2pUpBytes: this.totals.p2pUp,
      peers: this.peers.size,
      playing: this.playing,
      positionS: this.position,
      liveLatencyS: this.liveLatency(performance.now()),
      heldMs: this.heldMs,
      segmentsLoaded: this.segmentsLoaded,
      segmentsLate: this.late,
      waitedMs: this.waitedMs + waiting,
      errors: this.errors,
      lastError: this.lastError,
    };
  }

  stop() {
    if (this.stopped) return;
    if (SEND_METRICS) this.sendMetrics(true);
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    try {
      this.core?.destroy();
    } catch (e) {
      this.fail("destroy: " + e);
    }
  }
}

/** The rendition hls.js's ABR would settle on for the link: the highest whose bitrate fits
 * 70% of the rate, the lowest when none does, the highest on an unthrottled link. */
function pickLevel(levels) {
  const byRate = [...levels].sort((a, b) => a.bitrate - b.bitrate);
  if (!DOWN_KBPS) return byRate[byRate.length - 1];
  const fits = byRate.filter((l) => l.bitrate <= DOWN_KBPS * 1000 * ABR_UP_FACTOR);
  return fits.length ? fits[fits.length - 1] : byRate[0];
}

// --- the page ------------------------------------------------------------------------------
const peers = [];
const pageErrors = [];
window.addEventListener("error", (e) => pageErrors.push(String(e.message)));
for (let i = 0; i < PEERS; i++) {
  const peer = new LightPeer(FIRST + i);
  peers.push(peer);
  const delay = PEERS > 1 ? (SPREAD_MS * i) / PEERS : 0;
  // A start that fails (the origin not answering yet) is tried again until the page closes.
  const begin = () => {
    if (peer.stopped) return;
    peer.start().catch((e) => {
      peer.fail("start: " + e);
      setTimeout(begin, 2000);
    });
  };
  setTimeout(begin, delay);
}
window.addEventListener("pagehide", () => peers.forEach((p) => p.stop()));

window.viewerfleetLight = {
  /** Every peer's figures; the lag meter's worst lateness is since the previous read.
   * `follow`: the real viewers' live latency to hold the playheads at (see the top). */
  read: (follow) => {
    if (typeof follow === "number" && Number.isFinite(follow) && follow > 0) {
      followLatencyS = follow;
    }
    const meter = { ...lag };
    lag.maxMs = 0;
    return { lag: meter, peers: peers.map((p) => p.read()), errors: pageErrors.slice(-5) };
  },
  stop: () => peers.forEach((p) => p.stop()),
};
