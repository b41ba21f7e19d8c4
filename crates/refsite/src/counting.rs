//! A response body that counts the bytes the connection really took. The body hands out its
//! content in small chunks; a chunk is counted when the server asks for the next one (the
//! previous one was accepted by the connection) or, for the last chunk, when the body is
//! dropped after being read to the end. A client that disconnects early is therefore not
//! charged for the part that was never sent (at most one chunk of uncertainty).

use super::stats::{ServedKind, SiteStats};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Chunk size handed to the connection.
pub(crate) const CHUNK: usize = 16 * 1024;

/// In-memory content streamed in chunks and counted as it goes.
#[derive(Debug)]
pub(crate) struct CountingBody {
    data: Bytes,
    offset: usize,
    pending: usize,
    /// Bytes the connection took so far (counted in `sent`).
    taken: u64,
    stats: Arc<SiteStats>,
    video: String,
    kind: ServedKind,
}

impl CountingBody {
    /// Streams `data`, adding what is sent to `refsite_origin_sent_bytes_total{video,kind}`.
    pub fn new(data: Bytes, stats: Arc<SiteStats>, video: &str, kind: ServedKind) -> Self {
        Self {
            data,
            offset: 0,
            pending: 0,
            taken: 0,
            stats,
            video: video.to_string(),
            kind,
        }
    }

    fn settle(&mut self) {
        if self.pending > 0 {
            self.stats
                .add_sent(&self.video, self.kind, self.pending as u64);
            self.taken += self.pending as u64;
            self.pending = 0;
        }
    }
}

impl Body for CountingBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.settle();
        if self.offset >= self.data.len() {
            return Poll::Ready(None);
        }
        let end = (self.offset + CHUNK).min(self.data.len());
        let chunk = self.data.slice(self.offset..end);
        self.offset = end;
        self.pending = chunk.len();
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.offset >= self.data.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.data.len() - self.offset) as u64)
    }
}

impl Drop for CountingBody {
    fn drop(&mut self) {
        // The connection stops polling once the announced length is out: the last chunk
        // was taken. An unfinished body was cut short: its last chunk is not counted.
        if self.offset >= self.data.len() {
            self.settle();
        } else {
            self.stats.add_aborted(&self.video, self.kind, self.taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker;

    fn poll(b: &mut CountingBody) -> Option<usize> {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        match Pin::new(b).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(f))) => Some(f.into_data().unwrap().len()),
            _ => None,
        }
    }

    #[test]
    fn full_read_counts_everything() {
        let stats = Arc::new(SiteStats::default());
        let mut b = CountingBody::new(
            Bytes::from(vec![0u8; CHUNK * 2 + 5]),
            stats.clone(),
            "v",
            ServedKind::Segment,
        );
        while poll(&mut b).is_some() {}
        drop(b);
        assert_eq!(stats.segment_bytes("v"), (CHUNK * 2 + 5) as u64);
    }

    #[test]
    fn last_chunk_counted_on_drop_when_length_is_done() {
        let stats = Arc::new(SiteStats::default());
        let mut b = CountingBody::new(
            Bytes::from(vec![0u8; CHUNK + 1]),
            stats.clone(),
            "v",
            ServedKind::Segment,
        );
        poll(&mut b);
        poll(&mut b);
        drop(b);
        assert_eq!(stats.segment_bytes("v"), (CHUNK + 1) as u64);
    }

    #[test]
    fn early_disconnect_counts_only_taken_chunks() {
        let stats = Arc::new(SiteStats::default());
        let mut b = CountingBody::new(
            Bytes::from(vec![0u8; CHUNK * 4]),
            stats.clone(),
            "v",
            ServedKind::Segment,
        );
        poll(&mut b);
        poll(&mut b);
        drop(b);
        assert_eq!(stats.segment_bytes("v"), CHUNK as u64);
        assert!(stats.render().contains(&format!(
            "refsite_origin_segment_aborted_bytes_total{{video=\"v\"}} {CHUNK}"
        )));
    }
}
