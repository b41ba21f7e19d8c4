//! One Chromium shared by several viewers (`viewers.per_browser` > 1): one WebDriver
//! session created with `webSocketUrl: true`, and WebDriver BiDi over it. Each viewer gets
//! its own BiDi user context (its own storage, cookies, cache and connection pool, so its
//! own P2P peer id) and a tab in it; the tab's id is at once the BiDi browsing context, the
//! WebDriver window handle and the CDP target. Everything a viewer does goes through BiDi
//! and needs no switching of the session's current window, so viewers of one browser run
//! their commands at once: CDP commands through ChromeDriver's `goog:cdp.sendCommand` on
//! the tab's own CDP session (throttling, scripts before the page), `browsingContext.
//! navigate`, `script.evaluate` for stats reads.
//!
//! Failures, as measured on Chromium/ChromeDriver 156 (MECHANICS in BENCHMARKS.md): a tab's
//! renderer crash is announced by the CDP event `Inspector.targetCrashed` on that tab's
//! session (subscribed to here); commands to that tab then never answer, so they fail at
//! once with `ViewerError::TabCrashed` and the other tabs go on. A browser crash closes
//! the BiDi socket within milliseconds: every tab then fails with `BrowserGone`. Closing a
//! browser's last tab ends the browser, so a blank tab of the default context is kept open
//! while no viewer tab is (the session's first tab until the first viewer's exists).

use super::bidi::{self, Bidi, BidiError};
use super::{BrowserSetup, ViewerError, ViewerSlot, ViewerTimeouts};
use fantoccini::Client;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How long a BiDi handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A browser whose tabs are viewers. Created by `create`, shared as `Arc`, closed by `close`.
pub struct SharedBrowser {
    client: Client,
    bidi: Bidi,
    profile: Mutex<Option<tempfile::TempDir>>,
    timeouts: ViewerTimeouts,
    setup: BrowserSetup,
    pub session_id: Option<String>,
    tabs: tokio::sync::Mutex<TabBook>,
    crashes: Arc<CrashWatch>,
    closed: AtomicBool,
}

/// Viewer tabs open, and the blank tab that keeps the browser alive while there are none.
struct TabBook {
    open: usize,
    keeper: Option<String>,
}

/// CDP sessions whose tab crashed, as the `Inspector.targetCrashed` events said.
#[derive(Default)]
struct CrashWatch {
    sessions: Mutex<HashSet<String>>,
    changed: Option<watch::Sender<u64>>,
}

impl CrashWatch {
    fn new() -> Self {
        Self {
            sessions: Mutex::default(),
            changed: Some(watch::channel(0).0),
        }
    }

    fn record(&self, event: &Value) {
        if event["method"] != "goog:cdp.Inspector.targetCrashed" {
            return;
        }
        let Some(session) = event["params"]["session"].as_str() else {
            return;
        };
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_string());
        if let Some(tx) = &self.changed {
            tx.send_modify(|n| *n += 1);
        }
    }

    fn crashed(&self, session: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(session)
    }

    /// Resolves once `session`'s tab has crashed (never, if it does not).
    async fn wait(&self, session: &str) {
        let Some(tx) = &self.changed else {
            return std::future::pending().await;
        };
        let mut rx = tx.subscribe();
        loop {
            if self.crashed(session) {
                return;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

impl SharedBrowser {
    /// Creates the session (with `webSocketUrl`) and connects BiDi. A WebDriver endpoint
    /// that does not grant BiDi gets its session deleted and an error that says so.
    pub async fn create(
        slot: &ViewerSlot,
        timeouts: ViewerTimeouts,
        setup: &BrowserSetup,
    ) -> Result<Arc<Self>, ViewerError> {
        let profile = super::new_profile()?;
        let mut caps =
            super::capabilities_with(&setup.flags, slot, Some(profile.path().to_path_buf()));
        caps.insert("webSocketUrl".into(), Value::Bool(true));
        let client = super::connect(slot, &timeouts, caps).await?;
        let session_id = client.session_id().await.ok().flatten();
        let granted = client
            .capabilities()
            .and_then(|c| c.get("webSocketUrl"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let connected = match granted {
            None => Err(ViewerError::Session(format!(
                "{} created the session without a webSocketUrl: it does not offer WebDriver \
                 BiDi, which several viewers per browser need; use a ChromeDriver or Selenium \
                 Grid 4 that does (Grid 4.20 does), or viewers.per_browser: 1",
                slot.webdriver_url
            ))),
            Some(ws) => Self::connect(&ws, slot).await,
        };
        let (bidi, crashes) = match connected {
            Ok(parts) => parts,
            Err(err) => {
                let _ = tokio::time::timeout(timeouts.command, client.close()).await;
                let _ = profile.close();
                return Err(err);
            }
        };
        let browser = Self {
            client,
            bidi,
            profile: Mutex::new(Some(profile)),
            timeouts,
            setup: setup.clone(),
            session_id,
            tabs: tokio::sync::Mutex::new(TabBook {
                open: 0,
                keeper: None,
            }),
            crashes,
            closed: AtomicBool::new(false),
        };
        match browser.first_tab().await {
            Ok(first) => {
                browser.tabs.lock().await.keeper = first;
                Ok(Arc::new(browser))
            }
            Err(err) => {
                browser.close().await;
                Err(err)
            }
        }
    }

    async fn connect(ws: &str, slot: &ViewerSlot) -> Result<(Bidi, Arc<CrashWatch>), ViewerError> {
        let url = bidi::socket_url(ws, &slot.webdriver_url).map_err(ViewerError::Session)?;
        let crashes = Arc::new(CrashWatch::new());
        let watch = crashes.clone();
        let bidi = Bidi::connect(
            &url,
            slot.grid_auth.as_deref(),
            CONNECT_TIMEOUT,
            Box::new(move |e| watch.record(e)),
        )
        .await
        .map_err(|e| ViewerError::Session(e.to_string()))?;
        bidi.send(
            "session.subscribe",
            json!({ "events": ["goog:cdp.Inspector.targetCrashed"] }),
            CONNECT_TIMEOUT,
        )
        .await
        .map_err(|e| ViewerError::Session(format!("subscribing to tab crashes: {e}")))?;
        Ok((bidi, crashes))
    }

    /// The session's first tab (about:blank in the default context).
    async fn first_tab(&self) -> Result<Option<String>, ViewerError> {
        let tree = self
            .send(
                "listing the browser's tabs",
                "browsingContext.getTree",
                json!({ "maxDepth": 0 }),
            )
            .await?;
        Ok(tree["contexts"][0]["context"].as_str().map(str::to_string))
    }

    /// The flags and levers this browser was started with.
    pub fn setup(&self) -> &BrowserSetup {
        &self.setup
    }

    /// Its profile folder, until `close` removes it.
    pub fn profile_dir(&self) -> Option<std::path::PathBuf> {
        self.profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|p| p.path().to_path_buf())
    }

    /// Opens a viewer: a new user context and a tab in it. The viewer is then throttled and
    /// opened like any other (`Viewer::throttle`, `Viewer::open`).
    pub async fn open_viewer(self: &Arc<Self>) -> Result<super::Viewer, ViewerError> {
        let created = self
            .send(
                "creating a browser context",
                "browser.createUserContext",
                json!({}),
            )
            .await?;
        let user_context = created["userContext"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let tab = async {
            let tab = self
                .send(
                    "opening a tab",
                    "browsingContext.create",
                    json!({ "type": "tab", "userContext": user_context }),
                )
                .await?;
            let context = tab["context"].as_str().unwrap_or_default().to_string();
            let session = self
                .send(
                    "attaching to the tab",
                    "goog:cdp.getSession",
                    json!({ "context": context }),
                )
                .await?;
            let cdp_session = session["session"].as_str().unwrap_or_default().to_string();
            Ok::<_, ViewerError>((context, cdp_session))
        }
        .await;
        let (context, cdp_session) = match tab {
            Ok(ids) => ids,
            Err(err) => {
                self.remove_user_context(&user_context).await;
                return Err(err);
            }
        };
        let keeper = {
            let mut book = self.tabs.lock().await;
            book.open += 1;
            book.keeper.take()
        };
        if let Some(keeper) = keeper {
            // A viewer tab keeps the browser alive now.
            if let Err(err) = self.close_context(&keeper).await {
                tracing::debug!("closing the browser's blank tab: {err}");
            }
        }
        Ok(super::Viewer::tab(
            Tab {
                browser: self.clone(),
                user_context,
                context,
                cdp_session,
            },
            self.timeouts.clone(),
            self.setup.no_video_track,
        ))
    }

    /// The BiDi socket has ended: the browser (or its session) is gone.
    pub fn is_gone(&self) -> bool {
        self.bidi.is_closed()
    }

    /// Whether the browser still answers (within `limit`).
    pub async fn answers(&self, limit: Duration) -> bool {
        !self.is_gone()
            && self
                .bidi
                .send("browsingContext.getTree", json!({ "maxDepth": 0 }), limit)
                .await
                .is_ok()
    }

    /// Deletes the session (closing the browser and every tab) and the profile. Never
    /// fails; idempotent.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let id = self.session_id.clone().unwrap_or_default();
        match tokio::time::timeout(self.timeouts.command, self.client.clone().close()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::debug!("deleting shared session {id}: {err}"),
            Err(_) => tracing::warn!("deleting shared session {id} timed out"),
        }
        self.bidi.close();
        let profile = self
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(profile) = profile {
            let path = profile.path().to_path_buf();
            if let Err(err) = profile.close() {
                tracing::debug!("removing profile {}: {err}", path.display());
            }
        }
    }

    async fn close_context(&self, context: &str) -> Result<Value, ViewerError> {
        self.send(
            "closing a tab",
            "browsingContext.close",
            json!({ "context": context }),
        )
        .await
    }

    async fn remove_user_context(&self, user_context: &str) {
        if user_context.is_empty() {
            return;
        }
        if let Err(err) = self
            .send(
                "removing a browser context",
                "browser.removeUserContext",
                json!({ "userContext": user_context }),
            )
            .await
        {
            tracing::debug!("removing user context {user_context}: {err}");
        }
    }

    async fn send(
        &self,
        what: &'static str,
        method: &str,
        params: Value,
    ) -> Result<Value, ViewerError> {
        self.bidi
            .send(method, params, self.timeouts.command)
            .await
            .map_err(|e| bidi_error(what, e, self.timeouts.command))
    }
}

fn bidi_error(what: &'static str, err: BidiError, limit: Duration) -> ViewerError {
    match err {
        BidiError::Closed(why) => ViewerError::BrowserGone(why),
        BidiError::Timeout(_) => ViewerError::Timeout { what, after: limit },
        other => ViewerError::Command {
            what,
            message: other.to_string(),
        },
    }
}

/// One viewer's tab in a shared browser.
pub(super) struct Tab {
    browser: Arc<SharedBrowser>,
    user_context: String,
    context: String,
    cdp_session: String,
}

impl Tab {
    pub(super) fn browser(&self) -> &Arc<SharedBrowser> {
        &self.browser
    }

    /// Sends a BiDi command about this tab; fails at once when the tab has crashed.
    async fn send(
        &self,
        what: &'static str,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, ViewerError> {
        let crashes = &self.browser.crashes;
        if crashes.crashed(&self.cdp_session) {
            return Err(ViewerError::TabCrashed);
        }
        tokio::select! {
            r = self.browser.bidi.send(method, params, limit) => r.map_err(|e| bidi_error(what, e, limit)),
            _ = crashes.wait(&self.cdp_session) => Err(ViewerError::TabCrashed),
        }
    }

    /// One CDP command on this tab's own session.
    pub(super) async fn cdp(
        &self,
        what: &'static str,
        method: &str,
        params: Value,
    ) -> Result<Value, ViewerError> {
        let answer = self
            .send(
                what,
                "goog:cdp.sendCommand",
                json!({ "method": method, "params": params, "session": self.cdp_session }),
                self.browser.timeouts.command,
            )
            .await?;
        Ok(answer["result"].clone())
    }

    /// Opens `url` and waits for its DOM (what `pageLoadStrategy: eager` waits for).
    pub(super) async fn navigate(&self, url: &str) -> Result<(), ViewerError> {
        self.send(
            "opening a page",
            "browsingContext.navigate",
            json!({ "context": self.context, "url": url, "wait": "interactive" }),
            self.browser.timeouts.command,
        )
        .await
        .map(|_| ())
    }

    /// Evaluates a JavaScript expression that yields a JSON string (awaited if a promise)
    /// and parses it.
    pub(super) async fn evaluate_json(
        &self,
        what: &'static str,
        expression: String,
        await_promise: bool,
    ) -> Result<Value, ViewerError> {
        let answer = self
            .send(
                what,
                "script.evaluate",
                json!({
                    "expression": expression,
                    "target": { "context": self.context },
                    "awaitPromise": await_promise,
                    "resultOwnership": "none",
                }),
                self.browser.timeouts.command,
            )
            .await?;
        evaluation_value(what, &answer)
    }

    /// Closes the tab and its user context. The browser stays up: when this is its last
    /// viewer tab, a blank tab is opened first (closing the last tab ends a browser).
    pub(super) async fn close(self) {
        let browser = &self.browser;
        if browser.is_gone() {
            return;
        }
        {
            let mut book = browser.tabs.lock().await;
            book.open = book.open.saturating_sub(1);
            if book.open == 0 && book.keeper.is_none() {
                match browser
                    .send(
                        "opening a blank tab",
                        "browsingContext.create",
                        json!({ "type": "tab" }),
                    )
                    .await
                {
                    Ok(tab) => book.keeper = tab["context"].as_str().map(str::to_string),
                    Err(err) => tracing::debug!("opening a blank tab: {err}"),
                }
            }
        }
        if let Err(err) = browser.close_context(&self.context).await {
            tracing::debug!("closing tab {}: {err}", self.context);
        }
        browser.remove_user_context(&self.user_context).await;
    }
}

/// The string a `script.evaluate` returned, parsed as JSON; a thrown exception is an error
/// naming it.
fn evaluation_value(what: &'static str, answer: &Value) -> Result<Value, ViewerError> {
    match answer["type"].as_str() {
        Some("success") => {
            let text = answer["result"]["value"]
                .as_str()
                .ok_or_else(|| ViewerError::Command {
                    what,
                    message: format!("unexpected answer: {}", answer["result"]),
                })?;
            serde_json::from_str(text).map_err(|e| ViewerError::Command {
                what,
                message: format!("unexpected answer: {e}"),
            })
        }
        _ => Err(ViewerError::Command {
            what,
            message: format!(
                "the script threw: {}",
                answer["exceptionDetails"]["text"]
                    .as_str()
                    .unwrap_or("an exception")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluations_give_their_json_or_the_exception() {
        let ok =
            json!({"type": "success", "result": {"type": "string", "value": "{\"httpBytes\":5}"}});
        assert_eq!(evaluation_value("reading", &ok).unwrap()["httpBytes"], 5);
        let threw = json!({"type": "exception", "exceptionDetails": {"text": "ReferenceError: x"}});
        let err = evaluation_value("reading", &threw).unwrap_err().to_string();
        assert!(err.contains("ReferenceError: x"), "{err}");
        let odd = json!({"type": "success", "result": {"type": "number", "value": 2}});
        assert!(evaluation_value("reading", &odd).is_err());
    }

    #[tokio::test]
    async fn a_crash_event_reaches_its_tab_only() {
        let watch = Arc::new(CrashWatch::new());
        let waiting = {
            let watch = watch.clone();
            tokio::spawn(async move { watch.wait("S1").await })
        };
        watch.record(
            &json!({"type": "event", "method": "goog:cdp.Inspector.targetCrashed",
            "params": {"event": "Inspector.targetCrashed", "params": {}, "session": "S2"}}),
        );
        watch.record(
            &json!({"type": "event", "method": "browsingContext.contextDestroyed",
            "params": {"session": "S1"}}),
        );
        assert!(watch.crashed("S2") && !watch.crashed("S1"));
        assert!(!waiting.is_finished());
        watch.record(
            &json!({"type": "event", "method": "goog:cdp.Inspector.targetCrashed",
            "params": {"event": "Inspector.targetCrashed", "params": {}, "session": "S1"}}),
        );
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting tab learns of its crash")
            .unwrap();
    }
}
