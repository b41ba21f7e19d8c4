// viewerfleet's light-peer host: runs one light page (web/light.js, as the target serves it)
// under Node.js instead of a browser tab. WebRTC comes from node-datachannel (libdatachannel),
// the tracker's WebSocket from ws, HTTP from Node's fetch; p2p-media-loader-core, hls.js's
// playlist parser and light.js itself are the target's own files, loaded over HTTP.
//
//   node host.mjs <light page URL>
//
// Protocol with the engine: one command per line on stdin, one JSON answer per line on
// stdout, prefixed with "viewerfleet-light ":
//   read [S] -> the page's window.viewerfleetLight.read(S)  (null before the script ran);
//               S: the real viewers' live latency for the peers to follow, seconds
//   stop  -> every peer closed; answers {"stopped":true} and exits
// End of stdin (the engine is gone) closes every peer and exits too. Logs go to stderr.

import { createSocket } from "node:dgram";
import { register } from "node:module";
import { createInterface } from "node:readline";
import * as polyfill from "node-datachannel/polyfill";
import { WebSocket } from "ws";

const REPLY = "viewerfleet-light ";
const pageUrl = process.argv[2];
if (!pageUrl || !/^https?:\/\//.test(pageUrl)) {
  console.error("usage: node host.mjs <light page URL (http or https)>");
  process.exit(2);
}

// Only the protocol on stdout: libraries' logs go to stderr.
const out = process.stdout;
console.log = console.info = console.debug = console.error;

/** The JSON of the page's `<script type=...>` element with this id or type. */
function scriptJson(html, attribute) {
  const start = html.search(new RegExp(`<script[^>]*${attribute}[^>]*>`));
  if (start < 0) return null;
  const open = html.indexOf(">", start) + 1;
  const close = html.indexOf("</script>", open);
  return JSON.parse(html.slice(open, close));
}

const page = await fetch(pageUrl);
if (!page.ok) {
  console.error(`light host: ${pageUrl} answered HTTP ${page.status}`);
  process.exit(1);
}
const html = await page.text();
const config = scriptJson(html, 'id="refsite-config"');
const importMap = scriptJson(html, 'type="importmap"') ?? {};
const entry = html.match(/<script type="module" src="([^"]+)"/)?.[1];
if (!config || !entry) {
  console.error(`light host: ${pageUrl} is not a light-peer page (no config or module script)`);
  process.exit(1);
}

// --- one UDP port per light peer ------------------------------------------------------------
// With a socket per connection, libjuice's one poll thread watches every socket of the host's
// peers (hundreds) for each packet; with one port per peer shared by its connections
// (libjuice's UDP mux) the host spent less CPU (BENCHMARKS.md). One port per peer, not per
// host: two peers of one host on one port could not reach each other. Peer n takes port
// PORT_BASE + n, below the kernel's ephemeral range, so the peers of one run never collide
// and a port found taken leaves its peer a socket per connection, as before.
// VIEWERFLEET_LIGHT_PORT_BASE moves the range; 0 gives every connection its own socket.
const PORT_BASE = Number(process.env.VIEWERFLEET_LIGHT_PORT_BASE ?? 20000);
const PORT_LAST = 65535;

/** Whether UDP `port` can be bound now (on every address, as libjuice binds it). */
function udpPortFree(port) {
  return new Promise((resolve) => {
    const socket = createSocket({ type: "udp6", ipv6Only: false });
    socket.once("error", () => {
      socket.close();
      resolve(false);
    });
    socket.bind(port, () => socket.close(() => resolve(true)));
  });
}

const pageParams = new URL(pageUrl).searchParams;
const firstPeer = Number(pageParams.get("first") ?? 0);
const pagePeers = Number(pageParams.get("peers") ?? 1);
/** Light peer number -> its UDP port. */
const peerPorts = new Map();
if (PORT_BASE > 0 && Number.isInteger(firstPeer) && Number.isInteger(pagePeers)) {
  for (let peer = firstPeer; peer < firstPeer + pagePeers; peer++) {
    const port = PORT_BASE + peer;
    if (port <= PORT_LAST && (await udpPortFree(port))) peerPorts.set(peer, port);
  }
}

// --- what the page's script expects of a browser -------------------------------------------
/** Offers and answers as plain objects, as the browser's WebRTC gives them to the engine;
 * each light peer's connections on its own UDP port. */
class PeerConnection extends polyfill.RTCPeerConnection {
  constructor(config = {}) {
    const { viewerfleetLightPeer, ...rtc } = config;
    const port = peerPorts.get(viewerfleetLightPeer);
    super(
      port === undefined
        ? rtc
        : { ...rtc, enableIceUdpMux: true, portRangeBegin: port, portRangeEnd: port },
    );
  }
  async createOffer(...args) {
    const d = await super.createOffer(...args);
    return { type: d.type, sdp: d.sdp };
  }
  async createAnswer(...args) {
    const d = await super.createAnswer(...args);
    return { type: d.type, sdp: d.sdp };
  }
}

const listeners = new Map();
Object.assign(globalThis, {
  window: globalThis,
  self: globalThis,
  location: new URL(pageUrl),
  document: {
    visibilityState: "visible",
    getElementById: (id) =>
      id === "refsite-config" ? { textContent: JSON.stringify(config) } : null,
  },
  addEventListener: (type, listener) => {
    if (!listeners.has(type)) listeners.set(type, []);
    listeners.get(type).push(listener);
  },
  removeEventListener: () => {},
  WebSocket,
  RTCPeerConnection: PeerConnection,
  RTCSessionDescription: polyfill.RTCSessionDescription,
  RTCIceCandidate: polyfill.RTCIceCandidate,
  RTCDataChannel: polyfill.RTCDataChannel,
});
if (!globalThis.navigator) {
  globalThis.navigator = { userAgent: `Node.js/${process.version} viewerfleet-light` };
}
if (!globalThis.localStorage) {
  const items = new Map();
  globalThis.localStorage = {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => items.set(k, String(v)),
    removeItem: (k) => items.delete(k),
    clear: () => items.clear(),
  };
}
const dispatch = (type, event) => (listeners.get(type) ?? []).forEach((l) => l(event));
// A peer's stray error is the page's error (counted by light.js), not the host's end.
process.on("uncaughtException", (error) => {
  console.error("light host: uncaught", error);
  dispatch("error", { message: String(error?.message ?? error) });
});
process.on("unhandledRejection", (reason) => {
  console.error("light host: unhandled rejection", reason);
});

register("./hooks.mjs", import.meta.url, {
  data: { pageUrl, imports: importMap.imports ?? {} },
});
await import(new URL(entry, pageUrl).href);

// --- the engine's commands -------------------------------------------------------------------
let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await globalThis.viewerfleetLight?.stop();
  } catch (error) {
    console.error("light host: stopping", error);
  }
  dispatch("pagehide", {});
}

const reply = (value) => out.write(REPLY + JSON.stringify(value) + "\n");
const commands = createInterface({ input: process.stdin });
commands.on("line", async (line) => {
  const [command, argument] = line.trim().split(/\s+/, 2);
  switch (command) {
    case "read": {
      const follow = argument === undefined ? undefined : Number(argument);
      reply(globalThis.viewerfleetLight ? globalThis.viewerfleetLight.read(follow) : null);
      break;
    }
    case "stop":
      await stop();
      reply({ stopped: true });
      out.write("", () => process.exit(0));
      break;
    default:
      console.error(`light host: unknown command ${JSON.stringify(line)}`);
  }
});
commands.on("close", async () => {
  await stop();
  process.exit(0);
});
