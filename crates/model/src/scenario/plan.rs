//! Validation: `ScenarioSpec` → `Plan`, the one type the run engine uses.

use super::browser::BrowserSetup;
use super::fleet::FleetPlan;
use super::networks::{NetworkClass, ViewerAccess};
use super::spec::{FailedThreshold, NetworkProfile, ScenarioSpec, ViewerCountSpec};
use super::{Overrides, ScenarioError};
use crate::kinds::{Latency, TargetKind, Throttling, VideoKind};
use std::time::Duration;

/// A validated run: every default filled in, every value in range.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: String,
    pub description: Option<String>,
    pub target: TargetPlan,
    /// Viewers to start; with `auto`, the most the governed ramp may start.
    pub viewers: u32,
    /// `viewers.count: auto`: browsers arrive while the host has headroom (`engine::governor`).
    pub auto: Option<AutoRamp>,
    /// Viewers per browser (`viewers.per_browser`, see `packing`).
    pub per_browser: u32,
    /// The scenario's `viewers.per_browser` when the plan did not apply it: under `tc` its
    /// viewers would exchange P2P inside one network namespace, past the shaped link
    /// (`packing::unshaped_under_tc`). Only `--per-browser` packs a tc run.
    pub per_browser_not_applied: Option<u32>,
    /// How the browsers are started: viewerfleet's own set-up, unless `calibrate` measures
    /// another.
    pub browser: BrowserSetup,
    pub ramp: Duration,
    /// Where the timeline (`measure_at`, `duration`) starts.
    pub clock: RunClock,
    pub p2p_off_share: f64,
    pub network: Option<NetworkProfile>,
    pub alt_network: Option<(f64, NetworkProfile)>,
    pub duration: Duration,
    pub sampling_interval: Duration,
    pub measure_at: Duration,
    pub steady_window: Duration,
    pub max_failed_viewers: u32,
    /// Conditions on the run's figures, judged from its report (exit code 99 when one fails).
    pub thresholds: Vec<super::thresholds::Threshold>,
    pub fleet: FleetPlan,
    /// The scenario as run (the file's text with overrides applied), saved in the run folder.
    pub yaml: String,

    // --- Internet swarms ---
    /// `viewers.networks`, validated (profiles with the fleet's throttling filled in); with
    /// the `network` + `alt_network` shorthand its classes `network` and `alt_network` (public
    /// viewers, assigned as that shorthand always did); empty with neither.
    pub networks: Vec<NetworkClass>,
    /// `networks` came from the shorthand: no emulated internet, the fleet's usual addresses.
    pub networks_from_shorthand: bool,
    /// `viewers.churn`: who leaves (and is replaced) and who joins late.
    pub churn: Option<super::churn::ChurnPlan>,
    /// `swarm.light_peers`: light peers beside the viewers.
    pub light: Option<super::light::LightPlan>,
    /// `swarm.fidelity`: the verdict light peers rely on, read whether or not the run has
    /// any (a run with them records it; `plan`'s mix with light peers relies on it).
    pub fidelity: Option<super::light::FidelityRecord>,
}

/// A headroom-governed ramp: one browser (its `per_browser` viewers) at a time, each once
/// the previous ones play and the host's CPU was measured, while the next is expected to
/// keep it below `cpu_below`, for at most the plan's `ramp`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoRamp {
    /// Busy share of the host's cores the ramp stays below.
    pub cpu_below: f64,
    /// The plan's count is a size an earlier governed ramp of the same run measured on this
    /// host (an earlier repeat of the suite, or its `--swarm-size-file`): only a host clearly
    /// past `cpu_below` stops the ramp before it, not a prediction from one noisy step, so
    /// repeats keep one swarm size where the host allows.
    pub known_to_fit: bool,
}

/// Default of `viewers.auto.max`.
pub(crate) const AUTO_MAX_VIEWERS: u32 = 64;
/// Default of `viewers.auto.cpu_below`.
pub(crate) const AUTO_CPU_BELOW: f64 = 0.7;

#[derive(Debug, Clone)]
pub struct TargetPlan {
    pub kind: TargetKind,
    pub video: VideoKind,
    pub latency: Latency,
    /// peertube only.
    pub url: Option<String>,
    pub exporter: Option<String>,
    /// refsite only.
    pub metrics_interval: Duration,
    pub vod_length: Duration,
}

/// Where a run's timeline starts: the ramp, the measurement point and the end count from
/// there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunClock {
    /// When the target is ready and the first viewers are asked for (every scenario file).
    #[default]
    FromStart,
    /// When every viewer has played its first frame (or failed), at most `limit` after the
    /// start: a warm-up and a window then count from the last first frame, however long the
    /// viewers took to start (`calibrate`).
    FromEveryFirstFrame { limit: Duration },
}

/// What one viewer is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewerPlan {
    /// 0-based; stable across the run and in raw data.
    pub index: u32,
    /// When it arrives, from the run's start.
    pub start_after: Duration,
    pub p2p: bool,
    pub network: Option<NetworkProfile>,
    /// The browser it plays in (`index / per_browser`).
    pub browser: u32,
    /// Its class of `viewers.networks`: NAT and address families of its browser's slot.
    pub access: ViewerAccess,
}

impl Plan {
    /// The viewers in arrival order: spread evenly over the ramp; the P2P-off and
    /// alternative-network viewers interleaved evenly so every part of the ramp has some.
    pub fn viewer_plans(&self) -> Vec<ViewerPlan> {
        let browsers =
            super::packing::browser_of(self.viewers.saturating_sub(1), self.per_browser) + 1;
        let classes = self.browser_classes(browsers);
        let late = self.late_arrivals();
        (0..self.viewers)
            .map(|index| {
                let start_after = match late.get(&index) {
                    Some(at) => *at,
                    None if self.viewers <= 1 => Duration::ZERO,
                    None => self.ramp.mul_f64(index as f64 / (self.viewers - 1) as f64),
                };
                let alt = matches!(self.alt_network, Some((share, _)) if picked(index, share));
                let network = match self.alt_network {
                    Some((_, profile)) if alt => Some(profile),
                    _ => self.network,
                };
                let browser = super::packing::browser_of(index, self.per_browser);
                let (network, access) = match classes.get(browser as usize) {
                    Some(&k) => self.class_access(k),
                    None if self.networks_from_shorthand => {
                        let class = if alt { self.networks.len() - 1 } else { 0 };
                        let access = ViewerAccess {
                            class: Some(class as u32),
                            ..ViewerAccess::default()
                        };
                        (network, access)
                    }
                    None => (network, ViewerAccess::default()),
                };
                ViewerPlan {
                    index,
                    start_after,
                    p2p: !picked(index, self.p2p_off_share),
                    network,
                    browser,
                    access,
                }
            })
            .collect()
    }

    /// Whether light peer `peer` uses P2P: the plan's P2P-off share applies to light peers
    /// as to viewers, spread the same way, so a half-P2P-off swarm stays half off.
    pub fn light_peer_p2p(&self, peer: u32) -> bool {
        !picked(peer, self.p2p_off_share)
    }

    /// With `viewers.churn.late_share`: the late viewers and when they arrive, spread
    /// evenly from the ramp's end to three quarters of the run.
    pub fn late_arrivals(&self) -> std::collections::BTreeMap<u32, Duration> {
        let share = self.churn.as_ref().map_or(0.0, |c| c.late_share);
        let late: Vec<u32> = (0..self.viewers).filter(|&i| picked(i, share)).collect();
        let from = self.ramp;
        let to = self.duration.mul_f64(0.75).max(from);
        let n = late.len() as f64;
        late.iter()
            .enumerate()
            .map(|(k, &i)| (i, from + (to - from).mul_f64((k as f64 + 1.0) / (n + 1.0))))
            .collect()
    }

    /// The class (index into `networks`) of each of the first `browsers` browsers; empty
    /// without `viewers.networks`.
    pub(crate) fn browser_classes(&self, browsers: u32) -> Vec<usize> {
        if self.networks.is_empty() || self.networks_from_shorthand {
            return Vec::new();
        }
        let shares: Vec<f64> = self.networks.iter().map(|c| c.share).collect();
        super::networks::spread(&shares, browsers)
    }

    /// The link and access of a viewer of class `k`.
    pub(crate) fn class_access(&self, k: usize) -> (Option<NetworkProfile>, ViewerAccess) {
        let class = &self.networks[k];
        (
            class.profile,
            ViewerAccess {
                class: Some(k as u32),
                nat: class.nat,
                stack: Some(class.stack),
            },
        )
    }

    /// Every link profile of the plan: `network`, `alt_network` or each class's.
    pub fn all_profiles(&self) -> Vec<NetworkProfile> {
        if self.networks_from_shorthand {
            return self
                .network
                .iter()
                .copied()
                .chain(self.alt_network.iter().map(|(_, p)| *p))
                .collect();
        }
        self.networks.iter().filter_map(|c| c.profile).collect()
    }

    /// The run emulates the internet (`viewers.networks` written out): NATs, families,
    /// STUN, the target reached by name.
    pub fn emulates_internet(&self) -> bool {
        !self.networks.is_empty() && !self.networks_from_shorthand
    }

    pub fn summary_line(&self) -> String {
        let packing = match self.per_browser {
            1 => String::new(),
            n => format!(", {n} per browser"),
        };
        let clock = match self.clock {
            RunClock::FromStart => "",
            RunClock::FromEveryFirstFrame { .. } => " (timeline from every viewer's first frame)",
        };
        let viewers = match self.auto {
            Some(auto) => format!(
                "as many viewers as the host carries below {:.0}% busy (at most {})",
                auto.cpu_below * 100.0,
                self.viewers
            ),
            None => format!("{} viewers", self.viewers),
        };
        let churn = self
            .churn
            .as_ref()
            .map(|c| format!("; {}", c.describe()))
            .unwrap_or_default();
        let light = self
            .light
            .as_ref()
            .map(|l| format!(" + {}", l.describe()))
            .unwrap_or_default();
        format!(
            "{viewers}{packing} ({}% P2P off){light} on {} {}, ramp {}, duration {}, measured at {}{clock}, fleet {}{churn}",
            (self.p2p_off_share * 100.0).round(),
            self.target.kind,
            self.target.video,
            whole_ms(self.ramp),
            whole_ms(self.duration),
            whole_ms(self.measure_at),
            self.fleet.kind(),
        )
    }
}

/// A duration in words to the millisecond (a stretched clock makes nanoseconds no one reads).
fn whole_ms(d: std::time::Duration) -> humantime::FormattedDuration {
    humantime::format_duration(std::time::Duration::from_millis(d.as_millis() as u64))
}

/// Whether viewer `index` belongs to a share, spreading the chosen ones evenly:
/// with share 0.5 every second viewer (1, 3, 5, …) is picked.
fn picked(index: u32, share: f64) -> bool {
    let i = index as f64;
    ((i + 1.0) * share).floor() > (i * share).floor()
}

/// The longest run a scenario may plan: longer runs are surely a typo (`duration: 150h`),
/// and every report sizes its time series by the run's length.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Errors of one scenario file: each names the file, the field's line and the field.
struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn err(&self, field: &str, message: String) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            line: super::locate(self.text, field),
            field: field.to_string(),
            message,
        }
    }

    fn duration(&self, field: &str, value: &str) -> Result<Duration, ScenarioError> {
        humantime::parse_duration(value).map_err(|e| {
            self.err(
                field,
                format!("`{value}` is not a duration ({e}); write e.g. `90s`, `5m` or `1h 30m`"),
            )
        })
    }
}

pub(super) fn build(
    spec: ScenarioSpec,
    text: &str,
    file: &str,
    overrides: &Overrides,
) -> Result<Plan, ScenarioError> {
    let check = Checker { file, text };
    check_name(&check, &spec.name)?;
    let target = target(&check, &spec.target)?;
    let (viewers, auto) = viewer_count(&check, &spec.viewers, overrides)?;
    let per_browser = super::packing::per_browser(spec.viewers.per_browser, overrides.per_browser)
        .map_err(|message| check.err("viewers.per_browser", message))?;
    let (p2p_off_share, alt_network) = viewer_mix(&check, &spec.viewers)?;
    let timeline = timeline(&check, &spec, overrides)?;
    let max_failed_viewers = failure_threshold(&check, spec.max_failed_viewers.as_ref(), viewers)?;
    // An abort_on_fail judged from after the end would never be judged while the run goes.
    if let Some(t) = spec
        .thresholds
        .iter()
        .flat_map(|t| &t.0)
        .find(|t| t.abort.is_some_and(|a| a.delay >= timeline.duration))
    {
        return Err(check.err(
            &format!("thresholds.{}", t.key()),
            format!(
                "delay_abort_eval {} is not shorter than the run ({}): the threshold would never be judged while the run goes; shorten the delay or drop abort_on_fail",
                humantime::format_duration(t.abort.map(|a| a.delay).unwrap_or_default()),
                humantime::format_duration(timeline.duration)
            ),
        ));
    }
    let mut fleet = spec
        .fleet
        .plan(viewers)
        .map_err(|(field, message)| check.err(&format!("fleet.{field}"), message))?;
    if let (FleetPlan::Grid(grid), super::fleet::FleetSpec::Grid(written)) =
        (&mut fleet, &spec.fleet)
    {
        if written.max_parallel_starts.is_none() {
            grid.max_parallel_starts =
                super::fleet::grid::parallel_starts_for(viewers, timeline.ramp);
        }
    }
    if auto.is_some() && !fleet.kind().browsers_on_this_host() {
        return Err(check.err(
            "viewers.count",
            format!(
                "`auto` sizes the swarm to this machine's CPU, and a `{}` fleet runs its browsers elsewhere: give a number (`viewerfleet plan` sizes cloud fleets)",
                fleet.kind()
            ),
        ));
    }
    if let Some(n) = &spec.viewers.network {
        check_tc_fleet(n, "viewers.network", &fleet, &check)?;
    }
    if let Some((_, n)) = &alt_network {
        check_tc_fleet(n, "viewers.alt_network.profile", &fleet, &check)?;
    }
    let mut networks = network_mix(&check, &spec.viewers, &fleet)?;
    let networks_from_shorthand =
        networks.is_empty() && (spec.viewers.network.is_some() || alt_network.is_some());
    if networks_from_shorthand {
        networks = shorthand_classes(
            spec.viewers.network.map(|n| with_throttling(n, &fleet)),
            alt_network.map(|(share, n)| (share, with_throttling(n, &fleet))),
        );
    }
    let tc_shaped = networks
        .iter()
        .any(|c| c.profile.is_some_and(|p| p.apply == Some(Throttling::Tc)));
    let (per_browser, per_browser_not_applied) =
        super::packing::unshaped_under_tc(per_browser, overrides.per_browser, tc_shaped);
    let churn = churn(&check, &spec, overrides, per_browser, auto.is_some())?;
    let light =
        light(&check, &spec, overrides, &target)?.map(|l| l.one_per_page_under_tc(tc_shaped));
    let fidelity = super::light::swarm_fidelity(
        spec.swarm.as_ref(),
        std::path::Path::new(check.file),
        run_throttling(&networks, tc_shaped),
    )
    .map_err(|(field, message)| check.err(&field, message))?;
    if let FleetPlan::Netns(netns) = &mut fleet {
        netns.internet = !networks.is_empty() && !networks_from_shorthand;
    }

    let mut yaml = text.to_string();
    if let Some(n) = overrides.per_browser {
        yaml.push_str(&format!(
            "# Overridden on the command line: viewers.per_browser = {n}\n"
        ));
    }
    if let Some(n) = per_browser_not_applied {
        yaml.push_str(&format!(
            "# Not applied: viewers.per_browser = {n} (under tc, one viewer per browser; --per-browser packs a tc run)\n"
        ));
    }
    if let Some(n) = light.as_ref().and_then(|l| l.per_page_not_applied) {
        yaml.push_str(&format!(
            "# Not applied: swarm.per_page = {n} (under tc, one light peer per page, each with its own shaped link)\n"
        ));
    }
    if let Some(n) = overrides.light_peers {
        yaml.push_str(&format!(
            "# Overridden on the command line: swarm.light_peers = {n}\n"
        ));
    }
    if overrides.viewers != super::ViewersOverride::default() || overrides.duration.is_some() {
        let count = match auto {
            Some(_) => format!("auto (at most {viewers})"),
            None => viewers.to_string(),
        };
        yaml.push_str(&format!(
            "\n# Overridden on the command line: viewers.count = {count}, duration = {}\n",
            humantime::format_duration(timeline.duration)
        ));
    }
    if let Some(kind) = overrides.fleet {
        yaml.push_str(&format!(
            "# Overridden on the command line: fleet.kind = {kind}\n"
        ));
    }
    if let Some(apply) = overrides.apply {
        yaml.push_str(&format!(
            "# Overridden on the command line: every network profile's apply = {apply}\n"
        ));
    }

    Ok(Plan {
        name: spec.name,
        description: spec.description,
        target,
        viewers,
        auto,
        per_browser,
        per_browser_not_applied,
        browser: BrowserSetup::project(),
        ramp: timeline.ramp,
        clock: RunClock::FromStart,
        p2p_off_share,
        network: spec.viewers.network.map(|n| with_throttling(n, &fleet)),
        alt_network: alt_network.map(|(share, n)| (share, with_throttling(n, &fleet))),
        duration: timeline.duration,
        sampling_interval: timeline.sampling_interval,
        measure_at: timeline.measure_at,
        steady_window: timeline.steady_window,
        max_failed_viewers,
        thresholds: spec.thresholds.map(|t| t.0).unwrap_or_default(),
        fleet,
        yaml,
        networks,
        networks_from_shorthand,
        churn,
        light,
        fidelity,
    })
}

/// The run's throttling mode, for the verdict it relies on: tc where a class is tc-shaped,
/// else Chromium's whole-browser emulation where a class asks for it, else the 2023
/// conditions (also where the plan cannot know: a Grid's nodes decide, and without a profile
/// nothing is shaped).
fn run_throttling(networks: &[super::networks::NetworkClass], tc_shaped: bool) -> Throttling {
    let cdp_all = networks.iter().any(|c| {
        c.profile
            .is_some_and(|p| p.apply == Some(Throttling::CdpAll))
    });
    match (tc_shaped, cdp_all) {
        (true, _) => Throttling::Tc,
        (false, true) => Throttling::CdpAll,
        (false, false) => Throttling::HttpOnly,
    }
}

/// `swarm:`, with `--light-peers`; light peers speak refsite's swarm for now.
fn light(
    check: &Checker,
    spec: &ScenarioSpec,
    overrides: &Overrides,
    target: &TargetPlan,
) -> Result<Option<super::light::LightPlan>, ScenarioError> {
    let light = super::light::LightPlan::from_spec(
        spec.swarm.as_ref(),
        overrides.light_peers,
        overrides.light_runtime,
    )
    .map_err(|(field, message)| check.err(&field, message))?;
    let node = light
        .as_ref()
        .is_some_and(|l| l.runtime == super::light::LightRuntime::Node);
    if node && target.kind != TargetKind::Refsite {
        return Err(check.err(
            "swarm.runtime",
            format!(
                "light peers in Node.js load refsite's light page, which a `{}` target does not have: set `swarm.runtime: browser` (the light peers' module is then loaded into the instance's own page)",
                target.kind
            ),
        ));
    }
    Ok(light)
}

/// `viewers.churn`, its durations stretched like the run's clock.
fn churn(
    check: &Checker,
    spec: &ScenarioSpec,
    overrides: &Overrides,
    per_browser: u32,
    auto: bool,
) -> Result<Option<super::churn::ChurnPlan>, ScenarioError> {
    let Some(churn) = &spec.viewers.churn else {
        return Ok(None);
    };
    if per_browser > 1 {
        return Err(check.err(
            "viewers.churn",
            "needs one viewer per browser (`per_browser: 1`): a leaving viewer closes its own browser and session".into(),
        ));
    }
    if auto {
        return Err(check.err(
            "viewers.churn",
            "cannot be combined with `count: auto`: the governed ramp sizes a swarm that stays; give a number".into(),
        ));
    }
    let clock = Clock::new(check, spec, overrides)?;
    let scale =
        |field: &str, value: &str| clock.scaled(field, value).map_err(|e| (e.field, e.message));
    super::churn::plan(churn, scale)
        .map(Some)
        .map_err(|(field, message)| check.err(&field, message))
}

/// The mix `network` + `alt_network` stand for: public viewers in one or two classes.
fn shorthand_classes(
    network: Option<NetworkProfile>,
    alt: Option<(f64, NetworkProfile)>,
) -> Vec<NetworkClass> {
    let class = |name: &str, share: f64, profile: Option<NetworkProfile>| NetworkClass {
        name: name.to_string(),
        share,
        profile_name: None,
        profile,
        nat: crate::kinds::NatKind::None,
        stack: crate::kinds::IpStack::Dual,
    };
    let alt_share = alt.map(|(s, _)| s).unwrap_or(0.0);
    let mut classes = vec![class("network", 1.0 - alt_share, network)];
    if let Some((share, profile)) = alt {
        classes.push(class("alt_network", share, Some(profile)));
    }
    classes
}

/// `viewers.networks`, validated against the fleet: NATs and address families need a slot
/// per browser made by this machine (`netns`).
fn network_mix(
    check: &Checker,
    spec: &super::spec::ViewersSpec,
    fleet: &FleetPlan,
) -> Result<Vec<NetworkClass>, ScenarioError> {
    let Some(shares) = &spec.networks else {
        return Ok(Vec::new());
    };
    if spec.network.is_some() || spec.alt_network.is_some() {
        return Err(check.err(
            "viewers.networks",
            "is given with `network`/`alt_network`, which are its two-class shorthand: write one or the other".into(),
        ));
    }
    let mut classes =
        super::networks::classes(shares).map_err(|(field, message)| check.err(&field, message))?;
    for (i, class) in classes.iter_mut().enumerate() {
        let field = format!("viewers.networks[{i}]");
        if let Some(profile) = &class.profile {
            check_network(profile, &format!("{field}.profile"), check)?;
            check_tc_fleet(profile, &format!("{field}.profile"), fleet, check)?;
            class.profile = Some(with_throttling(*profile, fleet));
        }
        let emulated =
            class.nat != crate::kinds::NatKind::None || class.stack != crate::kinds::IpStack::Dual;
        if emulated && !matches!(fleet, FleetPlan::Netns(_)) {
            return Err(check.err(
                &format!("{field}.nat"),
                format!(
                    "NAT types and address families are emulated in each browser's own network namespace, which the `{}` fleet does not give: use `fleet: {{kind: netns}}` (as root); a Grid's nodes take theirs from `grid/viewer-slots.sh --nat` (cloud nodes: SLOT_NAT)",
                    fleet.kind()
                ),
            ));
        }
    }
    Ok(classes)
}

/// The name becomes a folder name.
fn check_name(check: &Checker, name: &str) -> Result<(), ScenarioError> {
    if name.trim().is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(check.err(
            "name",
            format!(
                "`{name}` is not allowed; use letters, digits, `-`, `_` or `.` (it names the output folder)"
            ),
        ));
    }
    Ok(())
}

/// How many viewers: the file's count, or `--viewers`; with `auto` (the file's or
/// `--viewers auto`), the most the governed ramp may start and its CPU limit.
fn viewer_count(
    check: &Checker,
    spec: &super::spec::ViewersSpec,
    overrides: &Overrides,
) -> Result<(u32, Option<AutoRamp>), ScenarioError> {
    use super::ViewersOverride;
    let fixed = match (overrides.viewers, spec.count) {
        (ViewersOverride::Fixed(n), _) => Some(n),
        (ViewersOverride::AsWritten { .. }, ViewerCountSpec::Count(n)) => Some(n),
        (ViewersOverride::Auto { .. }, _)
        | (ViewersOverride::AsWritten { .. }, ViewerCountSpec::Auto) => None,
    };
    let auto_max = overrides.viewers.max();
    if let Some(count) = fixed {
        let count = checked_count(check, "viewers.count", count)?;
        if auto_max.is_some() {
            return Err(check.err(
                "--max-viewers",
                "bounds a governed ramp: use it with `count: auto` or `--viewers auto`".into(),
            ));
        }
        // A file written for `auto` may be run at a fixed `--viewers N`.
        if spec.auto.is_some() && spec.count != ViewerCountSpec::Auto {
            return Err(check.err(
                "viewers.auto",
                "only applies with `count: auto` (or `--viewers auto`): remove it or write `count: auto`".into(),
            ));
        }
        return Ok((count, None));
    }
    let limits = spec.auto.unwrap_or(super::spec::AutoSpec {
        max: None,
        cpu_below: None,
    });
    let max = match (auto_max, limits.max, spec.count) {
        (Some(max), _, _) => checked_count(check, "--max-viewers", max)?,
        (None, Some(max), _) => checked_count(check, "viewers.auto.max", max)?,
        (None, None, ViewerCountSpec::Count(n)) => checked_count(check, "viewers.count", n)?,
        (None, None, ViewerCountSpec::Auto) => AUTO_MAX_VIEWERS,
    };
    let cpu_below = limits.cpu_below.unwrap_or(AUTO_CPU_BELOW);
    if !(0.1..=0.95).contains(&cpu_below) {
        return Err(check.err(
            "viewers.auto.cpu_below",
            format!(
                "{cpu_below} is outside 0.1 to 0.95; it is the busy share of the host's cores the ramp stays below (e.g. 0.7 for 70%)"
            ),
        ));
    }
    Ok((
        max,
        Some(AutoRamp {
            cpu_below,
            known_to_fit: false,
        }),
    ))
}

fn checked_count(check: &Checker, field: &str, viewers: u32) -> Result<u32, ScenarioError> {
    if viewers == 0 {
        return Err(check.err(field, "must be at least 1 (got 0)".into()));
    }
    if viewers > 100_000 {
        return Err(check.err(
            field,
            format!("{viewers} is more than the 100000 viewers one run supports"),
        ));
    }
    Ok(viewers)
}

/// Who has P2P off and who gets the second network profile.
#[allow(clippy::type_complexity)]
fn viewer_mix(
    check: &Checker,
    spec: &super::spec::ViewersSpec,
) -> Result<(f64, Option<(f64, NetworkProfile)>), ScenarioError> {
    let p2p_off_share = spec.p2p_off_share.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&p2p_off_share) {
        return Err(check.err(
            "viewers.p2p_off_share",
            format!("{p2p_off_share} is not a share; use a number from 0.0 to 1.0"),
        ));
    }
    if let Some(network) = &spec.network {
        check_network(network, "viewers.network", check)?;
    }
    let alt_network = match &spec.alt_network {
        Some(alt) => {
            if !(0.0..=1.0).contains(&alt.share) {
                return Err(check.err(
                    "viewers.alt_network.share",
                    format!("{} is not a share; use a number from 0.0 to 1.0", alt.share),
                ));
            }
            check_network(&alt.profile, "viewers.alt_network.profile", check)?;
            Some((alt.share, alt.profile))
        }
        None => None,
    };
    Ok((p2p_off_share, alt_network))
}

/// The run's clock: its length, the ramp, sampling, the measurement point and its window.
struct Timeline {
    duration: Duration,
    ramp: Duration,
    sampling_interval: Duration,
    measure_at: Duration,
    steady_window: Duration,
}

fn timeline(
    check: &Checker,
    spec: &ScenarioSpec,
    overrides: &Overrides,
) -> Result<Timeline, ScenarioError> {
    let clock = Clock::new(check, spec, overrides)?;
    let duration = clock.duration;
    let ramp = ramp(&clock, spec)?;
    let sampling_interval = sampling_interval(check, spec, duration)?;
    let measure_at = measure_at(&clock, spec)?;
    let steady_window = match &spec.steady_window {
        Some(value) => clock.scaled("steady_window", value)?,
        None => Duration::try_from_secs_f64(30.0 * clock.ratio)
            .unwrap_or(MAX_DURATION)
            .min(measure_at),
    };
    // A shortened run samples often enough to keep two samples in its window.
    let sampling_interval = if clock.overridden {
        sampling_interval
            .min(steady_window / 2)
            .max(Duration::from_millis(500))
    } else {
        sampling_interval
    };
    if steady_window > measure_at || steady_window < sampling_interval * 2 {
        return Err(check.err(
            "steady_window",
            "must hold at least two samples and end at measure_at (start at or after 0s)".into(),
        ));
    }
    Ok(Timeline {
        duration,
        ramp,
        sampling_interval,
        measure_at,
        steady_window,
    })
}

/// The run's length, and how a `--duration` on the command line stretches the timeline the
/// file wrote (ramp, measure point, window), so a shortened run keeps the scenario's shape.
struct Clock<'a> {
    check: &'a Checker<'a>,
    duration: Duration,
    /// `--duration` over the file's duration; 1 without the flag.
    ratio: f64,
    /// `--duration` was given.
    overridden: bool,
}

impl<'a> Clock<'a> {
    /// The file's duration, or `--duration`'s, from 5 s to [`MAX_DURATION`].
    fn new(
        check: &'a Checker<'a>,
        spec: &ScenarioSpec,
        overrides: &Overrides,
    ) -> Result<Self, ScenarioError> {
        let written_duration = check.duration("duration", &spec.duration)?;
        let duration = overrides.duration.unwrap_or(written_duration);
        if duration < Duration::from_secs(5) {
            return Err(check.err("duration", "must be at least 5s".into()));
        }
        if duration > MAX_DURATION {
            return Err(check.err(
                "duration",
                format!(
                    "{} is longer than the {} a run may last; split it into several runs (`viewerfleet suite --repeat`)",
                    humantime::format_duration(duration),
                    humantime::format_duration(MAX_DURATION)
                ),
            ));
        }
        let overridden = overrides.duration.is_some();
        let ratio = if overridden && !written_duration.is_zero() {
            duration.as_secs_f64() / written_duration.as_secs_f64()
        } else {
            1.0
        };
        Ok(Self {
            check,
            duration,
            ratio,
            overridden,
        })
    }

    /// A duration the file wrote for `field`, stretched like the whole run.
    fn scaled(&self, field: &str, value: &str) -> Result<Duration, ScenarioError> {
        let d = self.check.duration(field, value)?;
        if d > MAX_DURATION {
            return Err(self.check.err(
                field,
                format!(
                    "{} is longer than a run may last ({})",
                    humantime::format_duration(d),
                    humantime::format_duration(MAX_DURATION)
                ),
            ));
        }
        Duration::try_from_secs_f64(d.as_secs_f64() * self.ratio).map_err(|_| {
            self.check.err(
                field,
                format!(
                    "`{value}` scaled to --duration {} is out of range; shorten it",
                    humantime::format_duration(self.duration)
                ),
            )
        })
    }
}

/// How long the viewers take to arrive (all at once without a ramp); it ends before the run.
fn ramp(clock: &Clock, spec: &ScenarioSpec) -> Result<Duration, ScenarioError> {
    let ramp = match &spec.viewers.ramp {
        Some(value) => clock.scaled("viewers.ramp", value)?,
        None => Duration::ZERO,
    };
    if ramp >= clock.duration {
        return Err(clock.check.err(
            "viewers.ramp",
            format!(
                "the ramp ({}) must end before the run does (duration {})",
                humantime::format_duration(ramp),
                humantime::format_duration(clock.duration)
            ),
        ));
    }
    Ok(ramp)
}

/// The sampling interval as written (not scaled), 2 s by default, from 500 ms to half the run.
fn sampling_interval(
    check: &Checker,
    spec: &ScenarioSpec,
    duration: Duration,
) -> Result<Duration, ScenarioError> {
    let sampling_interval = match &spec.sampling_interval {
        Some(value) => check.duration("sampling_interval", value)?,
        None => Duration::from_secs(2),
    };
    if sampling_interval < Duration::from_millis(500) || sampling_interval > duration / 2 {
        return Err(check.err(
            "sampling_interval",
            "must be between 500ms and half the duration".into(),
        ));
    }
    Ok(sampling_interval)
}

/// The measurement point T, the end of the run by default. Within the run as written; with
/// `--duration` (shorter runs), a point beyond the end moves to it.
fn measure_at(clock: &Clock, spec: &ScenarioSpec) -> Result<Duration, ScenarioError> {
    let measure_at = match &spec.measure_at {
        Some(value) => clock.scaled("measure_at", value)?,
        None => clock.duration,
    };
    if measure_at > clock.duration && !clock.overridden {
        return Err(clock.check.err(
            "measure_at",
            format!(
                "{} is after the end of the run ({}); choose a point within the duration",
                humantime::format_duration(measure_at),
                humantime::format_duration(clock.duration)
            ),
        ));
    }
    Ok(measure_at.min(clock.duration))
}

/// What the viewers watch: refsite (started by the run) or a PeerTube video.
fn target(check: &Checker, t: &super::spec::TargetSpec) -> Result<TargetPlan, ScenarioError> {
    let latency = t.latency.unwrap_or(Latency::Normal);
    if t.video == VideoKind::Vod && t.latency.is_some() {
        return Err(check.err(
            "target.latency",
            "applies to live videos only; remove it or set `video: live`".into(),
        ));
    }
    match t.kind {
        TargetKind::Peertube => {
            let url = t.url.as_deref().ok_or_else(|| {
                check.err(
                    "target",
                    "`kind: peertube` needs `url:` (the video's watch or embed URL, e.g. https://peertube.example/w/<uuid>)".into(),
                )
            })?;
            check_video_url(url).map_err(|message| check.err("target.url", message))?;
            if let Some(exporter) = &t.exporter {
                check_http_url(exporter).map_err(|why| {
                    check.err(
                        "target.exporter",
                        format!("`{exporter}` {why}; write the exporter's URL, e.g. http://127.0.0.1:9091/metrics"),
                    )
                })?;
            }
            for (field, value) in [
                ("target.metrics_interval", &t.metrics_interval),
                ("target.vod_length", &t.vod_length),
            ] {
                if value.is_some() {
                    return Err(check.err(field, "applies to `kind: refsite` only".into()));
                }
            }
        }
        TargetKind::Refsite => {
            for (field, value) in [("target.url", &t.url), ("target.exporter", &t.exporter)] {
                if value.is_some() {
                    return Err(check.err(
                        field,
                        "refsite is started by the run itself; remove this field (it applies to `kind: peertube`)".into(),
                    ));
                }
            }
        }
    }
    let metrics_interval = match &t.metrics_interval {
        Some(value) => check.duration("target.metrics_interval", value)?,
        None => Duration::from_secs(15),
    };
    if metrics_interval < Duration::from_secs(1) || metrics_interval > Duration::from_secs(3600) {
        return Err(check.err(
            "target.metrics_interval",
            "must be between 1s and 1h (PeerTube's players POST every 15s)".into(),
        ));
    }
    let vod_length = match &t.vod_length {
        Some(value) => check.duration("target.vod_length", value)?,
        None => Duration::from_secs(120),
    };
    if vod_length < Duration::from_secs(10) || vod_length > Duration::from_secs(3600) {
        return Err(check.err("target.vod_length", "must be between 10s and 1h".into()));
    }
    Ok(TargetPlan {
        kind: t.kind,
        video: t.video,
        latency,
        url: t.url.clone(),
        exporter: t.exporter.clone(),
        metrics_interval,
        vod_length,
    })
}

/// A PeerTube video's watch or embed URL, as the PeerTube adapter reads it.
fn check_video_url(url: &str) -> Result<(), String> {
    const SHAPES: &str = "https://<instance>/w/<uuid>, https://<instance>/videos/watch/<uuid> or https://<instance>/videos/embed/<uuid>";
    check_http_url(url).map_err(|why| format!("`{url}` {why}; write the video's URL: {SHAPES}"))?;
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let segments: Vec<&str> = parsed
        .path_segments()
        .map(|s| s.filter(|p| !p.is_empty()).collect())
        .unwrap_or_default();
    if matches!(
        segments.as_slice(),
        ["w", _] | ["videos", "watch", _] | ["videos", "embed", _]
    ) {
        return Ok(());
    }
    let host = parsed.host_str().unwrap_or_default().to_ascii_lowercase();
    let site = [
        ("youtube.com", "YouTube"),
        ("youtu.be", "YouTube"),
        ("vimeo.com", "Vimeo"),
        ("dailymotion.com", "Dailymotion"),
        ("twitch.tv", "Twitch"),
    ]
    .iter()
    .find(|(domain, _)| host == *domain || host.ends_with(&format!(".{domain}")))
    .map(|(_, name)| *name);
    Err(match site {
        Some(name) => format!(
            "`{url}` is a {name} page, not a PeerTube video: `kind: peertube` drives PeerTube's player; give {SHAPES}"
        ),
        None => format!(
            "`{url}` is not a PeerTube video URL (its path is `{}`); expected {SHAPES}",
            parsed.path()
        ),
    })
}

/// `Ok` for an http(s) URL with a host; else why not.
fn check_http_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err("is not an http:// or https:// URL with a host".into());
    }
    Ok(())
}

/// `max_failed_viewers`: a count, or a share of the viewers.
fn failure_threshold(
    check: &Checker,
    threshold: Option<&FailedThreshold>,
    viewers: u32,
) -> Result<u32, ScenarioError> {
    Ok(match threshold {
        None => 0,
        Some(FailedThreshold::Count(n)) => *n,
        Some(FailedThreshold::Share(s)) => {
            let share = s
                .strip_suffix('%')
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| (0.0..=100.0).contains(v))
                .ok_or_else(|| {
                    check.err(
                        "max_failed_viewers",
                        format!(
                            "`{s}` is neither a count (e.g. 2) nor a percentage from 0% to 100% (e.g. \"5%\")"
                        ),
                    )
                })?;
            (viewers as f64 * share / 100.0).floor() as u32
        }
    })
}

/// `apply: tc` where the fleet gives viewers no interfaces of their own is refused before
/// anything starts (Grids are checked per slot at run time: only their nodes know).
fn check_tc_fleet(
    network: &NetworkProfile,
    field: &str,
    fleet: &FleetPlan,
    check: &Checker,
) -> Result<(), ScenarioError> {
    if network.apply == Some(Throttling::Tc) && matches!(fleet, FleetPlan::Local(_)) {
        return Err(check.err(
            &format!("{field}.apply"),
            "`tc` needs one network interface per viewer, which the local fleet does not \
             have; use `fleet: kind: netns` (as root) or `apply: http-only`"
                .into(),
        ));
    }
    Ok(())
}

/// Fills in the fleet's default throttling where the plan can know it: tc where every
/// viewer has its own interface (netns), the 2023 conditions (HTTP only) on the local fleet.
/// On a Grid only the nodes know whether their slots shape: left unset, each viewer then
/// gets tc when its slot is shaped and HTTP-only rules otherwise.
fn with_throttling(mut network: NetworkProfile, fleet: &FleetPlan) -> NetworkProfile {
    if network.apply.is_none() {
        network.apply = match fleet {
            FleetPlan::Netns(_) => Some(Throttling::Tc),
            FleetPlan::Local(_) => Some(Throttling::HttpOnly),
            FleetPlan::Grid(_) | FleetPlan::Hcloud(_) => None,
        };
    }
    network
}

fn check_network(
    network: &NetworkProfile,
    field: &str,
    check: &Checker,
) -> Result<(), ScenarioError> {
    let err = |field: &str, message: String| check.err(field, message);
    for (name, value, max) in [
        ("download_kbps", network.link.download_kbps, 10_000_000),
        ("upload_kbps", network.link.upload_kbps, 10_000_000),
    ] {
        if let Some(v) = value {
            if v < 8 || v > max {
                return Err(err(
                    &format!("{field}.{name}"),
                    format!("{v} kbit/s is out of range; use 8 to {max} kbit/s"),
                ));
            }
        }
    }
    if let Some(latency) = network.link.latency_ms {
        if latency > 10_000 {
            return Err(err(
                &format!("{field}.latency_ms"),
                format!("{latency} ms is out of range; use 0 to 10000 ms"),
            ));
        }
    }
    Ok(())
}
