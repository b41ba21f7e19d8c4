//! A WebDriver BiDi client over a session's `webSocketUrl` (tokio-tungstenite): commands
//! `{"id", "method", "params"}` answered by `{"id", "type": "success", "result"}` or
//! `{"id", "type": "error", "error", "message"}`. One reader task routes answers by id, so
//! commands to different tabs run at once (ChromeDriver's BiDi mapper handles them
//! concurrently, unlike the classic HTTP commands of one session). Events the session
//! subscribed to go to the `on_event` handler given at connection. When the socket ends
//! (the browser or its driver went away), every pending and later command fails with
//! `BidiError::Closed`.

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum BidiError {
    /// The browser answered with an error (e.g. `no such frame`, `unknown error: tab crashed`).
    #[error("{error}: {message}")]
    Command { error: String, message: String },
    /// The socket is closed: the session, its browser or its driver is gone.
    #[error("the WebDriver BiDi connection is closed ({0})")]
    Closed(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect WebDriver BiDi at {url}: {message}")]
    Connect { url: String, message: String },
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, BidiError>>>>>;

/// Called with every event message (`{"type": "event", "method", "params"}`).
pub(crate) type EventHandler = Box<dyn Fn(&Value) + Send + Sync>;

/// One session's BiDi connection. Dropping it closes the socket.
pub(crate) struct Bidi {
    outgoing: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next_id: AtomicU64,
    closed: CancellationToken,
    why_closed: Arc<Mutex<Option<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Bidi {
    /// Connects within `limit`, sending `auth` (a Grid's router credentials) as the
    /// handshake's `Authorization` header; events go to `on_event`.
    pub async fn connect(
        url: &str,
        auth: Option<&crate::grid::auth::GridCredentials>,
        limit: Duration,
        on_event: EventHandler,
    ) -> Result<Self, BidiError> {
        let connect_err = |message: String| BidiError::Connect {
            url: url.to_string(),
            message,
        };
        // `wss://` with the system's roots (or SSL_CERT_FILE's), `ws://` as plain TCP.
        let tls = crate::sys::tls::client_config().map_err(|e| connect_err(format!("{e:#}")))?;
        let connector = tokio_tungstenite::Connector::Rustls(tls);
        let mut request =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
                .map_err(|e| connect_err(e.to_string()))?;
        if let Some(auth) = auth {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, auth.header());
        }
        let handshake =
            tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(connector));
        let (socket, _) = tokio::time::timeout(limit, handshake)
            .await
            .map_err(|_| connect_err(format!("no handshake within {limit:?}")))?
            .map_err(|e| connect_err(e.to_string()))?;
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut queue) = mpsc::unbounded_channel::<Message>();
        let pending: Pending = Arc::default();
        let closed = CancellationToken::new();
        let why_closed: Arc<Mutex<Option<String>>> = Arc::default();
        let writer = {
            let closed = closed.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        m = queue.recv() => match m {
                            Some(m) => if sink.send(m).await.is_err() { break },
                            None => break,
                        },
                        _ = closed.cancelled() => break,
                    }
                }
                let _ = sink.close().await;
            })
        };
        let reader = {
            let (pending, closed, why) = (pending.clone(), closed.clone(), why_closed.clone());
            tokio::spawn(async move {
                let reason = loop {
                    let message = tokio::select! {
                        m = stream.next() => m,
                        _ = closed.cancelled() => break "closed by viewerfleet".to_string(),
                    };
                    match message {
                        Some(Ok(Message::Text(text))) => route(&pending, text.as_str(), &on_event),
                        Some(Ok(Message::Close(frame))) => {
                            break frame.map_or("closed by the driver".into(), |f| {
                                format!("closed by the driver: {}", f.reason)
                            })
                        }
                        Some(Ok(_)) => {}
                        Some(Err(err)) => break err.to_string(),
                        None => break "the connection ended".to_string(),
                    }
                };
                *why.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
                closed.cancel();
                let waiting: Vec<_> = pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .drain()
                    .collect();
                for (_, tx) in waiting {
                    let _ = tx.send(Err(BidiError::Closed(reason.clone())));
                }
            })
        };
        Ok(Self {
            outgoing,
            pending,
            next_id: AtomicU64::new(1),
            closed,
            why_closed,
            tasks: vec![reader, writer],
        })
    }

    /// Sends one command and waits up to `limit` for its answer (`result` on success).
    pub async fn send(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, BidiError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let text = serde_json::json!({ "id": id, "method": method, "params": params }).to_string();
        if self.outgoing.send(Message::Text(text.into())).is_err() {
            self.forget(id);
            return Err(self.closed_error());
        }
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(self.closed_error()),
            Err(_) => {
                self.forget(id);
                Err(BidiError::Timeout(limit))
            }
        }
    }

    /// The socket has ended (or was closed here).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Closes the socket; pending commands fail.
    pub fn close(&self) {
        self.closed.cancel();
    }

    fn forget(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    fn closed_error(&self) -> BidiError {
        BidiError::Closed(
            self.why_closed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_else(|| "closed".into()),
        )
    }
}

impl Drop for Bidi {
    fn drop(&mut self) {
        self.closed.cancel();
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Hands an answer to the command waiting for it, an event to `on_event`; unknown ids
/// are dropped.
fn route(pending: &Pending, text: &str, on_event: &EventHandler) {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        tracing::debug!(
            "BiDi: unreadable message: {}",
            text.chars().take(200).collect::<String>()
        );
        return;
    };
    if message.get("type").and_then(Value::as_str) == Some("event") {
        on_event(&message);
        return;
    }
    let Some(id) = message.get("id").and_then(Value::as_u64) else {
        return;
    };
    let Some(tx) = pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id)
    else {
        return;
    };
    let answer = match message.get("type").and_then(Value::as_str) {
        Some("success") => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        _ => Err(BidiError::Command {
            error: text_field(&message, "error"),
            message: text_field(&message, "message"),
        }),
    };
    let _ = tx.send(answer);
}

fn text_field(message: &Value, key: &str) -> String {
    message
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string()
}

/// The session's `webSocketUrl` reached through the endpoint the session was created at:
/// its path with the endpoint's host and port. A Grid answers with its own configured
/// address (which the controller may reach only through a tunnel), ChromeDriver with the
/// loopback address it listens on; either way the session lives behind `webdriver_url`.
pub(crate) fn socket_url(web_socket_url: &str, webdriver_url: &str) -> Result<String, String> {
    let ws = url::Url::parse(web_socket_url)
        .map_err(|e| format!("the session's webSocketUrl `{web_socket_url}` is not a URL: {e}"))?;
    let endpoint = url::Url::parse(webdriver_url)
        .map_err(|e| format!("`{webdriver_url}` is not a URL: {e}"))?;
    let scheme = if endpoint.scheme() == "https" {
        "wss"
    } else {
        "ws"
    };
    let host = endpoint.host_str().unwrap_or("127.0.0.1");
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let port = endpoint
        .port_or_known_default()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let query = ws.query().map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!("{scheme}://{host}{port}{}{query}", ws.path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_reached_through_the_sessions_endpoint() {
        // A Grid hub names itself by its configured address; the controller reaches it
        // through the URL it created the session at (a tunnel, a loopback port).
        assert_eq!(
            socket_url(
                "ws://10.0.0.2:4444/session/abc/se/bidi",
                "http://127.0.0.1:8089/hub/"
            )
            .unwrap(),
            "ws://127.0.0.1:8089/session/abc/se/bidi"
        );
        assert_eq!(
            socket_url("ws://127.0.0.1:9515/session/abc", "http://127.0.0.1:9515/").unwrap(),
            "ws://127.0.0.1:9515/session/abc"
        );
        assert_eq!(
            socket_url("ws://x/session/a", "https://[2001:db8::1]/").unwrap(),
            "wss://[2001:db8::1]:443/session/a"
        );
        assert!(socket_url("not a url", "http://127.0.0.1:1/").is_err());
    }

    #[test]
    fn answers_reach_their_command_and_errors_keep_their_words() {
        let pending: Pending = Arc::default();
        let events = Arc::new(AtomicU64::new(0));
        let seen = events.clone();
        let on_event: EventHandler = Box::new(move |e| {
            assert_eq!(e["method"], "log.entryAdded");
            seen.fetch_add(1, Ordering::Relaxed);
        });
        let (tx, mut rx) = oneshot::channel();
        pending.lock().unwrap().insert(7, tx);
        route(
            &pending,
            r#"{"type":"event","method":"log.entryAdded","params":{}}"#,
            &on_event,
        );
        route(&pending, "not json", &on_event);
        assert!(rx.try_recv().is_err(), "events and junk answer nothing");
        assert_eq!(
            events.load(Ordering::Relaxed),
            1,
            "the event reached its handler"
        );
        route(
            &pending,
            r#"{"id":7,"type":"error","error":"no such frame","message":"tab crashed"}"#,
            &on_event,
        );
        let err = rx.try_recv().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "no such frame: tab crashed");
        let (tx, mut rx) = oneshot::channel();
        pending.lock().unwrap().insert(8, tx);
        route(
            &pending,
            r#"{"id":8,"type":"success","result":{"context":"C"}}"#,
            &on_event,
        );
        assert_eq!(rx.try_recv().unwrap().unwrap()["context"], "C");
        assert!(pending.lock().unwrap().is_empty());
    }
}
