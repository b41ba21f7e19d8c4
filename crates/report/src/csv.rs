//! CSV files: `timeseries.csv` (every series on the bin grid), `viewers.csv` (one row per
//! viewer, with its headroom), `host.csv` (host samples), `nodes.csv` (viewer nodes' busy
//! share, when they were sampled) and `compare.csv` (one row per compared run).

use super::compare::Comparison;
use super::render::Renderer;
use super::summary::{FiguresAtT, RunReport};
use std::collections::BTreeMap;

pub(crate) struct CsvRenderer;

/// One CSV file: the header, then one record per row, written by the `csv` crate, which
/// quotes a field holding a comma, a quote, `\r` or `\n` (a failure reason quoting a
/// browser's message has all four), so every reader sees one row per record.
fn table<R, F>(header: &[&str], rows: R) -> anyhow::Result<String>
where
    R: IntoIterator<Item = Vec<F>>,
    F: AsRef<[u8]>,
{
    let mut out = ::csv::Writer::from_writer(Vec::new());
    out.write_record(header)?;
    for row in rows {
        out.write_record(&row)?;
    }
    let bytes = out
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
    Ok(String::from_utf8(bytes)?)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Rounds for output so files stay readable (1e-6 of the unit).
fn r6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

impl Renderer for CsvRenderer {
    fn run(&self, report: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        // Time series joined on time (ms).
        let mut rows: BTreeMap<i64, Vec<Option<f64>>> = BTreeMap::new();
        let n = report.series.len();
        for (i, s) in report.series.iter().enumerate() {
            for (t, v) in &s.points {
                rows.entry((t * 1000.0).round() as i64)
                    .or_insert_with(|| vec![None; n])[i] = Some(*v);
            }
        }
        let header: Vec<&str> = std::iter::once("t_s")
            .chain(report.series.iter().map(|s| s.name))
            .collect();
        let ts = table(
            &header,
            rows.into_iter().map(|(t, values)| {
                std::iter::once((t as f64 / 1000.0).to_string())
                    .chain(values.into_iter().map(|v| opt(v.map(r6))))
                    .collect::<Vec<_>>()
            }),
        )?;

        let viewers = table(
            &[
                "viewer",
                "p2p",
                "node",
                "address",
                "ttff_ms",
                "http_bytes",
                "p2p_bytes",
                "p2p_up_bytes",
                "stalls",
                "stalled_ms",
                "watch_s",
                "end",
                "reason",
                "headroom",
                "headroom_reasons",
                "page_mean_late_ms",
                "page_late_ticks_share",
                "page_max_ms",
                "due_s",
                "creating_s",
                "session_s",
                "playing_s",
            ],
            report.viewers.iter().map(|v| {
                vec![
                    v.viewer.to_string(),
                    v.p2p.to_string(),
                    v.node.clone().unwrap_or_default(),
                    v.address.clone().unwrap_or_default(),
                    opt(v.ttff_ms.map(r6)),
                    v.http_bytes.to_string(),
                    v.p2p_bytes.to_string(),
                    v.p2p_up_bytes.to_string(),
                    v.stalls.to_string(),
                    r6(v.stalled_ms).to_string(),
                    r6(v.watch_s).to_string(),
                    v.end.clone(),
                    v.reason.clone().unwrap_or_default(),
                    opt(v.headroom),
                    v.headroom_reasons.join("; "),
                    opt(v.page.map(|p| r6(p.mean_late_ms))),
                    opt(v.page.map(|p| r6(p.late_ticks_share))),
                    opt(v.page.map(|p| r6(p.max_ms))),
                    opt(v.due_s.map(r6)),
                    opt(v.creating_s.map(r6)),
                    opt(v.session_s.map(r6)),
                    opt(v.playing_s.map(r6)),
                ]
            }),
        )?;

        let host = table(
            &["t_s", "cpu_busy", "cpu_steal", "cpu_pressure"],
            report.host_cpu.iter().map(|h| {
                vec![
                    r6(h.t).to_string(),
                    r6(h.busy).to_string(),
                    opt(h.steal.map(r6)),
                    opt(h.pressure.map(r6)),
                ]
            }),
        )?;
        let mut files = vec![
            ("timeseries.csv".into(), ts),
            ("viewers.csv".into(), viewers),
            ("host.csv".into(), host),
        ];
        if !report.node_busy.is_empty() {
            let nodes = table(
                &["t_s", "node", "cpu_busy"],
                report.node_busy.iter().flat_map(|(node, points)| {
                    points.iter().map(move |(t, busy)| {
                        vec![r6(*t).to_string(), node.clone(), r6(*busy).to_string()]
                    })
                }),
            )?;
            files.push(("nodes.csv".into(), nodes));
        }
        Ok(files)
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let rows = cmp.groups.iter().flat_map(|g| {
            g.runs.iter().map(move |r| {
                let s = &r.summary;
                let h = s.headroom.as_ref();
                let savings = |f: fn(&super::summary::HeadroomFigures) -> Option<&FiguresAtT>| {
                    opt(h
                        .and_then(|h| f(&h.figures))
                        .and_then(|f| f.p2p_savings)
                        .map(r6))
                };
                vec![
                    g.name.clone(),
                    r.name.clone(),
                    s.scenario.clone(),
                    s.partial.to_string(),
                    s.source.to_string(),
                    s.viewers.requested.to_string(),
                    s.viewers.started.to_string(),
                    s.viewers.failed.to_string(),
                    opt(s.http_peak_mbps.map(r6)),
                    opt(s.http_at_mbps.map(r6)),
                    opt(s.p2p_at_mbps.map(r6)),
                    opt(s.http_share.map(r6)),
                    opt(s.p2p_savings.map(r6)),
                    opt(s.http_bytes),
                    opt(s.p2p_bytes),
                    opt(s.p2p_uploaded_bytes),
                    opt(s.origin_bytes),
                    opt(s.origin_deviation_pct.map(r6)),
                    opt(s.qoe.ttff_median_ms.map(r6)),
                    opt(s.qoe.ttff_p95_ms.map(r6)),
                    opt(s.qoe.stalls_per_viewer_minute.map(r6)),
                    opt(s.qoe.stalled_time_share.map(r6)),
                    s.honesty
                        .cpu
                        .as_ref()
                        .is_some_and(|c| c.saturated)
                        .to_string(),
                    opt(h.map(|h| h.verdict)),
                    opt(h.map(|h| h.viewers.in_steady)),
                    opt(h.map(|h| h.viewers.starved)),
                    savings(|f| f.all.as_ref()),
                    savings(|f| f.with_headroom.as_ref()),
                ]
            })
        });
        let out = table(
            &[
                "group",
                "run",
                "scenario",
                "partial",
                "source",
                "viewers_requested",
                "viewers_started",
                "viewers_failed",
                "http_peak_mbps",
                "http_at_mbps",
                "p2p_at_mbps",
                "http_share",
                "p2p_savings",
                "http_bytes",
                "p2p_bytes",
                "p2p_uploaded_bytes",
                "origin_bytes",
                "origin_deviation_pct",
                "ttff_median_ms",
                "ttff_p95_ms",
                "stalls_per_viewer_minute",
                "stalled_time_share",
                "cpu_saturated",
                "headroom",
                "viewers_in_steady",
                "viewers_starved",
                "players_p2p_savings",
                "headroom_p2p_savings",
            ],
            rows,
        )?;
        Ok(vec![("compare.csv".into(), out)])
    }
}
