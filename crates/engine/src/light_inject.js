// Loads the light peers' module (web/light.js) into a page of a site that has no light page
// of its own (a PeerTube instance): the site's own origin, so the peers fetch its playlists
// and segments and post its playback reports as its player does, with no CORS in the way.
//
// Run as an async script; arguments[0]: { config, query, sources: { light, p2pConfig, hls, engine } } — the
// settings the refsite page would carry, the page's query string, and the module texts.
// Each module becomes a blob: URL; light.js's imports are pointed at them, and each light
// peer gets a copy of the engine of its own (a URL of its own), as on refsite's page.
const setup = arguments[0];
const blobUrl = (text) => URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
const hls = blobUrl(setup.sources.hls);
const p2pConfig = blobUrl(setup.sources.p2pConfig);
const engine = blobUrl(setup.sources.engine);
window.viewerfleetLightSetup = {
  config: setup.config,
  query: setup.query,
  engineUrl: () => blobUrl(setup.sources.engine),
};
const light = setup.sources.light
  .replace('from "hls.js"', `from "${hls}"`)
  .replace('from "p2p-media-loader-core"', `from "${engine}"`)
  .replace('from "/web/p2p-config.js"', `from "${p2pConfig}"`);
const script = document.createElement("script");
script.type = "module";
script.src = blobUrl(light);
(document.head || document.documentElement).appendChild(script);
arguments[arguments.length - 1](true);
