//! CSV files: `timeseries.csv` (every series on the bin grid), `viewers.csv` (one row per
//! viewer, with its headroom), `host.csv` (host samples), `nodes.csv` (viewer nodes' busy
//! share, when they were sampled) and `compare.csv` (one row per compared run).

use super::compare::Comparison;
use super::model::{FiguresAtT, RunReport};
use super::render::Renderer;
use std::collections::BTreeMap;
use std::fmt::Write;

pub struct CsvRenderer;

fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
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
        let mut ts = String::from("t_s");
        for s in &report.series {
            let _ = write!(ts, ",{}", s.name);
        }
        ts.push('\n');
        for (t, values) in rows {
            let _ = write!(ts, "{}", t as f64 / 1000.0);
            for v in values {
                let _ = write!(ts, ",{}", opt(v.map(r6)));
            }
            ts.push('\n');
        }

        let mut viewers = String::from(
            "viewer,p2p,node,address,ttff_ms,http_bytes,p2p_bytes,p2p_up_bytes,stalls,stalled_ms,watch_s,end,reason,\
             headroom,headroom_reasons,page_mean_late_ms,page_late_ticks_share,page_max_ms,\
             due_s,creating_s,session_s,playing_s\n",
        );
        for v in &report.viewers {
            let _ = writeln!(
                viewers,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                v.viewer,
                v.p2p,
                field(v.node.as_deref().unwrap_or("")),
                field(v.address.as_deref().unwrap_or("")),
                opt(v.ttff_ms.map(r6)),
                v.http_bytes,
                v.p2p_bytes,
                v.p2p_up_bytes,
                v.stalls,
                r6(v.stalled_ms),
                r6(v.watch_s),
                v.end,
                field(v.reason.as_deref().unwrap_or("")),
                opt(v.headroom),
                field(&v.headroom_reasons.join("; ")),
                opt(v.page.map(|p| r6(p.mean_late_ms))),
                opt(v.page.map(|p| r6(p.late_ticks_share))),
                opt(v.page.map(|p| r6(p.max_ms))),
                opt(v.due_s.map(r6)),
                opt(v.creating_s.map(r6)),
                opt(v.session_s.map(r6)),
                opt(v.playing_s.map(r6)),
            );
        }

        let mut host = String::from("t_s,cpu_busy,cpu_steal,cpu_pressure\n");
        for h in &report.host_cpu {
            let _ = writeln!(
                host,
                "{},{},{},{}",
                r6(h.t),
                r6(h.busy),
                opt(h.steal.map(r6)),
                opt(h.pressure.map(r6))
            );
        }
        let mut files = vec![
            ("timeseries.csv".into(), ts),
            ("viewers.csv".into(), viewers),
            ("host.csv".into(), host),
        ];
        if !report.node_busy.is_empty() {
            let mut nodes = String::from("t_s,node,cpu_busy\n");
            for (node, points) in &report.node_busy {
                for (t, busy) in points {
                    let _ = writeln!(nodes, "{},{},{}", r6(*t), field(node), r6(*busy));
                }
            }
            files.push(("nodes.csv".into(), nodes));
        }
        Ok(files)
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let mut out = String::from(
            "group,run,scenario,partial,source,viewers_requested,viewers_started,viewers_failed,\
             http_peak_mbps,http_at_mbps,p2p_at_mbps,http_share,p2p_savings,http_bytes,p2p_bytes,\
             p2p_uploaded_bytes,origin_bytes,origin_deviation_pct,ttff_median_ms,ttff_p95_ms,\
             stalls_per_viewer_minute,stalled_time_share,cpu_saturated,headroom,viewers_in_steady,\
             viewers_starved,players_p2p_savings,headroom_p2p_savings\n",
        );
        for g in &cmp.groups {
            for r in &g.runs {
                let s = &r.summary;
                let h = s.headroom.as_ref();
                let savings = |f: fn(&super::model::HeadroomFigures) -> Option<&FiguresAtT>| {
                    opt(h
                        .and_then(|h| f(&h.figures))
                        .and_then(|f| f.p2p_savings)
                        .map(r6))
                };
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    field(&g.name),
                    field(&r.name),
                    field(&s.scenario),
                    s.partial,
                    s.source,
                    s.viewers.requested,
                    s.viewers.started,
                    s.viewers.failed,
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
                    s.honesty.cpu.as_ref().is_some_and(|c| c.saturated),
                    opt(h.map(|h| h.verdict)),
                    opt(h.map(|h| h.viewers.in_steady)),
                    opt(h.map(|h| h.viewers.starved)),
                    savings(|f| f.all.as_ref()),
                    savings(|f| f.with_headroom.as_ref()),
                );
            }
        }
        Ok(vec![("compare.csv".into(), out)])
    }
}
