//! The accept loop. refsite serves HTTP/1.1 itself (rather than `axum::serve`) to keep the
//! connection's user-space write buffer small (one chunk, no write queue): the origin's
//! byte counters then follow what really left for the socket, and a client that hangs up
//! is not charged for hundreds of kilobytes that sat in a buffer. The kernel send buffer is
//! bounded too (512 KiB), for the same reason. Each request carries
//! `ConnectInfo` (the client address); `cancel` stops accepting and closes connections
//! gracefully (a few seconds at most).

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// hyper's smallest allowed connection buffer: at most this much is buffered per connection.
const CONN_BUFFER: usize = 16 * 1024;
/// Kernel send buffer per connection (Linux doubles it): bounds what a client that hangs
/// up can be charged for without it having received it, and is still far above the
/// bandwidth-delay product of the links viewers are given (e.g. 2 Mbit/s × 500 ms = 125 KB).
const SEND_BUFFER: usize = 256 * 1024;
/// How long open connections get to finish after `cancel`.
const GRACE: Duration = Duration::from_secs(3);

fn set_send_buffer(stream: &tokio::net::TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt::SndBuf};
    if let Err(e) = setsockopt(stream, SndBuf, &SEND_BUFFER) {
        tracing::debug!("cannot bound the send buffer: {e}");
    }
}

/// Serves `app` on `listener` until `cancel` fires.
pub async fn serve(listener: TcpListener, app: Router, cancel: CancellationToken) {
    let mut conns = JoinSet::new();
    loop {
        let (stream, remote) = tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: wait a little instead of spinning.
                    tracing::warn!("refsite: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        set_send_buffer(&stream);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            app.clone().oneshot(req.map(Body::new))
        });
        let cancel = cancel.clone();
        conns.spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .max_buf_size(CONN_BUFFER)
                .writev(false)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("connection from {remote}: {e}");
                    }
                    return;
                }
                _ = cancel.cancelled() => conn.as_mut().graceful_shutdown(),
            }
            let _ = tokio::time::timeout(GRACE, conn).await;
        });
        // Reap finished connections as we go.
        while conns.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(GRACE * 2, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    conns.abort_all();
}
