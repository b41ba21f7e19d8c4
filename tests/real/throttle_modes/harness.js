// In-page functions of the throttling-modes test (window.H), driven by executeScript.
// Signalling goes through the test (offer -> answer -> accept, non-trickle SDP), never
// through the origin: under an HTTP throttle every request costs the configured latency.
(() => {
  const now = () => performance.now();
  const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
  const rnd = () => Math.random().toString(36).slice(2);
  // Resolves with `promise`, or rejects with `what` after `ms`.
  const within = (promise, ms, what) => Promise.race([promise,
    sleep(ms).then(() => { throw new Error(`${what} within ${ms} ms`); })]);
  const H = (window.H = {});

  // ---------- HTTP ----------
  // GET url (never cached), reading the whole body: time to the headers and to the last
  // byte, and the body's rate after its first `tail` share (what a shaped link sets, whatever
  // the latency and the first burst did).
  H.download = async (url, size, tail = 0.25) => {
    const t0 = now();
    const res = await fetch(url + (url.includes('?') ? '&' : '?') + 'r=' + rnd(), { cache: 'no-store' });
    const headersMs = now() - t0;
    const reader = res.body.getReader();
    let bytes = 0, markBytes = null, markT = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (markBytes === null && bytes >= tail * size) { markBytes = bytes; markT = now(); }
    }
    const end = now();
    const rateBps = markBytes !== null && bytes > markBytes && end > markT
      ? (bytes - markBytes) / ((end - markT) / 1000) : null;
    return { status: res.status, bytes, headersMs, totalMs: end - t0, rateBps };
  };
  // POST n bytes; the origin answers with the count it received and the rate it received
  // them at (timed at the origin, first body byte to last).
  H.upload = async (url, n) => {
    const t0 = now();
    const res = await fetch(url + '?r=' + rnd(), { method: 'POST', body: new Uint8Array(n), cache: 'no-store' });
    const answer = await res.json();
    return { status: res.status, bytes: answer.bytes, totalMs: now() - t0, rateBps: answer.rateBps };
  };

  // ---------- WebRTC data channel A -> B ----------
  const gathered = (pc) => new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    const t = setTimeout(resolve, 5000);
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); }
    });
  });
  H.rx = { bytes: 0, msgs: 0, first: 0, last: 0 };
  let arrivedFirst;
  const first = new Promise((r) => { arrivedFirst = r; });
  let awaited = null; // { bytes, resolve }: drained() waiting for that many bytes
  // A: makes the connection and the channel; returns the offer with all its candidates.
  H.offer = async () => {
    const pc = (H.pc = new RTCPeerConnection({ iceServers: [] }));
    const dc = (H.dc = pc.createDataChannel('throttle', { ordered: true }));
    dc.binaryType = 'arraybuffer';
    H.opened = new Promise((r) => dc.addEventListener('open', r));
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    return pc.localDescription.sdp;
  };
  // B: answers, and counts every message on arrival.
  H.answer = async (sdp) => {
    const pc = (H.pc = new RTCPeerConnection({ iceServers: [] }));
    pc.ondatachannel = (e) => {
      H.dc = e.channel;
      H.dc.binaryType = 'arraybuffer';
      H.dc.onmessage = (m) => {
        const t = now();
        if (!H.rx.first) { H.rx.first = t; arrivedFirst(); }
        H.rx.last = t;
        H.rx.bytes += m.data.byteLength;
        H.rx.msgs++;
        if (awaited && H.rx.bytes >= awaited.bytes) awaited.resolve();
      };
    };
    await pc.setRemoteDescription({ type: 'offer', sdp });
    await pc.setLocalDescription(await pc.createAnswer());
    await gathered(pc);
    return pc.localDescription.sdp;
  };
  H.accept = async (sdp) => {
    const t0 = now();
    await H.pc.setRemoteDescription({ type: 'answer', sdp });
    await within(H.opened, 20000, 'the data channel did not open');
    return { openMs: now() - t0 };
  };
  // A: sends 16 KB messages until stop(), refilled on `bufferedamountlow`: an application
  // that respects backpressure. The queue above SCTP is kept shallow (highWater bytes) so
  // that what is left after stop() drains within seconds even on a throttled channel.
  H.send = (highWater, lowWater) => {
    const dc = H.dc;
    const chunk = new Uint8Array(16384);
    H.tx = { queued: 0, stopped: false };
    dc.bufferedAmountLowThreshold = lowWater;
    const pump = () => {
      while (!H.tx.stopped && dc.readyState === 'open' && dc.bufferedAmount < highWater) {
        dc.send(chunk);
        H.tx.queued += chunk.byteLength;
      }
    };
    dc.onbufferedamountlow = pump;
    pump();
    return true;
  };
  H.stop = () => { H.tx.stopped = true; return { queued: H.tx.queued, bufferedAmount: H.dc.bufferedAmount }; };
  // B: resolves once `bytes` (all A queued) have arrived: the channel is then idle.
  H.drained = async (bytes, withinMs) => {
    const t0 = now();
    if (H.rx.bytes < bytes) {
      await within(new Promise((resolve) => { awaited = { bytes, resolve }; }), withinMs,
        `only ${H.rx.bytes} of the ${bytes} bytes A queued arrived`);
      awaited = null;
    }
    return { ms: now() - t0, bytes: H.rx.bytes };
  };
  // B: waits for the first message, lets the rate settle for warmupMs, then measures for
  // windowMs: bytes on arrival (data-channel payload) and candidate-pair bytes (UDP payload).
  H.measure = async (firstWithinMs, warmupMs, windowMs) => {
    const t0 = now();
    await within(first, firstWithinMs, 'no data-channel message arrived');
    const firstMs = H.rx.first - t0;
    await sleep(H.rx.first + warmupMs - now());
    const point = async () => {
      const m = await window.__rtcMeter.read();
      return { t: now(), bytes: H.rx.bytes, pair: m.pairBytesReceived };
    };
    const a = await point();
    await sleep(windowMs);
    const b = await point();
    const s = (b.t - a.t) / 1000;
    return { firstMs, windowS: s, bytes: b.bytes - a.bytes, bps: (b.bytes - a.bytes) / s, pairBps: (b.pair - a.pair) / s };
  };
  // The selected candidate pair's round-trip time (ms).
  H.rtt = async () => {
    const stats = await H.pc.getStats();
    let rtt = null;
    stats.forEach((x) => {
      if (x.type === 'transport' && x.selectedCandidatePairId) {
        const pair = stats.get(x.selectedCandidatePairId);
        if (pair && pair.currentRoundTripTime != null) rtt = pair.currentRoundTripTime * 1000;
      }
    });
    return rtt;
  };
  // B, on an idle, open channel: the page's on-arrival count and the meter's (on arrival and
  // getStats). The report must be newer than the last message: Chromium answers getStats
  // from a cache for 50 ms, and a closed channel's stats are gone.
  H.count = async () => {
    const lastArrival = performance.timeOrigin + H.rx.last;
    let meter = await window.__rtcMeter.read();
    if (meter.statsTimestamp <= lastArrival) {
      // Answered from the cache (a read less than 50 ms ago): read once more after it.
      await sleep(meter.statsTimestamp + 60 - (performance.timeOrigin + now()));
      meter = await window.__rtcMeter.read();
    }
    return { pageBytes: H.rx.bytes, pageMessages: H.rx.msgs, lastArrival, meter };
  };
})();
