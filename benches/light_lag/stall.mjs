// Preloaded into each light-peer host by `cargo bench --bench light_lag`
// (NODE_OPTIONS=--import=…/stall.mjs): blocks the host's JavaScript thread the way a host short
// of CPU is blocked — its timers, its engines' tasks and the data-channel callbacks queued by
// libdatachannel's threads all wait — without burning the CPU a busy loop would.
//
//   VIEWERFLEET_LIGHT_STALL="min_ms,max_ms,gap_min_ms,gap_max_ms"
//
// blocks for a uniform random min..max ms, then runs for gap_min..gap_max ms, and again.
// Unset or empty: nothing is blocked (the bench's baseline runs with the same preload).
const spec = process.env.VIEWERFLEET_LIGHT_STALL ?? "";
if (spec.trim() !== "") {
  const [min, max, gapMin, gapMax] = spec.split(",").map(Number);
  if (![min, max, gapMin, gapMax].every((v) => Number.isFinite(v) && v >= 0) || max < min || gapMax < gapMin) {
    console.error(`VIEWERFLEET_LIGHT_STALL=${spec}: expected min_ms,max_ms,gap_min_ms,gap_max_ms`);
    process.exit(2);
  }
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const between = (a, b) => a + Math.random() * (b - a);
  const next = () =>
    setTimeout(() => {
      Atomics.wait(cell, 0, 0, between(min, max));
      next();
    }, between(gapMin, gapMax)).unref();
  next();
  console.error(`light host: stalls of ${min}-${max} ms every ${gapMin}-${gapMax} ms (bench)`);
}
