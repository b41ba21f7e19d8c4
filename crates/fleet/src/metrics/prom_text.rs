//! Prometheus text exposition format (0.0.4) and OpenMetrics' `# EOF`, parsed by hand:
//! label values may hold commas, escaped quotes and newlines, and metric names may hold
//! colons — cases where off-the-shelf parsers cut or drop data.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("line {line}: {message}: `{text}`")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
    pub text: String,
}

/// Parses a whole exposition. Like Prometheus, one malformed line fails the scrape: a
/// partial read would make counters look like they went backwards.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if line == "# EOF" {
            break;
        }
        if line.starts_with('#') {
            continue;
        }
        let err = |message: &str| ParseError {
            line: index + 1,
            message: message.to_string(),
            text: raw.chars().take(200).collect(),
        };
        samples.push(parse_sample(line).map_err(|m| err(&m))?);
    }
    Ok(samples)
}

/// One sample line (already trimmed, not a comment).
pub(super) fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("missing or invalid metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    let mut fields = rest.split_whitespace();
    let value_text = fields.next().ok_or("missing value")?;
    let value = parse_value(value_text).ok_or_else(|| format!("`{value_text}` is not a number"))?;
    let timestamp_ms = match fields.next() {
        Some(ts) => Some(
            ts.parse::<i64>()
                .map_err(|_| format!("`{ts}` is not a timestamp"))?,
        ),
        None => None,
    };
    if fields.next().is_some() {
        return Err("unexpected text after the timestamp".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses `key="value",...}` (after the opening brace); returns the rest of the line.
type Labels = Vec<(String, String)>;

fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let key_end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("unterminated label set")?;
        let key = &s[..key_end];
        if key.is_empty() {
            return Err("empty label name".into());
        }
        s = s[key_end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or("expected `=` after a label name")?;
        s = s.trim_start();
        s = s.strip_prefix('"').ok_or("expected a quoted label value")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => return Err("unterminated label value".into()),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        s = s[end + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("expected `,` or `}` after a label".into());
        }
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse::<f64>().ok(),
    }
}

/// Sums every series of each metric name whose name starts with one of `prefixes`
/// (PeerTube has no per-viewer label: its dashboards show sums too). NaN and infinities
/// never enter a sum, and a sum saturates at ±`f64::MAX` instead of overflowing: an
/// infinite sum would be written to raw data as `null`, a line no reader could take back.
pub fn sums_by_name(samples: &[Sample], prefixes: &[&str]) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for sample in samples {
        if prefixes.iter().any(|p| sample.name.starts_with(p)) && sample.value.is_finite() {
            let sum = sums.entry(sample.name.clone()).or_insert(0.0);
            *sum = (*sum + sample.value).clamp(-f64::MAX, f64::MAX);
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEERTUBE: &str = include_str!("../../../../tests/fixtures/prom/peertube-playback.txt");

    #[test]
    fn parses_a_real_peertube_scrape() {
        let samples = parse(PEERTUBE).unwrap();
        let http: Vec<_> = samples
            .iter()
            .filter(|s| s.name == "peertube_playback_http_downloaded_bytes_total")
            .collect();
        assert_eq!(http.len(), 2);
        assert_eq!(http[0].label("resolution"), Some("720"));
        assert_eq!(http[1].label("fps"), Some("undefined"));
        let sums = sums_by_name(&samples, &["peertube_"]);
        assert_eq!(
            sums["peertube_playback_p2p_downloaded_bytes_total"],
            26827762.0 + 1000.0
        );
        assert_eq!(
            sums["peertube_playback_http_downloaded_bytes_total"],
            9770638.0 + 500.0
        );
        assert!(!sums.contains_key("process_cpu_seconds_total"));
    }

    #[test]
    fn label_values_with_commas_quotes_and_newlines() {
        let s =
            parse(r#"a_b:c{x="1,2",y="say \"hi\"",z="l1\nl2",w="back\\slash"} 3 1700000000000"#)
                .unwrap();
        assert_eq!(s[0].name, "a_b:c");
        assert_eq!(s[0].label("x"), Some("1,2"));
        assert_eq!(s[0].label("y"), Some("say \"hi\""));
        assert_eq!(s[0].label("z"), Some("l1\nl2"));
        assert_eq!(s[0].label("w"), Some("back\\slash"));
        assert_eq!(s[0].timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn special_values_and_eof() {
        let s = parse("a +Inf\nb -Inf\nc NaN\nd{} 1.5e3\n# EOF\ne 1\n").unwrap();
        assert_eq!(s.len(), 4);
        assert!(s[0].value.is_infinite() && s[2].value.is_nan());
        assert_eq!(s[3].value, 1500.0);
        // NaN and infinities never enter sums.
        assert_eq!(sums_by_name(&s, &[""]).get("d"), Some(&1500.0));
        assert!(!sums_by_name(&s, &[""]).contains_key("c"));
    }

    #[test]
    fn sums_saturate_instead_of_becoming_infinite() {
        let s = parse(&format!("a {0:e}\na {0:e}\nb -{0:e}\nb -{0:e}\n", f64::MAX)).unwrap();
        let sums = sums_by_name(&s, &[""]);
        assert_eq!(sums["a"], f64::MAX);
        assert_eq!(sums["b"], -f64::MAX);
    }

    #[test]
    fn malformed_lines_name_the_line() {
        for bad in [
            "x{a=\"1\" 2",
            "x{a=1} 2",
            "x abc",
            "{a=\"1\"} 2",
            "x 1 2 3",
            "x{a=\"1\"b=\"2\"} 1",
        ] {
            let err = parse(&format!("ok 1\n{bad}\n")).expect_err(bad);
            assert_eq!(err.line, 2, "{bad}: {err}");
        }
    }
}
