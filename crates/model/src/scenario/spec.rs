//! The scenario file as written (serde types). Validation lives in `plan.rs`.

use super::fleet::FleetSpec;
use super::ScenarioError;
use crate::kinds::{Latency, TargetKind, Throttling, VideoKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Short name, used in output folder names and reports.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub target: TargetSpec,
    pub viewers: ViewersSpec,
    /// Total length of the run from the first viewer's arrival, e.g. `3m`.
    pub duration: String,
    /// How often players and the exporter are sampled [default: 2s].
    #[serde(default)]
    pub sampling_interval: Option<String>,
    /// The measurement point ("HTTP after 5 minutes") [default: the end of the run].
    #[serde(default)]
    pub measure_at: Option<String>,
    /// Steady-state window that ends at `measure_at`, averaged for the table [default: 30s].
    #[serde(default)]
    pub steady_window: Option<String>,
    /// How many viewers may fail before the run exits non-zero [default: 0].
    #[serde(default)]
    pub max_failed_viewers: Option<FailedThreshold>,
    /// Pass/fail conditions on the run's figures, e.g. `ttff_p95: "< 15s"` (see
    /// `thresholds`); a failed one makes the run exit 99.
    #[serde(default)]
    pub thresholds: Option<super::thresholds::ThresholdsSpec>,
    /// Light peers beside the viewers (see `light`).
    #[serde(default)]
    pub swarm: Option<super::light::SwarmSpec>,
    pub fleet: FleetSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub kind: TargetKind,
    pub video: VideoKind,
    /// Live latency mode; PeerTube's normal (default) or high latency.
    #[serde(default)]
    pub latency: Option<Latency>,
    /// peertube: the video's watch or embed URL, e.g. `https://peertube.example/w/<uuid>`.
    #[serde(default)]
    pub url: Option<String>,
    /// peertube: the Prometheus exporter, e.g. `http://127.0.0.1:9091/metrics`.
    #[serde(default)]
    pub exporter: Option<String>,
    /// refsite: interval of the players' playback-metrics POSTs [default: 15s like PeerTube].
    #[serde(default)]
    pub metrics_interval: Option<String>,
    /// refsite: length of the generated VOD [default: 2m].
    #[serde(default)]
    pub vod_length: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ViewersSpec {
    /// How many viewers, or `auto`: browsers keep arriving while this machine's CPU stays
    /// below `auto.cpu_below` (local fleets).
    pub count: ViewerCountSpec,
    /// The headroom-governed ramp's limits, with `count: auto` (or `--viewers auto`).
    #[serde(default)]
    pub auto: Option<AutoSpec>,
    /// All viewers arrive within this time, spread evenly, e.g. `3m` [default: 0s].
    #[serde(default)]
    pub ramp: Option<String>,
    /// Share of viewers with P2P off, 0.0..=1.0 [default: 0].
    #[serde(default)]
    pub p2p_off_share: Option<f64>,
    /// Each viewer's link. The PeerTube 2023 test used 2000/300 kbit/s and 500 ms.
    #[serde(default)]
    pub network: Option<NetworkProfile>,
    /// A second profile for part of the viewers, to study mixed swarms.
    #[serde(default)]
    pub alt_network: Option<AltNetwork>,
    /// Viewers per browser, 1 to 16: each in its own browser context and tab of one
    /// Chromium (one WebDriver session); they share its address and link [default: 1].
    #[serde(default)]
    pub per_browser: Option<u32>,

    // --- Internet swarms (GUIDE.md, "Internet swarms"): the mix of networks. ---
    /// The viewers' networks, each a share of the swarm with its link profile, NAT and
    /// address families; instead of `network` + `alt_network`.
    #[serde(default)]
    pub networks: Option<Vec<super::networks::NetworkShare>>,
    /// Viewers who leave and are replaced, and who join late (GUIDE.md, "Churn").
    #[serde(default)]
    pub churn: Option<super::churn::ChurnSpec>,
}

/// `viewers.auto`: how far a headroom-governed ramp may go.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AutoSpec {
    /// Never more viewers than this [default: 64; with `--viewers auto` over a file's
    /// count, that count].
    #[serde(default)]
    pub max: Option<u32>,
    /// Keep the host's CPU below this busy share, 0.1 to 0.95 [default: 0.7].
    #[serde(default)]
    pub cpu_below: Option<f64>,
}

/// `viewers.count`: a number, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ViewerCountSpec {
    Count(u32),
    #[serde(serialize_with = "auto_word")]
    Auto,
}

fn auto_word<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("auto")
}

/// By hand, so a wrong value is told both forms (see `CountOrText`).
impl<'de> Deserialize<'de> for ViewerCountSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CountOrText {
            forms: "a whole number of viewers (e.g. 16) or `auto` (as many as this machine \
                    carries below `viewers.auto.cpu_below`)",
            count: ViewerCountSpec::Count,
            text: |v| (v == "auto").then_some(ViewerCountSpec::Auto),
        })
    }
}

/// The rates and latency of one link: a viewer's, a browser's shared by its viewers
/// ([`super::packing::shared_link`]), a viewer slot's as tc shapes it (the netns slots, a
/// cloud node's slots), and what a run's manifest records of `viewers.network`. `None`:
/// not limited. The one type for a link's figures; there is no loss figure (the slots add
/// none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct LinkProfile {
    pub download_kbps: Option<u32>,
    pub upload_kbps: Option<u32>,
    /// Round trip; the slots add half of it each way (netem).
    pub latency_ms: Option<u32>,
}

impl LinkProfile {
    /// A link that limits nothing.
    pub const UNLIMITED: LinkProfile = LinkProfile {
        download_kbps: None,
        upload_kbps: None,
        latency_ms: None,
    };

    /// Limits nothing: no rate either way, no latency.
    pub fn is_unlimited(&self) -> bool {
        *self == Self::UNLIMITED
    }

    /// Limits a rate (either way), not only latency.
    pub fn limits_rate(&self) -> bool {
        self.download_kbps.is_some() || self.upload_kbps.is_some()
    }
}

/// `viewers.network` (and `alt_network.profile`, a link written out in `viewers.networks`):
/// a link and how the scenario wants it applied. Written as one flat map
/// (`{download_kbps, upload_kbps, latency_ms, apply}`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(from = "WrittenProfile", into = "WrittenProfile")]
pub struct NetworkProfile {
    pub link: LinkProfile,
    /// How the profile is applied: `http-only` (the PeerTube 2023 conditions: HTTP
    /// throttled, P2P free), `tc` (HTTP and P2P on each viewer's own link; needs a fleet with
    /// per-viewer interfaces) or `cdp-all` (Chromium's whole-browser emulation, WebRTC
    /// included) [default: `tc` on the netns fleet, `http-only` elsewhere].
    pub apply: Option<Throttling>,
}

/// How a [`NetworkProfile`] is written: the link's fields and `apply` side by side. Not
/// `#[serde(flatten)]`, which would read the link's fields from a buffered copy and lose
/// the line and field path of a wrong value in the scenario's error message.
#[derive(Deserialize, Serialize)]
#[serde(rename = "NetworkProfile", deny_unknown_fields)]
struct WrittenProfile {
    #[serde(default)]
    download_kbps: Option<u32>,
    #[serde(default)]
    upload_kbps: Option<u32>,
    #[serde(default)]
    latency_ms: Option<u32>,
    #[serde(default)]
    apply: Option<Throttling>,
}

impl From<WrittenProfile> for NetworkProfile {
    fn from(w: WrittenProfile) -> Self {
        NetworkProfile {
            link: LinkProfile {
                download_kbps: w.download_kbps,
                upload_kbps: w.upload_kbps,
                latency_ms: w.latency_ms,
            },
            apply: w.apply,
        }
    }
}

impl From<NetworkProfile> for WrittenProfile {
    fn from(p: NetworkProfile) -> Self {
        WrittenProfile {
            download_kbps: p.link.download_kbps,
            upload_kbps: p.link.upload_kbps,
            latency_ms: p.link.latency_ms,
            apply: p.apply,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AltNetwork {
    /// Share of viewers that get this profile, 0.0..=1.0.
    pub share: f64,
    pub profile: NetworkProfile,
}

/// A failure threshold: a count (`2`) or a share of the viewers (`"5%"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FailedThreshold {
    Count(u32),
    Share(String),
}

/// By hand rather than `untagged`, so a wrong value is told what both forms look like (see
/// `CountOrText`).
impl<'de> Deserialize<'de> for FailedThreshold {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CountOrText {
            forms: "a count of viewers (0 or more, e.g. 2) or a share in quotes (e.g. \"5%\")",
            count: FailedThreshold::Count,
            text: |v| Some(FailedThreshold::Share(v.to_string())),
        })
    }
}

/// A field that holds a count of viewers or a word: one visitor, so that every such field
/// tells a wrong value (negative, fractional, too large, an unknown word) what both of its
/// forms look like, where an untagged enum would only say that no variant matched, under
/// its type name and without a line.
struct CountOrText<T> {
    /// Both forms, in words, for the error.
    forms: &'static str,
    count: fn(u32) -> T,
    /// The value a string stands for, or `None` for a string that is no form.
    text: fn(&str) -> Option<T>,
}

impl<T> serde::de::Visitor<'_> for CountOrText<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.forms)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        let forms = self.forms;
        u32::try_from(v).map(self.count).map_err(|_| {
            E::custom(format!(
                "{v} is more viewers than a run can have; write {forms}"
            ))
        })
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!("{v} is negative; write {}", self.forms))),
        }
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<T, E> {
        Err(E::custom(format!(
            "{v} is not a whole number; write {}",
            self.forms
        )))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        (self.text)(v)
            .ok_or_else(|| E::custom(format!("`{v}` is not a count; write {}", self.forms)))
    }
}

pub(super) fn parse_spec(text: &str, file: &str) -> Result<ScenarioSpec, ScenarioError> {
    yaml_serde::from_str::<ScenarioSpec>(text).map_err(|err| {
        let line = err.location().map(|l| l.line());
        let message = err.to_string();
        // yaml_serde prefixes the dotted path ("viewers.count: ...") when it knows it.
        let (field, message) = match message.split_once(": ") {
            Some((path, rest))
                if !path.contains(' ') && !path.is_empty() && path != "invalid type" =>
            {
                (path.to_string(), rest.to_string())
            }
            _ => ("(file)".to_string(), message),
        };
        // A mark at the end of the text (a value cut short) is on the last line.
        let last_line = text.split('\n').count();
        let line = threshold_key_line(text, &field, &message)
            .or(line.map(|l| l.min(last_line)))
            .or_else(|| super::locate(text, &field))
            .or_else(|| second_document_line(text, &message));
        let hint = line
            .and_then(|l| text.lines().nth(l - 1))
            .map(block_scalar_hint)
            .unwrap_or_default();
        ScenarioError {
            file: file.to_string(),
            line,
            field,
            message: humanize(&strip_location(&message)) + renamed_value_hint(&message) + hint,
        }
    })
}

/// A value that starts with `>` or `|` opens a YAML block scalar (`p2p_savings_at_t: >=
/// 60%`), which the parser refuses in words about line breaks: say to quote it.
fn block_scalar_hint(line: &str) -> &'static str {
    let value = line
        .split_once(':')
        .map(|(_, v)| v.trim_start())
        .unwrap_or("");
    if value.starts_with(">=") || value.starts_with("> ") || value.starts_with('|') {
        "; a value starting with `>` or `|` opens a YAML block scalar: quote it, e.g. `p2p_savings_at_t: \">= 60%\"`"
    } else {
        ""
    }
}

/// What a value of an earlier version means today, for a file written for it.
fn renamed_value_hint(message: &str) -> &'static str {
    if message.contains("unknown variant `cdp`") || message.contains("unknown variant `both`") {
        "; `cdp` meant HTTP-only throttling until Chromium began throttling WebRTC with it \
         too: write `http-only` for the PeerTube 2023 conditions (HTTP throttled, P2P free), \
         `tc` for real per-viewer links, or `cdp-all` for Chromium's whole-browser emulation"
    } else {
        ""
    }
}

/// The line of a refused key under `thresholds:` (the parser marks the entry before it).
/// The message names the key first, in backticks.
fn threshold_key_line(text: &str, field: &str, message: &str) -> Option<usize> {
    if field != "thresholds" {
        return None;
    }
    let key = message.strip_prefix('`')?.split('`').next()?;
    let start = super::locate(text, "thresholds")?;
    text.lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, l)| l.trim().is_empty() || l.starts_with(' ') || l.starts_with('#'))
        .find(|(_, l)| {
            let t = l.trim_start();
            t.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with(':'))
                || t.strip_prefix(&format!("\"{key}\""))
                    .is_some_and(|r| r.starts_with(':'))
        })
        .map(|(i, _)| i + 1)
}

/// The line of the `---` that starts a second document, for that error.
fn second_document_line(text: &str, message: &str) -> Option<usize> {
    if !message.contains("more than one document") {
        return None;
    }
    let mut seen_content = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("---") && seen_content {
            return Some(i + 1);
        }
        if !trimmed.is_empty() && !trimmed.starts_with('#') && !trimmed.starts_with("---") {
            seen_content = true;
        }
    }
    None
}

/// Rewrites what serde expected in the words of the scenario reference: "a whole number from
/// 0 to 65535", not `u16`; the fleet kinds, not `internally tagged enum FleetSpec`. No
/// message may name a type of this program.
pub(super) fn humanize(message: &str) -> String {
    if message.contains("more than one document") {
        return "holds more than one YAML document (a `---` line between two); a scenario file holds one".into();
    }
    let (head, expected) = match message.rfind("expected ") {
        Some(pos) => message.split_at(pos + "expected ".len()),
        None => (message, ""),
    };
    // A note may follow the expected form in parentheses.
    let (expected, note) = match expected.find(" (") {
        Some(pos) => expected.split_at(pos),
        None => (expected, ""),
    };
    let expected = match expected {
        "u8" => "a whole number from 0 to 255".to_string(),
        "u16" => "a whole number from 0 to 65535".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a whole number of 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "option" => "a value".to_string(),
        "path string" => "a file path".to_string(),
        "struct ScenarioSpec" => {
            "the scenario's fields (`name:`, `target:`, `viewers:`, `duration:`, `fleet:`)"
                .to_string()
        }
        "internally tagged enum FleetSpec" => format!(
            "a `fleet:` section with `kind:` {} and that fleet's fields",
            crate::kinds::one_of(crate::kinds::FleetKind::NAMES)
        ),
        "enum OnLimit" => "`teardown` or `run_with_what_exists`".to_string(),
        "enum OnNodeFailure" => "`drop` or `replace`".to_string(),
        other => other.to_string(),
    };
    without_type_names(&format!("{head}{expected}{note}"))
}

/// Replaces any `struct Name` / `enum Name` that serde may still mention.
fn without_type_names(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    'outer: while !rest.is_empty() {
        for marker in [
            "untagged enum ",
            "internally tagged enum ",
            "adjacently tagged enum ",
            "struct ",
            "enum ",
        ] {
            if let Some(after) = rest.strip_prefix(marker) {
                let name_len = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                if after.starts_with(|c: char| c.is_ascii_uppercase()) {
                    out.push_str(if marker == "struct " {
                        "a mapping of fields (`key: value` lines)"
                    } else {
                        "one of the forms the scenario reference (README) lists"
                    });
                    rest = &after[name_len..];
                    continue 'outer;
                }
            }
        }
        let mut chars = rest.chars();
        out.extend(chars.next());
        rest = chars.as_str();
    }
    out
}

/// Drops yaml_serde's " at line L column C" suffix: the line is reported separately.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(pos) => message[..pos].to_string(),
        None => message.to_string(),
    }
}
