//! The fleet's Selenium Grid 4 hub, simulated under `/hub/`: what a real hub built from
//! `grid/` would answer once the fake's node servers have booted. A fleet split over several
//! hubs is simulated under `/hubs/<hub server name>/`: each hub sees only the node servers
//! whose user data names its address (`HUB_ADDR=[<its /64>::1]`), has its own distributor
//! and places sessions on its own nodes, as separate real hubs would. `/hub/` sees every
//! node server (one hub).
//!
//! - `GET /hub/status`: Grid 4's shape: every booted node server (label
//!   `viewerfleet-role=node`) as a node at `http://[<its /64>::1]:5555`, `UP`, with
//!   `maxSessions` and one slot per session from its user data (`MAX_SESSIONS=` in
//!   `node.env`), each slot with the stereotype from the node's `node.toml` and the session
//!   running in it (with the capabilities it was requested with, as the Grid echoes them);
//! - `POST /hub/session`: the distributor, one request at a time: the session goes to the
//!   node with the most free slots and is created by the WebDriver endpoint behind the hub
//!   (`FakeConfig::webdriver`, e.g. the kit's WebDriver stub); no free slot: `session not
//!   created`, as a Grid whose queue timed out answers;
//! - `/hub/session/{id}/…`: handed to that endpoint while the session's node exists; after
//!   the node's server was deleted, `invalid session id` (the node is lost);
//! - `GET /hub/se/grid/newsessionqueue/queue`: an empty queue.
//!
//! Like a real hub whose `node.env` names `GRID_USERNAME` and `GRID_PASSWORD` (the router's
//! basic authentication), every request must carry them (`router_auth`), else 401; the
//! refusals are counted (`Counts::hub_refused`).

use super::{FakeState, Inner, Stored};
use crate::webdriver_stub::requested_capabilities;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tower::ServiceExt;

/// A session the hub placed on a node.
#[derive(Debug, Clone)]
pub(super) struct HubSession {
    pub node: i64,
    pub capabilities: Value,
    pub started: String,
}

pub(super) fn routes() -> Router<FakeState> {
    Router::new()
        .route("/hub/status", get(|s, h| status(s, h, None)))
        .route("/hub/session", post(|s, b| new_session(s, None, b)))
        .route("/hub/session/{id}", delete(delete_session))
        .route("/hub/session/{id}/{*rest}", any(session_command))
        .route("/hub/se/grid/newsessionqueue/queue", get(queue))
        .route(
            "/hubs/{hub}/status",
            get(|s, h, Path(hub): Path<String>| status(s, h, Some(hub))),
        )
        .route(
            "/hubs/{hub}/session",
            post(|s, Path(hub): Path<String>, b| new_session(s, Some(hub), b)),
        )
        .route(
            "/hubs/{hub}/session/{id}",
            delete(|s, Path((_, id)): Path<(String, String)>| delete_session(s, Path(id))),
        )
        .route(
            "/hubs/{hub}/session/{id}/{*rest}",
            any(
                |s, Path((_, id, rest)): Path<(String, String, String)>, m, b| {
                    session_command(s, Path((id, rest)), m, b)
                },
            ),
        )
        .route("/hubs/{hub}/se/grid/newsessionqueue/queue", get(queue))
}

/// The router's basic authentication: the hub servers a request reaches (`/hub/`: any,
/// `/hubs/<name>/`: that one) that name credentials in their `node.env` admit only requests
/// with one of them; hubs without credentials admit everyone.
pub(super) async fn router_auth(
    State(state): State<FakeState>,
    req: Request<Body>,
    next: axum::middleware::Next,
) -> Response {
    use base64::Engine as _;
    let path = req.uri().path().to_string();
    let name = path
        .strip_prefix("/hubs/")
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string);
    let wanted: Vec<String> = {
        let inner = state.lock();
        inner
            .servers
            .values()
            .filter(|s| s.json["labels"]["viewerfleet-role"] == "hub" && s.delete_action.is_none())
            .filter(|s| name.as_ref().is_none_or(|n| s.json["name"] == n.as_str()))
            .filter_map(|s| {
                let user = env_value(&s.user_data, "GRID_USERNAME")?;
                let password = env_value(&s.user_data, "GRID_PASSWORD")?;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            })
            .collect()
    };
    let sent = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if wanted.is_empty() || wanted.contains(&sent) {
        return next.run(req).await;
    }
    state.lock().counts.hub_refused += 1;
    (
        StatusCode::UNAUTHORIZED,
        [(
            axum::http::header::WWW_AUTHENTICATE,
            "Basic realm=\"selenium-server\"",
        )],
        "",
    )
        .into_response()
}

/// `[<the /64>::1]` of a server: its address as `HUB_ADDR` names it.
fn bracketed_host(s: &Stored) -> Option<String> {
    let net = s.json["public_net"]["ipv6"]["ip"].as_str()?;
    Some(format!("[{}1]", net.trim_end_matches("/64")))
}

/// The hub server named `name` (not being deleted), as its nodes name it: `[addr]`.
fn hub_addr(inner: &Inner, name: &str) -> Option<String> {
    inner
        .servers
        .values()
        .filter(|s| s.json["labels"]["viewerfleet-role"] == "hub" && s.delete_action.is_none())
        .find(|s| s.json["name"] == name)
        .and_then(bracketed_host)
}

/// A node as the hub sees it.
struct Node {
    server: i64,
    uri: String,
    max_sessions: u32,
    stereotype: Value,
}

/// `NAME=value` from the server's `node.env`.
fn env_value(user_data: &str, name: &str) -> Option<String> {
    user_data.lines().find_map(|l| {
        l.trim()
            .strip_prefix(&format!("{name}="))
            .map(|v| v.trim().to_string())
    })
}

/// The stereotype line of the node's `node.toml`, placeholders filled from `node.env`, as
/// node-bootstrap.sh fills them. Its load endpoint is where the node would serve it,
/// `http://[host]:LOAD_PORT/metrics` (nothing serves it here), named also when `node.toml`
/// cannot be read (viewerfleet sends it compressed) and `node.env` has a `LOAD_PORT`.
fn stereotype(user_data: &str, host: &str) -> Value {
    let load =
        env_value(user_data, "LOAD_PORT").map(|port| format!("http://[{host}]:{port}/metrics"));
    let text = user_data
        .lines()
        .find_map(|l| l.trim().strip_prefix("stereotype = '"))
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or(r#"{"browserName": "chrome"}"#);
    let mut filled = text.to_string();
    while let Some(start) = filled.find('@') {
        let Some(len) = filled[start + 1..].find('@') else {
            break;
        };
        let name = filled[start + 1..start + 1 + len].to_string();
        let value = match name.as_str() {
            "VIEWERFLEET_LOAD" => load.clone().unwrap_or_default(),
            _ => env_value(user_data, &name).unwrap_or_default(),
        };
        filled.replace_range(start..start + len + 2, &value);
    }
    let mut value: Value =
        serde_json::from_str(&filled).unwrap_or_else(|_| json!({"browserName": "chrome"}));
    if let (Some(load), Some(map)) = (load, value.as_object_mut()) {
        map.entry("viewerfleet:load").or_insert(json!(load));
    }
    value
}

/// Booted node servers registered with `hub` (`[addr]`; `None`: any hub), in id order.
fn nodes(state: &FakeState, inner: &Inner, hub: Option<&str>) -> Vec<Node> {
    let Some(boot) = state.config().node_boot else {
        return Vec::new();
    };
    inner
        .servers
        .values()
        .filter(|s| s.json["labels"]["viewerfleet-role"] == "node")
        .filter(|s| s.delete_action.is_none() && s.created.elapsed() >= boot)
        .filter(|s| hub.is_none_or(|h| env_value(&s.user_data, "HUB_ADDR").as_deref() == Some(h)))
        .filter_map(node)
        .collect()
}

/// The hub a request reached: `None` for `/hub/` (every node), the named hub's address for
/// `/hubs/<name>/`, or the answer of a host that does not exist.
fn which_hub(inner: &Inner, name: Option<String>) -> Result<Option<String>, Box<Response>> {
    match name {
        None => Ok(None),
        Some(name) => hub_addr(inner, &name).map(Some).ok_or_else(|| {
            Box::new(webdriver_error(
                StatusCode::BAD_GATEWAY,
                "unknown error",
                &format!("no hub server {name} (deleted, or never created)"),
            ))
        }),
    }
}

fn node(s: &Stored) -> Option<Node> {
    let bracketed = bracketed_host(s)?;
    let host = bracketed.trim_matches(['[', ']']).to_string();
    Some(Node {
        server: s.json["id"].as_i64()?,
        uri: format!("http://{bracketed}:5555"),
        max_sessions: env_value(&s.user_data, "MAX_SESSIONS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1),
        stereotype: stereotype(&s.user_data, &host),
    })
}

async fn status(
    State(state): State<FakeState>,
    headers: axum::http::HeaderMap,
    hub: Option<String>,
) -> Response {
    let simulated_load = state.config().node_load.is_some();
    let mut inner = state.lock();
    inner.reap();
    let hub = match which_hub(&inner, hub) {
        Ok(hub) => hub,
        Err(resp) => return *resp,
    };
    let mut nodes = nodes(&state, &inner, hub.as_deref());
    // Simulated nodes serve their load here, at the fake's own address.
    if let (true, Some(host)) = (
        simulated_load,
        headers.get("host").and_then(|h| h.to_str().ok()),
    ) {
        for n in &mut nodes {
            if let Some(map) = n.stereotype.as_object_mut() {
                map.insert(
                    "viewerfleet:load".into(),
                    json!(super::load::url(host, n.server)),
                );
            }
        }
    }
    let json_nodes: Vec<Value> = nodes
        .iter()
        .map(|n| {
            let node_id = format!("node-{}", n.server);
            let mut sessions = inner.sessions.iter().filter(|(_, s)| s.node == n.server);
            let slots: Vec<Value> = (0..n.max_sessions)
                .map(|i| {
                    let session = sessions.next().map(|(id, s)| {
                        json!({"sessionId": id, "start": s.started, "stereotype": n.stereotype,
                               "capabilities": s.capabilities, "uri": n.uri})
                    });
                    json!({"id": {"hostId": node_id, "id": format!("{node_id}-slot-{i}")},
                           "lastStarted": "1970-01-01T00:00:00Z", "session": session,
                           "stereotype": n.stereotype})
                })
                .collect();
            json!({"id": node_id, "uri": n.uri, "availability": "UP", "maxSessions": n.max_sessions,
                   "heartbeatPeriod": 60000, "version": "4.48.0 (simulated by viewerfleet-kit)",
                   "osInfo": {"arch": "amd64", "name": "Linux", "version": "6.1"}, "slots": slots})
        })
        .collect();
    Json(json!({"value": {
        "ready": !json_nodes.is_empty(),
        "message": if json_nodes.is_empty() { "Selenium Grid not ready." } else { "Selenium Grid ready." },
        "nodes": json_nodes,
    }}))
    .into_response()
}

fn webdriver_error(status: StatusCode, error: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"value": {"error": error, "message": message, "stacktrace": ""}})),
    )
        .into_response()
}

async fn forward(state: &FakeState, method: Method, path: &str, body: Bytes) -> Option<Response> {
    let router = state.config().webdriver?;
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(body))
        .ok()?;
    router
        .oneshot(request)
        .await
        .ok()
        .map(IntoResponse::into_response)
}

async fn new_session(State(state): State<FakeState>, hub: Option<String>, body: Bytes) -> Response {
    // Each hub's distributor takes one request at a time.
    let distributor = match &hub {
        None => state.distributor.clone(),
        Some(name) => state
            .hub_distributors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.clone())
            .or_default()
            .clone(),
    };
    let _distributor = distributor.lock().await;
    let node = {
        let mut inner = state.lock();
        inner.reap();
        let hub = match which_hub(&inner, hub) {
            Ok(hub) => hub,
            Err(resp) => return *resp,
        };
        let nodes = nodes(&state, &inner, hub.as_deref());
        nodes
            .iter()
            .map(|n| {
                let used = inner
                    .sessions
                    .values()
                    .filter(|s| s.node == n.server)
                    .count() as u32;
                (n.max_sessions.saturating_sub(used), n.server)
            })
            .filter(|(free, _)| *free > 0)
            .max_by_key(|(free, id)| (*free, -id))
            .map(|(_, id)| id)
    };
    let Some(node) = node else {
        return webdriver_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "session not created",
            "Could not start a new session. New session request timed out: no free slot on any node",
        );
    };
    let requested: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(resp) = forward(&state, Method::POST, "/session", body).await else {
        return webdriver_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "session not created",
            "no WebDriver endpoint behind the simulated hub (FakeConfig::webdriver)",
        );
    };
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if let Some(id) = answer["value"]["sessionId"].as_str() {
        state.lock().sessions.insert(
            id.to_string(),
            HubSession {
                node,
                capabilities: requested_capabilities(&requested),
                started: super::now(),
            },
        );
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The session's node still exists.
fn live(state: &FakeState, id: &str) -> bool {
    let mut inner = state.lock();
    inner.reap();
    let Some(node) = inner.sessions.get(id).map(|s| s.node) else {
        return false;
    };
    let alive = inner
        .servers
        .get(&node)
        .is_some_and(|s| s.delete_action.is_none());
    if !alive {
        inner.sessions.remove(id);
    }
    alive
}

async fn delete_session(State(state): State<FakeState>, Path(id): Path<String>) -> Response {
    if !live(&state, &id) {
        return webdriver_error(
            StatusCode::NOT_FOUND,
            "invalid session id",
            "Unable to find session with ID",
        );
    }
    let resp = forward(
        &state,
        Method::DELETE,
        &format!("/session/{id}"),
        Bytes::new(),
    )
    .await;
    state.lock().sessions.remove(&id);
    resp.unwrap_or_else(|| Json(json!({"value": null})).into_response())
}

async fn session_command(
    State(state): State<FakeState>,
    Path((id, rest)): Path<(String, String)>,
    method: Method,
    body: Bytes,
) -> Response {
    if !live(&state, &id) {
        return webdriver_error(
            StatusCode::NOT_FOUND,
            "invalid session id",
            "Unable to find session with ID: its node is gone",
        );
    }
    forward(&state, method, &format!("/session/{id}/{rest}"), body)
        .await
        .unwrap_or_else(|| {
            webdriver_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unknown error",
                "no WebDriver endpoint behind the simulated hub",
            )
        })
}

async fn queue() -> Json<Value> {
    Json(json!({"value": []}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stereotype_comes_from_the_node_toml_in_the_user_data() {
        let user_data = "write_files:\n- content: |\n    ROLE=node\n    CHROME_BINARY=/usr/lib/chromium/chromium\n    MAX_SESSIONS=16\n- content: |\n    stereotype = '{\"browserName\": \"chrome\", \"goog:chromeOptions\": {\"binary\": \"@CHROME_BINARY@\"}}'\n";
        assert_eq!(
            stereotype(user_data, "2001:db8::1"),
            json!({"browserName": "chrome", "goog:chromeOptions": {"binary": "/usr/lib/chromium/chromium"}})
        );
        assert_eq!(env_value(user_data, "MAX_SESSIONS").as_deref(), Some("16"));
        assert_eq!(
            stereotype("nothing", "2001:db8::1"),
            json!({"browserName": "chrome"})
        );
    }

    #[test]
    fn a_node_with_a_load_port_names_its_load_endpoint() {
        let with_toml = "    LOAD_PORT=9465\n    stereotype = '{\"browserName\": \"chrome\", \"viewerfleet:load\": \"@VIEWERFLEET_LOAD@\"}'\n";
        let compressed = "    LOAD_PORT=9465\n";
        for user_data in [with_toml, compressed] {
            assert_eq!(
                stereotype(user_data, "2001:db8::1")["viewerfleet:load"],
                "http://[2001:db8::1]:9465/metrics",
                "{user_data}"
            );
        }
    }
}
