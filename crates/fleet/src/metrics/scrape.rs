//! One scrape of a target's exporter → one `ExporterSample`. A failed scrape is recorded
//! (ok = false, with the reason), never fatal to the run.

use super::prom_text;
use crate::model::rawdata::ExporterSample;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Metric name prefixes kept from a scrape: the platform's playback counters, refsite's
/// ground truth, and the target process' own resources.
pub const KEPT_PREFIXES: &[&str] = &["peertube_", "refsite_", "process_", "nodejs_"];

/// Fetches a URL's body: plain HTTP from this namespace, or a custom transport (e.g. from
/// inside a network namespace the controller cannot reach directly).
pub(crate) type FetchFn = Arc<
    dyn Fn(String, Duration) -> BoxFuture<'static, anyhow::Result<(u16, String)>> + Send + Sync,
>;

#[derive(Clone)]
pub struct Scraper {
    url: String,
    timeout: Duration,
    fetch: FetchFn,
}

impl Scraper {
    /// A scraper over plain HTTP.
    pub fn http(url: String, timeout: Duration) -> Self {
        let client = crate::sys::tls::http_client_builder()
            .timeout(timeout)
            .build()
            .unwrap_or_default();
        let fetch: FetchFn = Arc::new(move |url: String, _timeout| {
            let client = client.clone();
            Box::pin(async move {
                let response = client.get(&url).send().await?;
                let status = response.status().as_u16();
                Ok((status, response.text().await?))
            })
        });
        Self {
            url,
            timeout,
            fetch,
        }
    }

    pub fn with_fetch(url: String, timeout: Duration, fetch: FetchFn) -> Self {
        Self {
            url,
            timeout,
            fetch,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Scrapes once; `t` is the run-relative time stamped on the sample.
    pub async fn scrape(&self, t: f64) -> ExporterSample {
        self.scrape_with_body(t).await.0
    }

    /// Scrapes once, and gives the exposition as served when the scrape succeeded (the
    /// controller relays it on its own `/metrics`, see `relay`).
    pub async fn scrape_with_body(&self, t: f64) -> (ExporterSample, Option<String>) {
        let started = Instant::now();
        let result =
            tokio::time::timeout(self.timeout, (self.fetch)(self.url.clone(), self.timeout)).await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let failed = |error: String| {
            let sample = ExporterSample {
                t,
                ok: false,
                error: Some(error),
                latency_ms,
                sums: Default::default(),
            };
            (sample, None)
        };
        match result {
            Err(_) => failed(format!("timed out after {:?}", self.timeout)),
            Ok(Err(err)) => failed(format!("{err:#}")),
            Ok(Ok((status, _))) if status != 200 => failed(format!("HTTP status {status}")),
            Ok(Ok((_, body))) => match prom_text::parse(&body) {
                Ok(samples) => {
                    let sample = ExporterSample {
                        t,
                        ok: true,
                        error: None,
                        latency_ms,
                        sums: prom_text::sums_by_name(&samples, KEPT_PREFIXES),
                    };
                    (sample, Some(body))
                }
                Err(err) => failed(format!("unparsable exposition: {err}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(status: u16, body: &'static str) -> FetchFn {
        Arc::new(move |_, _| Box::pin(async move { Ok((status, body.to_string())) }))
    }

    #[tokio::test]
    async fn a_good_scrape_keeps_sums() {
        let s = Scraper::with_fetch(
            "x".into(),
            Duration::from_secs(1),
            fixed(
                200,
                "peertube_a_total{x=\"1\"} 2\npeertube_a_total{x=\"2\"} 3\nother 9\n",
            ),
        );
        let sample = s.scrape(1.5).await;
        assert!(sample.ok);
        assert_eq!(sample.sums["peertube_a_total"], 5.0);
        assert!(!sample.sums.contains_key("other"));
    }

    #[tokio::test]
    async fn failures_are_recorded_not_fatal() {
        let s = Scraper::with_fetch("x".into(), Duration::from_secs(1), fixed(500, ""));
        let sample = s.scrape(0.0).await;
        assert!(!sample.ok);
        assert!(sample.error.unwrap().contains("500"));
        let s = Scraper::with_fetch("x".into(), Duration::from_secs(1), fixed(200, "x{ 1"));
        assert!(s.scrape(0.0).await.error.unwrap().contains("unparsable"));
        let s = Scraper::http("http://127.0.0.1:1/metrics".into(), Duration::from_secs(2));
        assert!(!s.scrape(0.0).await.ok);
    }
}
