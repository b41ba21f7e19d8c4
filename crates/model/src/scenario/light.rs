//! `swarm:` — light peers beside the viewers. A light peer runs the page's own P2P engine
//! (tracker, WebRTC data channels, HTTP to the origin) against a simulated playhead, with
//! nothing decoded, so one machine carries a swarm of hundreds where it carries a handful of
//! real viewers. Many light peers share one page (one browser session): a group.
//!
//! `swarm.fidelity` names the verdict of `viewerfleet fidelity` (its `fidelity.json`) that
//! says light peers offload like real viewers for this scenario: the run records it in its
//! manifest and its report says which verdict it relied on.

use crate::kinds::Throttling;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Light peers per page unless `swarm.per_page` says otherwise.
pub const DEFAULT_PER_PAGE: u32 = 25;
/// At most this many per page: Chromium caps a page at 500 peer connections, and each light
/// peer may hold about ten.
pub(crate) const MAX_PER_PAGE: u32 = 50;
/// At most this many light peers in one run.
pub(crate) const MAX_LIGHT_PEERS: u32 = 10_000;

/// The scenario's `swarm:` section.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmSpec {
    /// Light peers that join the viewers' swarm [default: 0].
    #[serde(default)]
    pub light_peers: u32,
    /// Light peers per page (one browser session each) [default: 25, at most 50].
    #[serde(default)]
    pub per_page: Option<u32>,
    /// The `fidelity.json` of `viewerfleet fidelity` this scenario's light peers rely on
    /// (relative to the scenario file): one for every run, or one per throttling mode.
    #[serde(default)]
    pub fidelity: Option<FidelitySpec>,
    /// What runs a page of light peers [default: browser].
    #[serde(default)]
    pub runtime: Option<LightRuntime>,
}

pub use crate::kinds::LightRuntime;

/// `swarm.fidelity`: one verdict for every run, or one per throttling mode
/// (`{http-only: a.json, tc: b.json}`), since light peers are shaped differently in each
/// mode and a verdict vouches for the mode it was measured in. A run takes its own mode's
/// entry, and none when the map has no entry for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FidelitySpec {
    One(String),
    PerThrottling(BTreeMap<Throttling, String>),
}

impl From<&str> for FidelitySpec {
    fn from(path: &str) -> Self {
        FidelitySpec::One(path.to_string())
    }
}

impl<'de> Deserialize<'de> for FidelitySpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = FidelitySpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("the path of a fidelity.json, or a map from a throttling mode (http-only, tc, cdp-all) to one")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(FidelitySpec::One(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries = BTreeMap::new();
                while let Some((mode, path)) = map.next_entry::<Throttling, String>()? {
                    if entries.insert(mode, path).is_some() {
                        return Err(serde::de::Error::custom(format!("`{mode}` is named twice")));
                    }
                }
                Ok(FidelitySpec::PerThrottling(entries))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// What runs light peers unless `swarm.runtime` says otherwise: Chromium pages, whose light
/// peers passed a first fidelity check; Node.js hosts are cheaper but their first check
/// failed (+11 points of P2P savings at T, RESULTS.md), so they are asked for by name.
pub(crate) const DEFAULT_RUNTIME: LightRuntime = LightRuntime::Browser;

/// The light peers of a run, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LightPlan {
    pub peers: u32,
    pub per_page: u32,
    /// The `per_page` the plan left out under `tc` (see [`LightPlan::one_per_page_under_tc`]).
    pub per_page_not_applied: Option<u32>,
    /// `swarm.runtime`, as asked (the engine resolves `auto` against the fleet).
    pub runtime: LightRuntime,
}

/// What `fidelity.json` says it is (`document`), so a report or another JSON file given
/// as `swarm.fidelity` is refused.
pub const FIDELITY_DOCUMENT: &str = "viewerfleet-light-fidelity";
/// The layout version of `fidelity.json` this program writes and reads.
pub const FIDELITY_SCHEMA_VERSION: u32 = 1;
/// A `fidelity.json` larger than this is not one.
const FIDELITY_MAX_BYTES: u64 = 16 << 20;

/// A fidelity verdict: a cheaper browser profile against the default one (`calibrate`), or
/// light peers against an all-real swarm of the same size (`fidelity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FidelityVerdict {
    /// Within noise of the reference on every rule.
    Pass,
    /// Outside it on at least one rule: what is measured behaves differently.
    Fail,
    /// The figures cannot tell: for a profile, the rules held but the basis is too short
    /// (one segment weighs more than the bytes tolerance); for light peers, a run was not a
    /// finding or a rule could not be judged.
    Inconclusive,
}

impl FidelityVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            FidelityVerdict::Pass => "pass",
            FidelityVerdict::Fail => "FAIL",
            FidelityVerdict::Inconclusive => "inconclusive",
        }
    }
}

/// The verdict a run's light peers rely on, as its manifest keeps it: what
/// `viewerfleet fidelity` found, when, at which sizes, and where it is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelityRecord {
    pub verdict: FidelityVerdict,
    /// When it was measured (RFC 3339).
    pub created: String,
    /// The swarm compared: `swarm` real viewers against `real` viewers + `swarm − real`
    /// light peers.
    pub swarm: u32,
    pub real: u32,
    /// The swarm's P2P savings at T, mean over the all-real runs, in percent.
    pub all_real_p2p_savings_pct: Option<f64>,
    /// The same over the runs with light peers.
    pub with_light_p2p_savings_pct: Option<f64>,
    /// The file, as found from the scenario's folder.
    pub file: String,
    /// The fleet and throttling both arms ran on (`netns`, `http-only`, …), so a run under
    /// other conditions can say the verdict is not its own (absent in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<String>,
}

impl FidelityRecord {
    /// Where it was measured, as a phrase for a sentence: `on the netns fleet under
    /// http-only` (or as much of it as the verdict recorded), empty when it recorded neither.
    pub fn measured_on(&self) -> String {
        match (&self.fleet, &self.throttling) {
            (Some(fleet), Some(throttling)) => format!("on the {fleet} fleet under {throttling}"),
            (Some(fleet), None) => format!("on the {fleet} fleet"),
            (None, Some(throttling)) => format!("under {throttling}"),
            (None, None) => String::new(),
        }
    }
}

/// The part of `fidelity.json` a scenario reads.
#[derive(Deserialize)]
struct FidelityFile {
    document: String,
    schema_version: u32,
    verdict: FidelityVerdict,
    created: String,
    swarm: u32,
    real: u32,
    p2p_savings: FidelityFileSavings,
    #[serde(default)]
    fleet: Option<String>,
    #[serde(default)]
    throttling: Option<String>,
}

#[derive(Deserialize)]
struct FidelityFileSavings {
    all_real_pct: Option<f64>,
    with_light_pct: Option<f64>,
}

/// Where `swarm.fidelity: value` points: relative paths from the scenario file's folder,
/// with `dir/..` folded so reports name `scenarios/fidelity/x.json`, not
/// `scenarios/local/../fidelity/x.json` (lexically: a symlinked folder is not followed).
pub(crate) fn fidelity_path(value: &str, scenario_file: &Path) -> PathBuf {
    let path = Path::new(value);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let joined = match scenario_file.parent() {
        Some(dir) => dir.join(path),
        None => path.to_path_buf(),
    };
    let mut folded = PathBuf::new();
    for part in joined.components() {
        match part {
            std::path::Component::ParentDir
                if matches!(
                    folded.components().next_back(),
                    Some(std::path::Component::Normal(_))
                ) =>
            {
                folded.pop();
            }
            other => folded.push(other),
        }
    }
    folded
}

/// Reads `swarm.fidelity` (`value`, relative to `scenario_file`); the message says what is
/// wrong and how to fix it.
pub(crate) fn read_fidelity(value: &str, scenario_file: &Path) -> Result<FidelityRecord, String> {
    const HOW: &str = "give the fidelity.json that `viewerfleet fidelity SCENARIO --swarm N --real K --out DIR` wrote (a path relative to the scenario file), or remove `swarm.fidelity`";
    if value.trim().is_empty() {
        return Err(format!("is empty; {HOW}"));
    }
    let path = fidelity_path(value, scenario_file);
    let shown = path.display();
    let meta = std::fs::metadata(&path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file; {HOW}"),
        _ => format!("{shown}: {err}; {HOW}"),
    })?;
    if !meta.is_file() || meta.len() > FIDELITY_MAX_BYTES {
        return Err(format!(
            "{shown} is not a fidelity.json (not a regular file of at most {} MiB); {HOW}",
            FIDELITY_MAX_BYTES >> 20
        ));
    }
    let text = std::fs::read_to_string(&path).map_err(|err| format!("{shown}: {err}; {HOW}"))?;
    let malformed = |why: String| {
        format!(
            "{shown} is not a fidelity verdict written by `viewerfleet fidelity` ({why}); {HOW}"
        )
    };
    let file: FidelityFile = serde_json::from_str(&text).map_err(|e| malformed(e.to_string()))?;
    if file.document != FIDELITY_DOCUMENT {
        return Err(malformed(format!(
            "its `document` is `{}`, not `{FIDELITY_DOCUMENT}`",
            file.document
        )));
    }
    if file.schema_version != FIDELITY_SCHEMA_VERSION {
        return Err(malformed(format!(
            "layout version {}, this viewerfleet reads {FIDELITY_SCHEMA_VERSION}: measure it again with this version",
            file.schema_version
        )));
    }
    if file.real == 0 || file.real >= file.swarm {
        return Err(malformed(format!(
            "a swarm of {} with {} real viewers has no light peers to vouch for",
            file.swarm, file.real
        )));
    }
    Ok(FidelityRecord {
        verdict: file.verdict,
        created: file.created,
        swarm: file.swarm,
        real: file.real,
        all_real_p2p_savings_pct: file.p2p_savings.all_real_pct,
        with_light_p2p_savings_pct: file.p2p_savings.with_light_pct,
        file: shown.to_string(),
        fleet: file.fleet.filter(|f| !f.is_empty()),
        throttling: file.throttling.filter(|t| !t.is_empty()),
    })
}

/// `swarm.fidelity`, read and checked whether or not the scenario has light peers: a run
/// with them records it, and `plan` offers a mix with light peers that relies on it. Every
/// file a per-mode map names is checked; the run's `throttling` picks the one it relies on.
pub(crate) fn swarm_fidelity(
    spec: Option<&SwarmSpec>,
    scenario_file: &Path,
    throttling: Throttling,
) -> Result<Option<FidelityRecord>, (String, String)> {
    let field = |mode: Option<Throttling>| match mode {
        Some(mode) => format!("swarm.fidelity.{mode}"),
        None => "swarm.fidelity".to_string(),
    };
    match spec.and_then(|s| s.fidelity.as_ref()) {
        None => Ok(None),
        Some(FidelitySpec::One(value)) => read_fidelity(value, scenario_file)
            .map(Some)
            .map_err(|message| (field(None), message)),
        Some(FidelitySpec::PerThrottling(entries)) => {
            let mut chosen = None;
            for (&mode, value) in entries {
                let record = read_fidelity(value, scenario_file)
                    .map_err(|message| (field(Some(mode)), message))?;
                if mode == throttling {
                    chosen = Some(record);
                }
            }
            Ok(chosen)
        }
    }
}

/// One page of light peers: its number, and the peers it holds (`first..first + count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LightGroup {
    pub index: u32,
    pub first: u32,
    pub count: u32,
}

impl LightPlan {
    /// Validates `swarm:` (with `--light-peers` instead of its count when given); `None`
    /// without light peers (`swarm.fidelity` is read by [`swarm_fidelity`], with or
    /// without them). Errors are `(field, message)`.
    pub(crate) fn from_spec(
        spec: Option<&SwarmSpec>,
        override_peers: Option<u32>,
        override_runtime: Option<LightRuntime>,
    ) -> Result<Option<Self>, (String, String)> {
        let peers = override_peers.unwrap_or(spec.map_or(0, |s| s.light_peers));
        if peers > MAX_LIGHT_PEERS {
            return Err((
                "swarm.light_peers".into(),
                format!("{peers} is more than the {MAX_LIGHT_PEERS} one run may hold; split the swarm over several machines"),
            ));
        }
        let per_page = spec.and_then(|s| s.per_page).unwrap_or(DEFAULT_PER_PAGE);
        if !(1..=MAX_PER_PAGE).contains(&per_page) {
            return Err((
                "swarm.per_page".into(),
                format!("{per_page} is out of range: 1 to {MAX_PER_PAGE} light peers per page (Chromium caps a page's peer connections)"),
            ));
        }
        Ok((peers > 0).then_some(Self {
            peers,
            per_page,
            per_page_not_applied: None,
            runtime: override_runtime
                .or(spec.and_then(|s| s.runtime))
                .unwrap_or(DEFAULT_RUNTIME),
        }))
    }

    /// Under `tc` (`tc_shaped`) one light peer per page, as the plan keeps one viewer per
    /// browser: the light peers of one page share its namespace, so P2P among them crosses
    /// no shaped link, and the swarm shares more than its links allow (live-high, 4 real + 4
    /// light in pages of 4 under tc: 44.8% P2P savings against 8.9% with 8 real; RESULTS.md).
    /// Each light peer then has a slot and a link of its own; `per_page_not_applied` keeps
    /// the value left out, for the run's notes.
    pub(crate) fn one_per_page_under_tc(mut self, tc_shaped: bool) -> Self {
        if tc_shaped && self.per_page > 1 {
            self.per_page_not_applied = Some(self.per_page);
            self.per_page = 1;
        }
        self
    }

    /// The pages, each as full as `per_page` allows, the last one holding the rest.
    pub fn groups(&self) -> Vec<LightGroup> {
        (0..self.peers.div_ceil(self.per_page))
            .map(|index| {
                let first = index * self.per_page;
                LightGroup {
                    index,
                    first,
                    count: self.per_page.min(self.peers - first),
                }
            })
            .collect()
    }

    /// In words, for the plan's summary line.
    pub fn describe(&self) -> String {
        let pages = self.peers.div_ceil(self.per_page);
        let under_tc = match self.per_page_not_applied {
            Some(_) => " (one per page under tc, each with its own shaped link)",
            None => "",
        };
        format!(
            "{} light peers in {pages} page{} of up to {}{under_tc}",
            self.peers,
            if pages == 1 { "" } else { "s" },
            self.per_page
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fill_pages_and_the_last_holds_the_rest() {
        let plan = LightPlan {
            per_page_not_applied: None,
            peers: 60,
            per_page: 25,
            runtime: LightRuntime::Auto,
        };
        let groups = plan.groups();
        assert_eq!(
            groups,
            vec![
                LightGroup {
                    index: 0,
                    first: 0,
                    count: 25
                },
                LightGroup {
                    index: 1,
                    first: 25,
                    count: 25
                },
                LightGroup {
                    index: 2,
                    first: 50,
                    count: 10
                },
            ]
        );
        assert_eq!(plan.describe(), "60 light peers in 3 pages of up to 25");
    }

    #[test]
    fn no_section_or_zero_means_no_light_peers_and_the_override_wins() {
        assert_eq!(LightPlan::from_spec(None, None, None), Ok(None));
        let spec = SwarmSpec {
            light_peers: 10,
            per_page: Some(5),
            fidelity: None,
            runtime: None,
        };
        assert_eq!(
            LightPlan::from_spec(Some(&spec), Some(0), None),
            Ok(None),
            "--light-peers 0 turns them off"
        );
        assert_eq!(
            LightPlan::from_spec(Some(&spec), None, None),
            Ok(Some(LightPlan {
                per_page_not_applied: None,
                peers: 10,
                per_page: 5,
                runtime: LightRuntime::Browser,
            }))
        );
        assert_eq!(
            LightPlan::from_spec(None, Some(30), None),
            Ok(Some(LightPlan {
                per_page_not_applied: None,
                peers: 30,
                per_page: DEFAULT_PER_PAGE,
                runtime: LightRuntime::Browser,
            }))
        );
    }

    #[test]
    fn out_of_range_sizes_name_the_field() {
        let file = Path::new("s.yaml");
        let page = SwarmSpec {
            light_peers: 10,
            per_page: Some(MAX_PER_PAGE + 1),
            fidelity: None,
            runtime: None,
        };
        let (field, message) = LightPlan::from_spec(Some(&page), None, None).unwrap_err();
        assert_eq!(field, "swarm.per_page");
        assert!(message.contains("1 to 50"), "{message}");
        let (field, _) = LightPlan::from_spec(None, Some(MAX_LIGHT_PEERS + 1), None).unwrap_err();
        assert_eq!(field, "swarm.light_peers");
        assert_eq!(swarm_fidelity(None, file, Throttling::Tc), Ok(None));
    }

    /// A fidelity.json as `viewerfleet fidelity` writes it (the fields a scenario reads).
    const FIDELITY: &str = r#"{"document": "viewerfleet-light-fidelity", "schema_version": 1,
        "verdict": "pass", "created": "2026-12-04T10:00:00Z", "swarm": 8, "real": 2,
        "light": 6, "p2p_savings": {"all_real_pct": 68.1, "with_light_pct": 66.0},
        "fleet": "netns", "throttling": "http-only"}"#;

    #[test]
    fn the_fidelity_verdict_is_read_from_beside_the_scenario() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("fid")).unwrap();
        std::fs::write(dir.path().join("fid/fidelity.json"), FIDELITY).unwrap();
        let scenario = dir.path().join("s.yaml");
        // Read with light peers or without: `plan`'s mix relies on it either way.
        for light_peers in [6, 0] {
            let spec = SwarmSpec {
                light_peers,
                per_page: None,
                fidelity: Some("fid/fidelity.json".into()),
                runtime: None,
            };
            let f = swarm_fidelity(Some(&spec), &scenario, Throttling::HttpOnly)
                .unwrap()
                .unwrap();
            assert_eq!(
                f.verdict,
                FidelityVerdict::Pass,
                "{light_peers} light peers"
            );
        }
        let spec = SwarmSpec {
            light_peers: 6,
            per_page: None,
            fidelity: Some("fid/fidelity.json".into()),
            runtime: None,
        };
        let f = swarm_fidelity(Some(&spec), &scenario, Throttling::HttpOnly)
            .unwrap()
            .unwrap();
        assert_eq!(f.verdict, FidelityVerdict::Pass);
        assert_eq!((f.swarm, f.real), (8, 2));
        assert_eq!(f.all_real_p2p_savings_pct, Some(68.1));
        assert_eq!(f.with_light_p2p_savings_pct, Some(66.0));
        assert_eq!(f.created, "2026-12-04T10:00:00Z");
        assert_eq!(f.fleet.as_deref(), Some("netns"));
        assert_eq!(f.throttling.as_deref(), Some("http-only"));
        assert_eq!(f.measured_on(), "on the netns fleet under http-only");
        let older = FidelityRecord {
            fleet: None,
            throttling: None,
            ..f.clone()
        };
        assert_eq!(
            older.measured_on(),
            "",
            "verdicts of older versions say neither"
        );
        assert_eq!(
            f.file,
            dir.path().join("fid/fidelity.json").display().to_string()
        );
        // From a sibling folder, as the shipped scenarios name scenarios/fidelity/.
        assert_eq!(
            fidelity_path("../fidelity/x.json", Path::new("scenarios/local/vod.yaml")),
            Path::new("scenarios/fidelity/x.json")
        );
        assert_eq!(
            fidelity_path("../../x.json", Path::new("s.yaml")),
            Path::new("../../x.json")
        );
    }

    #[test]
    fn a_verdict_per_throttling_mode_is_taken_for_the_runs_own_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("http.json"), FIDELITY).unwrap();
        let tc = FIDELITY
            .replace(r#""verdict": "pass""#, r#""verdict": "fail""#)
            .replace(r#""throttling": "http-only""#, r#""throttling": "tc""#);
        std::fs::write(dir.path().join("tc.json"), tc).unwrap();
        let scenario = dir.path().join("s.yaml");
        let parsed: SwarmSpec =
            yaml_serde::from_str("fidelity:\n  http-only: http.json\n  tc: tc.json\n").unwrap();
        let pick = |mode| swarm_fidelity(Some(&parsed), &scenario, mode).unwrap();
        assert_eq!(
            pick(Throttling::HttpOnly).unwrap().verdict,
            FidelityVerdict::Pass
        );
        let under_tc = pick(Throttling::Tc).unwrap();
        assert_eq!(under_tc.verdict, FidelityVerdict::Fail);
        assert_eq!(under_tc.throttling.as_deref(), Some("tc"));
        assert_eq!(
            pick(Throttling::CdpAll),
            None,
            "no entry for the run's mode: none"
        );
        // Every entry is checked, whichever the run takes, and the error names the entry.
        let broken: SwarmSpec =
            yaml_serde::from_str("fidelity:\n  http-only: http.json\n  tc: gone.json\n").unwrap();
        let (field, message) =
            swarm_fidelity(Some(&broken), &scenario, Throttling::HttpOnly).unwrap_err();
        assert_eq!(field, "swarm.fidelity.tc");
        assert!(message.contains("gone.json: no such file"), "{message}");
        // A mode that is not one names the ones that are.
        let err = yaml_serde::from_str::<SwarmSpec>("fidelity:\n  tcp: x.json\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("tcp") && err.contains("http-only"), "{err}");
        let err = yaml_serde::from_str::<SwarmSpec>("fidelity: [x.json]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a map from a throttling mode"), "{err}");
    }

    #[test]
    fn a_missing_or_malformed_fidelity_file_names_the_field_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("s.yaml");
        let spec = |path: &str| SwarmSpec {
            light_peers: 6,
            per_page: None,
            fidelity: Some(path.into()),
            runtime: None,
        };
        let (field, message) =
            swarm_fidelity(Some(&spec("nope.json")), &scenario, Throttling::HttpOnly).unwrap_err();
        assert_eq!(field, "swarm.fidelity");
        assert!(
            message.contains("nope.json: no such file")
                && message.contains("viewerfleet fidelity")
                && message.contains("remove `swarm.fidelity`"),
            "{message}"
        );
        std::fs::write(dir.path().join("report.json"), r#"{"scenario": "x"}"#).unwrap();
        let (field, message) =
            swarm_fidelity(Some(&spec("report.json")), &scenario, Throttling::HttpOnly)
                .unwrap_err();
        assert_eq!(field, "swarm.fidelity");
        assert!(
            message.contains("is not a fidelity verdict written by `viewerfleet fidelity`"),
            "{message}"
        );
        let other = FIDELITY.replace("viewerfleet-light-fidelity", "calibration");
        std::fs::write(dir.path().join("other.json"), other).unwrap();
        let (_, message) =
            swarm_fidelity(Some(&spec("other.json")), &scenario, Throttling::HttpOnly).unwrap_err();
        assert!(message.contains("`document` is `calibration`"), "{message}");
    }

    #[test]
    fn the_runtime_comes_from_the_flag_then_the_scenario_then_browser_pages() {
        let spec = SwarmSpec {
            light_peers: 4,
            per_page: None,
            fidelity: None,
            runtime: Some(LightRuntime::Browser),
        };
        let runtime = |spec: Option<&SwarmSpec>, flag| {
            LightPlan::from_spec(spec, Some(4), flag)
                .unwrap()
                .unwrap()
                .runtime
        };
        assert_eq!(runtime(Some(&spec), None), LightRuntime::Browser);
        assert_eq!(
            runtime(Some(&spec), Some(LightRuntime::Node)),
            LightRuntime::Node
        );
        assert_eq!(runtime(None, None), LightRuntime::Browser);
        let parsed: SwarmSpec = yaml_serde::from_str("light_peers: 3\nruntime: node\n").unwrap();
        assert_eq!(parsed.runtime, Some(LightRuntime::Node));
        let err = yaml_serde::from_str::<SwarmSpec>("light_peers: 3\nruntime: deno\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("deno"), "{err}");
    }
}
