//! A faithful stand-in for the Hetzner Cloud API, served by axum: the only fake in the
//! project, because nothing here may reach the real API. Tests point `HCLOUD_ENDPOINT` at it;
//! users can run it (`viewerfleet-kit fake-hcloud`) for a dry run of `plan`, `up` and `down`.
//!
//! What it reproduces: JSON shapes of the API (read back through the `hcloud` crate's models),
//! `page`/`per_page` pagination with `meta.pagination`, actions that are `running` until
//! polled a few times then `success`, 429 `rate_limit_exceeded` with `RateLimit-*` headers,
//! `resource_limit_exceeded` after a configurable server count, transient 503s, Hetzner's
//! error body `{"error":{"code","message"}}`, label selectors, unique names and SSH keys,
//! firewalls that cannot be deleted while applied, and `/pricing` + `/server_types` data.
//!
//! It also plays the Selenium hub's `GET /hub/status` for dry runs: a node server is listed
//! as registered `node_boot` after its creation (never when `node_boot` is `None`).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
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

/// `ADDR/LEN`, as the API checks firewall source ranges.
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

/// How the fake behaves.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Servers the project may hold; the next create answers `resource_limit_exceeded`.
    pub server_limit: usize,
    /// Requests allowed per `rate_window`; 0: unlimited.
    pub rate_limit: u32,
    pub rate_window: Duration,
    /// Every n-th API request fails with 503 `unavailable`; 0: never.
    pub fail_every: u64,
    /// GETs of an action before it reports `success`.
    pub action_polls: u32,
    /// When a node server shows up as registered on `/hub/status`; `None`: never.
    pub node_boot: Option<Duration>,
    /// The bearer token the fake accepts; `None`: any non-empty token.
    pub token: Option<String>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            server_limit: 1000,
            rate_limit: 0,
            rate_window: Duration::from_secs(1),
            fail_every: 0,
            action_polls: 2,
            node_boot: Some(Duration::from_millis(200)),
            token: None,
        }
    }
}

/// One recorded request (for tests that check what was sent).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub body: Value,
}

struct Stored {
    json: Value,
    created: Instant,
    action: i64,
}

struct ActionState {
    json: Value,
    polls_left: u32,
}

#[derive(Default)]
struct Inner {
    next_id: i64,
    servers: BTreeMap<i64, Stored>,
    firewalls: BTreeMap<i64, Value>,
    ssh_keys: BTreeMap<i64, Value>,
    actions: HashMap<i64, ActionState>,
    recorded: Vec<Recorded>,
    requests: u64,
    window_start: Option<Instant>,
    window_count: u32,
    rate_limited: u64,
    transient: u64,
}

/// Shared state of one fake; clone freely.
#[derive(Clone)]
pub struct FakeState {
    config: Arc<Mutex<FakeConfig>>,
    inner: Arc<Mutex<Inner>>,
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

impl FakeHcloud {
    /// Serves a new fake on `listen` (port 0: any free port).
    pub async fn start(config: FakeConfig, listen: SocketAddr) -> std::io::Result<FakeHcloud> {
        let state = FakeState::new(config);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let app = app(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeHcloud { state, addr, task })
    }

    /// The value for `HCLOUD_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL of the simulated hub (`…/hub/`), for `VIEWERFLEET_HCLOUD_HUB_URL`.
    pub fn hub_url(&self) -> String {
        format!("http://{}/hub/", self.addr)
    }
}

impl FakeState {
    pub fn new(config: FakeConfig) -> FakeState {
        FakeState {
            config: Arc::new(Mutex::new(config)),
            inner: Arc::new(Mutex::new(Inner {
                next_id: 1000,
                ..Default::default()
            })),
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

    /// Every server, as the API would show it.
    pub fn servers(&self) -> Vec<Value> {
        self.lock()
            .servers
            .values()
            .map(|s| s.json.clone())
            .collect()
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
        self.lock().firewalls.values().cloned().collect()
    }

    pub fn ssh_keys(&self) -> Vec<Value> {
        self.lock().ssh_keys.values().cloned().collect()
    }

    /// Every request received so far (method, path with query, JSON body).
    pub fn recorded(&self) -> Vec<Recorded> {
        self.lock().recorded.clone()
    }

    /// (429 answers, transient 503 answers) given so far.
    pub fn injected_failures(&self) -> (u64, u64) {
        let inner = self.lock();
        (inner.rate_limited, inner.transient)
    }

    /// Creates a server directly (as if by another tool or an earlier crashed run).
    pub fn plant_server(&self, name: &str, labels: Value) -> i64 {
        let body =
            json!({"name": name, "server_type": "cx22", "image": "debian-12", "labels": labels});
        let mut inner = self.lock();
        let (json, action) = new_server(&mut inner, &body, 0);
        let id = json["id"].as_i64().unwrap_or_default();
        if let Some(a) = inner.actions.get_mut(&action) {
            a.polls_left = 0;
        }
        inner.servers.insert(
            id,
            Stored {
                json,
                created: Instant::now(),
                action,
            },
        );
        id
    }

    pub fn plant_firewall(&self, name: &str, labels: Value) -> i64 {
        let mut inner = self.lock();
        let id = next_id(&mut inner);
        inner.firewalls.insert(
            id,
            json!({"id": id, "name": name, "labels": labels, "created": now(), "rules": [], "applied_to": []}),
        );
        id
    }

    pub fn plant_ssh_key(&self, name: &str, labels: Value) -> i64 {
        let mut inner = self.lock();
        let id = next_id(&mut inner);
        let key = format!("ssh-ed25519 AAAAplanted{id} planted");
        inner
            .ssh_keys
            .insert(id, ssh_key_json(id, name, &key, labels));
        id
    }
}

fn next_id(inner: &mut Inner) -> i64 {
    inner.next_id += 1;
    inner.next_id
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The router: `/v1/...` (the API) and `/hub/status` (the simulated hub).
pub fn app(state: FakeState) -> Router {
    let api = Router::new()
        .route("/servers", get(list_servers).post(create_server))
        .route("/servers/{id}", get(get_server).delete(delete_server))
        .route("/actions/{id}", get(get_action))
        .route("/firewalls", get(list_firewalls).post(create_firewall))
        .route("/firewalls/{id}", get(get_firewall).delete(delete_firewall))
        .route("/firewalls/{id}/actions/set_rules", post(set_rules))
        .route("/ssh_keys", get(list_ssh_keys).post(create_ssh_key))
        .route("/ssh_keys/{id}", axum::routing::delete(delete_ssh_key))
        .route("/pricing", get(pricing))
        .route("/server_types", get(server_types))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such endpoint") })
        .layer(axum::middleware::from_fn_with_state(state.clone(), gate));
    Router::new()
        .nest("/v1", api)
        .route("/hub/status", get(hub_status))
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

/// Authentication, rate limiting, injected 503s and request recording, in that order.
async fn gate(
    State(state): State<FakeState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let config = state.config();
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
    if !authorized {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unable to authenticate",
        );
    }
    let (limited, remaining, reset, fail) = {
        let mut inner = state.lock();
        inner.requests += 1;
        let now = Instant::now();
        let start = *inner.window_start.get_or_insert(now);
        if now.duration_since(start) >= config.rate_window {
            inner.window_start = Some(now);
            inner.window_count = 0;
        }
        inner.window_count += 1;
        let limited = config.rate_limit > 0 && inner.window_count > config.rate_limit;
        let remaining = config.rate_limit.saturating_sub(inner.window_count);
        let reset = inner.window_start.unwrap_or(now) + config.rate_window;
        let fail = !limited && config.fail_every > 0 && inner.requests % config.fail_every == 0;
        if limited {
            inner.rate_limited += 1;
        }
        if fail {
            inner.transient += 1;
        }
        (
            limited,
            remaining,
            reset.saturating_duration_since(now),
            fail,
        )
    };
    let reset_at = chrono::Utc::now().timestamp() + reset.as_secs() as i64 + 1;
    let headers = |resp: &mut Response| {
        let h = resp.headers_mut();
        let limit = if config.rate_limit == 0 {
            3600
        } else {
            config.rate_limit
        };
        h.insert("RateLimit-Limit", HeaderValue::from(limit));
        h.insert("RateLimit-Remaining", HeaderValue::from(remaining));
        h.insert("RateLimit-Reset", HeaderValue::from(reset_at));
    };
    if limited {
        let mut resp = error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            "limit of requests per hour reached",
        );
        headers(&mut resp);
        return resp;
    }
    if fail {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "service temporarily unavailable",
        );
    }
    let method = req.method().clone();
    // This layer sits inside `nest("/v1")`, which strips the prefix: record the full path.
    let path = format!("/v1{}", req.uri().path());
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    if method != Method::GET {
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        state.lock().recorded.push(Recorded {
            method: method.to_string(),
            path: path.clone(),
            body,
        });
    }
    let req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    let mut resp = next.run(req).await;
    headers(&mut resp);
    resp
}

/// `page`, `per_page` (default 25, at most 50) and `label_selector` / `name` filters.
fn paginate(items: Vec<Value>, query: &HashMap<String, String>, key: &str) -> Response {
    let per_page: usize = query
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
        .clamp(1, 50);
    let page: usize = query
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let items: Vec<Value> = match query.get("label_selector").map(|s| LabelSelector::parse(s)) {
        Some(Err(message)) => return error(StatusCode::BAD_REQUEST, "invalid_input", &message),
        Some(Ok(sel)) => items
            .into_iter()
            .filter(|i| sel.matches(&i["labels"]))
            .collect(),
        None => items,
    };
    let items: Vec<Value> = match query.get("name") {
        Some(name) => items
            .into_iter()
            .filter(|i| i["name"] == name.as_str())
            .collect(),
        None => items,
    };
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

fn action_json(id: i64, command: &str, resources: Value) -> Value {
    json!({"id": id, "command": command, "status": "running", "progress": 0,
           "started": now(), "finished": null, "resources": resources, "error": null})
}

fn new_action(inner: &mut Inner, polls: u32, command: &str, resources: Value) -> Value {
    let id = next_id(inner);
    let json = action_json(id, command, resources);
    inner.actions.insert(
        id,
        ActionState {
            json: json.clone(),
            polls_left: polls,
        },
    );
    json
}

fn server_type_json(name: &str) -> Option<Value> {
    let types = server_types_data();
    types
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .cloned()
}

fn location_json(name: &str) -> Value {
    let (city, country, zone) = match name {
        "nbg1" => ("Nuremberg", "DE", "eu-central"),
        "hel1" => ("Helsinki", "FI", "eu-central"),
        "ash" => ("Ashburn, VA", "US", "us-east"),
        "hil" => ("Hillsboro, OR", "US", "us-west"),
        "sin" => ("Singapore", "SG", "ap-southeast"),
        _ => ("Falkenstein", "DE", "eu-central"),
    };
    json!({"id": 1, "name": name, "description": format!("{city} DC"), "city": city,
           "country": country, "latitude": 50.47612, "longitude": 12.370071, "network_zone": zone})
}

fn new_server(inner: &mut Inner, body: &Value, polls: u32) -> (Value, i64) {
    let id = next_id(inner);
    let location = body["location"].as_str().unwrap_or("fsn1");
    let public_net = &body["public_net"];
    let v4 = public_net["enable_ipv4"].as_bool().unwrap_or(true);
    let v6 = public_net["enable_ipv6"].as_bool().unwrap_or(true);
    let firewalls: Vec<Value> = body["firewalls"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| json!({"id": f["firewall"], "status": "applied"}))
                .collect()
        })
        .unwrap_or_default();
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
            "firewalls": firewalls,
        },
        "private_net": [],
        "server_type": server_type_json(body["server_type"].as_str().unwrap_or("")).unwrap_or(Value::Null),
        "location": location_json(location),
        "image": null, "iso": null, "rescue_enabled": false, "locked": false,
        "backup_window": null, "outgoing_traffic": 0, "ingoing_traffic": 0, "included_traffic": 21990232555520i64,
        "protection": {"delete": false, "rebuild": false},
        "primary_disk_size": 80, "volumes": [], "load_balancers": [],
    });
    let action = new_action(
        inner,
        polls,
        "create_server",
        json!([{"id": id, "type": "server"}]),
    );
    let action_id = action["id"].as_i64().unwrap_or_default();
    for fw in body["firewalls"].as_array().into_iter().flatten() {
        if let Some(f) = fw["firewall"]
            .as_i64()
            .and_then(|f| inner.firewalls.get_mut(&f))
        {
            if let Some(applied) = f["applied_to"].as_array_mut() {
                applied.push(json!({"type": "server", "server": {"id": id}}));
            }
        }
    }
    (server, action_id)
}

/// The server as shown now: `running` once its create action has finished.
fn view(inner: &Inner, stored: &Stored) -> Value {
    let mut json = stored.json.clone();
    let done = inner
        .actions
        .get(&stored.action)
        .map(|a| a.polls_left == 0)
        .unwrap_or(true);
    if done {
        json["status"] = json!("running");
    }
    json
}

async fn list_servers(
    State(state): State<FakeState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let inner = state.lock();
    let items = inner.servers.values().map(|s| view(&inner, s)).collect();
    paginate(items, &q, "servers")
}

async fn get_server(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let inner = state.lock();
    match inner.servers.get(&id) {
        Some(s) => Json(json!({"server": view(&inner, s)})).into_response(),
        None => error(StatusCode::NOT_FOUND, "not_found", "server not found"),
    }
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
    if inner.servers.values().any(|s| s.json["name"] == name) {
        return error(
            StatusCode::CONFLICT,
            "uniqueness_error",
            "server name is already used",
        );
    }
    if server_type_json(body["server_type"].as_str().unwrap_or_default()).is_none() {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            "invalid input in field 'server_type'",
        );
    }
    if let Some(user_data) = body["user_data"].as_str() {
        if user_data.len() > 32 * 1024 {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_input",
                "user_data is longer than 32 KiB",
            );
        }
    }
    for fw in body["firewalls"].as_array().into_iter().flatten() {
        if !fw["firewall"]
            .as_i64()
            .is_some_and(|f| inner.firewalls.contains_key(&f))
        {
            return error(StatusCode::NOT_FOUND, "not_found", "firewall not found");
        }
    }
    if inner.servers.len() >= config.server_limit {
        return error(
            StatusCode::FORBIDDEN,
            "resource_limit_exceeded",
            "server limit exceeded",
        );
    }
    let (server, action_id) = new_server(&mut inner, &body, config.action_polls);
    let id = server["id"].as_i64().unwrap_or_default();
    let action = inner.actions[&action_id].json.clone();
    let start = new_action(
        &mut inner,
        config.action_polls,
        "start_server",
        json!([{"id": id, "type": "server"}]),
    );
    inner.servers.insert(
        id,
        Stored {
            json: server.clone(),
            created: Instant::now(),
            action: action_id,
        },
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
    if inner.servers.remove(&id).is_none() {
        return error(StatusCode::NOT_FOUND, "not_found", "server not found");
    }
    for fw in inner.firewalls.values_mut() {
        if let Some(applied) = fw["applied_to"].as_array_mut() {
            applied.retain(|a| a["server"]["id"] != id);
        }
    }
    let action = new_action(
        &mut inner,
        config.action_polls,
        "delete_server",
        json!([{"id": id, "type": "server"}]),
    );
    Json(json!({"action": action})).into_response()
}

async fn get_action(State(state): State<FakeState>, Path(id): Path<i64>) -> Response {
    let mut inner = state.lock();
    let Some(action) = inner.actions.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "not_found", "action not found");
    };
    if action.polls_left > 0 {
        action.polls_left -= 1;
    }
    let mut json = action.json.clone();
    if action.polls_left == 0 {
        json["status"] = json!("success");
        json["progress"] = json!(100);
        json["finished"] = json!(now());
    } else {
        json["progress"] = json!(50);
    }
    Json(json!({"action": json})).into_response()
}

async fn list_firewalls(
    State(state): State<FakeState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
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
    let id = next_id(&mut inner);
    let firewall = json!({"id": id, "name": name, "labels": body.get("labels").cloned().unwrap_or(json!({})),
        "created": now(), "rules": rules, "applied_to": []});
    inner.firewalls.insert(id, firewall.clone());
    let action = new_action(
        &mut inner,
        config.action_polls,
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
    let action = new_action(
        &mut inner,
        config.action_polls,
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

async fn list_ssh_keys(
    State(state): State<FakeState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let items = state.lock().ssh_keys.values().cloned().collect();
    paginate(items, &q, "ssh_keys")
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
    let id = next_id(&mut inner);
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

/// Server types sold by the fake, with cores, memory and per-location prices (EUR, net and
/// gross at 19% VAT). Figures are close to Hetzner's 2025 list prices but are the fake's own:
/// real runs read live prices.
const TYPES: &[(&str, &str, i64, f64, f64, &str)] = &[
    // name, cpu_type, cores, memory GB, net EUR/hour (fsn1), description
    ("cx22", "shared", 2, 4.0, 0.0060, "CX22"),
    ("cx32", "shared", 4, 8.0, 0.0113, "CX32"),
    ("cx42", "shared", 8, 16.0, 0.0273, "CX42"),
    ("cx52", "shared", 16, 32.0, 0.0540, "CX52"),
    ("cpx31", "shared", 4, 8.0, 0.0224, "CPX 31"),
    ("cpx41", "shared", 8, 16.0, 0.0409, "CPX 41"),
    ("cpx51", "shared", 16, 32.0, 0.0842, "CPX 51"),
    ("ccx23", "dedicated", 4, 16.0, 0.0392, "CCX23 Dedicated CPU"),
    ("ccx33", "dedicated", 8, 32.0, 0.0777, "CCX33 Dedicated CPU"),
    (
        "ccx43",
        "dedicated",
        16,
        64.0,
        0.1553,
        "CCX43 Dedicated CPU",
    ),
    (
        "ccx53",
        "dedicated",
        32,
        128.0,
        0.3105,
        "CCX53 Dedicated CPU",
    ),
];
const LOCATIONS: &[&str] = &["fsn1", "nbg1", "hel1", "ash", "hil"];

fn price(net: f64) -> Value {
    json!({"net": format!("{net:.10}"), "gross": format!("{:.10}", net * 1.19)})
}

fn type_prices(hourly: f64) -> Value {
    LOCATIONS
        .iter()
        .map(|loc| {
            // US locations cost more and include less traffic, as on the real price list.
            let factor = if matches!(*loc, "ash" | "hil") { 1.2 } else { 1.0 };
            let h = hourly * factor;
            json!({"location": loc, "price_hourly": price(h), "price_monthly": price((h * 730.0 * 100.0).round() / 100.0 - 0.0001),
                   "included_traffic": if factor > 1.0 { 1099511627776i64 } else { 21990232555520i64 },
                   "price_per_tb_traffic": price(1.0)})
        })
        .collect()
}

fn server_types_data() -> Value {
    TYPES
        .iter()
        .enumerate()
        .map(|(i, (name, cpu, cores, mem, hourly, desc))| {
            json!({"id": i + 1, "name": name, "description": desc, "cores": cores, "memory": mem,
                   "disk": if *cores >= 16 { 360 } else { 80 }, "cpu_type": cpu, "storage_type": "local",
                   "architecture": "x86", "category": if *cpu == "dedicated" { "dedicated_cpu" } else { "shared_cpu" },
                   "deprecated": false, "deprecation": null,
                   "locations": LOCATIONS.iter().enumerate().map(|(j, l)| json!({"id": j + 1, "name": l, "deprecation": null})).collect::<Vec<_>>(),
                   "prices": type_prices(*hourly)})
        })
        .collect()
}

async fn server_types(Query(q): Query<HashMap<String, String>>) -> Response {
    let items = server_types_data().as_array().cloned().unwrap_or_default();
    paginate(items, &q, "server_types")
}

async fn pricing() -> Response {
    let types: Vec<Value> = TYPES
        .iter()
        .enumerate()
        .map(|(i, (name, _, _, _, hourly, _))| json!({"id": i + 1, "name": name, "prices": type_prices(*hourly)}))
        .collect();
    let per_loc = |monthly: f64| -> Vec<Value> {
        LOCATIONS.iter().map(|l| json!({"location": l, "price_hourly": price(monthly / 730.0), "price_monthly": price(monthly)})).collect()
    };
    Json(json!({"pricing": {
        "currency": "EUR", "vat_rate": "19.00",
        "image": {"price_per_gb_month": price(0.0119)},
        "floating_ip": {"price_monthly": price(3.0)},
        "floating_ips": [{"type": "ipv4", "prices": LOCATIONS.iter().map(|l| json!({"location": l, "price_monthly": price(3.0)})).collect::<Vec<_>>()}],
        "primary_ips": [{"type": "ipv4", "prices": per_loc(0.5)}, {"type": "ipv6", "prices": per_loc(0.0)}],
        "server_backup": {"percentage": "20.00"},
        "volume": {"price_per_gb_month": price(0.044)},
        "load_balancer_types": [],
        "server_types": types,
    }}))
    .into_response()
}

/// Selenium Grid 4's `GET /status`, as the hub would answer once nodes have registered.
async fn hub_status(State(state): State<FakeState>, _uri: Uri, _h: HeaderMap) -> Response {
    let boot = state.config().node_boot;
    let inner = state.lock();
    let nodes: Vec<Value> = inner
        .servers
        .values()
        .filter(|s| s.json["labels"]["viewerfleet-role"] == "node")
        .filter(|s| boot.is_some_and(|b| s.created.elapsed() >= b))
        .filter_map(|s| {
            let net = s.json["public_net"]["ipv6"]["ip"].as_str()?;
            let host = net.trim_end_matches("/64").to_string() + "1";
            Some(json!({"id": format!("node-{}", s.json["id"]), "uri": format!("http://[{host}]:5555"),
                        "availability": "UP", "maxSessions": 1, "slots": []}))
        })
        .collect();
    Json(json!({"value": {"ready": !nodes.is_empty(), "message": "Selenium Grid ready (simulated by viewerfleet fake-hcloud).", "nodes": nodes}}))
        .into_response()
}

/// A parsed Hetzner label selector: comma-separated terms, all of which must hold.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LabelSelector(Vec<Term>);

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl LabelSelector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut terms = Vec::new();
        let mut depth = 0;
        let mut current = String::new();
        let mut parts = Vec::new();
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        parts.push(current);
        for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let list = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| format!("invalid label selector term `{part}`"))?;
                Ok(inner.split(',').map(|s| s.trim().to_string()).collect())
            };
            let term = if let Some((k, v)) = part.split_once("!=") {
                Term::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Term::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Term::NotIn(k.trim().into(), list(rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Term::In(k.trim().into(), list(rest)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Term::Absent(k.trim().into())
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Term::Exists(part.into())
            } else {
                return Err(format!("invalid label selector term `{part}`"));
            };
            terms.push(term);
        }
        Ok(LabelSelector(terms))
    }

    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(|v| v.as_str());
        self.0.iter().all(|t| match t {
            Term::Eq(k, v) => get(k) == Some(v.as_str()),
            Term::Ne(k, v) => get(k) != Some(v.as_str()),
            Term::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Term::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Term::Exists(k) => get(k).is_some(),
            Term::Absent(k) => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors() {
        let labels = json!({"viewerfleet-run": "r1", "viewerfleet-role": "node"});
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&labels);
        assert!(ok("viewerfleet-run=r1"));
        assert!(ok("viewerfleet-run==r1,viewerfleet-role"));
        assert!(!ok("viewerfleet-run!=r1"));
        assert!(ok("viewerfleet-role in (hub, node)"));
        assert!(!ok("viewerfleet-role notin (node)"));
        assert!(ok("!other"));
        assert!(!ok("other"));
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn catalogue_deserializes_into_the_crate_models() {
        let types: Vec<hcloud::models::ServerType> =
            serde_json::from_value(server_types_data()).unwrap();
        assert!(types.iter().any(|t| t.name == "ccx33" && t.cores == 8));
    }
}
