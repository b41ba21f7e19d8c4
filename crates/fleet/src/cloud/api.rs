//! The Hetzner Cloud API over HTTP, with what a fleet of a hundred servers needs around it:
//! the endpoint from `HCLOUD_ENDPOINT` (the same convention as Hetzner's CLI and Terraform
//! provider, so a fake or proxy can stand in), the request budget (`pacer`: requests paced
//! by the `RateLimit-*` headers, 429s waited out), retries with backoff on transient 5xx and
//! lost connections, pagination (`list`), many actions polled in one request
//! (`wait_actions`), errors turned into [`CloudError`]s, and a count of every request sent.
//!
//! Requests and answers use the `hcloud` crate's models; the transport is our own because
//! the crate's calls hide the answers' headers, which the budget is read from.

use super::pacer::{Pacer, RateHeaders};
use super::token::ApiToken;
use super::CloudError;
use hcloud::models;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The real API's address; `HCLOUD_ENDPOINT` replaces it.
pub(crate) const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// Actions polled per request (the list's largest page).
const ACTIONS_PER_POLL: usize = 50;

/// A configured API client. Clones share the request budget and the request count. Its
/// `Debug` shows the endpoint, never the token.
#[derive(Clone)]
pub struct HcloudApi {
    client: reqwest::Client,
    endpoint: String,
    token: ApiToken,
    /// First wait after a transient error; doubles each retry up to `max_backoff`, each
    /// wait jittered (`sys::backoff`).
    pub backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// Attempts per request on transient errors before giving up.
    pub attempts: u32,
    /// First interval between polls of running actions; grows to `max_poll_interval`.
    pub poll_interval: Duration,
    pub max_poll_interval: Duration,
    /// How long 429 answers may hold one request back before it fails.
    pub rate_limit_patience: Duration,
    pacer: Arc<Pacer>,
    requests: Arc<AtomicU64>,
}

impl std::fmt::Debug for HcloudApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcloudApi")
            .field("endpoint", &self.endpoint)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// `(key, value)` query parameters; keys may repeat (`id=1&id=2`).
pub type Query = Vec<(String, String)>;

/// One query parameter.
pub fn q(key: &str, value: impl ToString) -> (String, String) {
    (key.to_string(), value.to_string())
}

impl HcloudApi {
    pub fn new(endpoint: &str, token: &ApiToken) -> HcloudApi {
        HcloudApi::with_agent(endpoint, token, "viewerfleet")
    }

    /// As [`HcloudApi::new`], its requests naming `agent` in their `User-Agent` (the reaper
    /// says it is one).
    pub fn with_agent(endpoint: &str, token: &ApiToken, agent: &str) -> HcloudApi {
        let client = crate::sys::tls::http_client_builder()
            .timeout(Duration::from_secs(60))
            .user_agent(format!("{agent}/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        HcloudApi {
            client,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: token.clone(),
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            attempts: 8,
            poll_interval: Duration::from_secs(1),
            max_poll_interval: Duration::from_secs(4),
            rate_limit_patience: Duration::from_secs(15 * 60),
            pacer: Arc::new(Pacer::new()),
            requests: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Endpoint from `HCLOUD_ENDPOINT` (or the real API) and token from `HCLOUD_TOKEN` or `token_file`.
    pub fn from_env(token_file: Option<&str>) -> Result<HcloudApi, CloudError> {
        let token = ApiToken::load(token_file)?;
        let endpoint = std::env::var("HCLOUD_ENDPOINT")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        Ok(HcloudApi::new(&endpoint, &token).paced_for_endpoint())
    }

    /// Whether this client talks to something else than Hetzner's API (a fake, a proxy).
    pub(crate) fn is_default_endpoint(&self) -> bool {
        self.endpoint == DEFAULT_ENDPOINT
    }

    /// Polls a local fake quickly: it answers in milliseconds.
    pub fn paced_for_endpoint(mut self) -> HcloudApi {
        if !self.is_default_endpoint() {
            self.poll_interval = Duration::from_millis(100);
            self.max_poll_interval = Duration::from_millis(500);
            self.backoff = Duration::from_millis(100);
        }
        self
    }

    /// The token, for handing it to the reaper over its pipe (never to argv, env or a file).
    pub(crate) fn token(&self) -> &ApiToken {
        &self.token
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Requests sent so far by this client and its clones (retries included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Answers 429 received so far.
    pub fn rate_limited(&self) -> u64 {
        self.pacer.limited()
    }

    pub(crate) fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    /// One request, paced by the budget; 429s are waited out (up to `rate_limit_patience`),
    /// transient errors and lost connections retried with backoff. A retried POST may find
    /// its first attempt executed: callers handle `uniqueness_error` (see `provision`).
    pub async fn request(
        &self,
        what: &str,
        method: Method,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Value, CloudError> {
        let url = format!("{}{path}", self.endpoint);
        let started = Instant::now();
        let mut backoff = crate::sys::backoff::Backoff::new(self.backoff, self.max_backoff);
        let mut attempt = 1;
        loop {
            let ticket = self.pacer.acquire().await;
            self.requests.fetch_add(1, Ordering::SeqCst);
            let mut req = self
                .client
                .request(method.clone(), &url)
                .bearer_auth(self.token.expose())
                .query(query);
            if let Some(body) = body {
                req = req.json(body);
            }
            let answer = match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let headers = RateHeaders::parse(resp.headers());
                    match resp.bytes().await {
                        Ok(bytes) => {
                            ticket.answered(headers, status == 429);
                            Ok((status, bytes))
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let err = match answer {
                Ok((status, bytes)) if (200..300).contains(&status) => {
                    return parse(what, &bytes);
                }
                Ok((status, bytes)) => classify(what, status, &bytes),
                Err(e) => CloudError::Transient {
                    what: format!("{what} ({})", without_url(&e)),
                    status: 0,
                },
            };
            match err {
                // The pacer holds the next attempt back until the bucket has refilled.
                CloudError::RateLimited { .. } if started.elapsed() < self.rate_limit_patience => {
                    tracing::debug!("{what}: 429, waiting for the request budget");
                }
                CloudError::Transient { .. } if attempt < self.attempts => {
                    let wait = backoff.next_wait();
                    tracing::debug!("{what}: {err}; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                e => return Err(e),
            }
        }
    }

    pub async fn get<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        query: &[(String, String)],
    ) -> Result<T, CloudError> {
        typed(
            what,
            self.request(what, Method::GET, path, query, None).await?,
        )
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        body: &impl serde::Serialize,
    ) -> Result<T, CloudError> {
        let body = serde_json::to_value(body).map_err(|e| CloudError::Transport {
            what: what.into(),
            message: format!("cannot encode the request: {e}"),
        })?;
        typed(
            what,
            self.request(what, Method::POST, path, &[], Some(&body))
                .await?,
        )
    }

    pub async fn put<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        body: &Value,
    ) -> Result<T, CloudError> {
        typed(
            what,
            self.request(what, Method::PUT, path, &[], Some(body))
                .await?,
        )
    }

    /// `DELETE`; the answer's JSON (`Null` for `204 No Content`).
    pub async fn delete(&self, what: &str, path: &str) -> Result<Value, CloudError> {
        self.request(what, Method::DELETE, path, &[], None).await
    }

    /// Every page of a list call: `GET path` with `filters`, items under `key`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
        key: &str,
        filters: &[(String, String)],
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let mut query = filters.to_vec();
            query.push(q("page", page));
            query.push(q("per_page", 50));
            let value = self.request(what, Method::GET, path, &query, None).await?;
            let items: Vec<T> = typed(what, value[key].clone())?;
            out.extend(items);
            match value["meta"]["pagination"]["next_page"].as_i64() {
                Some(next) if next > page => page = next,
                _ => return Ok(out),
            }
        }
    }

    /// Waits until every action finished: all still running are polled together, up to 50
    /// per request (`GET /actions?id=…&id=…`), at an interval growing from `poll_interval`
    /// to `max_poll_interval`. The first failed action is the error.
    pub(crate) async fn wait_actions(
        &self,
        actions: &[models::Action],
        timeout: Duration,
    ) -> Result<(), CloudError> {
        let deadline = Instant::now() + timeout;
        let mut running: BTreeMap<i64, models::Action> = BTreeMap::new();
        for action in actions {
            if still_running(action)? {
                running.insert(action.id, action.clone());
            }
        }
        let mut interval = self.poll_interval;
        while !running.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                let mut commands: Vec<&str> =
                    running.values().map(|a| a.command.as_str()).collect();
                commands.dedup();
                return Err(CloudError::Timeout {
                    what: format!(
                        "{} action(s) ({}) to finish",
                        running.len(),
                        commands.join(", ")
                    ),
                });
            }
            // Jittered, so the polls of fleets made together spread out.
            tokio::time::sleep(crate::sys::backoff::jitter(interval).min(deadline - now)).await;
            interval = (interval * 3 / 2).min(self.max_poll_interval);
            let ids: Vec<i64> = running.keys().copied().collect();
            for chunk in ids.chunks(ACTIONS_PER_POLL) {
                let query: Query = chunk.iter().map(|id| q("id", id)).collect();
                let polled: Vec<models::Action> = self
                    .list("poll actions", "/actions", "actions", &query)
                    .await?;
                for action in polled {
                    if !still_running(&action)? {
                        running.remove(&action.id);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Running (true), finished (false), or its error.
fn still_running(action: &models::Action) -> Result<bool, CloudError> {
    match action.status {
        models::action::Status::Running => Ok(true),
        models::action::Status::Success => Ok(false),
        models::action::Status::Error => {
            let (code, message) = action
                .error
                .as_ref()
                .map(|e| (e.code.clone(), e.message.clone()))
                .unwrap_or_default();
            let on: Vec<String> = action
                .resources
                .iter()
                .map(|r| format!("{} {}", r.r#type, r.id))
                .collect();
            Err(CloudError::Action {
                what: format!("{} on {}", action.command, on.join(", ")),
                code,
                message,
            })
        }
    }
}

fn parse(what: &str, bytes: &[u8]) -> Result<Value, CloudError> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(|e| CloudError::Transport {
        what: what.into(),
        message: format!("the answer is not JSON: {e}"),
    })
}

fn typed<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, CloudError> {
    serde_json::from_value(value).map_err(|e| CloudError::Transport {
        what: what.into(),
        message: format!("unexpected answer: {e}"),
    })
}

/// Turns an error answer into ours, reading Hetzner's `{"error":{"code","message"}}` body.
fn classify(what: &str, status: u16, body: &[u8]) -> CloudError {
    let body: Option<Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| {
        body.as_ref()
            .and_then(|b| b["error"][k].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (code, message) = (field("code"), field("message"));
    match (status, code.as_str()) {
        (_, "resource_limit_exceeded") => CloudError::LimitExceeded {
            what: what.to_string(),
            message,
        },
        (429, _) | (_, "rate_limit_exceeded") => CloudError::RateLimited {
            what: what.to_string(),
        },
        // `locked`: another action runs on the resource; `conflict`: it changed meanwhile.
        (500..=599, _) | (_, "unavailable") | (_, "timeout") | (_, "locked") | (_, "conflict") => {
            CloudError::Transient {
                what: what.to_string(),
                status,
            }
        }
        (401, _) | (_, "unauthorized") => CloudError::Unauthorized,
        _ => CloudError::Api {
            what: what.to_string(),
            status,
            code,
            message,
        },
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<endpoint>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
