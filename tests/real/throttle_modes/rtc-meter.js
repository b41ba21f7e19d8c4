// The test's own receiver-side WebRTC meter (not the product's probe), installed with
// Viewer::add_init_script so it runs before the page's scripts. It subclasses
// RTCPeerConnection and keeps two independent counts of what arrived:
//  - on arrival: the bytes of every data-channel `message` event (addEventListener, so
//    the page's own handlers do not matter);
//  - getStats: data-channel bytesReceived/bytesSent and candidate-pair bytesReceived/
//    bytesSent (UDP payload: SCTP/DTLS framing and retransmissions included), summed over
//    the page's connections and pairs.
//
// window.__rtcMeter.read() -> Promise<{pcs, arrivedBytes, arrivedMessages, dcBytesReceived,
//   dcBytesSent, pairBytesReceived, pairBytesSent, statsTimestamp}>; statsTimestamp is the
//   newest data-channel stats' time (ms since the epoch).
//
// Chromium answers getStats from a cache for 50 ms and drops a channel's stats once it is
// closed (measured, Chromium 156): compare the two counts on an open, idle channel, with a
// report newer than the last message.
(() => {
  if (window.__rtcMeter || !window.RTCPeerConnection) return;
  const Native = window.RTCPeerConnection;
  const nativeCreateDataChannel = Native.prototype.createDataChannel;
  const pcs = [];
  const arrived = { bytes: 0, messages: 0 };
  const size = (d) => (typeof d === 'string' ? new TextEncoder().encode(d).length
    : d instanceof Blob ? d.size : d.byteLength || 0);
  const watch = (ch) => {
    if (ch && !ch.__meterWatched) {
      Object.defineProperty(ch, '__meterWatched', { value: true });
      ch.addEventListener('message', (m) => { arrived.bytes += size(m.data); arrived.messages++; });
    }
    return ch;
  };
  class RTCPeerConnection extends Native {
    constructor(...args) {
      super(...args);
      pcs.push(this);
      this.addEventListener('datachannel', (e) => watch(e.channel));
    }
    createDataChannel(...args) { return watch(nativeCreateDataChannel.apply(this, args)); }
  }
  window.RTCPeerConnection = RTCPeerConnection;
  window.__rtcMeter = {
    async read() {
      const t = { pcs: pcs.length, arrivedBytes: arrived.bytes, arrivedMessages: arrived.messages,
        dcBytesReceived: 0, dcBytesSent: 0, pairBytesReceived: 0, pairBytesSent: 0, statsTimestamp: 0 };
      const reports = await Promise.all(pcs.map((pc) => pc.getStats()));
      for (const report of reports) {
        report.forEach((x) => {
          if (x.type === 'data-channel') {
            t.dcBytesReceived += x.bytesReceived || 0;
            t.dcBytesSent += x.bytesSent || 0;
            t.statsTimestamp = Math.max(t.statsTimestamp, x.timestamp || 0);
          } else if (x.type === 'candidate-pair') {
            t.pairBytesReceived += x.bytesReceived || 0;
            t.pairBytesSent += x.bytesSent || 0;
          }
        });
      }
      return t;
    },
  };
})();
