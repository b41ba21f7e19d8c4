//! The target's exporter, relayed on the controller's own `/metrics`.
//!
//! Prometheus often cannot scrape the target itself: refsite listens on a random port, on
//! the `netns` fleet it lives in a network namespace the host cannot reach, and a PeerTube
//! exporter may sit behind a firewall only the controller passes. The controller scrapes it
//! anyway, every sampling interval, so it serves the last successful scrape again beside
//! its own series: one scrape target (the controller) gives the whole picture.
//!
//! The relayed series follow Prometheus federation's conventions (`/federate`): they keep
//! their names and labels, and carry the `job` and `instance` of the scrape they come from —
//! `job="target"` and `instance` = the exporter's `host:port` as the controller reached it
//! — which a Prometheus keeps with `honor_labels: true` (without it they arrive as
//! `exported_job` / `exported_instance`). A reader tells a relayed series from the
//! controller's own by that: the controller's own are all named `viewerfleet_*` and carry
//! the scrape's job. Every series also carries the run's `run` label. A label of the target
//! that clashes with one added here is renamed `exported_<name>`, as Prometheus does.
//!
//! What is relayed: the families the controller keeps from a scrape
//! (`scrape::KEPT_PREFIXES`: `peertube_*`, `refsite_*`, `process_*`, `nodejs_*`), with their
//! `# HELP` and `# TYPE`. Timestamps are dropped, so a relayed sample is stamped when
//! Prometheus scrapes the controller; a failed scrape of the target relays nothing (the
//! series go stale, as they would had Prometheus failed the scrape itself), and
//! `viewerfleet_exporter_up` says why.

use super::prom_text::{self, ParseError, Sample};
use std::collections::HashSet;
use std::fmt::Write;

/// The `job` label of relayed series.
pub(crate) const TARGET_JOB: &str = "target";

/// The `instance` label of a relayed series: the exporter's `host:port` (never its path,
/// query or credentials), or the URL itself when it does not parse.
pub(crate) fn instance_of(exporter_url: &str) -> String {
    match url::Url::parse(exporter_url) {
        Ok(url) => match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            _ => exporter_url.to_string(),
        },
        Err(_) => exporter_url.to_string(),
    }
}

/// Rewrites one exposition for relaying: the families whose names start with one of
/// `prefixes`, every sample with `labels` added (in that order, after its own), comments
/// other than `# HELP` / `# TYPE` and timestamps dropped. OpenMetrics-only types become
/// `untyped`, the text format's word for them. Fails like the scrape itself on a malformed
/// sample line.
pub fn relay(body: &str, prefixes: &[&str], labels: &[(&str, &str)]) -> Result<String, ParseError> {
    let kept = |name: &str| prefixes.iter().any(|p| name.starts_with(p));
    let mut out = String::with_capacity(body.len() + body.len() / 2);
    // A family's HELP and TYPE once each, whatever the exporter repeated.
    let mut described: HashSet<(&str, &str)> = HashSet::new();
    for (index, raw) in body.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line == "# EOF" {
            break;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, char::is_whitespace);
            let (Some(keyword @ ("HELP" | "TYPE")), Some(name)) = (words.next(), words.next())
            else {
                continue;
            };
            if !kept(name) || !described.insert((keyword, name)) {
                continue;
            }
            let rest = words.next().unwrap_or("").trim();
            if keyword == "TYPE" {
                let kind = match rest {
                    "counter" | "gauge" | "histogram" | "summary" | "untyped" => rest,
                    _ => "untyped",
                };
                let _ = writeln!(out, "# TYPE {name} {kind}");
            } else {
                let _ = writeln!(out, "# HELP {name} {rest}");
            }
            continue;
        }
        let sample = prom_text::parse_sample(line).map_err(|message| ParseError {
            line: index + 1,
            message,
            text: raw.chars().take(200).collect(),
        })?;
        if kept(&sample.name) {
            write_sample(&mut out, &sample, labels);
        }
    }
    Ok(out)
}

fn write_sample(out: &mut String, sample: &Sample, added: &[(&str, &str)]) {
    out.push_str(&sample.name);
    out.push('{');
    let mut first = true;
    let mut label = |out: &mut String, key: &str, value: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{key}=\"{}\"", escape(value));
    };
    for (key, value) in &sample.labels {
        if added.iter().any(|(k, _)| k == key) {
            label(out, &format!("exported_{key}"), value);
        } else {
            label(out, key, value);
        }
    }
    for (key, value) in added {
        label(out, key, value);
    }
    out.push_str("} ");
    out.push_str(&format_value(sample.value));
    out.push('\n');
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value == f64::INFINITY {
        "+Inf".into()
    } else if value == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIXES: &[&str] = &["peertube_", "refsite_", "process_", "nodejs_"];
    const LABELS: &[(&str, &str)] = &[
        ("job", "target"),
        ("instance", "127.0.0.1:8080"),
        ("run", "live-20261201T101500Z"),
    ];

    #[test]
    fn a_real_peertube_scrape_keeps_names_labels_and_values_and_gains_job_instance_run() {
        let body = include_str!("../../../../tests/fixtures/prom/peertube-playback.txt");
        let text = relay(body, PREFIXES, LABELS).unwrap();
        let before = prom_text::parse(body).unwrap();
        let after = prom_text::parse(&text).unwrap();
        let kept: Vec<&Sample> = before
            .iter()
            .filter(|s| PREFIXES.iter().any(|p| s.name.starts_with(p)))
            .collect();
        assert_eq!(after.len(), kept.len());
        for (a, b) in after.iter().zip(kept) {
            assert_eq!(a.name, b.name);
            assert_eq!(a.value, b.value);
            assert_eq!(&a.labels[..b.labels.len()], &b.labels[..]);
            assert_eq!(a.label("job"), Some("target"));
            assert_eq!(a.label("instance"), Some("127.0.0.1:8080"));
            assert_eq!(a.label("run"), Some("live-20261201T101500Z"));
            assert_eq!(a.timestamp_ms, None);
        }
        assert!(text.contains("# TYPE peertube_playback_http_downloaded_bytes_total counter\n"));
    }

    #[test]
    fn other_families_comments_timestamps_and_clashing_labels() {
        let body = "# HELP go_goroutines Goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 8\n\
                    # A comment\n# HELP refsite_x_total Bytes \"sent\", with a \\\\ and a\\nnewline.\n\
                    # TYPE refsite_x_total counter\n# TYPE refsite_x_total counter\n\
                    refsite_x_total{job=\"peertube\",run=\"a\\\"b\",v=\"1,2\"} 5 1700000000000\n\
                    # TYPE refsite_info info\nrefsite_info{version=\"1\"} 1\n\
                    refsite_inf +Inf\nrefsite_nan NaN\nrefsite_big 1e21\n# EOF\nrefsite_after 1\n";
        let text = relay(body, PREFIXES, LABELS).unwrap();
        assert!(!text.contains("go_goroutines"), "{text}");
        assert!(!text.contains("A comment"), "{text}");
        assert!(!text.contains("refsite_after"), "{text}");
        assert_eq!(text.matches("# TYPE refsite_x_total counter").count(), 1);
        assert!(
            text.contains("# HELP refsite_x_total Bytes \"sent\", with a \\\\ and a\\nnewline.\n")
        );
        assert!(text.contains("# TYPE refsite_info untyped\n"), "{text}");
        let samples = prom_text::parse(&text).unwrap();
        let x = &samples[0];
        assert_eq!(x.name, "refsite_x_total");
        assert_eq!(x.label("exported_job"), Some("peertube"));
        assert_eq!(x.label("exported_run"), Some("a\"b"));
        assert_eq!(x.label("v"), Some("1,2"));
        assert_eq!(x.label("job"), Some("target"));
        assert_eq!(x.label("run"), Some("live-20261201T101500Z"));
        assert_eq!(x.timestamp_ms, None);
        let value = |name: &str| samples.iter().find(|s| s.name == name).unwrap().value;
        assert_eq!(value("refsite_inf"), f64::INFINITY);
        assert!(value("refsite_nan").is_nan());
        assert_eq!(value("refsite_big"), 1e21);
    }

    #[test]
    fn a_malformed_line_fails_like_the_scrape() {
        let err = relay("refsite_a 1\nrefsite_b{x=1} 2\n", PREFIXES, LABELS).unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn instance_is_host_and_port_only() {
        assert_eq!(
            instance_of("http://127.0.0.1:41234/metrics"),
            "127.0.0.1:41234"
        );
        assert_eq!(
            instance_of("http://[fd76:6700:6884::2]:8080/metrics"),
            "[fd76:6700:6884::2]:8080"
        );
        assert_eq!(
            instance_of("https://user:secret@peertube.example/metrics?x=1"),
            "peertube.example:443"
        );
        assert_eq!(instance_of("not a url"), "not a url");
    }
}
