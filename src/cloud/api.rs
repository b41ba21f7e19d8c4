//! The Hetzner Cloud API through the `hcloud` crate, with what the crate leaves to callers:
//! the endpoint from `HCLOUD_ENDPOINT` (the same convention as Hetzner's CLI and Terraform
//! provider, so a fake or proxy can stand in), retries with backoff on 429 and transient 5xx,
//! pagination, polling actions to completion, and errors turned into [`CloudError`]s.

use super::token::ApiToken;
use super::CloudError;
use hcloud::apis::configuration::Configuration;
use hcloud::apis::{actions_api, Error as HError};
use hcloud::models;
use std::future::Future;
use std::time::Duration;

/// The real API's address; `HCLOUD_ENDPOINT` replaces it.
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// A configured API client. Its `Debug` shows the endpoint, never the token.
#[derive(Clone)]
pub struct HcloudApi {
    config: Configuration,
    endpoint: String,
    /// First wait after a 429 or 5xx; doubles each retry up to `max_backoff`.
    pub backoff: Duration,
    /// Longest wait between two attempts.
    pub max_backoff: Duration,
    /// Attempts per request before giving up.
    pub attempts: u32,
    /// Interval between polls of a running action.
    pub poll_interval: Duration,
}

impl std::fmt::Debug for HcloudApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcloudApi")
            .field("endpoint", &self.endpoint)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl HcloudApi {
    pub fn new(endpoint: &str, token: &ApiToken) -> HcloudApi {
        let mut config = Configuration::new();
        let endpoint = endpoint.trim_end_matches('/').to_string();
        for base in ["https://api.hetzner.cloud/v1", "https://api.hetzner.com/v1"] {
            config
                .base_path_mapping
                .insert(base.into(), endpoint.clone());
        }
        config.bearer_access_token = Some(token.expose().to_string());
        config.user_agent = Some(format!("viewerfleet/{}", env!("CARGO_PKG_VERSION")));
        config.client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        HcloudApi {
            config,
            endpoint,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            attempts: 8,
            poll_interval: Duration::from_millis(500),
        }
    }

    /// Endpoint from `HCLOUD_ENDPOINT` (or the real API) and token from `HCLOUD_TOKEN` or `token_file`.
    pub fn from_env(token_file: Option<&str>) -> Result<HcloudApi, CloudError> {
        let token = ApiToken::load(token_file)?;
        let endpoint = std::env::var("HCLOUD_ENDPOINT")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let mut api = HcloudApi::new(&endpoint, &token);
        if endpoint != DEFAULT_ENDPOINT {
            // A local fake answers in milliseconds: poll it quickly.
            api.poll_interval = Duration::from_millis(100);
            api.backoff = Duration::from_millis(100);
        }
        Ok(api)
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Runs one API call, retrying rate limits (429), transient server errors (5xx) and
    /// connection failures with exponential backoff. `what` names the call in errors.
    pub async fn call<T, E, F, Fut>(&self, what: &str, mut f: F) -> Result<T, CloudError>
    where
        F: FnMut(Configuration) -> Fut,
        Fut: Future<Output = Result<T, HError<E>>>,
    {
        let mut wait = self.backoff;
        let mut attempt = 1;
        loop {
            let err = match f(self.config.clone()).await {
                Ok(value) => return Ok(value),
                Err(err) => classify(what, err),
            };
            let retry = matches!(
                err,
                CloudError::RateLimited { .. } | CloudError::Transient { .. }
            );
            if !retry || attempt >= self.attempts {
                return Err(err);
            }
            tracing::debug!("{what}: {err}; retrying in {wait:?}");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(self.max_backoff);
            attempt += 1;
        }
    }

    /// Polls an action until it succeeds (Ok), fails (Err) or `timeout` passes.
    pub async fn wait_action(
        &self,
        action: &models::Action,
        timeout: Duration,
    ) -> Result<(), CloudError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut current = action.clone();
        loop {
            match current.status {
                models::action::Status::Success => return Ok(()),
                models::action::Status::Error => {
                    let (code, message) = current
                        .error
                        .as_ref()
                        .map(|e| (e.code.clone(), e.message.clone()))
                        .unwrap_or_default();
                    return Err(CloudError::Action {
                        what: current.command.clone(),
                        code,
                        message,
                    });
                }
                models::action::Status::Running => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(CloudError::Timeout {
                    what: format!("action {} ({})", current.id, current.command),
                });
            }
            tokio::time::sleep(self.poll_interval).await;
            let id = current.id;
            current = *self
                .call("get action", |c| async move {
                    actions_api::get_action(&c, actions_api::GetActionParams { id }).await
                })
                .await?
                .action;
        }
    }
}

/// Turns the crate's error into ours, reading Hetzner's `{"error":{"code","message"}}` body.
fn classify<E>(what: &str, err: HError<E>) -> CloudError {
    match err {
        HError::ResponseError(resp) => {
            let body: Option<serde_json::Value> = serde_json::from_str(&resp.content).ok();
            let field = |k: &str| {
                body.as_ref()
                    .and_then(|b| b["error"][k].as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let (code, message) = (field("code"), field("message"));
            let status = resp.status.as_u16();
            match (status, code.as_str()) {
                (_, "resource_limit_exceeded") => CloudError::LimitExceeded {
                    what: what.to_string(),
                    message,
                },
                (429, _) | (_, "rate_limit_exceeded") => CloudError::RateLimited {
                    what: what.to_string(),
                },
                (500..=599, _) | (_, "unavailable") | (_, "timeout") => CloudError::Transient {
                    what: what.to_string(),
                    status,
                },
                (401, _) | (_, "unauthorized") => CloudError::Unauthorized,
                _ => CloudError::Api {
                    what: what.to_string(),
                    status,
                    code,
                    message,
                },
            }
        }
        HError::Reqwest(e) if e.is_connect() || e.is_timeout() || e.is_request() => {
            CloudError::Transient {
                what: format!("{what} ({})", without_url(&e)),
                status: 0,
            }
        }
        HError::Reqwest(e) => CloudError::Transport {
            what: what.to_string(),
            message: without_url(&e),
        },
        HError::Serde(e) => CloudError::Transport {
            what: what.to_string(),
            message: format!("unexpected response: {e}"),
        },
        HError::Io(e) => CloudError::Transport {
            what: what.to_string(),
            message: e.to_string(),
        },
    }
}

fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<endpoint>");
    }
    text
}

/// Collects every page of a list call: `f(page)` returns `(items, next_page)`.
pub async fn all_pages<T, F, Fut>(mut f: F) -> Result<Vec<T>, CloudError>
where
    F: FnMut(i64) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<i64>), CloudError>>,
{
    let mut out = Vec::new();
    let mut page = 1;
    loop {
        let (items, next) = f(page).await?;
        out.extend(items);
        match next {
            Some(next) if next > page => page = next,
            _ => return Ok(out),
        }
    }
}
