// viewerfleet's stats probe, installed before the page's own scripts (CDP
// Page.addScriptToEvaluateOnNewDocument) on PeerTube's embed page and on refsite's.
//
// It collects, in window.__vf:
// - playback: first frame, stalls and stalled time from the <video> element's events
//   (listened to in the capture phase: media events do not bubble), errors;
// - the player's own figures from its `network-info` event (HTTP and P2P bytes, peers);
// - HTTP by outcome, for every media-segment request the page makes with fetch or XHR:
//   bytes of responses read to the end, the announced length (Content-Length) of responses
//   the page aborted, and of those still in flight, plus requests still waiting for their
//   headers — so the origin's bytes can be reconciled with what the players counted;
// - segment bytes from Resource Timing, for players whose P2P engine is off (the loader
//   then fires no byte events);
// - an independent P2P count from WebRTC itself: every RTCPeerConnection the page makes is
//   kept, and its data channels' bytesReceived/bytesSent are summed once a second (a
//   closed connection keeps its last figures), on the receiving side as delivered bytes;
// - per peer connection that got an answer, whether ICE connected and over which candidate
//   types (host, srflx, prflx, relay) and family, or failed, with the remote's candidate
//   addresses (vf.ice.links): what the report's connectivity table is made of;
// - the P2P engine's own peer events (closes, errors, P2P segment failures and timeouts),
//   when the page exposes the engine as videojsPlayer.p2pEngine (refsite does);
// - the media segments the player asked for and got, by rendition height, from hls.js's
//   own events when the page exposes it as videojsPlayer.hls (refsite does): what
//   `calibrate` compares between browser profiles (segments over time, ABR choices);
// - page lag: how late a timer every 250 ms fires. A page starved of CPU runs its timers,
//   its player and its P2P engine late alike, so this shows a starved viewer on any fleet,
//   a foreign Grid included, without asking its host.
(() => {
  if (window.__vf) return;
  const vf = window.__vf = {
    http: 0, p2pDown: 0, p2pUp: 0, peers: 0, netinfo: false,
    firstFrameMs: null, stalls: 0, stalledMs: 0, waitingSince: null, errors: 0, lastError: null,
    rtBytes: 0, hooked: false,
    seg: { completed: 0, responses: 0, abortedAnnounced: 0, abortedDelivered: 0, inFlight: 0, waiting: 0, aborts: 0, abortedWaiting: 0 },
    rtc: { received: 0, sent: 0, connections: 0 },
    engine: { hooked: false, peerCloses: 0, peerErrors: 0, p2pTimeouts: 0, p2pFailures: 0 },
    frags: { hooked: false, requested: 0, loaded: 0, bytes: 0, byHeight: {} },
    lag: { ticks: 0, lateMs: 0, lateTicks: 0, maxMs: 0, hiddenTicks: 0 },
  };
  const isSegment = (name) => /\.(ts|m4s|mp4|m4a|aac)(\?|$)/.test(name) || /\/segments?\//.test(name);

  // --- Resource Timing ---------------------------------------------------------------------
  try { performance.setResourceTimingBufferSize(1000000); } catch (e) {}
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if (isSegment(e.name)) vf.rtBytes += (e.encodedBodySize || e.transferSize || 0);
      }
    }).observe({ type: 'resource', buffered: true });
  } catch (e) {}

  // --- HTTP by outcome: fetch ----------------------------------------------------------------
  const seg = vf.seg;
  const announced = (headers) => Number(headers && headers.get && headers.get('content-length')) || 0;
  // A response body passed through unchanged, counting how it ends.
  const countedBody = (body, length) => {
    const reader = body.getReader();
    let delivered = 0, open = true;
    seg.inFlight += length;
    const end = (aborted) => {
      if (!open) return;
      open = false;
      seg.inFlight -= length;
      if (aborted) { seg.abortedAnnounced += length; seg.abortedDelivered += delivered; seg.aborts += 1; }
      else { seg.completed += delivered; seg.responses += 1; }
    };
    return new ReadableStream({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) { end(false); controller.close(); return; }
          delivered += value.byteLength;
          controller.enqueue(value);
        } catch (e) { end(true); controller.error(e); }
      },
      cancel(reason) { end(true); return reader.cancel(reason); },
    });
  };
  const nativeFetch = window.fetch;
  if (typeof nativeFetch === 'function') {
    window.fetch = function (input, init) {
      const url = typeof input === 'string' ? input : (input && input.url) || String(input);
      if (!isSegment(url)) return nativeFetch.apply(this, arguments);
      seg.waiting += 1;
      return nativeFetch.apply(this, arguments).then((response) => {
        seg.waiting -= 1;
        if (!response.body) return response;
        return new Response(countedBody(response.body, announced(response.headers)), {
          status: response.status, statusText: response.statusText, headers: response.headers,
        });
      }, (err) => { seg.waiting -= 1; seg.aborts += 1; seg.abortedWaiting += 1; throw err; });
    };
  }

  // --- HTTP by outcome: XHR (hls.js's own loader, e.g. with P2P off) -------------------------
  const nativeOpen = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, url) {
    if (isSegment(String(url))) {
      let length = 0, delivered = 0, state = 'waiting';
      seg.waiting += 1;
      const settle = (next) => {
        if (state === 'waiting') seg.waiting -= 1;
        if (state === 'flight') seg.inFlight -= length;
        state = next;
      };
      this.addEventListener('readystatechange', () => {
        if (this.readyState === 2 && state === 'waiting') {
          length = Number(this.getResponseHeader('content-length')) || 0;
          settle('flight');
          seg.inFlight += length;
        }
      });
      this.addEventListener('progress', (e) => { delivered = e.loaded; });
      this.addEventListener('load', () => { if (state !== 'done') { seg.completed += delivered; seg.responses += 1; settle('done'); } });
      const aborted = () => {
        if (state === 'done') return;
        if (state === 'waiting') seg.abortedWaiting += 1;
        seg.abortedAnnounced += length; seg.abortedDelivered += delivered; seg.aborts += 1;
        settle('done');
      };
      this.addEventListener('abort', aborted);
      this.addEventListener('error', aborted);
      this.addEventListener('timeout', aborted);
    }
    return nativeOpen.apply(this, arguments);
  };

  // --- page lag ------------------------------------------------------------------------------
  // Each tick is due LAG_TICK_MS after the previous one ran; its lateness is how long the
  // page's event loop could not run it. lateTicks counts ticks later than LAG_LATE_MS, and
  // maxMs the worst since the last stats read (read.js resets it). A hidden page's timers
  // are throttled by the browser on purpose: those ticks are counted apart.
  const LAG_TICK_MS = 250, LAG_LATE_MS = 100;
  let lagDue = performance.now() + LAG_TICK_MS;
  const lagTick = () => {
    const t = performance.now();
    const late = Math.max(0, t - lagDue);
    const lag = vf.lag;
    if (document.hidden) {
      lag.hiddenTicks += 1;
    } else {
      lag.ticks += 1;
      lag.lateMs += late;
      if (late > LAG_LATE_MS) lag.lateTicks += 1;
      if (late > lag.maxMs) lag.maxMs = late;
    }
    lagDue = t + LAG_TICK_MS;
    setTimeout(lagTick, LAG_TICK_MS);
  };
  setTimeout(lagTick, LAG_TICK_MS);

  // --- WebRTC's own count ------------------------------------------------------------------
  // Also, per connection that got an answer (its remote description: the peer is known),
  // whether ICE connected and over which candidate pair, or failed: vf.ice.links. The
  // remote's candidate addresses (from its description, or trickled) tell the controller
  // which viewer, and so which network class, it was.
  vf.ice = { links: [] };
  const MAX_LINKS = 300;
  const candidateAddresses = (sdp) => {
    const out = [];
    for (const line of String(sdp || '').split(/\r?\n/)) {
      const m = /^a=candidate:\S+ \d+ \S+ \d+ (\S+) \d+ typ (\S+)/.exec(line);
      if (m && !out.includes(m[1])) out.push(m[1]);
    }
    return out;
  };
  const selectedPair = async (pc) => {
    const stats = await pc.getStats();
    let pair = null;
    stats.forEach((s) => { if (s.type === 'transport' && s.selectedCandidatePairId) pair = stats.get(s.selectedCandidatePairId); });
    if (!pair) stats.forEach((s) => { if (!pair && s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded') pair = s; });
    if (!pair) return null;
    const local = stats.get(pair.localCandidateId) || {}, remote = stats.get(pair.remoteCandidateId) || {};
    const address = remote.address || remote.ip || null;
    return {
      local_type: local.candidateType || null, remote_type: remote.candidateType || null,
      protocol: local.protocol || remote.protocol || null, remote_address: address,
      family: address ? (address.includes(':') ? 'ipv6' : 'ipv4') : null,
    };
  };
  const follow = async (c) => {
    const link = c.link, pc = c.pc;
    if (!link || link.state === 'connected') return;
    const state = pc.connectionState || pc.iceConnectionState;
    if (state === 'connected' || pc.iceConnectionState === 'connected' || pc.iceConnectionState === 'completed') {
      link.state = 'connected';
      link.connected_after_s = Math.round((performance.now() / 1000 - link.at_s) * 10) / 10;
      try { Object.assign(link, await selectedPair(pc) || {}); } catch (e) {}
    } else if (link.state === 'pending' && (state === 'failed' || state === 'closed' || pc.signalingState === 'closed')) {
      link.state = 'failed';
    }
  };
  const NativePC = window.RTCPeerConnection;
  if (typeof NativePC === 'function') {
    const connections = [];
    const Counted = function (...args) {
      const pc = new NativePC(...args);
      const c = { pc, received: 0, sent: 0, link: null };
      connections.push(c);
      vf.rtc.connections += 1;
      const answered = () => {
        if (c.link) return;
        c.link = { at_s: performance.now() / 1000, state: 'pending', remote: candidateAddresses(pc.remoteDescription && pc.remoteDescription.sdp) };
        vf.ice.links.push(c.link);
        if (vf.ice.links.length > MAX_LINKS) vf.ice.links.shift();
      };
      const setRemote = pc.setRemoteDescription;
      pc.setRemoteDescription = function () {
        const done = setRemote.apply(pc, arguments);
        Promise.resolve(done).then(answered, () => {});
        return done;
      };
      const addCandidate = pc.addIceCandidate;
      pc.addIceCandidate = function (candidate) {
        const line = candidate && (candidate.candidate || (typeof candidate === 'string' ? candidate : ''));
        const found = candidateAddresses('a=' + String(line || '').replace(/^a=/, ''));
        if (c.link) for (const a of found) if (!c.link.remote.includes(a)) c.link.remote.push(a);
        return addCandidate.apply(pc, arguments);
      };
      const onChange = () => { follow(c).catch(() => {}); };
      pc.addEventListener('connectionstatechange', onChange);
      pc.addEventListener('iceconnectionstatechange', onChange);
      return pc;
    };
    Counted.prototype = NativePC.prototype;
    Object.setPrototypeOf(Counted, NativePC);
    window.RTCPeerConnection = Counted;
    const poll = async () => {
      for (const c of connections) {
        if (c.link && c.link.state === 'pending') { try { await follow(c); } catch (e) {} }
        if (c.pc.connectionState === 'closed' && c.final) continue;
        try {
          const stats = await c.pc.getStats();
          let received = 0, sent = 0;
          stats.forEach((s) => {
            if (s.type === 'data-channel') { received += s.bytesReceived || 0; sent += s.bytesSent || 0; }
          });
          // Channels that closed drop out of getStats: keep the highest figures seen.
          c.received = Math.max(c.received, received);
          c.sent = Math.max(c.sent, sent);
        } catch (e) {}
        if (c.pc.connectionState === 'closed') c.final = true;
      }
      vf.rtc.received = connections.reduce((a, c) => a + c.received, 0);
      vf.rtc.sent = connections.reduce((a, c) => a + c.sent, 0);
    };
    setInterval(poll, 1000);
  }

  // --- playback ------------------------------------------------------------------------------
  const now = () => performance.now();
  document.addEventListener('playing', () => {
    if (vf.firstFrameMs === null) vf.firstFrameMs = now();
    if (vf.waitingSince !== null) { vf.stalledMs += now() - vf.waitingSince; vf.waitingSince = null; }
  }, true);
  document.addEventListener('waiting', () => {
    if (vf.firstFrameMs !== null && vf.waitingSince === null) { vf.stalls += 1; vf.waitingSince = now(); }
  }, true);
  document.addEventListener('error', (ev) => {
    if (ev.target && ev.target.tagName === 'VIDEO') {
      vf.errors += 1;
      const err = ev.target.error;
      vf.lastError = err ? ('media error ' + err.code + ': ' + (err.message || '')) : 'media error';
    }
  }, true);
  window.addEventListener('error', (ev) => { vf.lastError = String(ev.message || 'script error'); });

  // --- the player's interface ----------------------------------------------------------------
  const onInfo = (a, b) => {
    const d = (b && b.http) ? b : (a && a.http) ? a : (a && a.detail && a.detail.http) ? a.detail : null;
    if (!d) return;
    vf.netinfo = true;
    vf.http = Number(d.http.downloaded) || 0;
    if (d.p2p) {
      vf.p2pDown = Number(d.p2p.downloaded) || 0;
      vf.p2pUp = Number(d.p2p.uploaded) || 0;
      vf.peers = Number(d.p2p.peersP2POnly !== undefined ? d.p2p.peersP2POnly : d.p2p.numPeers) || 0;
    }
  };
  const hookEngine = (engine) => {
    if (!engine || typeof engine.addEventListener !== 'function' || vf.engine.hooked) return;
    vf.engine.hooked = true;
    engine.addEventListener('onPeerClose', () => { vf.engine.peerCloses += 1; });
    engine.addEventListener('onPeerError', () => { vf.engine.peerErrors += 1; });
    // A segment a peer did not deliver: on a slow peer, "bytes-receiving-timeout" (the
    // engine then destroys the peer after p2pErrorRetries of them, with chunks it had
    // already counted as uploaded).
    engine.addEventListener('onSegmentError', (d) => {
      if (!d || d.downloadSource !== 'p2p') return;
      vf.engine.p2pFailures += 1;
      if (d.error && d.error.type === 'bytes-receiving-timeout') vf.engine.p2pTimeouts += 1;
    });
  };
  // Main-stream fragments (audio-only or subtitle fragments of other playlists aside).
  const hookHls = (hls) => {
    if (!hls || typeof hls.on !== 'function' || vf.frags.hooked) return false;
    vf.frags.hooked = true;
    const f = vf.frags;
    hls.on('hlsFragLoading', (_e, d) => { if (d && d.frag && d.frag.type === 'main') f.requested += 1; });
    hls.on('hlsFragLoaded', (_e, d) => {
      const frag = d && d.frag;
      if (!frag || frag.type !== 'main') return;
      const level = hls.levels && hls.levels[frag.level];
      const height = String((level && level.height) || 0);
      f.loaded += 1;
      f.bytes += (frag.stats && frag.stats.loaded) || 0;
      f.byHeight[height] = (f.byHeight[height] || 0) + 1;
    });
    return true;
  };
  let tries = 0;
  const hook = () => {
    tries += 1;
    const p = window.videojsPlayer;
    if (p && typeof p.on === 'function') {
      if (!vf.hooked) {
        p.on('network-info', onInfo);
        vf.hooked = true;
        hookEngine(p.p2pEngine);
      }
      // The player object may get its hls.js instance a moment later (or never: a player
      // that does not expose hls.js is not asked for a minute).
      if (hookHls(p.hls) || vf.frags.hooked || tries > 300) return;
    }
    setTimeout(hook, 200);
  };
  hook();
})();
