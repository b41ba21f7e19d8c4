//! `report.html` and `compare.html`: one self-contained file each, inline CSS and SVG, no
//! scripts and a Content-Security-Policy that forbids fetching anything, so it opens
//! offline, prints, and cannot phone home.

use super::compare::Comparison;
use super::model::{names, RunReport};
use super::prose;
use super::render::{self, Renderer};
use super::svg::{self, esc, BarChart, BarSet, Line, LineChart};
use crate::model::kinds::RateSource;
use std::fmt::Write;

pub struct HtmlRenderer;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;\
max-width:1100px;margin:1.5em auto;padding:0 1em;color:#212529;line-height:1.45}\
h1{font-size:1.6em}h2{border-bottom:1px solid #dee2e6;padding-bottom:.2em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #dee2e6;\
padding:.3em .55em;vertical-align:top}th{background:#f1f3f5;text-align:left}td.num{text-align:right;\
font-variant-numeric:tabular-nums;white-space:nowrap}.partial{background:#fff3bf;border:2px solid #f08c00;\
padding:.6em 1em;font-weight:bold}.warn{color:#c92a2a;font-weight:bold}svg.plot{max-width:100%;height:auto;\
display:block;margin:.8em 0;border:1px solid #e9ecef}pre{background:#f8f9fa;padding:.6em;overflow-x:auto;\
white-space:pre-wrap}figure{margin:0}figcaption{font-size:.85em;color:#495057}\
@media print{body{max-width:none;margin:0}svg.plot,table,figure{page-break-inside:avoid}h2{page-break-after:avoid}}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{t}</title><style>{STYLE}</style></head><body>\n{body}\n</body></html>\n",
        t = esc(title)
    )
}

fn list(out: &mut String, lines: &[String]) {
    out.push_str("<ul>");
    for line in lines {
        let _ = write!(out, "<li>{}</li>", esc(line));
    }
    out.push_str("</ul>\n");
}

fn figure(out: &mut String, svg: String, caption: &str) {
    let _ = writeln!(
        out,
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn pts<'a>(r: &'a RunReport, name: &str) -> &'a [(f64, f64)] {
    r.series(name).map(|s| s.points.as_slice()).unwrap_or(&[])
}

/// The bandwidth chart for one source, like the PeerTube post's graphs.
fn bandwidth_chart(r: &RunReport, source: &str, http: &str, p2p: &str, up: &str) -> Option<String> {
    r.series(http)?;
    let w = &r.summary.windows;
    let mut lines = vec![
        Line {
            label: "HTTP".into(),
            color: svg::HTTP,
            dashed: false,
            points: pts(r, http),
        },
        Line {
            label: "P2P down".into(),
            color: svg::P2P,
            dashed: false,
            points: pts(r, p2p),
        },
        Line {
            label: "P2P up".into(),
            color: svg::UP,
            dashed: true,
            points: pts(r, up),
        },
    ];
    if r.series(names::ORIGIN).is_some() {
        lines.push(Line {
            label: "origin (truth)".into(),
            color: svg::GREY,
            dashed: true,
            points: pts(r, names::ORIGIN),
        });
    }
    let title = format!(
        "HTTP vs P2P, {source} (Mbit/s, trailing {:.0} s)",
        w.rate_window_s
    );
    Some(svg::line_chart(&LineChart {
        title: &title,
        y_label: "Mbit/s",
        lines,
        band: Some((w.steady_from_s, w.steady_to_s, "steady window")),
        y_max: None,
    }))
}

impl Renderer for HtmlRenderer {
    fn run(&self, r: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        let s = &r.summary;
        let mut b = format!("<h1>viewerfleet report: {}</h1>\n", esc(&s.scenario));
        if let Some(reason) = &s.partial_reason {
            let _ = writeln!(b, "<p class=\"partial\">PARTIAL RUN: {}.</p>", esc(reason));
        }
        list(&mut b, &prose::run_lines(s));

        b.push_str("<h2>Bandwidth</h2>\n");
        b.push_str(&render::seed_table(s).html());
        list(&mut b, &prose::origin_lines(s));
        let reconciliation = prose::reconciliation_lines(s);
        if !reconciliation.is_empty() {
            b.push_str("<h3>Where the bytes went</h3>\n");
            list(&mut b, &reconciliation);
        }
        if let Some(svg) = bandwidth_chart(
            r,
            "exporter",
            names::EXPORTER_HTTP,
            names::EXPORTER_P2P,
            names::EXPORTER_UP,
        ) {
            figure(&mut b, svg, "From the platform's exporter: the counters players POST (as PeerTube's own dashboards show them). Shaded: the steady window.");
        }
        if let Some(svg) = bandwidth_chart(
            r,
            "players",
            names::PLAYERS_HTTP,
            names::PLAYERS_P2P,
            names::PLAYERS_UP,
        ) {
            figure(
                &mut b,
                svg,
                "From each player's own stats, summed over viewers.",
            );
        }
        figure(
            &mut b,
            svg::line_chart(&LineChart {
                title: "Viewers watching",
                y_label: "viewers",
                lines: vec![Line {
                    label: "active".into(),
                    color: svg::P2P,
                    dashed: false,
                    points: pts(r, names::ACTIVE),
                }],
                band: None,
                y_max: None,
            }),
            "Viewers between their first frame and their end (stopped, failed or lost).",
        );
        if !r.host_cpu.is_empty() {
            let cpu: Vec<(f64, f64)> = r.host_cpu.iter().map(|(t, v)| (*t, v * 100.0)).collect();
            figure(
                &mut b,
                svg::line_chart(&LineChart {
                    title: "Host CPU busy (%)",
                    y_label: "%",
                    lines: vec![Line {
                        label: "cpu busy".into(),
                        color: svg::GREY,
                        dashed: false,
                        points: &cpu,
                    }],
                    band: Some((
                        s.windows.steady_from_s,
                        s.windows.steady_to_s,
                        "steady window",
                    )),
                    y_max: Some(100.0),
                }),
                "The load generator's CPU: above 90% the players themselves may be what degrades.",
            );
        }

        b.push_str("<h2>Per viewer</h2>\n");
        let mut rows: Vec<_> = r
            .viewers
            .iter()
            .filter(|v| v.http_bytes.saturating_add(v.p2p_bytes) > 0)
            .collect();
        rows.sort_by_key(|v| std::cmp::Reverse(v.http_bytes.saturating_add(v.p2p_bytes)));
        if !rows.is_empty() {
            figure(
                &mut b,
                svg::bar_chart(&BarChart {
                    title: "Downloaded per viewer (MB), by source",
                    y_label: "MB",
                    categories: rows.iter().map(|v| format!("#{}", v.viewer)).collect(),
                    sets: vec![
                        BarSet { label: "HTTP".into(), color: svg::HTTP, values: rows.iter().map(|v| Some((v.http_bytes as f64 / 1e6, None))).collect() },
                        BarSet { label: "P2P".into(), color: svg::P2P, values: rows.iter().map(|v| Some((v.p2p_bytes as f64 / 1e6, None))).collect() },
                    ],
                    stacked: true,
                }),
                "Each bar is one viewer, sorted by total downloaded; viewers with P2P off show HTTP only.",
            );
            figure(
                &mut b,
                svg::bar_chart(&BarChart {
                    title: "Uploaded over P2P per viewer (MB)",
                    y_label: "MB",
                    categories: rows.iter().map(|v| format!("#{}", v.viewer)).collect(),
                    sets: vec![BarSet {
                        label: "P2P up".into(),
                        color: svg::UP,
                        values: rows
                            .iter()
                            .map(|v| Some((v.p2p_up_bytes as f64 / 1e6, None)))
                            .collect(),
                    }],
                    stacked: false,
                }),
                "Same order as above.",
            );
        }

        b.push_str("<h2>Quality of experience</h2>\n");
        list(&mut b, &prose::qoe_lines(s));
        let ttffs: Vec<f64> = r.viewers.iter().filter_map(|v| v.ttff_ms).collect();
        if !ttffs.is_empty() {
            let max = ttffs.iter().copied().fold(0.0, f64::max);
            let bins = 12usize;
            let width = (max / bins as f64).max(1.0);
            let mut counts = vec![0u32; bins];
            for t in &ttffs {
                counts[((t / width) as usize).min(bins - 1)] += 1;
            }
            figure(
                &mut b,
                svg::bar_chart(&BarChart {
                    title: "Time to first frame (viewers per bin)",
                    y_label: "viewers",
                    categories: (0..bins)
                        .map(|i| format!("{:.1}s", (i as f64 + 0.5) * width / 1000.0))
                        .collect(),
                    sets: vec![BarSet {
                        label: "viewers".into(),
                        color: svg::P2P,
                        values: counts.iter().map(|c| Some((*c as f64, None))).collect(),
                    }],
                    stacked: false,
                }),
                "Histogram of time to first frame; labels are bin centres.",
            );
        }
        if r.series(names::STALLS_PER_MIN).is_some() {
            figure(
                &mut b,
                svg::line_chart(&LineChart {
                    title: "Stalls per minute (all viewers)",
                    y_label: "stalls/min",
                    lines: vec![Line {
                        label: "stalls/min".into(),
                        color: svg::HTTP,
                        dashed: false,
                        points: pts(r, names::STALLS_PER_MIN),
                    }],
                    band: Some((
                        s.windows.steady_from_s,
                        s.windows.steady_to_s,
                        "steady window",
                    )),
                    y_max: None,
                }),
                "Rebuffering events after first frame, trailing-window rate.",
            );
        }
        if !s.qoe.failed.is_empty() {
            b.push_str(&render::failures_table(s).html());
        }

        b.push_str("<h2>Honesty</h2>\n");
        list(&mut b, &prose::honesty_lines(s));
        b.push_str("<h2>Method</h2>\n");
        list(&mut b, &prose::method_lines(s));
        b.push_str("<h2>Re-run</h2>\n");
        let _ = writeln!(
            b,
            "<pre>{}</pre><p>Rebuild this report from the raw data: <code>viewerfleet report RUN_DIR</code>.</p>",
            esc(&s.honesty.rerun_command)
        );
        Ok(vec![(
            "report.html".into(),
            page(&format!("viewerfleet: {}", s.scenario), &b),
        )])
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let mut b = String::from("<h1>viewerfleet comparison</h1>\n");
        b.push_str(&cmp.table().html());
        let _ = writeln!(b, "<p>{}</p>", esc(super::compare::LEGEND));
        if cmp.has_repeats() {
            b.push_str("<p>Values are mean ± half-width of the 95% confidence interval (Student's t) over the n repeats.</p>\n");
        }
        if !cmp.failed.is_empty() {
            b.push_str("<h2>Runs without a report</h2><ul>");
            for f in &cmp.failed {
                let _ = write!(
                    b,
                    "<li class=\"warn\">{}: {}</li>",
                    esc(&f.name),
                    esc(&f.error)
                );
            }
            b.push_str("</ul>\n");
        }
        let categories: Vec<String> = cmp.groups.iter().map(|g| g.name.clone()).collect();
        let mci = |v: Option<super::stats::MeanCi>| v.map(|m| (m.mean, m.ci95));
        figure(
            &mut b,
            svg::bar_chart(&BarChart {
                title: "HTTP and P2P at the measurement point (Mbit/s)",
                y_label: "Mbit/s",
                categories: categories.clone(),
                sets: vec![
                    BarSet {
                        label: "HTTP at T".into(),
                        color: svg::HTTP,
                        values: cmp
                            .groups
                            .iter()
                            .map(|g| mci(g.stats.http_at_mbps))
                            .collect(),
                    },
                    BarSet {
                        label: "P2P at T".into(),
                        color: svg::P2P,
                        values: cmp
                            .groups
                            .iter()
                            .map(|g| mci(g.stats.p2p_at_mbps))
                            .collect(),
                    },
                    BarSet {
                        label: "HTTP peak".into(),
                        color: svg::GREY,
                        values: cmp
                            .groups
                            .iter()
                            .map(|g| mci(g.stats.http_peak_mbps))
                            .collect(),
                    },
                ],
                stacked: false,
            }),
            "Whiskers: 95% confidence interval across repeats (none for single runs).",
        );
        figure(
            &mut b,
            svg::bar_chart(&BarChart {
                title: "HTTP share at the measurement point (%)",
                y_label: "%",
                categories,
                sets: vec![BarSet {
                    label: "HTTP share".into(),
                    color: svg::HTTP,
                    values: cmp
                        .groups
                        .iter()
                        .map(|g| {
                            g.stats
                                .http_share
                                .map(|m| (m.mean * 100.0, m.ci95.map(|c| c * 100.0)))
                        })
                        .collect(),
                }],
                stacked: false,
            }),
            "HTTP / (HTTP + P2P): lower means P2P saved more of the server's bandwidth.",
        );
        let mut lines = Vec::new();
        let mut k = 0;
        for g in &cmp.groups {
            for r in &g.runs {
                let name = if r.summary.source == RateSource::Players {
                    names::PLAYERS_HTTP
                } else {
                    names::EXPORTER_HTTP
                };
                lines.push(Line {
                    label: r.name.clone(),
                    color: svg::PALETTE[k % svg::PALETTE.len()],
                    dashed: k >= svg::PALETTE.len(),
                    points: pts(r, name),
                });
                k += 1;
            }
        }
        if lines.len() <= 12 {
            figure(
                &mut b,
                svg::line_chart(&LineChart {
                    title: "HTTP over time per run (Mbit/s)",
                    y_label: "Mbit/s",
                    lines,
                    band: None,
                    y_max: None,
                }),
                "Each run's top-level source (exporter when it had data).",
            );
        }
        b.push_str("<h2>Runs</h2><ul>");
        for g in &cmp.groups {
            for r in &g.runs {
                let _ = write!(
                    b,
                    "<li><code>{}</code> ({}): {}</li>",
                    esc(&r.name),
                    esc(&r.summary.started_at),
                    esc(&render::flags(&r.summary))
                );
            }
        }
        b.push_str("</ul>\n");
        Ok(vec![(
            "compare.html".into(),
            page("viewerfleet comparison", &b),
        )])
    }
}
