//! HTTP routes of refsite, PeerTube's paths where PeerTube has one:
//! `/videos/embed/<uuid>` (player page), `/static/streaming-playlists/hls/<uuid>/…` (HLS),
//! `/api/v1/metrics/playback` (players' reports), `/api/v1/config` (the STUN servers players
//! get, as PeerTube's `webrtc.stunServers`), `/metrics` (Prometheus), `/tracker/socket`
//! (WebTorrent tracker), plus `/` (index), `/api/v1/videos` (JSON list) and `/web/…` (the
//! player's JavaScript from `web/`). `app` builds the router without a socket, for tests.

use super::counting::CountingBody;
use super::page;
use super::playback::parse_report;
use super::stats::{ServedKind, SiteStats, NO_VIDEO};
use super::tracker::{serve_connection, Tracker, MAX_MESSAGE_BYTES};
use super::{Video, VideoKind};
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::StreamExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Everything the handlers share.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub stats: Arc<SiteStats>,
    pub tracker: Arc<Tracker>,
    pub videos: Arc<Vec<Video>>,
    pub web: super::web::WebFiles,
    pub metrics_interval: Duration,
    pub cancel: CancellationToken,
    /// PeerTube's `webrtc.stun_servers`: what players get as `iceServers`.
    pub stun_servers: Arc<Vec<String>>,
    /// Networks whose playback reports and tracker announces are taken (all when empty).
    pub reports_from: Arc<Vec<(std::net::IpAddr, u8)>>,
}

impl AppState {
    fn video(&self, id: &str) -> Option<&Video> {
        self.videos.iter().find(|v| v.id == id)
    }
}

/// The router.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/videos/embed/{id}", get(embed))
        .route("/w/{id}", get(embed))
        .route("/videos/light/{id}", get(light))
        .route("/web/{*path}", get(web_file))
        .route("/static/streaming-playlists/hls/{id}/{*path}", get(media))
        .route("/api/v1/metrics/playback", post(playback))
        .route("/api/v1/videos", get(video_list))
        .route("/api/v1/videos/{id}", get(video_details))
        .route("/api/v1/config", get(server_config))
        .route("/metrics", get(metrics))
        .route("/tracker/socket", get(tracker_socket))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            reports_only_from_the_fleet,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            count_request,
        ))
        .with_state(state)
}

/// Classifies a request path for `refsite_http_requests_total{kind}`.
fn kind_of(path: &str) -> ServedKind {
    if path.starts_with("/static/streaming-playlists/") {
        if path.ends_with(".ts") {
            ServedKind::Segment
        } else if path.ends_with(".m3u8") {
            ServedKind::Playlist
        } else {
            ServedKind::Other
        }
    } else if path == "/"
        || path.starts_with("/videos/embed/")
        || path.starts_with("/videos/light/")
        || path.starts_with("/w/")
    {
        ServedKind::Page
    } else if path.starts_with("/web/") {
        ServedKind::Static
    } else if path.starts_with("/api/") {
        ServedKind::Api
    } else if path == "/metrics" {
        ServedKind::Metrics
    } else if path == "/tracker/socket" {
        ServedKind::Tracker
    } else {
        ServedKind::Other
    }
}

async fn count_request(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let kind = kind_of(req.uri().path());
    state.stats.add_request(kind);
    if matches!(
        kind,
        ServedKind::Page | ServedKind::Playlist | ServedKind::Segment
    ) {
        if let Some(ConnectInfo(addr)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
            state.stats.saw_client(addr.ip());
        }
    }
    next.run(req).await
}

/// Playback reports and tracker sockets from outside `reports_from` are refused (403): they
/// would change the run's ground truth or its swarm.
async fn reports_only_from_the_fleet(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let guarded = path == "/api/v1/metrics/playback" || path == "/tracker/socket";
    if guarded && !state.reports_from.is_empty() {
        let client = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip());
        let allowed = client.is_some_and(|ip| {
            state
                .reports_from
                .iter()
                .any(|&(net, len)| crate::model::net::cidr_contains(net, len, ip))
        });
        if !allowed {
            if path != "/tracker/socket" {
                state.stats.add_rejected_playback();
            }
            let body = serde_json::json!({
                "status": 403,
                "error": "this site takes playback reports and tracker announces from the run's fleet only",
            });
            return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
        }
    }
    next.run(req).await
}

fn counted(
    state: &AppState,
    data: Bytes,
    video: &str,
    kind: ServedKind,
    content_type: &'static str,
    cache: &'static str,
) -> Response {
    let body = CountingBody::new(data, state.stats.clone(), video, kind);
    let mut resp = Response::new(Body::new(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    resp
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, what).into_response()
}

async fn index(State(state): State<AppState>) -> Response {
    let html = page::index_html(&state.videos);
    counted(
        &state,
        Bytes::from(html),
        NO_VIDEO,
        ServedKind::Page,
        "text/html; charset=utf-8",
        "no-store",
    )
}

async fn embed(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    page(&state, &id, page::PageKind::Embed).await
}

/// The light peers' page (viewerfleet's own path: PeerTube has no such page).
async fn light(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    page(&state, &id, page::PageKind::Light).await
}

async fn page(state: &AppState, id: &str, kind: page::PageKind) -> Response {
    let Some(video) = state.video(id) else {
        return not_found(format!("no video {id}; see / for the list"));
    };
    match page::page_html(
        kind,
        &state.web,
        video,
        state.metrics_interval,
        &state.stun_servers,
    )
    .await
    {
        Ok(html) => counted(
            state,
            Bytes::from(html),
            &video.id,
            ServedKind::Page,
            "text/html; charset=utf-8",
            "no-store",
        ),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// PeerTube's server configuration, the part a player reads: `webrtc.stunServers`, and
/// whether and how often it reports playback (`openTelemetry.metrics`).
async fn server_config(State(state): State<AppState>) -> Response {
    axum::Json(serde_json::json!({
        "webrtc": { "stunServers": *state.stun_servers },
        "openTelemetry": { "metrics": {
            "enabled": true,
            "playbackStatsInterval": state.metrics_interval.as_millis() as u64,
        }},
    }))
    .into_response()
}

async fn web_file(State(state): State<AppState>, Path(path): Path<String>) -> Response {
    let Some(content_type) = page::servable_web_path(&path) else {
        return not_found(format!("/web/{path} is not served"));
    };
    match state.web.read(&path).await {
        Ok(data) => counted(
            &state,
            Bytes::from(data.into_owned()),
            NO_VIDEO,
            ServedKind::Static,
            content_type,
            "no-cache",
        ),
        Err(_) => not_found(format!("/web/{path} not found")),
    }
}

/// A `Range: bytes=a-b` request header, resolved against a length.
fn parse_range(headers: &HeaderMap, len: usize) -> Option<Result<(usize, usize), ()>> {
    let value = headers.get(header::RANGE)?.to_str().ok()?;
    let spec = value.strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None; // multiple ranges: serve the whole file
    }
    let (a, b) = spec.split_once('-')?;
    let range = match (a.trim(), b.trim()) {
        ("", suffix) => suffix
            .parse::<usize>()
            .ok()
            .map(|n| (len.saturating_sub(n), len.saturating_sub(1))),
        (start, "") => start
            .parse::<usize>()
            .ok()
            .map(|s| (s, len.saturating_sub(1))),
        (start, end) => match (start.parse::<usize>(), end.parse::<usize>()) {
            (Ok(s), Ok(e)) => Some((s, e.min(len.saturating_sub(1)))),
            _ => None,
        },
    };
    Some(match range {
        Some((s, e)) if s <= e && s < len => Ok((s, e)),
        _ => Err(()),
    })
}

async fn media(
    State(state): State<AppState>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let Some(video) = state.video(&id) else {
        return not_found(format!("no video {id}"));
    };
    let safe = !path.is_empty()
        && !path.split('/').any(|c| c.is_empty() || c.starts_with('.'))
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
    let is_segment = path.ends_with(".ts");
    let is_playlist = path.ends_with(".m3u8");
    if !safe || !(is_segment || is_playlist) {
        return not_found(format!("no file {path}"));
    }
    let data = if video.kind == VideoKind::Live && path == "master.m3u8" {
        Bytes::from(super::media::live_master_playlist())
    } else {
        match tokio::fs::read(video.dir.join(&path)).await {
            Ok(d) => Bytes::from(d),
            Err(_) => return not_found(format!("no file {path} (live segments expire)")),
        }
    };
    let (kind, content_type) = if is_segment {
        (ServedKind::Segment, "video/mp2t")
    } else {
        (ServedKind::Playlist, "application/vnd.apple.mpegurl")
    };
    // Nothing cached by browsers: every byte a player counts crossed the origin's socket.
    let len = data.len();
    match parse_range(&headers, len) {
        None => counted(&state, data, &video.id, kind, content_type, "no-store"),
        Some(Ok((start, end))) => {
            let mut resp = counted(
                &state,
                data.slice(start..=end),
                &video.id,
                kind,
                content_type,
                "no-store",
            );
            *resp.status_mut() = StatusCode::PARTIAL_CONTENT;
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")) {
                resp.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            resp
        }
        Some(Err(())) => {
            let mut resp = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                resp.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            resp
        }
    }
}

async fn playback(State(state): State<AppState>, body: Bytes) -> Response {
    match parse_report(&body, |id| state.video(id).is_some()) {
        Ok(report) => match state.stats.add_playback(report) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => {
                state.stats.add_rejected_playback();
                let body = serde_json::json!({"status": 429, "error": e.to_string()});
                (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response()
            }
        },
        Err(e) => {
            state.stats.add_rejected_playback();
            tracing::debug!("playback report refused: {e}");
            let body = serde_json::json!({"status": 400, "error": e.to_string()});
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
    }
}

async fn video_list(State(state): State<AppState>) -> Response {
    let list: Vec<_> = state
        .videos
        .iter()
        .map(|v| {
            serde_json::json!({
                "uuid": v.id, "kind": v.kind.as_str(), "isLive": v.kind == VideoKind::Live,
                "embedPath": format!("/videos/embed/{}", v.id),
                "playlistUrl": format!("/static/streaming-playlists/hls/{}/master.m3u8", v.id),
            })
        })
        .collect();
    axum::Json(serde_json::json!({"total": list.len(), "data": list})).into_response()
}

/// PeerTube's `VideoDetails`, the part a player (and viewerfleet's light peers on a
/// PeerTube target) reads: the HLS playlist and the trackers, as absolute URLs on the host
/// the request named.
async fn video_details(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(video) = state.video(&id) else {
        return not_found(format!("no video {id}; see /api/v1/videos for the list"));
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    axum::Json(video_details_json(video, host)).into_response()
}

fn video_details_json(video: &Video, host: &str) -> serde_json::Value {
    let base = format!("http://{host}/static/streaming-playlists/hls/{}", video.id);
    serde_json::json!({
        "uuid": video.id,
        "isLive": video.kind == VideoKind::Live,
        "streamingPlaylists": [{
            "id": 1,
            "type": 1,
            "playlistUrl": format!("{base}/master.m3u8"),
        }],
        "trackerUrls": [
            format!("ws://{host}/tracker/socket"),
        ],
    })
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.stats.render(),
    )
        .into_response()
}

async fn tracker_socket(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(MAX_MESSAGE_BYTES * 16)
        .max_frame_size(MAX_MESSAGE_BYTES * 16)
        .on_upgrade(move |socket| async move {
            let (sink, stream) = socket.split();
            serve_connection(state.tracker.clone(), sink, stream, state.cancel.clone()).await;
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let mut h = HeaderMap::new();
        assert_eq!(parse_range(&h, 10), None);
        h.insert(header::RANGE, HeaderValue::from_static("bytes=2-4"));
        assert_eq!(parse_range(&h, 10), Some(Ok((2, 4))));
        h.insert(header::RANGE, HeaderValue::from_static("bytes=5-"));
        assert_eq!(parse_range(&h, 10), Some(Ok((5, 9))));
        h.insert(header::RANGE, HeaderValue::from_static("bytes=-3"));
        assert_eq!(parse_range(&h, 10), Some(Ok((7, 9))));
        h.insert(header::RANGE, HeaderValue::from_static("bytes=20-30"));
        assert_eq!(parse_range(&h, 10), Some(Err(())));
    }

    #[test]
    fn request_kinds() {
        assert_eq!(
            kind_of("/static/streaming-playlists/hls/x/v0/seg_001.ts"),
            ServedKind::Segment
        );
        assert_eq!(
            kind_of("/static/streaming-playlists/hls/x/master.m3u8"),
            ServedKind::Playlist
        );
        assert_eq!(kind_of("/videos/embed/x"), ServedKind::Page);
        assert_eq!(kind_of("/tracker/socket"), ServedKind::Tracker);
    }
}
