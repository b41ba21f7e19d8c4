//! Both ends of every transfer, reconciled from raw data.
//!
//! - **HTTP by outcome**: what the origin really sent (refsite's ground truth) against what
//!   the players counted, with the bytes the pages aborted and those still in flight
//!   measured on the page's side, so a deviation is explained by figures, not guessed at.
//! - **P2P delivered vs sent**: P2P engines count an upload when a chunk is queued, and a
//!   download when it arrives; the swarm's uploads minus its downloads is what was sent and
//!   never delivered. WebRTC's own receive counter is a third, independent witness, and the
//!   engine's P2P timeouts and peer closes say why bytes were lost.

use super::load::RunData;
use super::summary::{HttpReconciliation, P2pReconciliation};
use super::traffic::{ExporterTraffic, Traffic};
use crate::model::rawdata::{EngineEvents, HttpOutcomes, RtcCounts, ViewerSample};
use std::collections::BTreeMap;

/// Undelivered P2P above this share of the uploads is reported in the honesty section.
pub(crate) const UNDELIVERED_WARN_SHARE: f64 = 0.05;
/// An unexplained HTTP rest above this share of the origin's bytes is reported.
pub(crate) const HTTP_REST_WARN_SHARE: f64 = 0.02;

/// The increase of a per-viewer cumulative counter over its samples: a value below the
/// previous one is a new page (the viewer was created again) counting from zero.
pub(super) fn increase(values: impl Iterator<Item = u64>) -> u64 {
    let mut total = 0u64;
    let mut previous = 0u64;
    for v in values {
        total = total.saturating_add(if v < previous { v } else { v - previous });
        previous = v;
    }
    total
}

fn by_viewer(run: &RunData) -> BTreeMap<u32, Vec<&ViewerSample>> {
    let mut map: BTreeMap<u32, Vec<&ViewerSample>> = BTreeMap::new();
    for s in &run.viewer_samples {
        map.entry(s.viewer).or_default().push(s);
    }
    map
}

/// Sums one counter over viewers, each viewer's own increase.
fn swarm_sum<T>(
    viewers: &BTreeMap<u32, Vec<&ViewerSample>>,
    part: impl Fn(&ViewerSample) -> Option<T>,
    field: impl Fn(&T) -> u64,
) -> Option<u64> {
    let mut any = false;
    let mut total = 0u64;
    for samples in viewers.values() {
        let values: Vec<u64> = samples
            .iter()
            .filter_map(|s| part(s).map(|p| field(&p)))
            .collect();
        any |= !values.is_empty();
        total = total.saturating_add(increase(values.into_iter()));
    }
    any.then_some(total)
}

/// A gauge at each viewer's last sample, summed.
fn last_sum<T>(
    viewers: &BTreeMap<u32, Vec<&ViewerSample>>,
    part: impl Fn(&ViewerSample) -> Option<T>,
    field: impl Fn(&T) -> u64,
) -> u64 {
    viewers
        .values()
        .filter_map(|s| s.last().and_then(|s| part(s)).map(|p| field(&p)))
        .fold(0u64, u64::saturating_add)
}

/// The origin against the players, at the players' last samples (the origin's bytes up to
/// the mean time of each viewer's last sample: viewers sample on their own clocks). `None`
/// without an origin (a platform other than refsite) or without the pages' own figures.
/// The light peers (`light`: their part of the swarm's traffic) fetch from the same origin
/// but count no outcomes: their HTTP bytes up to the same time are explained as read.
pub fn http(
    run: &RunData,
    exp: &ExporterTraffic,
    players_http: u64,
    light: Option<&Traffic>,
) -> Option<HttpReconciliation> {
    let (origin_bins, _) = exp.origin_segments.as_ref()?;
    let viewers = by_viewer(run);
    let last: Vec<f64> = viewers
        .values()
        .filter_map(|s| s.iter().rev().find(|s| s.http.is_some()).map(|s| s.t))
        .collect();
    if last.is_empty() {
        return None;
    }
    let at_s = last.iter().sum::<f64>() / last.len() as f64;
    let http = |s: &ViewerSample| -> Option<HttpOutcomes> { s.http };
    let aborted = swarm_sum(&viewers, http, |h| h.aborted_announced_bytes)?;
    let origin = origin_bins.sum_between(0.0, at_s).round().max(0.0) as u64;
    let in_flight = last_sum(&viewers, http, |h| h.in_flight_bytes);
    let completed = swarm_sum(&viewers, http, |h| h.completed_bytes).unwrap_or(0);
    let responses = swarm_sum(&viewers, http, |h| h.responses as u64).unwrap_or(0);
    let waiting = last_sum(&viewers, http, |h| h.waiting_requests as u64);
    let aborted_waiting = swarm_sum(&viewers, http, |h| h.aborted_waiting as u64).unwrap_or(0);
    let waiting_estimate = completed.checked_div(responses).map_or(0, |mean| {
        waiting.saturating_add(aborted_waiting).saturating_mul(mean)
    });
    let light_bytes = light.map(|l| l.http.sum_between(0.0, at_s).round().max(0.0) as u64);
    let explained = completed
        .saturating_add(light_bytes.unwrap_or(0))
        .saturating_add(aborted)
        .saturating_add(in_flight)
        .saturating_add(waiting_estimate);
    let rest = origin as i64 - explained as i64;
    Some(HttpReconciliation {
        at_s,
        origin_segment_bytes: origin,
        origin_cut_short_bytes: exp
            .origin_aborted
            .as_ref()
            .map(|(b, _)| b.sum_between(0.0, at_s).round().max(0.0) as u64),
        playlist_bytes: exp.origin_playlists,
        other_bytes: exp.origin_other,
        players_bytes: players_http,
        completed_bytes: completed,
        aborted_bytes: aborted,
        aborted_delivered_bytes: swarm_sum(&viewers, http, |h| h.aborted_delivered_bytes)
            .unwrap_or(0),
        aborts: swarm_sum(&viewers, http, |h| h.aborts as u64).unwrap_or(0),
        in_flight_bytes: in_flight,
        waiting_requests: waiting,
        aborted_waiting,
        waiting_estimate_bytes: waiting_estimate,
        light_bytes,
        rest_bytes: rest,
        rest_share: (origin > 0).then(|| rest as f64 / origin as f64),
    })
}

/// The swarm's uploads against its downloads, WebRTC's count, the engine's events.
/// `None` when no P2P byte moved at all. `light_downloaded`: the light peers' part of the
/// downloads (their pages report no WebRTC or engine counts).
pub fn p2p(
    run: &RunData,
    uploaded: u64,
    downloaded: u64,
    light_downloaded: Option<u64>,
) -> Option<P2pReconciliation> {
    if uploaded == 0 && downloaded == 0 {
        return None;
    }
    let viewers = by_viewer(run);
    let rtc = |s: &ViewerSample| -> Option<RtcCounts> { s.rtc };
    let engine = |s: &ViewerSample| -> Option<EngineEvents> { s.engine };
    let undelivered = uploaded as i64 - downloaded as i64;
    Some(P2pReconciliation {
        uploaded_bytes: uploaded,
        downloaded_bytes: downloaded,
        undelivered_bytes: undelivered,
        undelivered_share: (uploaded > 0).then(|| undelivered as f64 / uploaded as f64),
        light_downloaded_bytes: light_downloaded,
        rtc_received_bytes: swarm_sum(&viewers, rtc, |r| r.received_bytes),
        rtc_sent_bytes: swarm_sum(&viewers, rtc, |r| r.sent_bytes),
        p2p_timeouts: swarm_sum(&viewers, engine, |e| e.p2p_timeouts as u64),
        p2p_failures: swarm_sum(&viewers, engine, |e| e.p2p_failures as u64),
        peer_closes: swarm_sum(&viewers, engine, |e| e.peer_closes as u64),
    })
}

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

/// The HTTP reconciliation in sentences, for the report.
pub(crate) fn http_lines(r: &HttpReconciliation) -> Vec<String> {
    let pct = |b: u64| {
        if r.origin_segment_bytes > 0 {
            format!(
                " ({:.1}%)",
                b as f64 * 100.0 / r.origin_segment_bytes as f64
            )
        } else {
            String::new()
        }
    };
    let mut lines = vec![format!(
        "Up to {:.0} s the origin sent {} of media segments. The pages read {}{} of responses \
         to the end (their players counted {}); they aborted {} segment requests announcing \
         {}{} ({} of it had reached the page); {}{} were still in flight; {} requests were \
         waiting for their headers and {} were aborted while waiting (≈ {} at the mean \
         response size, an estimate).",
        r.at_s,
        mb(r.origin_segment_bytes),
        mb(r.completed_bytes),
        pct(r.completed_bytes),
        mb(r.players_bytes),
        r.aborts,
        mb(r.aborted_bytes),
        pct(r.aborted_bytes),
        mb(r.aborted_delivered_bytes),
        mb(r.in_flight_bytes),
        pct(r.in_flight_bytes),
        r.waiting_requests,
        r.aborted_waiting,
        mb(r.waiting_estimate_bytes),
    )];
    if let Some(light) = r.light_bytes {
        lines.push(format!(
            "The light peers counted {}{} of HTTP up to then (they count no outcomes: taken as \
             read to the end, so their aborted and in-flight bytes fall into the rest).",
            mb(light),
            pct(light)
        ));
    }
    if let Some(share) = r.rest_share {
        lines.push(format!(
            "Unexplained rest: {:+.2} MB ({:+.1}% of the origin's bytes){}.",
            r.rest_bytes as f64 / 1e6,
            share * 100.0,
            if share.abs() <= HTTP_REST_WARN_SHARE {
                ", within the ±2% the accounting aims at"
            } else {
                ""
            }
        ));
    }
    if let Some(cut) = r.origin_cut_short_bytes.filter(|b| *b > 0) {
        lines.push(format!(
            "The origin itself saw {} of segment responses cut short by the client (the \
             network, not the browser, was the bottleneck).",
            mb(cut)
        ));
    }
    if let (Some(p), Some(o)) = (r.playlist_bytes, r.other_bytes) {
        lines.push(format!(
            "Besides segments the origin sent {} of playlists and {} of pages, front-end \
             files and API answers; neither is in any HTTP figure of this report.",
            mb(p),
            mb(o)
        ));
    }
    lines
}

/// The P2P reconciliation in sentences, for the report.
pub(crate) fn p2p_lines(r: &P2pReconciliation) -> Vec<String> {
    let mut lines = vec![format!(
        "P2P: the swarm's engines counted {} uploaded and {} downloaded; the P2P figures of \
         this report are the downloads (what receivers got).",
        mb(r.uploaded_bytes),
        mb(r.downloaded_bytes)
    )];
    if let Some(share) = r.undelivered_share {
        let events = match (r.p2p_timeouts, r.peer_closes) {
            (Some(t), Some(c)) if r.undelivered_bytes > 0 => format!(
                "; the engines saw {t} P2P segment timeouts and closed {c} peer connections, \
                 discarding chunks they had already counted as uploaded"
            ),
            (Some(t), Some(c)) => format!(
                " (within what the sampling moments explain; {t} P2P segment timeouts, {c} peer \
                 connections closed)"
            ),
            _ => String::new(),
        };
        // Only a positive share means something; at or below zero it is the sampling
        // moments of uploaders and receivers differing.
        lines.push(if share * 100.0 < 0.05 {
            format!("Sent but never delivered: none beyond measurement noise{events}.")
        } else {
            format!(
                "Sent but never delivered: {:.2} MB ({:.1}% of the uploads){events}.",
                r.undelivered_bytes as f64 / 1e6,
                share * 100.0,
            )
        });
    }
    if let Some(received) = r.rtc_received_bytes {
        // WebRTC's count comes from the viewers' pages: compare it with their downloads.
        let viewers_downloaded = r
            .downloaded_bytes
            .saturating_sub(r.light_downloaded_bytes.unwrap_or(0));
        let vs = if viewers_downloaded > 0 {
            format!(
                " ({:+.1}% against the engines' downloads{}; WebRTC also counts the engines' \
                 commands, and the two are read at slightly different moments)",
                (received as f64 - viewers_downloaded as f64) * 100.0 / viewers_downloaded as f64,
                if r.light_downloaded_bytes.is_some() {
                    format!(" on those pages ({})", mb(viewers_downloaded))
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "WebRTC's own count on the receiving side{}: {} arrived on data channels{vs}.",
            if r.light_downloaded_bytes.is_some() {
                " (the viewers' pages; the light peers report none)"
            } else {
                ""
            },
            mb(received)
        ));
    }
    lines
}

/// Honesty warnings the reconciliations call for.
pub fn warnings(http: Option<&HttpReconciliation>, p2p: Option<&P2pReconciliation>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = p2p {
        if r.undelivered_share
            .is_some_and(|s| s > UNDELIVERED_WARN_SHARE)
        {
            out.push(format!(
                "P2P uploads exceed what the swarm received by {:.2} MB ({:.0}% of the uploads): \
                 P2P engines count a chunk as uploaded when they queue it, and slow peers are \
                 timed out and closed with chunks in their queues. The P2P figures here are \
                 the receivers' bytes; the uploaders' count is not a measure of what P2P saved.",
                r.undelivered_bytes as f64 / 1e6,
                r.undelivered_share.unwrap_or(0.0) * 100.0
            ));
        }
    }
    if let Some(r) = http {
        if r.rest_share.is_some_and(|s| s.abs() > HTTP_REST_WARN_SHARE) {
            out.push(format!(
                "{:+.1}% of the origin's segment bytes are not explained by what the pages read, \
                 aborted or had in flight; read the players' HTTP figures with that margin.",
                r.rest_share.unwrap_or(0.0) * 100.0
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_that_restarts_counts_both_lives() {
        assert_eq!(increase([0, 10, 25].into_iter()), 25);
        // A new page after a loss starts from zero again.
        assert_eq!(increase([10, 30, 5, 20].into_iter()), 50);
        assert_eq!(increase(std::iter::empty()), 0);
    }
}
