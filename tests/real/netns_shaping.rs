//! P2P and HTTP throughput between viewer slots, with and without tc shaping.
//!
//! Two real headless Chromiums, each in its own slot of a `NetnsFleet`, open a WebRTC data
//! channel (signalled through a tiny axum server that runs in the fleet's target
//! namespace) and the receiver measures the rate; then the receiver downloads over HTTP
//! from the same server. With the PeerTube 2023 profile (2000 kbit/s down, 300 kbit/s up)
//! the WebRTC rate (bytes on the selected ICE candidate pair, from `getStats`) must sit
//! within 10% of the 300 kbit/s upload limit and the HTTP rate within 10% of the
//! 2000 kbit/s download limit; unshaped both must be far above. tc rates count IP packets.
//!
//! Needs root, iproute2, chromium and chromium-driver.

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::response::Html;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use viewerfleet::fleet::netns::NetnsFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::scenario::fleet::NetnsFleetPlan;
use viewerfleet::model::scenario::{LinkProfile, NetworkProfile, ViewerPlan};
use viewerfleet::viewer::ViewerSlot;

const PAGE: &str = r#"<!doctype html><html><head><title>slots</title></head><body><script>
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function post(box, msg) { await fetch('/mbox/' + box, {method: 'POST', body: JSON.stringify(msg)}); }
async function take(box) {
  for (;;) {
    const list = await (await fetch('/mbox/' + box)).json();
    if (list.length) return JSON.parse(list[0]);
    await sleep(100);
  }
}
function gathered(pc) {
  return new Promise(res => {
    if (pc.iceGatheringState === 'complete') return res();
    pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') res(); });
    setTimeout(res, 5000);
  });
}
async function pairStats(pc) {
  const stats = await pc.getStats();
  let pair = null;
  stats.forEach(s => { if (s.type === 'transport' && s.selectedCandidatePairId) pair = stats.get(s.selectedCandidatePairId); });
  if (!pair) return {bytesReceived: 0, bytesSent: 0};
  const local = stats.get(pair.localCandidateId), remote = stats.get(pair.remoteCandidateId);
  return {bytesReceived: pair.bytesReceived, bytesSent: pair.bytesSent,
          local: local && local.address, remote: remote && remote.address};
}
window.sender = async (room, seconds) => {
  const pc = new RTCPeerConnection({iceServers: []});
  window.keep = pc;
  const dc = pc.createDataChannel('bulk', {ordered: true});
  dc.binaryType = 'arraybuffer';
  // Listen before negotiating: on a fast link the channel can open before the answer's
  // setRemoteDescription promise resolves.
  const opened = new Promise(res => { dc.onopen = res; if (dc.readyState === 'open') res(); });
  await pc.setLocalDescription(await pc.createOffer());
  await gathered(pc);
  await post(room + '-offer', pc.localDescription);
  await pc.setRemoteDescription(await take(room + '-answer'));
  await Promise.race([opened, sleep(15000).then(() => {
    throw new Error('data channel did not open within 15 s: ice ' + pc.iceConnectionState +
      ', connection ' + pc.connectionState + ', channel ' + dc.readyState);
  })]);
  const chunk = new Uint8Array(16384);
  dc.bufferedAmountLowThreshold = 256 * 1024;
  const end = performance.now() + seconds * 1000;
  let sent = 0;
  while (performance.now() < end) {
    if (dc.readyState !== 'open') break;  // the receiver has measured and closed
    while (dc.readyState === 'open' && dc.bufferedAmount < 1024 * 1024) { dc.send(chunk); sent += chunk.length; }
    await new Promise(res => { dc.onbufferedamountlow = res; setTimeout(res, 100); });
  }
  const pair = await pairStats(pc);
  pc.close();  // drop what is still buffered: it would compete with the next measurement
  return {sent, pair};
};
window.receiver = async (room, warmup, seconds) => {
  const pc = new RTCPeerConnection({iceServers: []});
  window.keep = pc;
  const channel = new Promise(res => { pc.ondatachannel = e => res(e.channel); });
  await pc.setRemoteDescription(await take(room + '-offer'));
  await pc.setLocalDescription(await pc.createAnswer());
  await gathered(pc);
  await post(room + '-answer', pc.localDescription);
  const dc = await Promise.race([channel, sleep(15000).then(() => { throw new Error('no data channel within 15 s'); })]);
  dc.binaryType = 'arraybuffer';
  let bytes = 0;
  dc.onmessage = e => { bytes += e.data.byteLength; };
  const deadline = performance.now() + 15000;
  while (bytes === 0) { if (performance.now() > deadline) throw new Error('no data within 15 s'); await sleep(20); }
  await sleep(warmup * 1000);
  const b0 = bytes, s0 = await pairStats(pc), t0 = performance.now();
  await sleep(seconds * 1000);
  const b1 = bytes, s1 = await pairStats(pc), t1 = performance.now();
  const ms = t1 - t0;
  pc.close();
  return {app_kbit: (b1 - b0) * 8 / ms, transport_kbit: (s1.bytesReceived - s0.bytesReceived) * 8 / ms,
          local: s1.local, remote: s1.remote, seconds: ms / 1000};
};
window.download = async (url, warmup, seconds) => {
  const response = await fetch(url, {cache: 'no-store'});
  const reader = response.body.getReader();
  const start = performance.now();
  let bytes = 0, b0 = null, t0 = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) throw new Error('body ended after ' + bytes + ' bytes, before the measurement did');
    bytes += value.length;
    const now = performance.now();
    if (b0 === null && now - start >= warmup * 1000) { b0 = bytes; t0 = now; }
    if (b0 !== null && now - t0 >= seconds * 1000) {
      reader.cancel();
      return {kbit: (bytes - b0) * 8 / (now - t0), seconds: (now - t0) / 1000};
    }
  }
};
</script></body></html>"#;

type Mailboxes = Arc<Mutex<HashMap<String, Vec<String>>>>;

fn app() -> Router {
    let boxes: Mailboxes = Arc::default();
    Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route(
            "/mbox/{name}",
            get(
                |State(boxes): State<Mailboxes>, Path(name): Path<String>| async move {
                    let list = boxes.lock().unwrap().remove(&name).unwrap_or_default();
                    Json(list)
                },
            )
            .post(
                |State(boxes): State<Mailboxes>, Path(name): Path<String>, body: String| async move {
                    boxes.lock().unwrap().entry(name).or_default().push(body);
                },
            ),
        )
        .route(
            "/blob",
            get(|Query(q): Query<HashMap<String, u64>>| async move {
                // Endless unless `bytes` is given: the page stops reading when it has measured.
                let total = q.get("bytes").copied().unwrap_or(u64::MAX / 2);
                let chunk = Bytes::from(vec![7u8; 64 * 1024]);
                let count = total.div_ceil(chunk.len() as u64);
                let stream = futures::stream::iter(
                    (0..count).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
                );
                Body::from_stream(stream)
            }),
        )
        .with_state(boxes)
}

/// A WebDriver session over plain HTTP (the W3C protocol, as the engine speaks it).
struct Session {
    http: reqwest::Client,
    base: String,
}

impl Session {
    async fn create(slot: &ViewerSlot, profile_dir: &std::path::Path) -> anyhow::Result<Self> {
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--mute-audio",
            "--allow-loopback-in-peer-connection",
            "--disable-features=WebRtcHideLocalIpsWithMdns",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--user-data-dir={}", profile_dir.display()));
        args.extend(slot.extra_args.iter().cloned());
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "timeouts": {"script": 60000, "pageLoad": 30000},
            "goog:chromeOptions": {"binary": slot.chrome_binary, "args": args}
        }}});
        let http = reqwest::Client::new();
        let reply: Value = http
            .post(format!("{}session", slot.webdriver_url))
            .json(&caps)
            .timeout(Duration::from_secs(60))
            .send()
            .await?
            .json()
            .await?;
        let id = reply["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no session for {}: {reply}", slot.node))?;
        Ok(Self {
            base: format!("{}session/{id}", slot.webdriver_url),
            http,
        })
    }

    async fn goto(&self, url: &str) -> anyhow::Result<()> {
        let reply: Value = self
            .http
            .post(format!("{}/url", self.base))
            .json(&json!({ "url": url }))
            .timeout(Duration::from_secs(40))
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(
            reply["value"].is_null(),
            "navigation to {url} failed: {reply}"
        );
        Ok(())
    }

    /// Calls an async page function; its result or `{error}` comes back.
    async fn call(&self, expr: &str) -> anyhow::Result<Value> {
        let script = format!(
            "const done = arguments[arguments.length - 1]; ({expr}).then(done, e => done({{error: String(e)}}));"
        );
        let reply: Value = self
            .http
            .post(format!("{}/execute/async", self.base))
            .json(&json!({ "script": script, "args": [] }))
            .timeout(Duration::from_secs(70))
            .send()
            .await?
            .json()
            .await?;
        let value = reply["value"].clone();
        anyhow::ensure!(value.get("error").is_none(), "{expr} failed: {value}");
        Ok(value)
    }

    async fn delete(self) {
        let _ = self
            .http
            .delete(&self.base)
            .timeout(Duration::from_secs(20))
            .send()
            .await;
    }
}

fn profile(down: u32, up: u32) -> Option<NetworkProfile> {
    Some(NetworkProfile {
        link: LinkProfile {
            download_kbps: Some(down),
            upload_kbps: Some(up),
            latency_ms: None,
        },
        apply: None,
    })
}

fn viewer(index: u32, network: Option<NetworkProfile>) -> ViewerPlan {
    ViewerPlan {
        index,
        start_after: Duration::ZERO,
        p2p: true,
        network,
        browser: index,
        access: Default::default(),
    }
}

/// What one pair of slots measured.
#[derive(Debug)]
struct PairRates {
    p2p_app_kbit: f64,
    p2p_transport_kbit: f64,
    http_kbit: f64,
}

/// Opens two slots, runs a data channel from the first to the second, then an HTTP
/// download into the second; every session and slot is released before returning.
async fn measure_pair(
    fleet: &NetnsFleet,
    first_index: u32,
    network: Option<NetworkProfile>,
    room: &str,
) -> anyhow::Result<PairRates> {
    let origin = fleet.target_origin();
    let profiles = tempfile::tempdir()?;
    let mut slots = Vec::new();
    let mut sessions = Vec::new();
    let result = async {
        for i in 0..2 {
            let slot = fleet.open_viewer(&viewer(first_index + i, network)).await?;
            slots.push(slot.clone());
            let dir = profiles.path().join(format!("p{i}"));
            let session = Session::create(&slot, &dir).await?;
            session.goto(&format!("{origin}/")).await?;
            sessions.push(session);
        }
        let send = format!("window.sender('{room}', 9)");
        let receive = format!("window.receiver('{room}', 2, 5)");
        let (sent, received) = tokio::join!(sessions[0].call(&send), sessions[1].call(&receive));
        let (sent, received) = (sent?, received?);
        eprintln!("{room}: sender {sent}\n{room}: receiver {received}");
        // The peers talked over their own slot addresses, not loopback.
        assert_eq!(received["remote"].as_str(), slots[0].address.as_deref());
        assert_eq!(received["local"].as_str(), slots[1].address.as_deref());
        let download = sessions[1]
            .call(&format!("window.download('{origin}/blob', 1, 5)"))
            .await?;
        eprintln!("{room}: download {download}");
        anyhow::Ok(PairRates {
            p2p_app_kbit: received["app_kbit"].as_f64().unwrap_or(0.0),
            p2p_transport_kbit: received["transport_kbit"].as_f64().unwrap_or(0.0),
            http_kbit: download["kbit"].as_f64().unwrap_or(0.0),
        })
    }
    .await;
    for session in sessions {
        session.delete().await;
    }
    for slot in &slots {
        fleet.close_viewer(slot).await;
    }
    result
}

fn within(measured: f64, limit: f64, tolerance: f64) -> bool {
    (measured - limit).abs() <= limit * tolerance
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tc_shapes_webrtc_and_http_per_slot() {
    let fleet = NetnsFleet::start(&NetnsFleetPlan::default())
        .await
        .expect("the netns fleet needs root, iproute2, chromium and chromium-driver");
    let placement = fleet.target_placement();
    let ns = placement.netns.clone().unwrap();
    let listener = viewerfleet::netns::bind_tcp_in_netns(&ns, placement.listen).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app())
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });

    // The controller reaches the server only from inside its namespace.
    let (status, body) = viewerfleet::netns::http_get_in_netns(
        &ns,
        &format!("{}/", fleet.target_origin()),
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("window.sender"));

    let shaped = measure_pair(&fleet, 0, profile(2000, 300), "shaped").await;
    let unshaped = measure_pair(&fleet, 2, None, "unshaped").await;

    let _ = stop_tx.send(());
    let _ = server.await;
    fleet.shutdown().await.unwrap();
    fleet.shutdown().await.unwrap();
    let (_, name_prefix) = fleet.names();
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains(name_prefix),
        "namespaces left after shutdown"
    );

    let shaped = shaped.unwrap();
    let unshaped = unshaped.unwrap();
    eprintln!("shaped {shaped:?}\nunshaped {unshaped:?}");
    assert!(
        within(shaped.p2p_transport_kbit, 300.0, 0.10),
        "WebRTC rate {:.0} kbit/s is not within 10% of the 300 kbit/s upload limit",
        shaped.p2p_transport_kbit
    );
    // The data channel's payload is less: DTLS and SCTP headers, and SCTP retransmissions.
    assert!(
        shaped.p2p_app_kbit <= 300.0 && shaped.p2p_app_kbit >= 0.6 * 300.0,
        "data channel payload rate {:.0} kbit/s is not between 60% and 100% of 300 kbit/s",
        shaped.p2p_app_kbit
    );
    assert!(
        within(shaped.http_kbit, 2000.0, 0.10),
        "HTTP rate {:.0} kbit/s is not within 10% of the 2000 kbit/s download limit",
        shaped.http_kbit
    );
    assert!(
        unshaped.p2p_transport_kbit > 10.0 * 300.0,
        "unshaped WebRTC ran only {:.0} kbit/s",
        unshaped.p2p_transport_kbit
    );
    assert!(
        unshaped.http_kbit > 10.0 * 2000.0,
        "unshaped HTTP ran only {:.0} kbit/s",
        unshaped.http_kbit
    );
}
