//! `viewerfleet refsite`: serves the reference site until SIGINT/SIGTERM.

use super::Done;
use crate::cli::RefsiteArgs;
use crate::model::exit::Exit;
use crate::refsite::{
    default_media_dir, media, start, RefsiteConfig, RefsiteError, ServeLimits, WebFiles,
};
use anyhow::Context;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Turns the command-line arguments into a validated configuration.
pub fn config_from_args(args: &RefsiteArgs) -> Result<RefsiteConfig, RefsiteError> {
    let mut config = RefsiteConfig::with_web(
        args.media.clone().unwrap_or_else(default_media_dir),
        args.web
            .clone()
            .map_or_else(WebFiles::built_in, WebFiles::Dir),
    );
    config.listen = args.listen;
    config.metrics_interval = args.metrics_interval;
    if config.metrics_interval.is_zero() {
        return Err(RefsiteError::Range {
            flag: "metrics-interval",
            reason: "must be more than 0".into(),
        });
    }
    config.vod_length = args.vod_length;
    if config.vod_length < Duration::from_secs(u64::from(media::SEGMENT_SECONDS) * 3) {
        return Err(RefsiteError::Range {
            flag: "vod-length",
            reason: "must be at least 6s (three segments)".into(),
        });
    }
    config.also_listen = args.also_listen.clone();
    config.stun = args.stun.clone();
    config.stun_servers = match args.stun_servers.as_slice() {
        [] => None,
        [none] if none == "none" => Some(Vec::new()),
        urls => {
            if let Some(bad) = urls.iter().find(|u| {
                !(u.starts_with("stun:") || u.starts_with("turn:") || u.starts_with("turns:"))
            }) {
                return Err(RefsiteError::Range {
                    flag: "stun-servers",
                    reason: format!("`{bad}` is not a stun:, turn: or turns: URL (e.g. stun:stun.example.org:3478)"),
                });
            }
            Some(urls.to_vec())
        }
    };
    config.limits = ServeLimits {
        header_timeout: args.header_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: args.max_connections,
    };
    if config.limits.header_timeout.is_zero() || config.limits.idle_timeout.is_zero() {
        return Err(RefsiteError::Range {
            flag: "header-timeout/--idle-timeout",
            reason: "must be longer than 0s".into(),
        });
    }
    if args.max_connections == 0 {
        return Err(RefsiteError::Range {
            flag: "max-connections",
            reason: "must be at least 1".into(),
        });
    }
    config.reports_from = args
        .reports_from
        .iter()
        .map(|net| {
            crate::model::net::parse_cidr(net).ok_or_else(|| RefsiteError::Range {
                flag: "reports-from",
                reason: format!("`{net}` is not a network; write ADDRESS/LENGTH, e.g. 2001:db8:0:a::/64 or 192.0.2.0/24"),
            })
        })
        .collect::<Result<_, _>>()?;
    config.vod = false;
    config.live = false;
    for kind in &args.videos {
        match kind.trim() {
            "vod" => config.vod = true,
            "live" => config.live = true,
            other => return Err(RefsiteError::VideoKind(other.to_string())),
        }
    }
    Ok(config)
}

/// Serves until SIGINT/SIGTERM, printing `READY {json}` on stdout (under `--json`, the
/// document with the same figures, and nothing else on stdout).
pub async fn run(args: RefsiteArgs) -> anyhow::Result<Done> {
    let config = config_from_args(&args).map_err(crate::model::exit::bad_input)?;
    let cancel = CancellationToken::new();
    let signals = spawn_signal_watch(cancel.clone())?;
    let handle = tokio::select! {
        h = start(config, cancel.clone()) => h.context("refsite could not start")?,
        _ = cancel.cancelled() => {
            eprintln!("refsite: interrupted during start-up");
            return Ok(Exit::Interrupted { sigterm: false }.into());
        }
    };
    let info = handle.ready_info();
    eprintln!("refsite listening on {}", info.base_url);
    for v in &info.videos {
        eprintln!("  {:<4} {}", v.kind.as_str(), v.embed_url);
    }
    eprintln!("  metrics {}", info.metrics_url);
    // Flushed at once; a reader that already left does not stop the site.
    if args.stdout.json {
        super::output::json(&super::json::document(
            "refsite",
            Exit::Ok,
            Some(super::json::refsite(&info)),
            None,
        ));
    } else {
        println!("READY {}", serde_json::to_string(&info)?);
    }
    cancel.cancelled().await;
    eprintln!("refsite: stopping");
    handle.shutdown().await;
    signals.abort();
    Ok(Exit::Ok.into())
}

fn spawn_signal_watch(cancel: CancellationToken) -> anyhow::Result<JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        cancel.cancel();
    }))
}
