//! A fast WebDriver endpoint for measuring the controller itself: it answers session
//! creation, navigation, script calls and the ChromeDriver vendor commands in microseconds
//! (plus a configurable latency and failure rate), and returns player stats that say the
//! video plays. Also serves a viewer page and an exporter so a whole `run` can target it.
//! Used by the controller benchmark and by the fast (browser-free) tests of the run engine.
//!
//! A session asked for with `webSocketUrl: true` also gets a WebDriver BiDi socket
//! (`/session/<id>/bidi`) that answers what a browser shared by several viewers is asked:
//! user contexts, tabs, per-tab CDP, navigation, stats reads by `script.evaluate`, closes;
//! it can crash a tab (an `Inspector.targetCrashed` event, then silence) or the whole
//! browser (the socket closes) after a number of reads.

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Behaviour of the stub.
#[derive(Debug, Clone, Default)]
pub struct StubConfig {
    /// Added to every WebDriver answer.
    pub latency: Duration,
    /// Share of session creations answered with `session not created`, 0..1.
    pub session_failure_rate: f64,
    /// Stop answering stats reads of a session after this many reads (simulates a lost
    /// browser); `None` = never.
    pub reads_before_loss: Option<u64>,
    /// Grant `webSocketUrl` (WebDriver BiDi) when a session asks for it; `true` is what
    /// ChromeDriver and Grid 4 do. Set `no_bidi` to act like an endpoint without BiDi.
    pub no_bidi: bool,
    /// BiDi: the first session's socket closes, as when its browser crashes, once
    /// `browser_crash_tabs` of its tabs (at least one) have each had this many stats reads
    /// and one is read again; later sessions live on. Counting per tab keeps every viewer
    /// of the browser in it when it goes, however late the last one's tab opened.
    pub browser_crash_after_reads: Option<u64>,
    /// See `browser_crash_after_reads`.
    pub browser_crash_tabs: usize,
    /// BiDi: the first tab opened crashes after this many of its stats reads.
    pub tab_crash_after_reads: Option<u64>,
    /// Time a session takes to be created (a hub's queue, a browser's start-up). As on a
    /// Grid, a creation goes on when the client stops waiting for it, and the session
    /// exists afterwards.
    pub create_delay: Duration,
    /// List live sessions in `/status` with the capabilities they were asked with, as a Grid
    /// hub does, so a controller can find and delete sessions it no longer waited for.
    pub list_sessions: bool,
    /// The n-th vendor command (CDP through `goog/cdp/execute`, …) of each session is answered
    /// once as a Grid node answers when its connection to the driver broke: `unknown
    /// error`, "Failed to execute request (...)". `None` = never.
    pub forwarding_failure_at: Option<u64>,
}

/// Request counters, for the benchmark's figures and for tests.
#[derive(Debug, Default)]
pub struct StubCounters {
    pub sessions_created: AtomicU64,
    pub sessions_refused: AtomicU64,
    pub sessions_deleted: AtomicU64,
    pub script_calls: AtomicU64,
    pub other_calls: AtomicU64,
    /// BiDi sockets opened, tabs opened in user contexts, tabs closed, stats reads.
    pub bidi_sockets: AtomicU64,
    pub tabs_opened: AtomicU64,
    pub tabs_closed: AtomicU64,
    pub bidi_reads: AtomicU64,
    pub browsers_crashed: AtomicU64,
    /// Commands answered with a forwarding failure (`forwarding_failure_at`).
    pub forwarding_failures: AtomicU64,
    pub tabs_crashed: AtomicU64,
    /// The Chromium arguments (`goog:chromeOptions.args`) of every session created.
    pub session_args: Mutex<Vec<Vec<String>>>,
}

struct StubState {
    config: StubConfig,
    counters: Arc<StubCounters>,
    next_id: AtomicU64,
    reads: Mutex<std::collections::HashMap<String, u64>>,
    /// Deterministic failure pattern: every n-th creation fails.
    failure_every: Option<u64>,
    /// Ids handed out to BiDi user contexts and tabs.
    next_bidi: AtomicU64,
    /// Whether the one browser crash and the one tab crash already happened.
    crashed_browser: std::sync::atomic::AtomicBool,
    crashed_tab: std::sync::atomic::AtomicBool,
    /// Live sessions and the capabilities they were asked with (`list_sessions`).
    live: Mutex<std::collections::BTreeMap<String, Value>>,
    /// Commands per session, for `forwarding_failure_at`.
    commands: Mutex<std::collections::HashMap<String, u64>>,
}

pub fn app(config: StubConfig, counters: Arc<StubCounters>) -> Router {
    let failure_every = (config.session_failure_rate > 0.0)
        .then(|| (1.0 / config.session_failure_rate).round().max(1.0) as u64);
    let state = Arc::new(StubState {
        config,
        counters,
        next_id: AtomicU64::new(1),
        reads: Mutex::default(),
        failure_every,
        next_bidi: AtomicU64::new(1),
        crashed_browser: Default::default(),
        crashed_tab: Default::default(),
        live: Mutex::default(),
        commands: Mutex::default(),
    });
    Router::new()
        .route("/status", get(status))
        .route("/session", post(new_session))
        .route("/session/{id}", delete(delete_session))
        .route("/session/{id}/execute/sync", post(execute))
        .route("/session/{id}/bidi", get(bidi))
        .route("/session/{id}/url", get(current_url).post(other))
        .route("/session/{id}/{*rest}", post(command).get(other_get))
        .route("/w/{video}", get(page))
        .route("/videos/embed/{video}", get(page))
        .route("/api/v1/videos/{video}", get(video))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// A running stub; it stops when dropped.
pub struct Stub {
    addr: std::net::SocketAddr,
    counters: Arc<StubCounters>,
    task: tokio::task::JoinHandle<()>,
}

impl Stub {
    /// Serves the stub on `addr` (port 0: a free port) on the current runtime.
    pub async fn serve(addr: std::net::SocketAddr, config: StubConfig) -> std::io::Result<Stub> {
        let counters = Arc::new(StubCounters::default());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let router = app(config, counters.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Stub {
            addr,
            counters,
            task,
        })
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `http://ADDR/`: the stub as a WebDriver endpoint or Grid hub.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn counters(&self) -> &StubCounters {
        &self.counters
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StubCounters {
    /// One line: sessions created, refused, deleted; script and other calls.
    pub fn summary(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} sessions created, {} refused, {} deleted, {} script calls, {} other calls; BiDi: {} sockets, {} tabs opened, {} closed",
            get(&self.sessions_created),
            get(&self.sessions_refused),
            get(&self.sessions_deleted),
            get(&self.script_calls),
            get(&self.other_calls),
            get(&self.bidi_sockets),
            get(&self.tabs_opened),
            get(&self.tabs_closed)
        )
    }
}

async fn pause(state: &StubState) {
    if !state.config.latency.is_zero() {
        tokio::time::sleep(state.config.latency).await;
    }
}

/// Shaped like Selenium Grid 4's `/status`, so the `grid` fleet accepts the stub as a hub;
/// with `list_sessions`, every live session in a slot of its own.
async fn status(State(s): State<Arc<StubState>>) -> Json<Value> {
    let slots: Vec<Value> = if s.config.list_sessions {
        let live = s.live.lock().unwrap_or_else(|e| e.into_inner());
        live.iter()
            .map(|(id, caps)| json!({"session": {"sessionId": id, "capabilities": caps}, "stereotype": {"browserName": "chrome"}}))
            .collect()
    } else {
        Vec::new()
    };
    Json(json!({"value": {
        "ready": true,
        "message": "viewerfleet WebDriver stub",
        "nodes": [{"uri": "http://stub.invalid", "availability": "UP", "maxSessions": 1_000_000, "slots": slots}]
    }}))
}

/// The capabilities a session was asked with (`alwaysMatch` and the first `firstMatch`), as
/// a Grid echoes them in `/status` (the stub and the fake cloud's hubs alike).
pub(crate) fn requested_capabilities(body: &Value) -> Value {
    let caps = &body["capabilities"];
    let mut merged = caps["alwaysMatch"].clone();
    if !merged.is_object() {
        merged = json!({});
    }
    if let (Some(first), Some(m)) = (
        caps["firstMatch"].get(0).and_then(|f| f.as_object()),
        merged.as_object_mut(),
    ) {
        for (k, v) in first {
            m.insert(k.clone(), v.clone());
        }
    }
    merged
}

async fn new_session(
    State(s): State<Arc<StubState>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> impl IntoResponse {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    pause(&s).await;
    if s.config.create_delay.is_zero() {
        return create_session(&s, &headers, &body);
    }
    // As on a Grid, the creation goes on when the client stops waiting.
    let delay = s.config.create_delay;
    let task = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        create_session(&s, &headers, &body)
    });
    task.await.unwrap_or_else(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"value": {"error": "unknown error", "message": "stub: creation task failed", "stacktrace": ""}})),
        )
    })
}

fn create_session(
    s: &StubState,
    headers: &axum::http::HeaderMap,
    body: &Value,
) -> (StatusCode, Json<Value>) {
    let n = s.next_id.fetch_add(1, Ordering::Relaxed);
    if s.failure_every.is_some_and(|every| n % every == 0) {
        s.counters.sessions_refused.fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(
                json!({"value": {"error": "session not created", "message": "stub: refused by the configured failure rate", "stacktrace": ""}}),
            ),
        );
    }
    s.counters.sessions_created.fetch_add(1, Ordering::Relaxed);
    let args = body["capabilities"]["alwaysMatch"]["goog:chromeOptions"]["args"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    s.counters
        .session_args
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(args);
    let id = format!("stub{n:08}");
    if s.config.list_sessions {
        s.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), requested_capabilities(body));
    }
    let mut capabilities = json!({"browserName": "chrome", "browserVersion": "stub"});
    let asked = |caps: &Value| caps["webSocketUrl"] == json!(true);
    let wants_bidi = asked(&body["capabilities"]["alwaysMatch"])
        || body["capabilities"]["firstMatch"]
            .as_array()
            .is_some_and(|all| all.iter().any(asked));
    if wants_bidi && !s.config.no_bidi {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        capabilities["webSocketUrl"] = json!(format!("ws://{host}/session/{id}/bidi"));
    }
    (
        StatusCode::OK,
        Json(json!({"value": {"sessionId": id, "capabilities": capabilities}})),
    )
}

async fn delete_session(State(s): State<Arc<StubState>>, Path(id): Path<String>) -> Json<Value> {
    pause(&s).await;
    s.counters.sessions_deleted.fetch_add(1, Ordering::Relaxed);
    s.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    s.reads
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    Json(json!({"value": null}))
}

/// The player stats of the `reads`-th read: growing with every read so rates are non-zero
/// and deterministic, 100 kB HTTP and 300 kB P2P per read, one 240p segment of 400 kB
/// asked for and loaded per read, video track deselected.
fn stats(reads: u64) -> Value {
    json!({
        "httpBytes": reads * 100_000, "httpSource": "network-info",
        "p2pDownBytes": reads * 300_000, "p2pUpBytes": reads * 250_000, "peers": 2,
        "networkInfoSeen": true, "hasVideo": true, "playing": true,
        "currentTime": reads as f64, "firstFrameMs": 500.0, "stalls": 0, "stalledMs": 0.0,
        "resolution": 240, "droppedFrames": 0, "errors": 0, "lastError": null,
        "videoTrackOff": true,
        "segments": {"requested": reads, "loaded": reads, "bytes": reads * 400_000,
                     "byHeight": {"240": reads}}
    })
}

async fn bidi(
    State(s): State<Arc<StubState>>,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> impl IntoResponse {
    upgrade.on_upgrade(move |socket| bidi_session(s, id, socket))
}

/// One session's BiDi socket, as ChromeDriver's mapper answers a shared browser.
async fn bidi_session(s: Arc<StubState>, session: String, mut socket: WebSocket) {
    s.counters.bidi_sockets.fetch_add(1, Ordering::Relaxed);
    // This socket's browser crashes after that many reads, if it is the first to.
    let crash_after = s
        .config
        .browser_crash_after_reads
        .filter(|_| !s.crashed_browser.swap(true, Ordering::SeqCst));
    let mut tab_reads: std::collections::HashMap<String, u64> = Default::default();
    let mut crashed_tab: Option<String> = None;
    while let Some(Ok(message)) = socket.recv().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(command) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        pause(&s).await;
        let params = &command["params"];
        let context = params["context"]
            .as_str()
            .or_else(|| params["target"]["context"].as_str())
            .map(str::to_string)
            .or_else(|| {
                params["session"]
                    .as_str()
                    .and_then(|c| c.strip_prefix("cdp-"))
                    .map(str::to_string)
            });
        if context.is_some() && context == crashed_tab {
            continue; // A crashed tab never answers.
        }
        let next = || s.next_bidi.fetch_add(1, Ordering::Relaxed);
        let result = match command["method"].as_str().unwrap_or_default() {
            "session.subscribe" => Ok(json!({"subscription": "stub"})),
            "browsingContext.getTree" => Ok(
                json!({"contexts": [{"context": format!("initial-{session}"), "userContext": "default"}]}),
            ),
            "browser.createUserContext" => Ok(json!({"userContext": format!("uc{}", next())})),
            "browsingContext.create" => {
                if params["userContext"].is_string() {
                    s.counters.tabs_opened.fetch_add(1, Ordering::Relaxed);
                }
                Ok(json!({"context": format!("tab{}", next())}))
            }
            "goog:cdp.getSession" => {
                Ok(json!({"session": format!("cdp-{}", context.clone().unwrap_or_default())}))
            }
            "goog:cdp.sendCommand" => Ok(json!({"result": {}, "session": params["session"]})),
            "browsingContext.navigate" => Ok(json!({"navigation": "n", "url": params["url"]})),
            "browsingContext.close" => {
                if context.as_deref().is_some_and(|c| c.starts_with("tab")) {
                    s.counters.tabs_closed.fetch_add(1, Ordering::Relaxed);
                }
                Ok(json!({}))
            }
            "browser.removeUserContext" => Ok(json!({})),
            "script.evaluate" => {
                let tab = context.clone().unwrap_or_default();
                let n = {
                    let reads = tab_reads.entry(tab.clone()).or_insert(0);
                    *reads += 1;
                    *reads
                };
                s.counters.bidi_reads.fetch_add(1, Ordering::Relaxed);
                s.counters.script_calls.fetch_add(1, Ordering::Relaxed);
                // This read goes past the limit, and enough tabs were read that often.
                let crash_browser = crash_after.is_some_and(|limit| {
                    n > limit
                        && tab_reads.values().filter(|&&reads| reads >= limit).count()
                            >= s.config.browser_crash_tabs.max(1)
                });
                if crash_browser {
                    s.counters.browsers_crashed.fetch_add(1, Ordering::Relaxed);
                    return; // The socket closes: the browser is gone.
                }
                let crash_this_tab = s.config.tab_crash_after_reads.is_some_and(|l| n > l)
                    && !s.crashed_tab.swap(true, Ordering::SeqCst);
                if crash_this_tab {
                    s.counters.tabs_crashed.fetch_add(1, Ordering::Relaxed);
                    crashed_tab = Some(tab.clone());
                    let event = json!({"type": "event", "method": "goog:cdp.Inspector.targetCrashed",
                        "params": {"event": "Inspector.targetCrashed", "params": {}, "session": format!("cdp-{tab}")}});
                    let _ = socket.send(Message::Text(event.to_string().into())).await;
                    continue;
                }
                Ok(
                    json!({"type": "success", "result": {"type": "string", "value": stats(n).to_string()}}),
                )
            }
            other => Err(format!("unknown command {other}")),
        };
        let answer = match result {
            Ok(result) => json!({"id": command["id"], "type": "success", "result": result}),
            Err(message) => {
                json!({"id": command["id"], "type": "error", "error": "unknown command", "message": message})
            }
        };
        if socket
            .send(Message::Text(answer.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn execute(State(s): State<Arc<StubState>>, Path(id): Path<String>) -> impl IntoResponse {
    pause(&s).await;
    s.counters.script_calls.fetch_add(1, Ordering::Relaxed);
    let reads = {
        let mut map = s.reads.lock().unwrap_or_else(|e| e.into_inner());
        let r = map.entry(id).or_insert(0);
        *r += 1;
        *r
    };
    if s.config
        .reads_before_loss
        .is_some_and(|limit| reads > limit)
    {
        return (
            StatusCode::NOT_FOUND,
            Json(
                json!({"value": {"error": "invalid session id", "message": "stub: browser gone", "stacktrace": ""}}),
            ),
        );
    }
    (StatusCode::OK, Json(json!({ "value": stats(reads) })))
}

/// A command of a session: answered like `other`, unless it is the one
/// `forwarding_failure_at` fails.
async fn command(
    State(s): State<Arc<StubState>>,
    Path((id, rest)): Path<(String, String)>,
) -> axum::response::Response {
    if let Some(at) = s.config.forwarding_failure_at {
        let n = {
            let mut map = s.commands.lock().unwrap_or_else(|e| e.into_inner());
            let n = map.entry(id.clone()).or_insert(0);
            *n += 1;
            *n
        };
        if n == at {
            pause(&s).await;
            s.counters
                .forwarding_failures
                .fetch_add(1, Ordering::Relaxed);
            let message =
                format!("Failed to execute request (POST http://stub.invalid/session/{id}/{rest})");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"value": {"error": "unknown error", "message": message, "stacktrace": ""}})),
            )
                .into_response();
        }
    }
    other(State(s)).await.into_response()
}

async fn other(State(s): State<Arc<StubState>>) -> Json<Value> {
    pause(&s).await;
    s.counters.other_calls.fetch_add(1, Ordering::Relaxed);
    Json(json!({"value": null}))
}

async fn other_get(State(s): State<Arc<StubState>>) -> Json<Value> {
    other(State(s)).await
}

/// fantoccini reads the current URL before every navigation.
async fn current_url(State(s): State<Arc<StubState>>) -> Json<Value> {
    pause(&s).await;
    s.counters.other_calls.fetch_add(1, Ordering::Relaxed);
    Json(json!({"value": "about:blank"}))
}

async fn page() -> axum::response::Html<&'static str> {
    axum::response::Html("<!doctype html><title>stub viewer page</title><video></video>")
}

/// PeerTube's description of a video, which the controller checks before a fleet starts.
async fn video(Path(video): Path<String>) -> Json<Value> {
    Json(json!({"uuid": video, "name": "stub video", "isLive": false}))
}

async fn metrics(State(s): State<Arc<StubState>>) -> String {
    let reads = s.counters.script_calls.load(Ordering::Relaxed);
    format!(
        "peertube_playback_http_downloaded_bytes_total{{p2pEnabled=\"true\"}} {}\npeertube_playback_p2p_downloaded_bytes_total{{p2pEnabled=\"true\"}} {}\n",
        reads * 100_000,
        reads * 300_000
    )
}
