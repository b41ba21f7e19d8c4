//! A faithful stand-in for the Hetzner Cloud API, served over loopback: the only fake in the
//! project, because nothing here may reach the real API. Tests point `HCLOUD_ENDPOINT` at it;
//! users can run it (`viewerfleet-kit fake-hcloud`) for a dry run of `plan`, `up`, `run` and
//! `down`.
//!
//! What it reproduces of today's API:
//! - JSON shapes (read back through the `hcloud` crate's models), Hetzner's error body
//!   `{"error":{"code","message","details"}}`, label rules and label selectors, unique names;
//! - `page`/`per_page` pagination with `meta.pagination`, `name` and `label_selector` filters;
//! - actions that run for a while (`action_time`) and are polled one at a time
//!   (`/actions/{id}`) or many at once (`/actions?id=…&id=…`, `/servers/actions?id=…`);
//! - servers `initializing` → `running`, and `deleting` until their delete action finished
//!   (still listed, still holding their firewalls, which then refuse deletion with
//!   `resource_in_use`);
//! - server types with per-location availability and deprecation (`catalogue`), orders of
//!   withdrawn types or unsupported locations refused;
//! - the rate limit: a bucket of `limit` requests refilled continuously (3600 per hour, one
//!   per second, by default), `RateLimit-Limit/-Remaining/-Reset` on every answer and
//!   `429 rate_limit_exceeded` when it is empty;
//! - `resource_limit_exceeded` above the project's server limit, transient 503s;
//! - faults (`Fault`): an answer lost after the request was executed (the connection is
//!   closed without a byte of answer), or a status answered before executing, a few times or
//!   forever.
//!
//! It also plays the fleet's Selenium hub under `/hub/` (`hub`), handing sessions to a
//! WebDriver endpoint, so a whole `viewerfleet run` with `fleet: hcloud` runs against it.

mod catalogue;
mod hub;
mod load;
mod selector;

pub use load::NodeLoadModel;

pub use selector::LabelSelector;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The variable viewerfleet reads to reach the hub somewhere else than its public address;
/// `fake-hcloud` prints it pointing at its simulated hub.
pub const HUB_URL_ENV: &str = "VIEWERFLEET_HCLOUD_HUB_URL";

/// The project's request budget: `limit` requests, one more every `refill_every`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateBucket {
    pub limit: u32,
    pub refill_every: Duration,
    /// Requests left at the fake's first request (a project that already spent part of its
    /// hour); `None`: a full bucket.
    pub initial: Option<u32>,
}

impl RateBucket {
    /// Hetzner's: 3600 requests per hour per project, one more every second.
    pub const HETZNER: RateBucket = RateBucket {
        limit: 3600,
        refill_every: Duration::from_secs(1),
        initial: None,
    };
}

/// What a fault does to a matching request.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Execute the request, then close the connection without answering (a lost answer).
    DropAnswer,
    /// Answer this status with Hetzner's error body, without executing.
    Status(u16),
    /// Close the connection without executing or answering: the network lost the request.
    Refuse,
    /// Execute the request only after this long, whether or not the client still waits (a
    /// request in flight when its client died: Hetzner executes what it received).
    Late(Duration),
}

/// A fault injected into matching requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub method: Method,
    /// The request's path; a trailing `*` matches any rest (`/v1/servers/*`).
    pub path: String,
    pub kind: FaultKind,
    /// How many matching requests it hits; `None`: every one, forever.
    pub times: Option<u32>,
}

impl Fault {
    /// The first `times` matching requests are executed and their answers lost.
    pub fn drop_answer(method: Method, path: &str, times: u32) -> Fault {
        Fault {
            method,
            path: path.into(),
            kind: FaultKind::DropAnswer,
            times: Some(times),
        }
    }

    /// Matching requests are answered `status` (`times`: how many; `None`: forever).
    pub fn status(method: Method, path: &str, status: u16, times: Option<u32>) -> Fault {
        Fault {
            method,
            path: path.into(),
            kind: FaultKind::Status(status),
            times,
        }
    }

    fn matches(&self, method: &Method, path: &str) -> bool {
        self.method == *method
            && match self.path.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == self.path,
            }
    }
}

/// How the fake behaves.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Servers the project may hold; the next create answers `resource_limit_exceeded`.
    pub server_limit: usize,
    /// The request budget; `None`: unlimited (the headers still say 3600).
    pub rate_limit: Option<RateBucket>,
    /// Every n-th API request fails with 503 `unavailable`; 0: never.
    pub fail_every: u64,
    /// How long an action runs before it reports `success`.
    pub action_time: Duration,
    /// When a node server shows up as registered on `/hub/status`; `None`: never.
    pub node_boot: Option<Duration>,
    /// The bearer token the fake accepts; `None`: any non-empty token.
    pub token: Option<String>,
    /// Faults, checked in order; the first that still has hits left applies.
    pub faults: Vec<Fault>,
    /// The WebDriver endpoint behind the simulated hub (e.g. `webdriver_stub::app`).
    pub webdriver: Option<Router>,
    /// The simulated nodes' load (their load endpoints at `/load/{server}/metrics`, named
    /// in their stereotypes); `None`: nodes name a load endpoint nothing serves, as a node
    /// behind a closed firewall does.
    pub node_load: Option<NodeLoadModel>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            server_limit: 1000,
            rate_limit: Some(RateBucket::HETZNER),
            fail_every: 0,
            action_time: Duration::from_millis(30),
            node_boot: Some(Duration::from_millis(200)),
            token: None,
            faults: Vec::new(),
            webdriver: None,
            node_load: None,
        }
    }
}

/// One recorded request (for tests that check what was sent).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// The query string, as sent (`id=1&id=2`).
    pub query: String,
    pub body: Value,
    /// The answer's status.
    pub status: u16,
    /// The client's `User-Agent`.
    pub user_agent: String,
}

/// What the fake counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Every API request received, answered or not.
    pub requests: u64,
    /// Answered 429 `rate_limit_exceeded`.
    pub rate_limited: u64,
    /// Answered 503 by `fail_every`.
    pub transient: u64,
    /// Executed with the answer lost (`FaultKind::DropAnswer`).
    pub dropped: u64,
    /// Answered by a `FaultKind::Status` fault.
    pub faulted: u64,
    /// Connections closed unexecuted by a `FaultKind::Refuse` fault.
    pub refused: u64,
    /// Requests held by a `FaultKind::Late` fault (counted when they arrive).
    pub late: u64,
    /// Requests to the simulated hub refused 401 (without the hub's router credentials).
    pub hub_refused: u64,
}

struct Stored {
    json: Value,
    created: Instant,
    create_action: i64,
    delete_action: Option<i64>,
    user_data: String,
}

struct ActionState {
    json: Value,
    done_at: Instant,
}

struct Bucket {
    tokens: f64,
    /// When `tokens` was counted; `None` until the first request.
    at: Option<Instant>,
}

struct Inner {
    next_id: i64,
    servers: BTreeMap<i64, Stored>,
    firewalls: BTreeMap<i64, Value>,
    ssh_keys: BTreeMap<i64, Value>,
    actions: HashMap<i64, ActionState>,
    recorded: Vec<Recorded>,
    counts: Counts,
    bucket: Option<Bucket>,
    fault_hits: HashMap<usize, u32>,
    sessions: BTreeMap<String, hub::HubSession>,
    node_load: HashMap<i64, load::NodeCounters>,
}

/// Shared state of one fake; clone freely.
#[derive(Clone)]
pub struct FakeState {
    config: Arc<Mutex<FakeConfig>>,
    inner: Arc<Mutex<Inner>>,
    /// The hub's distributor: one new-session request at a time.
    distributor: Arc<tokio::sync::Mutex<()>>,
    /// Each named hub's (`/hubs/<name>/`) distributor.
    hub_distributors: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// A running fake on a loopback port; stops when dropped.
pub struct FakeHcloud {
    pub state: FakeState,
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeHcloud {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Put into every request's extensions by the server loop: notifying it closes the
/// request's connection at once, without an answer.
#[derive(Clone)]
struct ConnectionKill(Arc<tokio::sync::Notify>);

/// Serves `app` on `listener`, one task per connection, each of which a `ConnectionKill`
/// can end.
async fn serve(listener: tokio::net::TcpListener, app: Router) {
    use tower::ServiceExt;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            let kill = Arc::new(tokio::sync::Notify::new());
            let service = {
                let kill = kill.clone();
                hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(ConnectionKill(kill.clone()));
                    app.clone().oneshot(req.map(axum::body::Body::new))
                })
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                // Dropping the connection closes the socket: the client sees a reset.
                _ = kill.notified() => {}
            }
        });
    }
}

impl FakeHcloud {
    /// Serves a new fake on `listen` (port 0: any free port).
    pub async fn start(config: FakeConfig, listen: SocketAddr) -> std::io::Result<FakeHcloud> {
        let state = FakeState::new(config);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(serve(listener, app(state.clone())));
        Ok(FakeHcloud { state, addr, task })
    }

    /// The value for `HCLOUD_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL of the simulated hub (`…/hub/`), for `VIEWERFLEET_HCLOUD_HUB_URL`: one hub
    /// that every node server registers with.
    pub fn hub_url(&self) -> String {
        format!("http://{}/hub/", self.addr)
    }

    /// The simulated hubs one by one (`…/hubs/{hub}/`, `{hub}` the hub server's name), for
    /// `VIEWERFLEET_HCLOUD_HUB_URL`: each lists the node servers whose `HUB_ADDR` is its
    /// address, as real hubs would, so a fleet split over hubs works as in the cloud.
    pub fn hubs_url(&self) -> String {
        format!("http://{}/hubs/{{hub}}/", self.addr)
    }
}

impl FakeState {
    pub fn new(config: FakeConfig) -> FakeState {
        let bucket = config.rate_limit.map(|b| Bucket {
            tokens: b.initial.unwrap_or(b.limit).min(b.limit) as f64,
            at: None,
        });
        FakeState {
            config: Arc::new(Mutex::new(config)),
            inner: Arc::new(Mutex::new(Inner {
                next_id: 1000,
                servers: BTreeMap::new(),
                firewalls: BTreeMap::new(),
                ssh_keys: BTreeMap::new(),
                actions: HashMap::new(),
                recorded: Vec::new(),
                counts: Counts::default(),
                bucket,
                fault_hits: HashMap::new(),
                sessions: BTreeMap::new(),
                node_load: HashMap::new(),
            })),
            distributor: Arc::new(tokio::sync::Mutex::new(())),
            hub_distributors: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn config(&self) -> FakeConfig {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_config(&self, f: impl FnOnce(&mut FakeConfig)) {
        f(&mut self.config.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Every server, as the API would list it now (deleting ones included).
    pub fn servers(&self) -> Vec<Value> {
        let mut inner = self.lock();
        inner.reap();
        inner.servers.values().map(|s| inner.view(s)).collect()
    }

    /// Servers whose labels match a label selector.
    pub fn servers_matching(&self, selector: &str) -> Vec<Value> {
        let sel = LabelSelector::parse(selector).unwrap_or_default();
        self.servers()
            .into_iter()
            .filter(|s| sel.matches(&s["labels"]))
            .collect()
    }

    pub fn firewalls(&self) -> Vec<Value> {
        let mut inner = self.lock();
        inner.reap();
        inner.firewalls.values().cloned().collect()
    }

    pub fn ssh_keys(&self) -> Vec<Value> {
        self.lock().ssh_keys.values().cloned().collect()
    }

    /// Every API request received so far, in order.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.lock().recorded.clone()
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// (429 answers, transient 503 answers) given so far.
    pub fn injected_failures(&self) -> (u64, u64) {
        let c = self.counts();
        (c.rate_limited, c.transient)
    }

    /// Sessions the simulated hub holds now.
    pub fn hub_sessions(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Creates a running server directly (as if by another tool or an earlier crashed run).
    pub fn plant_server(&self, name: &str, labels: Value) -> i64 {
        let body = json!({"name": name, "server_type": "cx33", "image": "debian-12",
                          "location": "fsn1", "labels": labels});
        let mut inner = self.lock();
        inner.insert_server(&body, Duration::ZERO)
    }

    pub fn plant_firewall(&self, name: &str, labels: Value) -> i64 {
        let mut inner = self.lock();
        let id = inner.next_id();
        inner.firewalls.insert(
            id,
            json!({"id": id, "name": name, "labels": labels, "created": now(), "rules": [], "applied_to": []}),
        );
        id
    }

    pub fn plant_ssh_key(&self, name: &str, labels: Value) -> i64 {
        let mut inner = self.lock();
        let id = inner.next_id();
        let key = format!("ssh-ed25519 AAAAplanted{id} planted");
        inner
            .ssh_keys
            .insert(id, ssh_key_json(id, name, &key, labels));
        id
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Inner {
    fn next_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn new_action(&mut self, duration: Duration, command: &str, resources: Value) -> Value {
        let id = self.next_id();
        let json = json!({"id": id, "command": command, "status": "running", "progress": 0,
                          "started": now(), "finished": null, "resources": resources, "error": null});
        self.actions.insert(
            id,
            ActionState {
                json: json.clone(),
                done_at: Instant::now() + duration,
            },
        );
        json
    }

    fn action_done(&self, id: i64) -> bool {
        self.actions
            .get(&id)
            .is_none_or(|a| Instant::now() >= a.done_at)
    }

    /// An action as it stands now.
    fn action_view(&self, a: &ActionState) -> Value {
        let mut json = a.json.clone();
        let now_i = Instant::now();
        if now_i >= a.done_at {
            json["status"] = json!("success");
            json["progress"] = json!(100);
            json["finished"] = json!(now());
        } else {
            json["progress"] = json!(50);
        }
        json
    }

    /// Servers whose delete action finished are gone: their firewalls are free.
    fn reap(&mut self) {
        let gone: Vec<i64> = self
            .servers
            .iter()
            .filter(|(_, s)| s.delete_action.is_some_and(|a| self.action_done(a)))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.servers.remove(&id);
            for fw in self.firewalls.values_mut() {
                if let Some(applied) = fw["applied_to"].as_array_mut() {
                    applied.retain(|a| a["server"]["id"] != id);
                }
            }
            self.sessions.retain(|_, s| s.node != id);
        }
    }

    /// The server as the API shows it now.
    fn view(&self, stored: &Stored) -> Value {
        let mut json = stored.json.clone();
        json["status"] = json!(if stored.delete_action.is_some() {
            "deleting"
        } else if self.action_done(stored.create_action) {
            "running"
        } else {
            "initializing"
        });
        json
    }

    /// Stores a server from a (validated) create request; returns its id.
    fn insert_server(&mut self, body: &Value, action_time: Duration) -> i64 {
        let id = self.next_id();
        let location = body["location"].as_str().unwrap_or("fsn1");
        let public_net = &body["public_net"];
        let v4 = public_net["enable_ipv4"].as_bool().unwrap_or(true);
        let v6 = public_net["enable_ipv6"].as_bool().unwrap_or(true);
        let firewall_ids: Vec<i64> = body["firewalls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["firewall"].as_i64())
            .collect();
        let server = json!({
            "id": id,
            "name": body["name"],
            "status": "initializing",
            "created": now(),
            "labels": body.get("labels").cloned().filter(|l| l.is_object()).unwrap_or(json!({})),
            "public_net": {
                "ipv4": if v4 { json!({"id": id, "ip": format!("203.0.113.{}", id % 250 + 1), "blocked": false, "dns_ptr": "static.example"}) } else { Value::Null },
                "ipv6": if v6 { json!({"id": id, "ip": format!("2001:db8:0:{:x}::/64", id), "blocked": false, "dns_ptr": []}) } else { Value::Null },
                "floating_ips": [],
                "firewalls": firewall_ids.iter().map(|f| json!({"id": f, "status": "applied"})).collect::<Vec<_>>(),
            },
            "private_net": [],
            "server_type": catalogue::server_type(body["server_type"].as_str().unwrap_or("")).unwrap_or(Value::Null),
            "location": catalogue::location(location),
            "image": null, "iso": null, "rescue_enabled": false, "locked": false,
            "backup_window": null, "outgoing_traffic": 0, "ingoing_traffic": 0, "included_traffic": 21990232555520i64,
            "protection": {"delete": false, "rebuild": false},
            "primary_disk_size": 80, "volumes": [], "load_balancers": [],
        });
        let action = self.new_action(
            action_time,
            "create_server",
            json!([{"id": id, "type": "server"}]),
        );
        for f in firewall_ids {
            if let Some(applied) = self
                .firewalls
                .get_mut(&f)
                .and_then(|fw| fw["applied_to"].as_array_mut())
            {
                applied.push(json!({"type": "server", "server": {"id": id}}));
            }
        }
        self.servers.insert(
            id,
            Stored {
                json: server,
                created: Instant::now(),
                create_action: action["id"].as_i64().unwrap_or_default(),
                delete_action: None,
                user_data: body["user_data"].as_str().unwrap_or_default().to_string(),
            },
        );
        id
    }

    /// Takes one request from the bucket; `Err` when it is empty. Returns the headers'
    /// (remaining, seconds until full).
    fn take(&mut self, rate: Option<RateBucket>, now: Instant) -> Result<(u32, f64), (u32, f64)> {
        let (Some(rate), Some(bucket)) = (rate, self.bucket.as_mut()) else {
            return Ok((3600, 0.0));
        };
        let since = bucket
            .at
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        let refill = since.as_secs_f64() / rate.refill_every.as_secs_f64();
        bucket.tokens = (bucket.tokens + refill).min(rate.limit as f64);
        bucket.at = Some(bucket.at.map_or(now, |at| at.max(now)));
        let ok = bucket.tokens >= 1.0;
        if ok {
            bucket.tokens -= 1.0;
        }
        let to_full = (rate.limit as f64 - bucket.tokens) * rate.refill_every.as_secs_f64();
        let state = (bucket.tokens.floor() as u32, to_full);
        if ok {
            Ok(state)
        } else {
            Err(state)
        }
    }

    /// The first fault matching this request that still has hits left.
    fn fault(&mut self, faults: &[Fault], method: &Method, path: &str) -> Option<FaultKind> {
        for (i, f) in faults.iter().enumerate() {
            if !f.matches(method, path) {
                continue;
            }
            let hits = self.fault_hits.entry(i).or_insert(0);
            if f.times.is_none_or(|t| *hits < t) {
                *hits += 1;
                return Some(f.kind.clone());
            }
        }
        None
    }
}

/// The router: `/v1/...` (the API) and `/hub/...` (the simulated hub).
pub fn app(state: FakeState) -> Router {
    let api = Router::new()
        .route("/servers", get(list_servers).post(create_server))
        .route("/servers/actions", get(list_server_actions))
        .route(
            "/servers/{id}",
            get(get_server).put(update_server).delete(delete_server),
        )
        .route("/actions", get(list_actions))
        .route("/actions/{id}", get(get_action))
        .route("/firewalls", get(list_firewalls).post(create_firewall))
        .route("/firewalls/{id}", get(get_firewall).delete(delete_firewall))
        .route("/firewalls/{id}/actions/set_rules", post(set_rules))
        .route("/ssh_keys", get(list_ssh_keys).post(create_ssh_key))
        .route("/ssh_keys/{id}", get(get_ssh_key).delete(delete_ssh_key))
        .route("/pricing", get(pricing))
        .route("/server_types", get(server_types))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such endpoint") })
        .layer(axum::middleware::from_fn_with_state(state.clone(), gate));
    Router::new()
        .nest("/v1", api)
        .merge(
            hub::routes().route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                hub::router_auth,
            )),
        )
        .merge(load::routes())
        .with_state(state)
}

/// Hetzner's error body.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message, "details": {}}})),
    )
        .into_response()
}

fn rate_headers(resp: &mut Response, limit: u32, remaining: u32, to_full: f64) {
    let reset = (chrono::Utc::now().timestamp_millis() as f64 / 1000.0 + to_full).ceil() as i64;
    let h = resp.headers_mut();
    h.insert("RateLimit-Limit", HeaderValue::from(limit));
    h.insert("RateLimit-Remaining", HeaderValue::from(remaining));
    h.insert("RateLimit-Reset", HeaderValue::from(reset));
}

/// Rate limit, authentication, faults and injected 503s, recording; then the request, and
/// a lost answer if a fault says so.
async fn gate(
    State(state): State<FakeState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let config = state.config();
    let method = req.method().clone();
    // This layer sits inside `nest("/v1")`, which strips the prefix: record the full path.
    let path = format!("/v1{}", req.uri().path());
    let query = req.uri().query().unwrap_or_default().to_string();
    let kill = req.extensions().get::<ConnectionKill>().cloned();
    let user_agent = req
        .headers()
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let limit = config.rate_limit.map_or(3600, |r| r.limit);
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let authorized = match (&auth, &config.token) {
        (Some(got), Some(want)) => got == want,
        (Some(got), None) => !got.is_empty(),
        (None, _) => false,
    };
    let (taken, fault, fail) = {
        let mut inner = state.lock();
        inner.counts.requests += 1;
        inner.reap();
        let taken = inner.take(config.rate_limit, Instant::now());
        let fault = match (&taken, authorized) {
            (Ok(_), true) => inner.fault(&config.faults, &method, &path),
            _ => None,
        };
        let fail = taken.is_ok()
            && authorized
            && fault.is_none()
            && config.fail_every > 0
            && inner.counts.requests % config.fail_every == 0;
        match (&taken, &fault) {
            (Err(_), _) => inner.counts.rate_limited += 1,
            (_, Some(FaultKind::Status(_))) => inner.counts.faulted += 1,
            (_, Some(FaultKind::DropAnswer)) => inner.counts.dropped += 1,
            (_, Some(FaultKind::Refuse)) => inner.counts.refused += 1,
            (_, Some(FaultKind::Late(_))) => inner.counts.late += 1,
            _ if fail => inner.counts.transient += 1,
            _ => {}
        }
        (taken, fault, fail)
    };
    let (remaining, to_full) = match taken {
        Ok(s) | Err(s) => s,
    };
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let body_json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let mut resp = if taken.is_err() {
        error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            "limit of 3600 requests per hour reached",
        )
    } else if !authorized {
        error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unable to authenticate",
        )
    } else if let Some(FaultKind::Status(code)) = fault {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        error(status, "server_error", "injected failure (fake fault)")
    } else if fail {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "service temporarily unavailable",
        )
    } else if fault == Some(FaultKind::Refuse) {
        if let Some(ConnectionKill(kill)) = kill {
            kill.notify_one();
        }
        return std::future::pending::<Response>().await;
    } else if let Some(FaultKind::Late(after)) = fault {
        // Spawned: it runs to the end even when the client goes away meanwhile.
        let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        let late = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            next.run(req).await
        });
        match late.await {
            Ok(resp) => resp,
            Err(_) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "late request failed",
            ),
        }
    } else {
        let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        next.run(req).await
    };
    rate_headers(&mut resp, limit, remaining, to_full);
    state.lock().recorded.push(Recorded {
        method: method.to_string(),
        path,
        query,
        body: body_json,
        status: resp.status().as_u16(),
        user_agent,
    });
    if fault == Some(FaultKind::DropAnswer) {
        if let Some(ConnectionKill(kill)) = kill {
            kill.notify_one();
            std::future::pending::<()>().await;
        }
    }
    resp
}

type Params = Query<Vec<(String, String)>>;

fn param<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn params<'a>(q: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    q.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// `page`, `per_page` (default 25, at most 50) and the `label_selector`, `name` and
/// `status` filters.
fn paginate(items: Vec<Value>, q: &[(String, String)], key: &str) -> Response {
    let per_page: usize = param(q, "per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
        .clamp(1, 50);
    let page: usize = param(q, "page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut items = items;
    if let Some(selector) = param(q, "label_selector") {
        match LabelSelector::parse(selector) {
            Ok(sel) => items.retain(|i| sel.matches(&i["labels"])),
            Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_input", &message),
        }
    }
    if let Some(name) = param(q, "name") {
        items.retain(|i| i["name"] == name);
    }
    let statuses = params(q, "status");
    if !statuses.is_empty() {
        items.retain(|i| statuses.iter().any(|s| i["status"] == *s));
    }
    let total = items.len();
    let last = total.div_ceil(per_page).max(1);
    let page_items: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    Json(json!({
        key: page_items,
        "meta": {"pagination": {
            "page": page, "per_page": per_page,
            "previous_page": if page > 1 { json!(page - 1) } else { Value::Null },
            "next_page": if page < last { json!(page + 1) } else { Value::Null },
            "last_page": last, "total_entries": total,
        }}
    }))
    .into_response()
}

/// Hetzner's label rules: keys and values of at most 63 characters, alphanumerics with
/// `-_.` inside (keys may carry a `prefix/`), values possibly empty.
fn check_labels(labels: &Value) -> Result<(), String> {
    let Some(map) = labels.as_object() else {
        return if labels.is_null() {
            Ok(())
        } else {
            Err("labels must be an object".into())
        };
    };
    let ok = |s: &str, empty_ok: bool| {
        (empty_ok && s.is_empty())
            || (!s.is_empty()
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.ends_with(|c: char| c.is_ascii_alphanumeric()))
    };
    for (k, v) in map {
        let name = k.rsplit('/').next().unwrap_or(k);
        let value = v.as_str().unwrap_or("\u{0}");
        if !ok(name, false) || !ok(value, true) {
            return Err(format!("invalid input in field 'labels': {k}={v}"));
        }
    }
    Ok(())
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, len)) = s.split_once('/') else {
        return false;
    };
    let Ok(addr) = addr.parse::<std::net::IpAddr>() else {
        return false;
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    len.parse::<u8>().is_ok_and(|len| len <= max)
}

async fn list_servers(State(state): State<FakeState>, Query(q): Params) -> Response {
    let items = {
        let inner = state.lock();
        inner.servers.values().map(|s| inner.view(s)).collect()
    };
    paginate(items, &q, "servers")
}

async fn get_server(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let inner = state.lock();
    match inner.servers.get(&id) {
        Some(s) => Json(json!({"server": inner.view(s)})).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "server not found"),
    }
}

async fn update_server(
    State(state): State<FakeState>,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Response {
    if let Err(m) = check_labels(&body["labels"]) {
        return error(StatusCode::BAD_REQUEST, "invalid_input", &m);
    }
    let mut inner = state.lock();
    let Some(stored) = inner.servers.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "not_found", "server not found");
    };
    if let Some(labels) = body.get("labels").filter(|l| l.is_object()) {
        stored.json["labels"] = labels.clone();
    }
    if let Some(name) = body["name"].as_str() {
        stored.json["name"] = json!(name);
    }
    let view = inner.view(&inner.servers[&id]);
    Json(json!({"server": view})).into_response()
}

async fn create_server(State(state): State<FakeState>, Json(body): Json<Value>) -> Response {
    let config = state.config();
    let mut inner = state.lock();
    let name = body["name"].as_str().unwrap_or_default();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "invalid input in field 'name'",
        );
    }
    if let Err(m) = check_labels(&body["labels"]) {
        return error(StatusCode::BAD_REQUEST, "invalid_input", &m);
    }
    if inner.servers.values().any(|s| s.json["name"] == name) {
        return error(
            StatusCode::CONFLICT,
            "uniqueness_error",
            "server name is already used",
        );
    }
    let location = body["location"].as_str().unwrap_or("fsn1");
    if let Some((code, message)) =
        catalogue::refuse_order(body["server_type"].as_str().unwrap_or_default(), location)
    {
        return error(StatusCode::BAD_REQUEST, code, &message);
    }
    if body["user_data"]
        .as_str()
        .is_some_and(|u| u.len() > 32 * 1024)
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "user_data is longer than 32 KiB",
        );
    }
    for fw in body["firewalls"].as_array().into_iter().flatten() {
        if !fw["firewall"]
            .as_i64()
            .is_some_and(|f| inner.firewalls.contains_key(&f))
        {
            return error(StatusCode::NOT_FOUND, "not_found", "firewall not found");
        }
    }
    for key in body["ssh_keys"].as_array().into_iter().flatten() {
        let key = key.as_str().map(str::to_string).unwrap_or(key.to_string());
        if !inner.ssh_keys.values().any(|k| {
            k["id"].as_i64().is_some_and(|id| id.to_string() == key) || k["name"] == key.as_str()
        }) {
            return error(StatusCode::NOT_FOUND, "not_found", "ssh key not found");
        }
    }
    if inner.servers.len() >= config.server_limit {
        return error(
            StatusCode::FORBIDDEN,
            "resource_limit_exceeded",
            "server limit exceeded",
        );
    }
    let id = inner.insert_server(&body, config.action_time);
    let server = inner.view(&inner.servers[&id]);
    let create = inner.servers[&id].create_action;
    let action = inner.action_view(&inner.actions[&create]);
    let start = inner.new_action(
        config.action_time,
        "start_server",
        json!([{"id": id, "type": "server"}]),
    );
    (
        StatusCode::CREATED,
        Json(json!({"server": server, "action": action, "next_actions": [start], "root_password": null})),
    )
        .into_response()
}

async fn delete_server(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let config = state.config();
    let mut inner = state.lock();
    let existing = match inner.servers.get(&id) {
        None => return error(StatusCode::NOT_FOUND, "not_found", "server not found"),
        Some(s) => s.delete_action,
    };
    let action_id = match existing {
        Some(a) => a,
        None => {
            let action = inner.new_action(
                config.action_time,
                "delete_server",
                json!([{"id": id, "type": "server"}]),
            );
            let a = action["id"].as_i64().unwrap_or_default();
            if let Some(s) = inner.servers.get_mut(&id) {
                s.delete_action = Some(a);
            }
            a
        }
    };
    let action = inner.action_view(&inner.actions[&action_id]);
    Json(json!({"action": action})).into_response()
}

async fn get_action(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let inner = state.lock();
    match inner.actions.get(&id) {
        Some(a) => Json(json!({"action": inner.action_view(a)})).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "action not found"),
    }
}

fn actions_by_id(state: &FakeState, q: &[(String, String)], server_only: bool) -> Response {
    let ids: Vec<i64> = params(q, "id")
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    if ids.is_empty() && !server_only {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "listing actions needs the id filter (listing arbitrary actions was removed)",
        );
    }
    let inner = state.lock();
    let mut found: Vec<(i64, Value)> = inner
        .actions
        .iter()
        .filter(|(id, _)| ids.is_empty() || ids.contains(id))
        .map(|(id, a)| (*id, inner.action_view(a)))
        .filter(|(_, a)| {
            !server_only
                || a["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|x| x["type"] == "server"))
        })
        .collect();
    found.sort_by_key(|(id, _)| *id);
    let items = found.into_iter().map(|(_, a)| a).collect();
    paginate(items, q, "actions")
}

async fn list_actions(State(state): State<FakeState>, Query(q): Params) -> Response {
    actions_by_id(&state, &q, false)
}

async fn list_server_actions(State(state): State<FakeState>, Query(q): Params) -> Response {
    actions_by_id(&state, &q, true)
}

async fn list_firewalls(State(state): State<FakeState>, Query(q): Params) -> Response {
    let items = state.lock().firewalls.values().cloned().collect();
    paginate(items, &q, "firewalls")
}

async fn get_firewall(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    match state.lock().firewalls.get(&id) {
        Some(f) => Json(json!({"firewall": f})).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "firewall not found"),
    }
}

fn rules_response(rules: &Value) -> Result<Value, String> {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let direction = rule["direction"].as_str().unwrap_or_default();
        let protocol = rule["protocol"].as_str().unwrap_or_default();
        if !matches!(direction, "in" | "out")
            || !matches!(protocol, "tcp" | "udp" | "icmp" | "esp" | "gre")
        {
            return Err("invalid input in field 'rules'".into());
        }
        if matches!(protocol, "tcp" | "udp") && rule["port"].as_str().is_none() {
            return Err("port is required for tcp and udp rules".into());
        }
        for ip in rule["source_ips"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(rule["destination_ips"].as_array().into_iter().flatten())
        {
            if ip.as_str().is_none_or(|cidr| !is_cidr(cidr)) {
                return Err(format!(
                    "invalid input in field 'rules': {ip} is not a CIDR"
                ));
            }
        }
        out.push(json!({
            "direction": direction, "protocol": protocol, "port": rule["port"],
            "source_ips": rule.get("source_ips").cloned().unwrap_or(json!([])),
            "destination_ips": rule.get("destination_ips").cloned().unwrap_or(json!([])),
            "description": rule.get("description").cloned().unwrap_or(Value::Null),
        }));
    }
    Ok(Value::Array(out))
}

async fn create_firewall(State(state): State<FakeState>, Json(body): Json<Value>) -> Response {
    let config = state.config();
    let mut inner = state.lock();
    let name = body["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "invalid input in field 'name'",
        );
    }
    if let Err(m) = check_labels(&body["labels"]) {
        return error(StatusCode::BAD_REQUEST, "invalid_input", &m);
    }
    if inner.firewalls.values().any(|f| f["name"] == name.as_str()) {
        return error(
            StatusCode::CONFLICT,
            "uniqueness_error",
            "firewall name is already used",
        );
    }
    let rules = match rules_response(&body["rules"]) {
        Ok(r) => r,
        Err(m) => return error(StatusCode::BAD_REQUEST, "invalid_input", &m),
    };
    let id = inner.next_id();
    let firewall = json!({"id": id, "name": name, "labels": body.get("labels").cloned().unwrap_or(json!({})),
        "created": now(), "rules": rules, "applied_to": []});
    inner.firewalls.insert(id, firewall.clone());
    let action = inner.new_action(
        config.action_time,
        "set_firewall_rules",
        json!([{"id": id, "type": "firewall"}]),
    );
    (
        StatusCode::CREATED,
        Json(json!({"firewall": firewall, "actions": [action]})),
    )
        .into_response()
}

async fn set_rules(
    State(state): State<FakeState>,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Response {
    let config = state.config();
    let mut inner = state.lock();
    let rules = match rules_response(&body["rules"]) {
        Ok(r) => r,
        Err(m) => return error(StatusCode::BAD_REQUEST, "invalid_input", &m),
    };
    let Some(fw) = inner.firewalls.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "not_found", "firewall not found");
    };
    fw["rules"] = rules;
    let action = inner.new_action(
        config.action_time,
        "set_firewall_rules",
        json!([{"id": id, "type": "firewall"}]),
    );
    (StatusCode::CREATED, Json(json!({"actions": [action]}))).into_response()
}

async fn delete_firewall(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let mut inner = state.lock();
    match inner.firewalls.get(&id) {
        None => error(StatusCode::NOT_FOUND, "not_found", "firewall not found"),
        Some(f) if f["applied_to"].as_array().is_some_and(|a| !a.is_empty()) => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "resource_in_use",
            "firewall is still applied to a resource",
        ),
        Some(_) => {
            inner.firewalls.remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
    }
}

fn ssh_key_json(id: i64, name: &str, key: &str, labels: Value) -> Value {
    let digest = key.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    let hex = format!("{digest:016x}{:016x}", digest.rotate_left(17));
    let fingerprint: Vec<String> = hex
        .as_bytes()
        .chunks(2)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    json!({"id": id, "name": name, "public_key": key, "fingerprint": fingerprint.join(":"),
           "labels": labels, "created": now()})
}

async fn list_ssh_keys(State(state): State<FakeState>, Query(q): Params) -> Response {
    let items = state.lock().ssh_keys.values().cloned().collect();
    paginate(items, &q, "ssh_keys")
}

async fn get_ssh_key(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    match state.lock().ssh_keys.get(&id) {
        Some(k) => Json(json!({"ssh_key": k})).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "ssh_key not found"),
    }
}

async fn create_ssh_key(State(state): State<FakeState>, Json(body): Json<Value>) -> Response {
    let mut inner = state.lock();
    let name = body["name"].as_str().unwrap_or_default().to_string();
    let key = body["public_key"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    if name.is_empty()
        || !(key.starts_with("ssh-") || key.starts_with("ecdsa-"))
        || key.split_whitespace().count() < 2
    {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "invalid input in field 'public_key'",
        );
    }
    if let Err(m) = check_labels(&body["labels"]) {
        return error(StatusCode::BAD_REQUEST, "invalid_input", &m);
    }
    let same_key = |k: &Value| {
        let a: Vec<&str> = k["public_key"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .take(2)
            .collect();
        let b: Vec<&str> = key.split_whitespace().take(2).collect();
        a == b
    };
    if inner
        .ssh_keys
        .values()
        .any(|k| k["name"] == name.as_str() || same_key(k))
    {
        return error(
            StatusCode::CONFLICT,
            "uniqueness_error",
            "SSH key with the same fingerprint or name already exists",
        );
    }
    let id = inner.next_id();
    let json = ssh_key_json(
        id,
        &name,
        &key,
        body.get("labels").cloned().unwrap_or(json!({})),
    );
    inner.ssh_keys.insert(id, json.clone());
    (StatusCode::CREATED, Json(json!({"ssh_key": json}))).into_response()
}

async fn delete_ssh_key(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    match state.lock().ssh_keys.remove(&id) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "ssh_key not found"),
    }
}

async fn server_types(Query(q): Params) -> Response {
    paginate(catalogue::server_types(), &q, "server_types")
}

async fn pricing() -> Response {
    Json(catalogue::pricing()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_deserializes_into_the_crate_models() {
        let types: Vec<hcloud::models::ServerType> =
            serde_json::from_value(Value::Array(catalogue::server_types())).unwrap();
        let cx33 = types.iter().find(|t| t.name == "cx33").unwrap();
        assert_eq!(cx33.cores, 4);
        assert!(cx33.locations.iter().all(|l| l.deprecation.is_none()));
        let cx32 = types.iter().find(|t| t.name == "cx32").unwrap();
        assert!(cx32.locations.iter().all(|l| l.deprecation.is_some()));
        let cpx41 = types.iter().find(|t| t.name == "cpx41").unwrap();
        let in_fsn1 = cpx41.locations.iter().find(|l| l.name == "fsn1").unwrap();
        let in_ash = cpx41.locations.iter().find(|l| l.name == "ash").unwrap();
        assert!(in_fsn1.deprecation.is_some() && in_ash.deprecation.is_none());
        let pricing: hcloud::models::ListPricesResponse =
            serde_json::from_value(catalogue::pricing()).unwrap();
        assert_eq!(pricing.pricing.currency, "EUR");
    }

    #[test]
    fn orders_of_withdrawn_types_and_unsupported_locations_are_refused() {
        assert!(catalogue::refuse_order("cx33", "fsn1").is_none());
        assert!(catalogue::refuse_order("cx32", "fsn1")
            .unwrap()
            .1
            .contains("no longer available"));
        assert_eq!(
            catalogue::refuse_order("cx33", "ash").unwrap().1,
            "unsupported location for server type"
        );
        assert!(
            catalogue::refuse_order("cpx41", "fsn1").is_none(),
            "retiring, still orderable"
        );
    }

    #[test]
    fn the_bucket_refills_continuously() {
        let rate = RateBucket {
            limit: 3,
            refill_every: Duration::from_millis(50),
            initial: None,
        };
        let state = FakeState::new(FakeConfig {
            rate_limit: Some(rate),
            ..FakeConfig::default()
        });
        let mut inner = state.lock();
        let t0 = Instant::now();
        assert_eq!(inner.take(Some(rate), t0).unwrap().0, 2);
        assert_eq!(inner.take(Some(rate), t0).unwrap().0, 1);
        assert_eq!(inner.take(Some(rate), t0).unwrap().0, 0);
        let (remaining, to_full) = inner.take(Some(rate), t0).unwrap_err();
        assert_eq!(remaining, 0);
        assert!((to_full - 0.15).abs() < 1e-3, "{to_full}");
        let later = t0 + Duration::from_millis(60);
        assert_eq!(
            inner.take(Some(rate), later).unwrap().0,
            0,
            "one refilled, taken"
        );
        assert!(inner.take(Some(rate), later).is_err());
        let much_later = t0 + Duration::from_secs(10);
        assert_eq!(
            inner.take(Some(rate), much_later).unwrap().0,
            2,
            "never above the limit"
        );
    }

    #[test]
    fn labels_follow_hetzners_rules() {
        assert!(check_labels(&json!({"viewerfleet-run": "r-1", "empty": ""})).is_ok());
        assert!(check_labels(&json!({"bad key": "x"})).is_err());
        assert!(check_labels(&json!({"k": "-starts-with-dash"})).is_err());
        assert!(check_labels(&json!({"k": "x".repeat(64)})).is_err());
    }
}
