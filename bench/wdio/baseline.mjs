// The baseline users would otherwise write: WebdriverIO creating the same sessions and
// polling the same stats script against the same WebDriver endpoint.
// node baseline.mjs HOST PORT SESSIONS HOLD_SECONDS INTERVAL_SECONDS PARALLEL
import { remote } from 'webdriverio';

const [host, port, sessions, holdS, intervalS, parallel] = process.argv.slice(2);
const n = Number(sessions);
const readScript = 'return window.__vf || null;';
const browsers = [];
let created = 0;
let next = 0;
const createdAt = [];

async function worker() {
  while (next < n) {
    next += 1;
    const b = await remote({
      hostname: host, port: Number(port), path: '/', logLevel: 'silent',
      capabilities: { browserName: 'chrome' }, connectionRetryCount: 0,
    });
    await b.url(`http://${host}:${port}/w/bench`);
    browsers.push(b);
    created += 1;
    createdAt.push(performance.now());
  }
}
await Promise.all(Array.from({ length: Number(parallel) }, worker));
const end = performance.now() + Number(holdS) * 1000;
const polls = browsers.map(async (b) => {
  while (performance.now() < end) {
    await b.execute(readScript);
    await new Promise((r) => setTimeout(r, Number(intervalS) * 1000));
  }
});
await Promise.all(polls);
await Promise.all(browsers.map((b) => b.deleteSession()));
const span = (Math.max(...createdAt) - Math.min(...createdAt)) / 1000;
console.log(JSON.stringify({ created, creationsPerSecond: span > 0 ? (created - 1) / span : null }));
