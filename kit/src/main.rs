//! `viewerfleet-kit`: the test kit's servers as a command, for tests, benchmarks and dry
//! runs without an account (see README: "Dry run without an account").
//!
//!   viewerfleet-kit fake-hcloud [--listen ADDR] …   a fake Hetzner Cloud API
//!   viewerfleet-kit stub-webdriver [--listen ADDR] …  a WebDriver stub (prints LISTENING addr)
//!   viewerfleet-kit tls-proxy --upstream ADDR …      https:// (test CA) in front of a hub

use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::process::ExitCode;
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud, RateBucket, HUB_URL_ENV};
use viewerfleet_kit::webdriver_stub;

#[derive(Debug, Parser)]
#[command(
    name = "viewerfleet-kit",
    version,
    about = "viewerfleet's test kit: fake Hetzner API, WebDriver stub."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a faithful fake of the Hetzner Cloud API (and a simulated Selenium hub).
    FakeHcloud(FakeHcloudArgs),
    /// Serve a WebDriver stub that also looks like a Selenium Grid hub and a PeerTube page.
    StubWebdriver(StubWebdriverArgs),
    /// Terminate TLS with a fresh test CA in front of a plain http:// server (a Grid hub):
    /// prints `LISTENING https://localhost:<port>/` and `CA <path of the CA's PEM>`.
    TlsProxy(TlsProxyArgs),
}

#[derive(Debug, Args)]
struct TlsProxyArgs {
    /// The plain server behind the proxy, e.g. 127.0.0.1:4444.
    #[arg(long)]
    upstream: SocketAddr,
    /// Address to listen on (loopback); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Folder for the CA's PEM file (`ca.pem`), to give clients as SSL_CERT_FILE.
    #[arg(long, default_value = ".")]
    ca_dir: std::path::PathBuf,
}

#[derive(Debug, Args)]
struct FakeHcloudArgs {
    /// Address to listen on (loopback only is sensible).
    #[arg(long, default_value = "127.0.0.1:8089")]
    listen: SocketAddr,
    /// Servers the fake project may hold before `resource_limit_exceeded`.
    #[arg(long, default_value_t = 1000)]
    server_limit: usize,
    /// The project's request budget, refilled one request per --refill-every (Hetzner:
    /// 3600, one per second); 0: unlimited.
    #[arg(long, default_value_t = 3600)]
    rate_limit: u32,
    /// Time to refill one request of the budget.
    #[arg(long, default_value = "1s")]
    refill_every: String,
    /// How long an action (create, delete, set rules) runs.
    #[arg(long, default_value = "2s")]
    action_time: String,
    /// Hand the simulated hub's sessions to a built-in WebDriver stub, so `viewerfleet run`
    /// with `fleet: hcloud` runs end to end without browsers (a target page and exporter:
    /// `viewerfleet-kit stub-webdriver`).
    #[arg(long)]
    with_webdriver_stub: bool,
    /// Every n-th request fails with 503 (0: never).
    #[arg(long, default_value_t = 0)]
    fail_every: u64,
    /// Time until a node server shows as registered on /hub/status ("never": never).
    #[arg(long, default_value = "2s")]
    node_boot: String,
}

#[derive(Debug, Args)]
struct StubWebdriverArgs {
    /// Address to listen on (loopback); port 0 picks a free port, printed on stdout.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Latency added to every WebDriver answer, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Share of session creations refused, 0..1.
    #[arg(long, default_value_t = 0.0)]
    session_failure_rate: f64,
    /// Time a session creation takes, in milliseconds; it goes on when the client leaves.
    #[arg(long, default_value_t = 0)]
    create_delay_ms: u64,
    /// List live sessions in /status with their capabilities, as a Grid hub does.
    #[arg(long)]
    list_sessions: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(err) => {
            eprintln!("Error: {err}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::FakeHcloud(args) => fake_hcloud(args).await,
            Command::StubWebdriver(args) => stub_webdriver(args).await,
            Command::TlsProxy(args) => tls_proxy(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// `viewerfleet-kit fake-hcloud`.
async fn fake_hcloud(args: FakeHcloudArgs) -> anyhow::Result<ExitCode> {
    let node_boot = match args.node_boot.as_str() {
        "never" => None,
        v => Some(
            humantime::parse_duration(v).map_err(|e| anyhow::anyhow!("--node-boot `{v}`: {e}"))?,
        ),
    };
    let duration = |flag: &str, v: &str| {
        humantime::parse_duration(v).map_err(|e| anyhow::anyhow!("--{flag} `{v}`: {e}"))
    };
    let refill_every = duration("refill-every", &args.refill_every)?;
    if refill_every.is_zero() {
        anyhow::bail!("--refill-every must be above 0 (use --rate-limit 0 for no limit)");
    }
    let config = FakeConfig {
        server_limit: args.server_limit,
        rate_limit: (args.rate_limit > 0).then_some(RateBucket {
            limit: args.rate_limit,
            refill_every,
            initial: None,
        }),
        fail_every: args.fail_every,
        action_time: duration("action-time", &args.action_time)?,
        node_boot,
        webdriver: args.with_webdriver_stub.then(|| {
            webdriver_stub::app(
                webdriver_stub::StubConfig::default(),
                std::sync::Arc::new(webdriver_stub::StubCounters::default()),
            )
        }),
        ..FakeConfig::default()
    };
    let fake = FakeHcloud::start(config, args.listen).await?;
    println!("export HCLOUD_ENDPOINT={}", fake.endpoint());
    println!("export HCLOUD_TOKEN=fake-token");
    println!("export {}={}", HUB_URL_ENV, fake.hubs_url());
    eprintln!("fake Hetzner Cloud API listening; Ctrl-C to stop");
    wait_for_signal().await?;
    Ok(ExitCode::SUCCESS)
}

/// `viewerfleet-kit stub-webdriver`: serves the stub until Ctrl-C/SIGTERM; prints
/// `LISTENING <addr>` on stdout when ready and its counters on stderr when it stops.
async fn stub_webdriver(args: StubWebdriverArgs) -> anyhow::Result<ExitCode> {
    if !args.listen.ip().is_loopback() {
        anyhow::bail!("--listen {}: the stub serves loopback only", args.listen);
    }
    if !(0.0..=1.0).contains(&args.session_failure_rate) {
        anyhow::bail!("--session-failure-rate must be between 0 and 1");
    }
    let config = webdriver_stub::StubConfig {
        latency: std::time::Duration::from_millis(args.latency_ms),
        session_failure_rate: args.session_failure_rate,
        create_delay: std::time::Duration::from_millis(args.create_delay_ms),
        list_sessions: args.list_sessions,
        ..Default::default()
    };
    let stub = webdriver_stub::Stub::serve(args.listen, config).await?;
    println!("LISTENING {}", stub.addr());
    wait_for_signal().await?;
    use std::io::Write;
    // Not `eprintln!`: whoever read stderr may be gone, and that must not stop the exit.
    let _ = writeln!(std::io::stderr(), "stub: {}", stub.counters().summary());
    Ok(ExitCode::SUCCESS)
}

/// `viewerfleet-kit tls-proxy`: serves until Ctrl-C/SIGTERM.
async fn tls_proxy(args: TlsProxyArgs) -> anyhow::Result<ExitCode> {
    if !args.listen.ip().is_loopback() {
        anyhow::bail!("--listen {}: the proxy serves loopback only", args.listen);
    }
    let proxy =
        viewerfleet_kit::tls_proxy::TlsProxy::start(args.listen, args.upstream, &args.ca_dir)
            .await?;
    println!("LISTENING {}", proxy.url());
    println!("CA {}", proxy.ca_pem().display());
    wait_for_signal().await?;
    Ok(ExitCode::SUCCESS)
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
