//! Command-line types only (clap). They are turned into validated configuration by the
//! module that owns each command; no core module imports clap types beyond its `cli_*` entry.
//! Flags several commands share are groups flattened into each (`ScaleArgs`, `SwarmArgs`,
//! `PaidArgs`, `JsonArgs`, `OutArgs`); a command whose help words one differently says so
//! with `mut_arg`, which keeps the flag's place in `--help`. `commands::overrides` turns the groups into the
//! scenario's `Overrides`.

use crate::model::kinds::{FleetKind, Throttling, VideoKind};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A duration flag's value, in the syntax scenario files write durations in (humantime's:
/// `90s`, `5m`, `1h 30m`). On a bad value clap names the flag, adds this message and exits
/// with 2 (bad input).
fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e}; write e.g. 90s, 5m or 1h 30m"))
}

#[derive(Debug, Parser)]
#[command(
    name = "viewerfleet",
    version,
    about = "Real headless Chrome viewers on a P2P video stream: HTTP vs P2P, measured."
)]
pub struct Cli {
    /// Only warnings and errors on stderr, no progress display (for CI).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one scenario: start the fleet and viewers, sample, write raw data and a report.
    Run(RunArgs),
    /// Serve the built-in reference P2P video site (PeerTube-compatible interfaces).
    ///
    /// Once the site listens, it prints `READY` and its addresses (JSON) on stdout, or with
    /// `--json` the JSON document instead, and nothing after it; it serves until Ctrl-C or
    /// SIGTERM.
    Refsite(RefsiteArgs),
    /// Build report.{json,md,html} and CSV time series from a run folder's raw data.
    Report(ReportArgs),
    /// Compare several run folders side by side.
    Compare(CompareArgs),
    /// Run several scenarios in sequence (optionally repeated) and compare them.
    Suite(SuiteArgs),
    /// Find and remove leftovers of earlier crashed runs.
    Gc(GcArgs),
    /// Estimate nodes and cost for a scenario on Hetzner Cloud.
    Plan(PlanArgs),
    /// Create a scenario's Hetzner Cloud fleet (hub + IPv6-only nodes) and leave it running.
    Up(UpArgs),
    /// Delete every server, firewall and SSH key of one cloud run.
    Down(DownArgs),
    /// Check a scenario file without running it.
    Validate(ValidateArgs),
    /// A real Selenium Grid 4 (hub + nodes) on this machine: `grid up --local`, `grid down`.
    Grid(GridArgs),
    /// Run a scenario at increasing viewer counts and find where it breaks.
    Ladder(LadderArgs),
    /// Measure what one viewer costs here (PSS, CPU, bytes) per browser profile.
    Calibrate(CalibrateArgs),
    /// Check light peers against real viewers: one swarm size, all real vs real + light.
    ///
    /// The scenario runs at a swarm of N (`--swarm`), as N real viewers (A) and as K real
    /// viewers (`--real`) + N − K light peers (B), `--repeat` times each, interleaved
    /// (A B A B …), each run in its own folder under `--out` (`all-real-<k>`,
    /// `with-light-<k>`). B passes when the swarm's P2P savings at T are within ±5 points of
    /// A's (means over the runs), the P2P upload per swarm member, pooled over the runs, has
    /// its median and p90 within 2× of A's, B's real viewers all played and stall at most
    /// 0.05 times per viewer-minute more, and every light peer joined. A run that is not a
    /// finding (saturated, starved, cut short, failed) makes the verdict `inconclusive`. The
    /// table goes to stdout and the verdict to fidelity.json in `--out`, which a scenario names in
    /// `swarm.fidelity` so its runs' reports say which verdict they rely on. Exit code 0 on
    /// pass, 1 on FAIL or inconclusive, 130/143 when interrupted. With `--json`, stdout holds
    /// fidelity.json's document in the `--json` envelope and the table goes to stderr.
    Fidelity(FidelityArgs),
    /// The watchdog a cloud command starts: deletes the run if the controller dies first.
    #[command(hide = true)]
    Reaper(ReaperArgs),
}

/// The reaper's arguments (started by the controller; the API token comes on stdin).
#[derive(Debug, Args)]
pub struct ReaperArgs {
    /// The run whose resources it deletes (label `viewerfleet-run`).
    #[arg(long)]
    pub run: String,
    /// The Hetzner API's address.
    #[arg(long)]
    pub endpoint: String,
    /// The controller's `pid:start time` (from /proc/<pid>/stat).
    #[arg(long)]
    pub controller: Option<String>,
    #[arg(long, default_value = "10m", value_parser = duration)]
    pub stale_after: Duration,
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub poll: Duration,
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub settle: Duration,
    #[arg(long, default_value = "5m", value_parser = duration)]
    pub keep_poll: Duration,
    #[arg(long, default_value = "2m", value_parser = duration)]
    pub beat: Duration,
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub backoff: Duration,
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub max_backoff: Duration,
    #[arg(long, default_value = "24h", value_parser = duration)]
    pub give_up: Duration,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Scenario whose target, video and network the viewers use [default: refsite, live
    /// and VOD, 2000/300 kbit/s, 500 ms]; its fleet is ignored (calibration runs on this
    /// machine).
    pub scenario: Option<PathBuf>,
    /// Viewers played at once per profile.
    #[arg(long, default_value_t = 4)]
    pub viewers: u32,
    /// Built-in profiles to measure, in order: `default` (a plain ChromeDriver set-up),
    /// `project` (viewerfleet's flags and the decode lever), `packed` (project, 4 viewers
    /// per browser). Every profile is compared against `default` (listed or not).
    #[arg(long, value_delimiter = ',', default_value = "default,project,packed")]
    pub profiles: Vec<String>,
    /// A further profile: `NAME=BASE --flag …` adds flags to BASE's, `-FLAG` removes one,
    /// `per_browser=N` packs N viewers per browser, `video_track=on|off` sets the decode
    /// lever (e.g. `lean=project --in-process-gpu`, `p8=packed per_browser=8`). Repeatable.
    #[arg(long)]
    pub profile: Vec<String>,
    /// The built-in scenario's videos, in order: `live` (240p, 650 kbit/s), `vod` (four
    /// renditions, 720p on top) or both [default: live,vod]; not with a scenario file.
    #[arg(long, value_delimiter = ',')]
    pub video: Vec<VideoKind>,
    /// Measure every profile this many times, round robin (all profiles, then again), so a
    /// drift of the machine spreads over all of them; each round is compared on its own.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Time after every viewer's first frame before measuring.
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub warmup: Duration,
    /// Measurement window (long enough that one live segment is under 5% of it).
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub window: Duration,
    /// Output folder for calibration.json, calibration.md and one run folder per
    /// measurement (`runs/<video>-<profile>-r<round>/`); it must not hold an earlier
    /// calibration's runs.
    #[arg(long, value_name = "DIR", default_value = "runs/calibration")]
    pub out: PathBuf,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

/// `viewerfleet fidelity SCENARIO --swarm N [--real K] [--repeat K] --out DIR [--json]`.
/// Why a subcommand and not a mode of `calibrate`: see `commands/fidelity.rs`.
#[derive(Debug, Args)]
pub struct FidelityArgs {
    /// Scenario file (YAML) with a refsite target; its viewer count and `swarm.light_peers`
    /// are replaced by each arm's, and its `swarm.fidelity` is left out.
    pub scenario: PathBuf,
    /// Swarm members in both arms: A runs this many real viewers.
    #[arg(long, value_name = "N")]
    pub swarm: u32,
    /// Real viewers in B, beside `swarm − real` light peers (at least 1, fewer than --swarm).
    #[arg(long, value_name = "K", default_value_t = 2)]
    pub real: u32,
    /// Runs of each arm, interleaved A B A B … so a drift of the machine hits both.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Output folder for one run folder per run and fidelity.json; it must not hold an
    /// earlier measurement's runs.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Apply every network profile this way in both arms: `http-only`, `tc` or `cdp-all`.
    #[arg(long)]
    pub apply: Option<Throttling>,
    /// Run both arms on this fleet instead of the scenario's: `local` or `netns` (as root).
    #[arg(long)]
    pub fleet: Option<FleetKind>,
    /// Override the scenario's duration in both arms (e.g. 5m).
    #[arg(long, value_parser = duration)]
    pub duration: Option<Duration>,
    #[command(flatten)]
    pub stdout: JsonArgs,
    #[command(flatten)]
    pub paid: PaidArgs,
}

/// `--json` (`JsonArgs`) is global here: it goes before or after the `grid` subcommand.
#[derive(Debug, Args)]
#[command(mut_arg("json", |a| a.global(true)))]
pub struct GridArgs {
    #[command(subcommand)]
    pub action: GridAction,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Subcommand)]
pub enum GridAction {
    /// Start a hub and N nodes from the Selenium server jar, each node with K viewer slots.
    Up(GridUpArgs),
    /// Stop the local Grid and release its processes, namespaces and files.
    Down(GridDownArgs),
    /// Say where `grid up --local` takes its files from: the Selenium server jar (and which
    /// rule found it) and the hub's and nodes' configuration. Exits 70 without a jar.
    Files(GridFilesArgs),
}

#[derive(Debug, Args)]
pub struct GridFilesArgs {
    /// As `grid up --jar`.
    #[arg(long)]
    pub jar: Option<PathBuf>,
    /// As `grid up --config-dir`.
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GridUpArgs {
    /// Run the Grid on this machine (the only mode of `grid up`).
    #[arg(long)]
    pub local: bool,
    /// Number of nodes.
    #[arg(long, default_value_t = 2)]
    pub nodes: u32,
    /// Viewer slots (browsers, each in its own namespace) per node.
    #[arg(long, default_value_t = 2)]
    pub slots: u32,
    /// State file [default: /run/viewerfleet/grid/local.json].
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Selenium server jar [default, in order: VIEWERFLEET_SELENIUM_JAR; the source tree's
    /// grid/node_modules/… when this binary runs from it; <prefix>/share/viewerfleet/ next
    /// to the binary's bin/ (`make install`)]. `grid files` says which one.
    #[arg(long)]
    pub jar: Option<PathBuf>,
    /// Folder holding hub.toml and node.toml to use instead of the copies built into this
    /// binary (the source tree's grid/ files as of the build).
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// tc download limit of every slot in kbit/s (0: none).
    #[arg(long, default_value_t = 0)]
    pub down_kbit: u32,
    /// tc upload limit of every slot in kbit/s (0: none).
    #[arg(long, default_value_t = 0)]
    pub up_kbit: u32,
    /// Port the target (refsite) listens on inside its namespace.
    #[arg(long, default_value_t = 8080)]
    pub target_port: u16,
    /// CPU quota of every node in cores (e.g. 0.5), or of one node (`0.25@2`: node 2); may
    /// be repeated. Default: no quota, a node may use the whole machine.
    #[arg(long, value_name = "CORES[@NODE]")]
    pub node_cpus: Vec<String>,
    /// Every viewer slot behind this NAT: none, home, cgnat or symmetric (GUIDE.md, "NAT
    /// types"); the slots are then dual-stack and refsite runs a STUN server.
    #[arg(long, default_value = "none")]
    pub nat: String,
}

#[derive(Debug, Args)]
pub struct GridDownArgs {
    /// State file [default: /run/viewerfleet/grid/local.json].
    #[arg(long)]
    pub state: Option<PathBuf>,
}

/// `--out` (`OutArgs`) in the words of `run`.
#[derive(Debug, Args)]
#[command(mut_arg("out", |a| a.help("Output folder for the run's raw data and reports [default: runs/<scenario>-<timestamp>]")))]
pub struct RunArgs {
    /// Scenario file (YAML); see scenarios/ for examples.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub output: OutArgs,
    #[command(flatten)]
    pub scale: ScaleArgs,
    /// Run on this fleet instead of the scenario's: `local` or `netns` (as root).
    #[arg(long)]
    pub fleet: Option<FleetKind>,
    /// Apply the network profile this way: `http-only`, `tc` or `cdp-all`.
    #[arg(long)]
    pub apply: Option<Throttling>,
    #[command(flatten)]
    pub swarm: SwarmArgs,
    /// Do not build the report at the end of the run.
    #[arg(long)]
    pub no_report: bool,
    /// Serve the controller's Prometheus metrics at this loopback address during the run
    /// (e.g. 127.0.0.1:9464, what dashboards/prometheus.yml scrapes), each labelled with the
    /// run folder's name, with the target's exporter relayed.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Cloud fleets: leave the servers running after the run (delete them with `viewerfleet down RUN`).
    #[arg(long)]
    pub keep: bool,
    /// Cloud fleets: make and measure one canary node first, and size the rest of the
    /// fleet from it (as `fleet.canary: true`).
    #[arg(long)]
    pub canary: bool,
    #[command(flatten)]
    pub paid: PaidArgs,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Args)]
pub struct RefsiteArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Cache folder for generated media [default: $XDG_CACHE_HOME/viewerfleet/media].
    #[arg(long)]
    pub media: Option<PathBuf>,
    /// Front-end folder holding the player page and its node_modules [default: the copy
    /// built into this binary, else web/ of the source tree].
    #[arg(long, env = "VIEWERFLEET_WEB")]
    pub web: Option<PathBuf>,
    /// Interval between the players' playback-metrics POSTs (PeerTube's default: 15s).
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub metrics_interval: Duration,
    /// Which videos to serve: vod, live or both (live runs an ffmpeg encoder all the time).
    #[arg(long, value_delimiter = ',', default_value = "vod,live")]
    pub videos: Vec<String>,
    /// Length of the generated VOD video (e.g. 2m).
    #[arg(long, default_value = "2m", value_parser = duration)]
    pub vod_length: Duration,
    /// Serve the same site on this address too (repeatable), e.g. its IPv4 beside its IPv6.
    #[arg(long = "also-listen", value_name = "ADDR")]
    pub also_listen: Vec<SocketAddr>,
    /// Run a STUN Binding server (RFC 5389) on this address (repeatable), e.g. [fd00::2]:3478.
    #[arg(long, value_name = "ADDR")]
    pub stun: Vec<SocketAddr>,
    /// STUN servers players get as `iceServers` (PeerTube's `webrtc.stun_servers`), e.g.
    /// stun:stun.example.org:3478 [default: the --stun addresses; `none` for none].
    #[arg(long = "stun-servers", value_delimiter = ',', value_name = "URLS")]
    pub stun_servers: Vec<String>,
    /// A request's header must arrive within this time; also how long a keep-alive
    /// connection may sit idle between requests.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = duration)]
    pub header_timeout: Duration,
    /// A connection that moves no byte either way for this long is closed.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = duration)]
    pub idle_timeout: Duration,
    /// Connections open at once; further clients wait until one closes.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub max_connections: usize,
    /// Take playback reports and tracker announces only from this network (CIDR,
    /// repeatable), e.g. a cloud fleet's 2001:db8:0:a::/64 [default: from everyone].
    #[arg(long, value_name = "CIDR")]
    pub reports_from: Vec<String>,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

/// `--out` (`OutArgs`) in the words of `report`.
#[derive(Debug, Args)]
#[command(mut_arg("out", |a| a.help("Output folder for report.{json,md,html} and the CSV files [default: the run folder]")))]
pub struct ReportArgs {
    /// A run folder written by `viewerfleet run`.
    pub run_dir: PathBuf,
    /// Judge these thresholds instead of those the run's manifest froze: a YAML file in the
    /// scenario's `thresholds:` syntax, or conditions such as
    /// "ttff_p95<15s,p2p_savings_at_t>=60%" (repeatable). Nothing is written into the run
    /// folder then, unless --out names it.
    #[arg(long, value_name = "FILE|EXPR")]
    pub thresholds: Vec<String>,
    #[command(flatten)]
    pub output: OutArgs,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

/// `--out` (`OutArgs`) in the words of `compare`.
#[derive(Debug, Args)]
#[command(mut_arg("out", |a| a.help("Output folder for compare.{md,html,json,csv} [default: the current folder]")))]
pub struct CompareArgs {
    /// Run folders to compare.
    #[arg(required = true)]
    pub run_dirs: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutArgs,
    /// Group runs of the same scenario: mean and 95% confidence interval per scenario.
    #[arg(long)]
    pub group: bool,
    /// Judge every run against these thresholds instead of those its manifest froze: a
    /// YAML file in the scenario's `thresholds:` syntax, or conditions such as
    /// "ttff_p95<15s,p2p_savings_at_t>=60%" (repeatable). The run folders are then only
    /// read, never written.
    #[arg(long, value_name = "FILE|EXPR")]
    pub thresholds: Vec<String>,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

/// The shared groups (`ScaleArgs`) with the words of a command that runs several scenarios.
#[derive(Debug, Args)]
#[command(
    mut_arg("viewers", |a| a.help("Override every scenario's viewer count: a number, or `auto` (each run as many as this machine carries, at most its file's count and at most the first run's)")),
    mut_arg("max_viewers", |a| a.help("With `auto`: at most this many viewers in every run (instead of `viewers.auto.max`)")),
    mut_arg("duration", |a| a.help("Override every scenario's duration")),
)]
pub struct SuiteArgs {
    /// Scenario files, run in this order.
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// Output folder for one run folder per run and the comparison.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Run each scenario this many times; rates get a 95% confidence interval.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Run one scenario K times instead, e.g. `live-normal@http-only=3` (a run's name, or
    /// its start up to an `@`: a file stem for all its modes and sizes, `<scenario>@<mode>`
    /// for all its swarm sizes); repeatable. For a figure that moves from run to run
    /// more than the others: the comparison shows the mean of its K runs with a 95% CI.
    #[arg(long, value_name = "NAME=K")]
    pub repeat_run: Vec<crate::suite::RunRepeat>,
    #[command(flatten)]
    pub scale: ScaleArgs,
    /// Keep each run's swarm size in this JSON file between suites: a run found there goes
    /// to its size (`count: auto`; stopped short only by a host 10 points past its limit);
    /// a run not found measures its own and is added. `make demo` keeps
    /// runs/demo-swarm-size.json.
    #[arg(long)]
    pub swarm_size_file: Option<PathBuf>,
    /// Run every scenario on this fleet instead: `local` or `netns` (as root).
    #[arg(long)]
    pub fleet: Option<FleetKind>,
    /// Run every scenario once per throttling mode, e.g. `http-only,tc`: the runs are named
    /// `<scenario>@<mode>` and compared side by side.
    #[arg(long, value_delimiter = ',')]
    pub apply: Vec<Throttling>,
    #[command(flatten)]
    pub swarm: SwarmArgs,
    /// Run every scenario (and every --apply mode) once per swarm size N, e.g. 4,16,64,256
    /// (positive whole numbers, sorted, repeats dropped): each run keeps the scenario's real
    /// viewers (`viewers.count` or --viewers: a number, not `auto`) and adds N − viewers
    /// light peers (refsite targets; `swarm.per_page` kept); a size below a scenario's
    /// viewers is an error. Runs are named `<scenario>[@<mode>]@<N>`. With two sizes or more
    /// the comparison adds "P2P offload against swarm size": per scenario@mode, the swarm's
    /// P2P savings and HTTP share at T, the bound 1 − 1/N that p2p-media-loader's design
    /// allows, and headroom, as tables and a plot.
    #[arg(long, value_name = "N,N,…", conflicts_with = "light_peers")]
    pub swarm_sizes: Option<crate::suite::SweepSizes>,
    /// Check every scenario and print the runs (name, folder, viewers and light peers),
    /// then exit without starting anything.
    #[arg(long, conflicts_with = "json")]
    pub dry_run: bool,
    #[command(flatten)]
    pub stdout: JsonArgs,
    #[command(flatten)]
    pub paid: PaidArgs,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Only local leftovers: browsers, drivers, namespaces, qdiscs, profiles.
    #[arg(long)]
    pub local: bool,
    /// Only cloud runs (Hetzner), e.g. for a scheduled gc from cron or a systemd timer.
    #[arg(long, conflicts_with = "local")]
    pub cloud: bool,
    /// Print what would be removed without removing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Cloud runs: also remove those created more than this long ago (e.g. 2h), even before
    /// their TTL.
    #[arg(long, value_parser = duration)]
    pub older_than: Option<Duration>,
    /// Cloud runs: remove those whose controller's heartbeat is older than this (the
    /// controller died) [default: 10m].
    #[arg(long, value_parser = duration)]
    pub heartbeat_grace: Option<Duration>,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Scenario files (YAML).
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// CPU cores per viewer [default: the scenario's fleet.budget, else 0.08 (240p live, BENCHMARKS.md)].
    #[arg(long)]
    pub cpu_per_viewer: Option<f64>,
    /// Memory (MB, PSS) per viewer [default: the scenario's fleet.budget, else 140, plus 55 per browser].
    #[arg(long)]
    pub memory_mb_per_viewer: Option<f64>,
    /// Override the scenario's viewer count.
    #[arg(long)]
    pub viewers: Option<u32>,
    /// Viewers per browser instead of the scenario's `viewers.per_browser` (1 to 16; they
    /// share the browser's address and link, see GUIDE.md "Several viewers per browser").
    #[arg(long)]
    pub per_browser: Option<u32>,
    /// Take CPU and memory per viewer from `viewerfleet calibrate` output (its `project`
    /// profile); --cpu-per-viewer / --memory-mb-per-viewer still win.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub stdout: JsonArgs,
    /// Also write the plan as Terraform variables for `terraform/` (one scenario; needs the
    /// scenario's `controller_ips` and an SSH public key, as `up` does).
    #[arg(long, value_name = "FILE")]
    pub tfvars: Option<PathBuf>,
}

/// `--yes` (`PaidArgs`) in the words of a command that is only about cloud servers.
#[derive(Debug, Args)]
#[command(mut_arg("yes", |a| a.help("Create the servers without asking (scripts, CI) [env: VIEWERFLEET_YES]")))]
pub struct UpArgs {
    /// Scenario file with `fleet: kind: hcloud`.
    pub scenario: PathBuf,
    /// Write the fleet's inventory (run id, hub URL, nodes) as JSON here [default: stdout,
    /// or with --json only inside its document].
    #[arg(long)]
    pub inventory: Option<PathBuf>,
    /// The viewer-slot script to install on the nodes [default: the one built into this binary].
    #[arg(long)]
    pub viewer_slots: Option<PathBuf>,
    /// Override the scenario's viewer count (sizes the fleet).
    #[arg(long)]
    pub viewers: Option<u32>,
    /// Make and measure one canary node first, and size the rest of the fleet from it (as
    /// `fleet.canary: true`).
    #[arg(long)]
    pub canary: bool,
    #[command(flatten)]
    pub paid: PaidArgs,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Args)]
pub struct DownArgs {
    /// The run id printed by `viewerfleet up` (label `viewerfleet-run`).
    pub run: String,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Scenario files to check.
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// Also ask the Grid of each scenario on a Grid fleet: its hubs answer `/status` (with
    /// the credentials the run would send, over the TLS it would use) and have nodes; exit
    /// 69 when one does not, 2 when it asks for a password not given.
    #[arg(long)]
    pub check_grid: bool,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

#[derive(Debug, Args)]
pub struct LadderArgs {
    /// Scenario file (YAML); its viewer count is replaced by each step's.
    pub scenario: PathBuf,
    /// Viewer counts, e.g. 2,4,6,8,10.
    #[arg(long, value_delimiter = ',', required = true)]
    pub steps: Vec<u32>,
    /// Duration of each step (scales the scenario's timeline) [default: the scenario's].
    #[arg(long, value_parser = duration)]
    pub hold: Option<Duration>,
    /// Output folder for one `step-<viewers>` run folder per step and the capacity report.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Do not run anything: rebuild the capacity report from the step folders in --out.
    #[arg(long)]
    pub analyze_only: bool,
    /// Cores the target may use [default: this machine's, for local targets].
    #[arg(long)]
    pub target_cores: Option<f64>,
    /// HTTP egress capacity of the target's link in Mbit/s (turns on the link rule).
    #[arg(long)]
    pub link_mbps: Option<f64>,
    /// Projection: the server's cores.
    #[arg(long, default_value_t = 4.0)]
    pub server_cores: f64,
    /// Projection: the server's memory in GB.
    #[arg(long, default_value_t = 4.0)]
    pub server_ram_gb: f64,
    /// Projection: the server's network card in Mbit/s.
    #[arg(long, default_value_t = 1000.0)]
    pub server_nic_mbps: f64,
    /// Projection: share of each resource to use, the rest being headroom.
    #[arg(long, default_value_t = 0.6)]
    pub usable_share: f64,
    #[command(flatten)]
    pub paid: PaidArgs,
    #[command(flatten)]
    pub stdout: JsonArgs,
}

/// How many viewers and for how long, instead of what the scenario writes (`run`, `suite`;
/// `commands::overrides` turns them into the scenario's `Overrides`).
#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    /// Override the scenario's viewer count: a number, or `auto` (browsers arrive while this
    /// machine's CPU stays below `viewers.auto.cpu_below`, at most the file's count).
    #[arg(long)]
    pub viewers: Option<ViewerCountArg>,
    /// With `auto`: at most this many viewers (instead of `viewers.auto.max`).
    #[arg(long)]
    pub max_viewers: Option<u32>,
    /// Override the scenario's duration (e.g. 90s, 5m).
    #[arg(long, value_parser = duration)]
    pub duration: Option<Duration>,
}

/// What the fleet's browsers carry, instead of what the scenario writes (`run`, `suite`).
#[derive(Debug, Clone, Args)]
pub struct SwarmArgs {
    /// Viewers per browser instead of the scenario's `viewers.per_browser` (1 to 16; they
    /// share the browser's address and link, see GUIDE.md "Several viewers per browser").
    #[arg(long)]
    pub per_browser: Option<u32>,
    /// Light peers instead of the scenario's `swarm.light_peers` (0 turns them off; see
    /// GUIDE.md "Light peers").
    #[arg(long, value_name = "N")]
    pub light_peers: Option<u32>,
    /// What runs the light peers instead of the scenario's `swarm.runtime`: `node` (a
    /// Node.js process per page, on the local and netns fleets), `browser` (a Chromium page
    /// each, every fleet) or `auto`.
    #[arg(long, value_name = "RUNTIME")]
    pub light_runtime: Option<crate::model::kinds::LightRuntime>,
}

/// `--out` of the commands whose output folder may be left out (`run`, `report`, `compare`),
/// each saying what it writes there and where it writes without it. The commands that need
/// one (`suite`, `ladder`, `fidelity`) or have a fixed default (`calibrate`) declare their
/// own `--out <DIR>`, worded the same way.
#[derive(Debug, Clone, Args)]
pub struct OutArgs {
    /// Output folder [default: the command's own].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `--json` of every command but the hidden `reaper` (README, "JSON output"): `main` sends
/// the text to stderr, and each command returns its figures for the document.
#[derive(Debug, Clone, Args)]
pub struct JsonArgs {
    /// Print one JSON document on stdout and nothing else: the outcome, the exit code and
    /// this command's figures (schema: schemas/<command>-summary.v1.json); the
    /// human-readable text then goes to stderr.
    #[arg(long)]
    pub json: bool,
}

/// `--yes` of the commands that may buy cloud servers.
#[derive(Debug, Clone, Args)]
pub struct PaidArgs {
    /// Cloud fleets: create the servers without asking (scripts, CI) [env: VIEWERFLEET_YES].
    #[arg(long, env = "VIEWERFLEET_YES", value_parser = clap::builder::FalseyValueParser::new())]
    pub yes: bool,
}

/// `--viewers N` or `--viewers auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewerCountArg {
    Count(u32),
    Auto,
}

impl std::str::FromStr for ViewerCountArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(ViewerCountArg::Auto);
        }
        s.parse()
            .map(ViewerCountArg::Count)
            .map_err(|_| format!("`{s}` is neither a number of viewers nor `auto`"))
    }
}
