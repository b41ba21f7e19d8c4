//! `viewerfleet reaper` (hidden): the watchdog a cloud command starts for its run (see
//! `cloud::reaper`). The API token is the first line on stdin; the rest of stdin is the
//! controller's pipe. Its stderr is its log, which the controller opened.

use crate::cli::ReaperArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::provision;
use crate::cloud::reaper::{self, HcloudRun, Outcome, ProcessId, Timings};
use crate::cloud::token::ApiToken;
use crate::model::exit::{bad_input, Exit};
use tokio::io::AsyncBufReadExt;

fn timings(args: &ReaperArgs) -> Timings {
    Timings {
        stale_after: args.stale_after,
        poll: args.poll,
        settle: args.settle,
        keep_poll: args.keep_poll,
        beat: args.beat,
        backoff: args.backoff,
        max_backoff: args.max_backoff,
        give_up: args.give_up,
    }
}

pub async fn run(args: ReaperArgs) -> anyhow::Result<Exit> {
    provision::check_run_id(&args.run)?;
    let t = timings(&args);
    let controller =
        match &args.controller {
            Some(text) => Some(ProcessId::parse(text).ok_or_else(|| {
                bad_input(anyhow::anyhow!("--controller `{text}`: write PID:START"))
            })?),
            None => None,
        };
    // The token lives in this process's memory only: keep other processes of the same user
    // from reading it through ptrace or /proc/<pid>/mem.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("cannot keep other processes from reading this one's memory: {e}");
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let token = ApiToken::new(lines.next_line().await?.unwrap_or_default())?;
    let mut api = HcloudApi::with_agent(&args.endpoint, &token, reaper::AGENT).paced_for_endpoint();
    drop(token);
    // Its own loop retries with backoff and jitter: few quick attempts per request.
    api.attempts = 3;
    api.backoff = t.backoff;
    api.max_backoff = t.max_backoff;
    let res = HcloudRun {
        api,
        run: args.run.clone(),
    };
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    // No terminal to hang up on; a stray SIGHUP or SIGQUIT must not end the watch.
    let mut hangup = signal(SignalKind::hangup())?;
    let mut quit = signal(SignalKind::quit())?;
    let serve = reaper::serve(&res, &args.run, &mut lines, controller, &t);
    tokio::pin!(serve);
    let outcome = loop {
        tokio::select! {
            outcome = &mut serve => break outcome,
            _ = hangup.recv() => tracing::info!("SIGHUP ignored: the reaper has no terminal"),
            _ = quit.recv() => tracing::info!("SIGQUIT ignored"),
            _ = terminate.recv() => {
                tracing::error!("stopped by SIGTERM: run {} is no longer watched; `viewerfleet gc --cloud` removes it once its controller's heartbeat or its reaper's label is stale, or its TTL passed", args.run);
                return Ok(Exit::Interrupted { sigterm: true });
            }
            _ = interrupt.recv() => {
                tracing::error!("stopped by SIGINT: run {} is no longer watched; `viewerfleet gc --cloud` removes it once its controller's heartbeat or its reaper's label is stale, or its TTL passed", args.run);
                return Ok(Exit::Interrupted { sigterm: false });
            }
        }
    };
    let line = reaper::summary(&args.run, &outcome);
    Ok(match outcome {
        Outcome::GaveUp(..) => {
            tracing::error!("{line}");
            Exit::Unavailable
        }
        _ => {
            tracing::info!("{line}");
            Exit::Ok
        }
    })
}
