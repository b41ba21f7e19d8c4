// Module hooks of the light-peer host: the light page's scripts are loaded from the target
// that serves them, as a browser loads them, so Node runs the very files the player page runs
// (web/light.js, web/p2p-config.js, hls.js and p2p-media-loader-core as the target ships them).
//
// - a bare specifier the page's import map names ("hls.js", "p2p-media-loader-core") resolves
//   to the URL the map gives, against the page's URL;
// - a path or relative specifier inside a script loaded over HTTP resolves against that
//   script's URL, its query kept (`…es.min.js?light_peer=7` is a module instance of its own,
//   as it is in the browser);
// - anything over HTTP is fetched and evaluated as an ES module.

let pageUrl;
let imports = {};

export async function initialize(data) {
  pageUrl = data.pageUrl;
  imports = data.imports ?? {};
}

const overHttp = (url) => url?.startsWith("http://") || url?.startsWith("https://");

export async function resolve(specifier, context, nextResolve) {
  if (Object.hasOwn(imports, specifier)) {
    return { url: new URL(imports[specifier], pageUrl).href, shortCircuit: true };
  }
  if (overHttp(specifier)) {
    return { url: specifier, shortCircuit: true };
  }
  const fromPage = overHttp(context.parentURL);
  if (fromPage && /^(\/|\.\.?\/)/.test(specifier)) {
    return { url: new URL(specifier, context.parentURL).href, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!overHttp(url)) return nextLoad(url, context);
  const response = await fetch(url);
  if (!response.ok) {
    throw new Error(`loading ${url}: HTTP ${response.status}`);
  }
  return { format: "module", source: await response.text(), shortCircuit: true };
}
