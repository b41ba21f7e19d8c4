//! refsite over real sockets, without browsers: the playback-metrics endpoint with good and
//! malformed bodies, the tracker over a real WebSocket with bad input, byte counting of
//! complete, ranged and abandoned downloads, the pages and their guards.

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use viewerfleet::model::kinds::VideoKind;
use viewerfleet::refsite::{self, RefsiteConfig, RefsiteError, RefsiteHandle};

use crate::support::refsite::media_cache;

async fn vod_site() -> RefsiteHandle {
    let mut config = crate::support::refsite::config();
    config.live = false;
    config.vod_length = Duration::from_secs(30);
    crate::support::refsite::start(config).await
}

fn metric(text: &str, line_prefix: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

async fn scrape(site: &RefsiteHandle) -> String {
    reqwest::get(site.metrics_url())
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn playback_metrics_accepts_peertube_body_and_refuses_malformed_ones() {
    let site = vod_site().await;
    let vod = site.video(VideoKind::Vod).unwrap().id.clone();
    let url = format!("{}/api/v1/metrics/playback", site.base_url);
    let http = reqwest::Client::new();
    let good = json!({
        "playerMode": "p2p-media-loader", "resolution": 720, "fps": 25, "p2pEnabled": true,
        "p2pPeers": 2, "resolutionChanges": 1, "errors": 0, "downloadedBytesP2P": 1000,
        "downloadedBytesHTTP": 3000, "uploadedBytesP2P": 900, "videoId": vod, "bufferStalled": 0
    });
    for _ in 0..2 {
        let r = http.post(&url).json(&good).send().await.unwrap();
        assert_eq!(r.status(), 204);
    }

    let mut bad_cases: Vec<(String, &str)> = vec![
        ("{oops".into(), "not JSON"),
        ("[]".into(), "JSON object"),
        ("\"x\"".into(), "JSON object"),
    ];
    for (field, value, named) in [
        ("downloadedBytesHTTP", json!(-5), "downloadedBytesHTTP"),
        ("downloadedBytesP2P", json!("lots"), "downloadedBytesP2P"),
        ("uploadedBytesP2P", json!(1e20), "uploadedBytesP2P"),
        ("p2pEnabled", json!(1), "p2pEnabled"),
        ("playerMode", json!(null), "playerMode"),
        (
            "videoId",
            json!("00000000-0000-4000-8000-000000000000"),
            "videoId",
        ),
        ("errors", json!(0.5), "errors"),
    ] {
        let mut body = good.clone();
        body[field] = value;
        bad_cases.push((body.to_string(), named));
    }
    for (body, reason) in &bad_cases {
        let r = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let answer: Value = r.json().await.unwrap();
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(reason), "{body}: {error}");
    }

    let text = scrape(&site).await;
    let labels = format!(
        "{{videoOrigin=\"local\",playerMode=\"p2p-media-loader\",resolution=\"720\",fps=\"25\",p2pEnabled=\"true\",videoUUID=\"{vod}\""
    );
    let get = |name: &str| metric(&text, &format!("{name}{labels}"));
    // Only the two good reports count, never a part of a refused one.
    assert_eq!(
        get("peertube_playback_http_downloaded_bytes_total"),
        Some(6000)
    );
    assert_eq!(
        get("peertube_playback_p2p_downloaded_bytes_total"),
        Some(2000)
    );
    assert_eq!(
        get("peertube_playback_p2p_uploaded_bytes_total"),
        Some(1800)
    );
    assert_eq!(
        get("peertube_playback_resolution_changes_count_total"),
        Some(2)
    );
    assert_eq!(get("peertube_playback_errors_count_total"), Some(0));
    assert_eq!(get("peertube_playback_p2p_peers"), Some(2));
    assert_eq!(
        metric(&text, "refsite_playback_reports_rejected_total "),
        Some(bad_cases.len() as u64)
    );
    assert!(text.contains("# TYPE peertube_playback_p2p_peers gauge"));
    site.shutdown().await;
}

#[tokio::test]
async fn tracker_socket_survives_bad_clients() {
    let site = vod_site().await;
    let ws_url = format!("{}/tracker/socket", site.base_url.replace("http", "ws"));
    let (mut a, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    async fn next_json(
        s: &mut (impl futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
                  + Unpin),
    ) -> Value {
        loop {
            let m = tokio::time::timeout(Duration::from_secs(5), s.next())
                .await
                .expect("reply within 5 s")
                .expect("open")
                .expect("frame");
            if let Message::Text(t) = m {
                return serde_json::from_str(t.as_str()).unwrap();
            }
        }
    }
    a.send(Message::text("not json at all")).await.unwrap();
    assert!(next_json(&mut a).await["failure reason"].is_string());
    a.send(Message::text(r#"{"action":"teleport"}"#))
        .await
        .unwrap();
    assert!(next_json(&mut a).await["failure reason"]
        .as_str()
        .unwrap()
        .contains("teleport"));
    let hash = "h".repeat(20);
    a.send(Message::text(
        json!({"action":"announce","info_hash":hash,"peer_id":"a".repeat(20),"offers":[]})
            .to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(next_json(&mut a).await["incomplete"], 1);

    // A huge frame: that client is dropped, the tracker and other clients carry on.
    let (mut big, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    let _ = big.send(Message::text("x".repeat(4 * 1024 * 1024))).await;
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(m)) = big.next().await {
            if let Message::Close(_) = m {
                break;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "oversized client was not disconnected");

    // A peer that vanishes mid-handshake: its offer reaches a, then it is gone.
    let (mut b, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    b.send(Message::text(
        json!({"action":"announce","info_hash":hash,"peer_id":"b".repeat(20),
               "offers":[{"offer":{"type":"offer","sdp":"v=0"},"offer_id":"o".repeat(20)}]})
        .to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(next_json(&mut b).await["incomplete"], 2);
    let offer = next_json(&mut a).await;
    assert_eq!(offer["peer_id"], "b".repeat(20));
    drop(b);
    a.send(Message::text(
        json!({"action":"announce","info_hash":hash,"peer_id":"a".repeat(20),
               "to_peer_id":"b".repeat(20),"answer":{"type":"answer","sdp":"v=0"},
               "offer_id":"o".repeat(20)})
        .to_string(),
    ))
    .await
    .unwrap();
    // The tracker is still answering, and b has left the swarm.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        a.send(Message::text(
            json!({"action":"scrape","info_hash":hash}).to_string(),
        ))
        .await
        .unwrap();
        let s = next_json(&mut a).await;
        if s["files"][&hash]["incomplete"] == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "b never left: {s}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let text = scrape(&site).await;
    assert_eq!(metric(&text, "refsite_tracker_peers "), Some(1));
    assert_eq!(metric(&text, "refsite_tracker_swarms "), Some(1));
    assert!(metric(&text, "refsite_tracker_announces_total ").unwrap() >= 3);
    drop(a);
    site.shutdown().await;
}

#[tokio::test]
async fn origin_counts_bytes_actually_sent() {
    let site = vod_site().await;
    let vod = site.video(VideoKind::Vod).unwrap().id.clone();
    let base = format!("{}/static/streaming-playlists/hls/{vod}", site.base_url);
    let http = reqwest::Client::new();

    let master = http
        .get(format!("{base}/master.m3u8"))
        .send()
        .await
        .unwrap();
    assert_eq!(master.headers()["cache-control"], "no-store");
    let master_len = master.bytes().await.unwrap().len() as u64;
    let seg = http
        .get(format!("{base}/v3/seg_001.ts"))
        .send()
        .await
        .unwrap();
    assert_eq!(seg.headers()["content-type"], "video/mp2t");
    let seg_len = seg.bytes().await.unwrap().len() as u64;
    assert!(seg_len > 100_000);
    let ranged = http
        .get(format!("{base}/v3/seg_001.ts"))
        .header("range", "bytes=100-1099")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().await.unwrap().len(), 1000);
    let text = scrape(&site).await;
    assert_eq!(
        metric(
            &text,
            &format!("refsite_origin_segment_bytes_total{{video=\"{vod}\"}}")
        ),
        Some(seg_len + 1000)
    );
    assert_eq!(
        metric(
            &text,
            &format!("refsite_origin_sent_bytes_total{{video=\"{vod}\",kind=\"playlist\"}}")
        ),
        Some(master_len)
    );

    // A client that reads the headers and a little, then hangs up: the unsent rest is not
    // counted. (Loopback sockets buffer megabytes in the kernel, so use a 3.5 MB file.)
    let file = "node_modules/hls.js/dist/hls.js.map";
    let full = std::fs::metadata(refsite::default_web_dir().join(file))
        .unwrap()
        .len();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(site.addr).await.unwrap();
    tcp.write_all(format!("GET /web/{file} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 2048];
    let _ = tcp.read(&mut buf).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(tcp);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = scrape(&site).await;
        if metric(
            &text,
            "refsite_origin_aborted_responses_total{kind=\"static\"}",
        ) == Some(1)
        {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "abandoned download not seen:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let partial = metric(
        &text,
        "refsite_origin_sent_bytes_total{video=\"none\",kind=\"static\"}",
    )
    .unwrap();
    eprintln!("abandoned download: {partial} of {full} bytes counted");
    // What the kernel accepted into the socket buffer (at most 512 KiB, plus the client's
    // window) counts as sent; the rest does not.
    assert!(
        partial < 1024 * 1024,
        "counted {partial} of {full} bytes for an abandoned download"
    );
    site.shutdown().await;
}

#[tokio::test]
async fn pages_and_guards() {
    let site = vod_site().await;
    let vod = site.video(VideoKind::Vod).unwrap();
    assert_eq!(
        vod.embed_url,
        format!("{}/videos/embed/{}", site.base_url, vod.id)
    );
    let page = reqwest::get(format!("{}?autoplay=1&muted=1&p2p=0&api=1", vod.embed_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(page.matches("<video").count(), 1);
    assert!(page.contains(&vod.id));
    assert!(page.contains("\"metricsIntervalMs\":15000"));
    let index = reqwest::get(&site.base_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(index.contains(&format!("/videos/embed/{}", vod.id)));
    for (path, status) in [
        ("/videos/embed/nope".to_string(), 404),
        ("/web/player.js".to_string(), 200),
        ("/web/node_modules/hls.js/dist/hls.mjs".to_string(), 200),
        ("/web/package.json".to_string(), 404),
        ("/web/node_modules/ws/index.js".to_string(), 404),
        (
            format!(
                "/static/streaming-playlists/hls/{}/..%2F..%2Fetc/passwd",
                vod.id
            ),
            404,
        ),
        (
            format!("/static/streaming-playlists/hls/{}/.complete", vod.id),
            404,
        ),
    ] {
        let r = reqwest::get(format!("{}{path}", site.base_url))
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
    }
    let list: Value = reqwest::get(format!("{}/api/v1/videos", site.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["total"], 1);
    let text = scrape(&site).await;
    assert!(metric(&text, "refsite_viewers_seen_total ").unwrap() >= 1);
    assert!(metric(&text, "refsite_http_requests_total{kind=\"page\"}").unwrap() >= 2);
    site.shutdown().await;
}

#[tokio::test]
async fn missing_front_end_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let config = RefsiteConfig::new(media_cache(), empty.path().to_path_buf());
    let err = refsite::start(config, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RefsiteError::WebDeps(_)));
    assert!(err.to_string().contains("make web-deps"), "{err}");
}

#[tokio::test]
async fn listens_on_ipv6_loopback() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("no IPv6 loopback here: skipped");
        return;
    }
    let mut config = RefsiteConfig::new(media_cache(), refsite::default_web_dir());
    config.live = false;
    config.vod_length = Duration::from_secs(30);
    config.listen = "[::1]:0".parse().unwrap();
    let site = refsite::start(config, CancellationToken::new())
        .await
        .unwrap();
    assert!(
        site.base_url.starts_with("http://[::1]:"),
        "{}",
        site.base_url
    );
    let r = reqwest::get(site.metrics_url()).await.unwrap();
    assert_eq!(r.status(), 200);
    site.shutdown().await;
}

/// The STUN servers players get, as a PeerTube instance hands its `webrtc.stun_servers`:
/// in `/api/v1/config` and in the embed page's `iceServers`; and refsite's own Binding
/// server answers with the client's address.
#[tokio::test]
async fn refsite_runs_a_stun_server_and_hands_it_to_players_as_peertube_does() {
    let mut config = RefsiteConfig::new(media_cache(), refsite::default_web_dir());
    config.live = false;
    config.vod_length = Duration::from_secs(30);
    let stun_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    config.stun = vec![format!("127.0.0.1:{stun_port}").parse().unwrap()];
    let site = refsite::start(config, CancellationToken::new())
        .await
        .expect("refsite starts");
    let url = format!("stun:127.0.0.1:{stun_port}");
    let cfg: Value = reqwest::get(format!("{}/api/v1/config", site.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cfg["webrtc"]["stunServers"], json!([url]));
    let vod = site.video(VideoKind::Vod).unwrap().embed_url.clone();
    let page = reqwest::get(&vod).await.unwrap().text().await.unwrap();
    assert!(
        page.contains(&format!("\"stunServers\":[\"{url}\"]")),
        "{page}"
    );

    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let request = viewerfleet::stun::Message::binding_request();
    client
        .send_to(&request.encode(true), ("127.0.0.1", stun_port))
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let (n, _) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .expect("a STUN answer")
        .unwrap();
    let reply = viewerfleet::stun::Message::decode(&buf[..n]).unwrap();
    assert_eq!(reply.mapped_address(), Some(client.local_addr().unwrap()));
    let metrics = scrape(&site).await;
    assert_eq!(
        metric(&metrics, "refsite_stun_binding_responses_total "),
        Some(1)
    );
    site.shutdown().await;
}

// --- a site that faces a network -------------------------------------------------------------

async fn site_with(
    limits: refsite::ServeLimits,
    reports_from: Vec<(std::net::IpAddr, u8)>,
) -> RefsiteHandle {
    let mut config = RefsiteConfig::new(media_cache(), refsite::default_web_dir());
    config.live = false;
    config.vod_length = Duration::from_secs(30);
    config.limits = limits;
    config.reports_from = reports_from;
    refsite::start(config, CancellationToken::new())
        .await
        .expect("refsite starts")
}

/// Reads until the server closes the connection; how long that took.
async fn closed_after(stream: &mut tokio::net::TcpStream, deadline: Duration) -> Duration {
    let started = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(deadline, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the server kept the connection open past {deadline:?}"
    );
    started.elapsed()
}

#[tokio::test]
async fn a_half_sent_header_and_a_stalled_connection_are_closed_after_their_timeouts() {
    let limits = refsite::ServeLimits {
        header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        max_connections: 64,
    };
    let site = site_with(limits, Vec::new()).await;
    // A slow client: half a header, then nothing (slowloris).
    let mut slow = tokio::net::TcpStream::connect(site.addr).await.unwrap();
    slow.write_all(b"GET /api/v1/videos HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let took = closed_after(&mut slow, Duration::from_secs(20)).await;
    assert!(
        took >= Duration::from_millis(900),
        "closed before the header timeout: {took:?}"
    );
    // A client that sends a request body announced far longer than what it sends.
    let mut stalled = tokio::net::TcpStream::connect(site.addr).await.unwrap();
    stalled
        .write_all(b"POST /api/v1/metrics/playback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"a\":")
        .await
        .unwrap();
    let took = closed_after(&mut stalled, Duration::from_secs(20)).await;
    assert!(
        took >= Duration::from_millis(1900),
        "closed before the idle timeout: {took:?}"
    );
    // A well-behaved client is served as before.
    let list = reqwest::get(format!("{}/api/v1/videos", site.base_url))
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let limits = refsite::ServeLimits {
        max_connections: 1,
        ..refsite::ServeLimits::default()
    };
    let site = site_with(limits, Vec::new()).await;
    // The one connection: open, and served.
    let mut first = tokio::net::TcpStream::connect(site.addr).await.unwrap();
    first
        .write_all(b"GET /api/v1/videos HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    first.read_exact(&mut buf).await.unwrap();
    assert!(buf.starts_with(b"HTTP/1.1 200"));
    // A second client's request is not answered while the first stays open ...
    let second = tokio::spawn({
        let url = format!("{}/api/v1/videos", site.base_url);
        async move { reqwest::get(url).await.map(|r| r.status()) }
    });
    tokio::task::yield_now().await;
    let waited = tokio::time::timeout(Duration::from_millis(500), async {
        while !second.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        waited.is_err(),
        "a second connection was served beyond the cap"
    );
    // ... and is once the first closes.
    drop(first);
    let status = tokio::time::timeout(Duration::from_secs(20), second)
        .await
        .expect("served after the first connection closed")
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
}

#[tokio::test]
async fn playback_reports_and_tracker_sockets_only_from_the_named_networks() {
    let others: Vec<(std::net::IpAddr, u8)> = vec![("2001:db8:0:a::".parse().unwrap(), 64)];
    let site = site_with(refsite::ServeLimits::default(), others).await;
    let vod = site.video(VideoKind::Vod).unwrap().id.clone();
    let report = json!({
        "playerMode": "p2p-media-loader", "resolution": 720, "fps": 25, "p2pEnabled": true,
        "resolutionChanges": 0, "errors": 0, "downloadedBytesP2P": 1000,
        "downloadedBytesHTTP": 3000, "uploadedBytesP2P": 900, "videoId": vod
    });
    let refused = reqwest::Client::new()
        .post(format!("{}/api/v1/metrics/playback", site.base_url))
        .json(&report)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("fleet only"));
    let ws = tokio_tungstenite::connect_async(format!(
        "{}/tracker/socket",
        site.base_url.replace("http://", "ws://")
    ))
    .await;
    assert!(
        ws.is_err(),
        "a tracker socket from outside the fleet was accepted"
    );
    // Nothing reached the counters; pages and /metrics still answer everyone.
    let text = scrape(&site).await;
    assert!(!text.contains("peertube_playback_http_downloaded_bytes_total{"));
    assert_eq!(metric(&text, "refsite_tracker_announces_total"), Some(0));
    let page = reqwest::get(&site.video(VideoKind::Vod).unwrap().embed_url)
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
}
