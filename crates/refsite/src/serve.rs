//! The accept loop. refsite serves HTTP/1.1 itself (rather than `axum::serve`) to keep the
//! connection's user-space write buffer small (one chunk, no write queue): the origin's
//! byte counters then follow what really left for the socket, and a client that hangs up
//! is not charged for hundreds of kilobytes that sat in a buffer. The kernel send buffer is
//! bounded too (512 KiB), for the same reason. Each request carries
//! `ConnectInfo` (the client address); `cancel` stops accepting and closes connections
//! gracefully (a few seconds at most).
//!
//! On a cloud run refsite faces a network, so one client cannot hold it: a request's header
//! must arrive within `header_timeout` (hyper's timer; it also ends keep-alive connections
//! idle that long between requests), a connection that moves no byte either way for
//! `idle_timeout` is closed (a client that stopped reading a body, or sends one too slowly),
//! and at most `max_connections` are open at once (the next ones wait in the kernel's
//! backlog until one closes).

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
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

/// What one client may hold of the site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// A request's header must arrive within this time; also the longest a keep-alive
    /// connection may sit idle between requests.
    pub header_timeout: Duration,
    /// A connection that moves no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; further clients wait until one closes.
    pub max_connections: usize,
}

impl Default for ServeLimits {
    /// Far above what a viewer needs (it requests a segment every few seconds and reads at
    /// its link's rate), far below what lets one client hold the site.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
        }
    }
}

/// A connection's stream that notes when a byte last moved either way.
struct Watched {
    stream: TcpStream,
    epoch: Instant,
    /// Milliseconds since `epoch` of the last byte read or written.
    last: Arc<AtomicU64>,
}

impl Watched {
    fn new(stream: TcpStream) -> (Self, Arc<AtomicU64>) {
        let last = Arc::new(AtomicU64::new(0));
        let watched = Self {
            stream,
            epoch: Instant::now(),
            last: last.clone(),
        };
        (watched, last)
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// How long until a connection last active at `last` (ms since `epoch`) has been idle for
/// `idle`; zero when it already has.
fn idle_left(epoch: Instant, last: &AtomicU64, idle: Duration) -> Duration {
    let since = epoch
        .elapsed()
        .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
    idle.saturating_sub(since)
}

fn set_send_buffer(stream: &tokio::net::TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt::SndBuf};
    if let Err(e) = setsockopt(stream, SndBuf, &SEND_BUFFER) {
        tracing::debug!("cannot bound the send buffer: {e}");
    }
}

/// Serves `app` on `listener` until `cancel` fires.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServeLimits,
    cancel: CancellationToken,
) {
    let mut conns = JoinSet::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut warned_full = false;
    loop {
        if slots.available_permits() == 0 && !warned_full {
            warned_full = true;
            tracing::warn!(
                "refsite: {} connections open, its limit; further clients wait until one closes",
                limits.max_connections
            );
        }
        let slot = tokio::select! {
            _ = cancel.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
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
        let (stream, last) = Watched::new(stream);
        let epoch = stream.epoch;
        conns.spawn(async move {
            let _slot = slot;
            let conn = hyper::server::conn::http1::Builder::new()
                .max_buf_size(CONN_BUFFER)
                .writev(false)
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::pin!(conn);
            loop {
                let left = idle_left(epoch, &last, limits.idle_timeout);
                if left.is_zero() {
                    tracing::debug!(
                        "connection from {remote}: no byte moved for {:?}, closed",
                        limits.idle_timeout
                    );
                    return;
                }
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!("connection from {remote}: {e}");
                        }
                        return;
                    }
                    _ = cancel.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        break;
                    }
                    _ = tokio::time::sleep(left) => {}
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_left_counts_from_the_last_byte() {
        let epoch = Instant::now() - Duration::from_secs(100);
        let last = AtomicU64::new(95_000);
        let left = idle_left(epoch, &last, Duration::from_secs(60));
        assert!(left > Duration::from_secs(54) && left <= Duration::from_secs(55));
        last.store(10_000, Ordering::Relaxed);
        assert_eq!(
            idle_left(epoch, &last, Duration::from_secs(60)),
            Duration::ZERO
        );
    }
}
