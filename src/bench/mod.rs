//! Measuring viewerfleet itself: a fast WebDriver stub so the controller's own cost per
//! session is visible (see BENCHMARKS.md).

pub mod controller;
pub mod webdriver_stub;

/// `viewerfleet stub-webdriver`: serves the stub until Ctrl-C/SIGTERM; prints
/// `LISTENING <addr>` on stdout when ready.
pub async fn cli_stub_webdriver(
    args: crate::cli::StubWebdriverArgs,
) -> anyhow::Result<std::process::ExitCode> {
    if !args.listen.ip().is_loopback() {
        anyhow::bail!("--listen {}: the stub serves loopback only", args.listen);
    }
    if !(0.0..=1.0).contains(&args.session_failure_rate) {
        anyhow::bail!("--session-failure-rate must be between 0 and 1");
    }
    let config = webdriver_stub::StubConfig {
        latency: std::time::Duration::from_millis(args.latency_ms),
        session_failure_rate: args.session_failure_rate,
        reads_before_loss: None,
    };
    let (addr, counters, task) = webdriver_stub::serve(args.listen, config).await?;
    println!("LISTENING {addr}");
    let shutdown = crate::shutdown::Shutdown::new();
    shutdown.listen_for_signals()?;
    shutdown.wait().await;
    task.abort();
    use std::io::Write;
    use std::sync::atomic::Ordering::Relaxed;
    // Not `eprintln!`: whoever read stderr may be gone, and that must not stop the exit.
    let _ = writeln!(
        std::io::stderr(),
        "stub: {} sessions created, {} refused, {} deleted, {} script calls, {} other calls",
        counters.sessions_created.load(Relaxed),
        counters.sessions_refused.load(Relaxed),
        counters.sessions_deleted.load(Relaxed),
        counters.script_calls.load(Relaxed),
        counters.other_calls.load(Relaxed)
    );
    Ok(std::process::ExitCode::SUCCESS)
}
