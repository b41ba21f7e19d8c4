//! What the terminal shows during and after a run: a progress bar on a TTY, a plain line
//! every 10 s otherwise (CI logs), nothing with `--quiet`; and the closing summary.

use super::shared::{LiveState, Shared};
use crate::model::rawdata::ViewerEventKind;
use crate::model::scenario::Plan;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn show_progress(shared: Arc<Shared>, plan_viewers: u32, duration: Duration) {
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let bar = indicatif::ProgressBar::new(duration.as_secs());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar
    });
    let mut ticker = tokio::time::interval(Duration::from_secs(if tty { 1 } else { 10 }));
    ticker.tick().await;
    let mut previous: Option<(f64, u64, u64)> = None;
    let mut rates = String::new();
    let mut last_rate_at = 0.0;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => break,
        }
        let now = shared.rec.now();
        let (line, http, p2p) = {
            let live = shared.live();
            let http: u64 = live.latest.values().map(|v| v.http_down_bytes).sum();
            let p2p: u64 = live.latest.values().map(|v| v.p2p_down_bytes).sum();
            (viewer_line(&live, plan_viewers), http, p2p)
        };
        // Rates over at least 5 s, so one sample's jitter does not dominate.
        if now - last_rate_at >= 5.0 {
            if let Some((t0, h0, p0)) = previous {
                let secs = now - t0;
                rates = format!(
                    " | players: HTTP {:.2} Mbit/s, P2P {:.2} Mbit/s",
                    http.saturating_sub(h0) as f64 * 8.0 / secs / 1e6,
                    p2p.saturating_sub(p0) as f64 * 8.0 / secs / 1e6
                );
            }
            previous = Some((now, http, p2p));
            last_rate_at = now;
        }
        match &bar {
            Some(bar) => {
                bar.set_position(now as u64);
                bar.set_message(format!("{line}{rates}"));
            }
            None => eprintln!("[{now:>5.0}s] {line}{rates}"),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

fn viewer_line(live: &LiveState, requested: u32) -> String {
    format!(
        "viewers: {} playing, {} failed/lost of {requested}",
        live.count(ViewerEventKind::Playing),
        live.failed_or_lost()
    )
}

/// The closing summary: viewers, HTTP and P2P totals and the HTTP share, warnings.
pub(super) fn summarize(plan: &Plan, live: &LiveState) -> String {
    let failed = live.failed_or_lost();
    // Started = played a first frame (as in the report); only those have samples.
    let started = live.latest.len();
    let http: u64 = live.latest.values().map(|v| v.http_down_bytes).sum();
    let p2p: u64 = live.latest.values().map(|v| v.p2p_down_bytes).sum();
    let share = |h: f64, p: f64| {
        if h + p > 0.0 {
            format!("{:.1}%", h * 100.0 / (h + p))
        } else {
            "n/a".into()
        }
    };
    let mut text = format!(
        "viewers: {} requested, {started} started, {failed} failed or lost\nplayers:  HTTP {:.1} MB, P2P {:.1} MB, HTTP share {}",
        plan.viewers,
        http as f64 / 1e6,
        p2p as f64 / 1e6,
        share(http as f64, p2p as f64)
    );
    if let Some(e) = &live.last_exporter {
        let get = |k: &str| e.sums.get(k).copied().unwrap_or(0.0);
        let eh = get("peertube_playback_http_downloaded_bytes_total");
        let ep = get("peertube_playback_p2p_downloaded_bytes_total");
        text.push_str(&format!(
            "\nexporter: HTTP {:.1} MB, P2P {:.1} MB, HTTP share {}",
            eh / 1e6,
            ep / 1e6,
            share(eh, ep)
        ));
    }
    let p2p_viewers = plan.viewer_plans().iter().filter(|v| v.p2p).count();
    if p2p_viewers >= 2 && started >= 2 && live.max_peers == 0 {
        text.push_str("\nwarning: no P2P peer ever connected, so this run's P2P share is not a finding (check ICE candidates, the tracker, the fleet's network)");
    }
    for (viewer, reason) in live.failures.iter().take(5) {
        text.push_str(&format!("\nviewer {viewer}: {reason}"));
    }
    if live.failures.len() > 5 {
        text.push_str(&format!(
            "\n… and {} more failures in raw/viewer_events.jsonl",
            live.failures.len() - 5
        ));
    }
    text
}
