//! `report.html` and `compare.html`: one self-contained file each, inline CSS and SVG, no
//! scripts and a Content-Security-Policy that forbids fetching anything, so it opens
//! offline, prints, and cannot phone home.

use super::compare::{Comparison, GroupStats};
use super::prose;
use super::render::Renderer;
use super::sections;
use super::stats::MeanCi;
use super::summary::{names, Arrival, Headroom, ReportSummary, RunReport, ViewerRow};
use super::svg::{self, esc, BarChart, BarSet, Line, LineChart};
use crate::model::kinds::RateSource;
use std::fmt::Write;

pub(crate) struct HtmlRenderer;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;\
max-width:1100px;margin:1.5em auto;padding:0 1em;color:#212529;line-height:1.45}\
h1{font-size:1.6em}h2{border-bottom:1px solid #dee2e6;padding-bottom:.2em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #dee2e6;\
padding:.3em .55em;vertical-align:top}th{background:#f1f3f5;text-align:left}td.num{text-align:right;\
font-variant-numeric:tabular-nums;white-space:nowrap}.partial{background:#fff3bf;border:2px solid #f08c00;\
padding:.6em 1em;font-weight:bold}.notfinding{background:#ffe3e3;border:3px solid #c92a2a;\
padding:.6em 1em;font-size:1.1em}.warn{color:#c92a2a;font-weight:bold}svg.plot{max-width:100%;height:auto;\
display:block;margin:.8em 0;border:1px solid #e9ecef}pre{background:#f8f9fa;padding:.6em;overflow-x:auto;\
white-space:pre-wrap}.tablebox{max-width:100%;overflow-x:auto}figure{margin:0}figcaption{font-size:.85em;color:#495057}\
@media print{body{max-width:none;margin:0}.tablebox{overflow:visible}svg.plot,table,figure{page-break-inside:avoid}h2{page-break-after:avoid}}";

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

/// The steady window as a chart's shaded band.
fn steady_band(s: &ReportSummary) -> Option<(f64, f64, &'static str)> {
    Some((
        s.windows.steady_from_s,
        s.windows.steady_to_s,
        "steady window",
    ))
}

/// A line chart of one series.
fn one_line_chart(
    title: &str,
    y_label: &str,
    line: Line,
    band: Option<(f64, f64, &str)>,
    y_max: Option<f64>,
) -> String {
    svg::line_chart(&LineChart {
        title,
        y_label,
        lines: vec![line],
        band,
        y_max,
    })
}

/// A solid line of one colour.
fn solid<'a>(label: &str, color: &'a str, points: &'a [(f64, f64)]) -> Line<'a> {
    Line {
        label: label.into(),
        color,
        dashed: false,
        points,
    }
}

/// A bar chart of one set of bars.
fn one_set_bar_chart(title: &str, y_label: &str, categories: Vec<String>, set: BarSet) -> String {
    svg::bar_chart(&BarChart {
        title,
        y_label,
        categories,
        sets: vec![set],
        stacked: false,
        // A share in percent never has an axis past 100%.
        y_cap: (y_label == "%").then_some(100.0),
    })
}

/// The bandwidth chart for one source, like the PeerTube post's graphs.
fn bandwidth_chart(r: &RunReport, source: &str, http: &str, p2p: &str, up: &str) -> Option<String> {
    r.series(http)?;
    let mut lines = vec![
        solid("HTTP", svg::HTTP, pts(r, http)),
        solid("P2P down", svg::P2P, pts(r, p2p)),
        Line {
            dashed: true,
            ..solid("P2P up", svg::UP, pts(r, up))
        },
    ];
    if r.series(names::ORIGIN).is_some() {
        lines.push(Line {
            dashed: true,
            ..solid("origin (truth)", svg::GREY, pts(r, names::ORIGIN))
        });
    }
    let title = format!(
        "HTTP vs P2P, {source} (Mbit/s, trailing {:.0} s)",
        r.summary.windows.rate_window_s
    );
    Some(svg::line_chart(&LineChart {
        title: &title,
        y_label: "Mbit/s",
        lines,
        band: steady_band(&r.summary),
        y_max: None,
    }))
}

/// The seed table, the origin's truth, where the bytes went, the bandwidth charts of both
/// sources, and what was running meanwhile (viewers, the generator's CPU).
fn bandwidth_section(b: &mut String, r: &RunReport) {
    let s = &r.summary;
    b.push_str("<h2>Bandwidth</h2>\n");
    b.push_str(&sections::seed_table(s).html());
    list(b, &prose::origin_lines(s));
    let reconciliation = prose::reconciliation_lines(s);
    if !reconciliation.is_empty() {
        b.push_str("<h3>Where the bytes went</h3>\n");
        list(b, &reconciliation);
    }
    let sources = [
        (
            "exporter",
            [names::EXPORTER_HTTP, names::EXPORTER_P2P, names::EXPORTER_UP],
            "From the platform's exporter: the counters players POST (as PeerTube's own dashboards show them). Shaded: the steady window.",
        ),
        (
            "players",
            [names::PLAYERS_HTTP, names::PLAYERS_P2P, names::PLAYERS_UP],
            "From each player's own stats, summed over viewers.",
        ),
    ];
    let players_caption = if s.light.is_some() {
        "From each player's own stats, summed over viewers and light peers (the whole swarm)."
    } else {
        "From each player's own stats, summed over viewers."
    };
    for (source, [http, p2p, up], caption) in sources {
        let caption = if source == "players" {
            players_caption
        } else {
            caption
        };
        if let Some(svg) = bandwidth_chart(r, source, http, p2p, up) {
            figure(b, svg, caption);
        }
    }
    figure(
        b,
        one_line_chart(
            "Viewers watching",
            "viewers",
            solid("active", svg::P2P, pts(r, names::ACTIVE)),
            None,
            None,
        ),
        "Viewers between their first frame and their end (stopped, failed or lost).",
    );
    if !r.host_cpu.is_empty() {
        let cpu: Vec<(f64, f64)> = r.host_cpu.iter().map(|h| (h.t, h.busy * 100.0)).collect();
        figure(
            b,
            one_line_chart(
                "Host CPU busy (%)",
                "%",
                solid("cpu busy", svg::GREY, &cpu),
                steady_band(s),
                Some(100.0),
            ),
            "The load generator's CPU: above 90% the players themselves may be what degrades.",
        );
    }
}

/// Nodes drawn in the busy chart, most saturated first.
const NODES_PLOTTED: usize = 8;

/// Which machines and viewers were starved, when, and the figures without them; the
/// machines' busy share and the pages' lateness over time.
fn headroom_section(b: &mut String, r: &RunReport, h: &Headroom) {
    let s = &r.summary;
    b.push_str("<h2>Headroom: which viewers were starved</h2>\n");
    list(b, &prose::headroom_lines(h));
    b.push_str(&sections::headroom_figures_table(h).html());
    if h.host.is_some() || !h.nodes.is_empty() {
        b.push_str(&sections::machines_table(h).html());
    }
    let listed = &h.viewers.listed;
    if !listed.is_empty() {
        let total = listed.len() + h.viewers.not_listed as usize;
        let _ = writeln!(
            b,
            "<p>Viewers without headroom in the steady window or with a starved page at some \
             time ({total}){}:</p>",
            if total > sections::STARVED_VIEWERS_SHOWN {
                format!(
                    ", the first {} (viewers.csv has every viewer's headroom)",
                    sections::STARVED_VIEWERS_SHOWN
                )
            } else {
                String::new()
            }
        );
        b.push_str(&sections::starved_viewers_table(h).html());
    }
    node_busy_chart(b, r, h);
    if let Some(late) = r.series(names::PAGE_LATE_MS) {
        let x_max = late.points.last().map_or(0.0, |p| p.0);
        let threshold = [
            (0.0, super::headroom::PAGE_LATE_MEAN_MS),
            (x_max, super::headroom::PAGE_LATE_MEAN_MS),
        ];
        figure(
            b,
            svg::line_chart(&LineChart {
                title: "Pages' timer lateness, mean over all viewers (ms)",
                y_label: "ms",
                lines: vec![
                    solid("mean lateness", svg::HTTP, &late.points),
                    Line {
                        dashed: true,
                        ..solid("starved above", svg::GREY, &threshold)
                    },
                ],
                band: steady_band(s),
                y_max: None,
            }),
            "How late the pages' own 250 ms timer ran, summed over viewers and divided by their \
             ticks, over two sampling intervals: a page whose timers run late runs its player \
             and P2P engine late too.",
        );
    }
    b.push_str("<p>Rules:</p>\n");
    list(b, &h.rules);
}

/// The sampled nodes' busy share over time, the most saturated in the steady window first.
fn node_busy_chart(b: &mut String, r: &RunReport, h: &Headroom) {
    let steady_share = |name: &str| {
        h.nodes
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.steady_hot_share)
            .unwrap_or(-1.0)
    };
    let mut nodes: Vec<&(String, Vec<(f64, f64)>)> = r.node_busy.iter().collect();
    nodes.sort_by(|a, b| steady_share(&b.0).total_cmp(&steady_share(&a.0)));
    let node_points: Vec<(&str, Vec<(f64, f64)>)> = nodes
        .iter()
        .take(NODES_PLOTTED)
        .map(|(name, points)| {
            let percent = points.iter().map(|(t, v)| (*t, v * 100.0)).collect();
            (name.as_str(), percent)
        })
        .collect();
    if node_points.is_empty() {
        return;
    }
    let lines = node_points
        .iter()
        .enumerate()
        .map(|(k, (name, points))| Line {
            label: name.to_string(),
            color: svg::PALETTE[k % svg::PALETTE.len()],
            dashed: false,
            points,
        })
        .collect();
    figure(
        b,
        svg::line_chart(&LineChart {
            title: "Viewer nodes' CPU busy (% of their allowance, steal included)",
            y_label: "%",
            lines,
            band: steady_band(&r.summary),
            y_max: Some(100.0),
        }),
        &format!(
            "Above {:.0}% a node's sample is hot; the {} most saturated nodes are drawn \
             (nodes.csv has them all).",
            super::headroom::HOT_BUSY * 100.0,
            node_points.len()
        ),
    );
}

/// Bars of what each viewer downloaded (by source) and uploaded, largest first.
fn per_viewer_section(b: &mut String, r: &RunReport) {
    b.push_str("<h2>Per viewer</h2>\n");
    let mut rows: Vec<&ViewerRow> = r
        .viewers
        .iter()
        .filter(|v| v.http_bytes.saturating_add(v.p2p_bytes) > 0)
        .collect();
    rows.sort_by_key(|v| std::cmp::Reverse(v.http_bytes.saturating_add(v.p2p_bytes)));
    if rows.is_empty() {
        return;
    }
    let categories: Vec<String> = rows.iter().map(|v| format!("#{}", v.viewer)).collect();
    let megabytes = |label: &str, color: &'static str, bytes: fn(&ViewerRow) -> u64| BarSet {
        label: label.into(),
        color,
        values: rows
            .iter()
            .map(|v| Some((bytes(v) as f64 / 1e6, None)))
            .collect(),
    };
    figure(
        b,
        svg::bar_chart(&BarChart {
            title: "Downloaded per viewer (MB), by source",
            y_label: "MB",
            categories: categories.clone(),
            sets: vec![
                megabytes("HTTP", svg::HTTP, |v| v.http_bytes),
                megabytes("P2P", svg::P2P, |v| v.p2p_bytes),
            ],
            stacked: true,
            y_cap: None,
        }),
        "Each bar is one viewer, sorted by total downloaded; viewers with P2P off show HTTP only.",
    );
    figure(
        b,
        one_set_bar_chart(
            "Uploaded over P2P per viewer (MB)",
            "MB",
            categories,
            megabytes("P2P up", svg::UP, |v| v.p2p_up_bytes),
        ),
        "Same order as above.",
    );
}

/// The arrivals asked for against the sessions and first frames obtained: the curves, the
/// sentence that says whether and from when the fleet fell behind, minute by minute.
fn arrival_section(b: &mut String, r: &RunReport, a: &Arrival) {
    use super::arrival::names as arrivals;
    b.push_str("<h2>Arrivals: asked for and obtained</h2>\n");
    list(b, &prose::arrival_lines(a));
    let chart = svg::line_chart(&LineChart {
        title: "Viewers asked for, with a session, playing (cumulative)",
        y_label: "viewers",
        lines: vec![
            Line {
                dashed: true,
                ..solid("asked for (the ramp)", svg::GREY, pts(r, arrivals::ASKED))
            },
            solid("sessions", svg::P2P, pts(r, arrivals::SESSIONS)),
            solid("first frames", svg::UP, pts(r, arrivals::FIRST_FRAMES)),
        ],
        band: None,
        y_max: None,
    });
    figure(
        b,
        chart,
        "Where the solid curves run right of the dashed one, the fleet was behind the ramp: \
         the horizontal distance is how late, the vertical one how many viewers.",
    );
    b.push_str(&sections::arrival_table(a).html());
}

/// The QoE numbers, the time-to-first-frame histogram, stalls over time, the failures.
fn qoe_section(b: &mut String, r: &RunReport) {
    let s = &r.summary;
    b.push_str("<h2>Quality of experience</h2>\n");
    list(b, &prose::qoe_lines(s));
    let ttffs: Vec<f64> = r.viewers.iter().filter_map(|v| v.ttff_ms).collect();
    if !ttffs.is_empty() {
        figure(
            b,
            ttff_histogram(&ttffs),
            "Histogram of time to first frame; labels are bin centres.",
        );
    }
    if r.series(names::STALLS_PER_MIN).is_some() {
        figure(
            b,
            one_line_chart(
                "Stalls per minute (all viewers)",
                "stalls/min",
                solid("stalls/min", svg::HTTP, pts(r, names::STALLS_PER_MIN)),
                steady_band(s),
                None,
            ),
            "Rebuffering events after first frame, trailing-window rate.",
        );
    }
    if !s.qoe.failed.is_empty() {
        b.push_str(&sections::failures_table(s).html());
    }
}

/// Viewers per time-to-first-frame bin: 12 bins from 0 to the slowest (at least 1 ms wide).
fn ttff_histogram(ttffs: &[f64]) -> String {
    let max = ttffs.iter().copied().fold(0.0, f64::max);
    let bins = 12usize;
    let width = (max / bins as f64).max(1.0);
    let mut counts = vec![0u32; bins];
    for t in ttffs {
        counts[((t / width) as usize).min(bins - 1)] += 1;
    }
    one_set_bar_chart(
        "Time to first frame (viewers per bin)",
        "viewers",
        (0..bins)
            .map(|i| format!("{:.1}s", (i as f64 + 0.5) * width / 1000.0))
            .collect(),
        BarSet {
            label: "viewers".into(),
            color: svg::P2P,
            values: counts.iter().map(|c| Some((*c as f64, None))).collect(),
        },
    )
}

/// Bars of one statistic per group, whiskers at the 95% confidence interval.
fn group_bars<'a>(
    cmp: &Comparison,
    label: &str,
    color: &'a str,
    stat: impl Fn(&GroupStats) -> Option<MeanCi>,
) -> BarSet<'a> {
    BarSet {
        label: label.into(),
        color,
        values: cmp
            .groups
            .iter()
            .map(|g| stat(&g.stats).map(|m| (m.mean, m.ci95)))
            .collect(),
    }
}

/// Each group's rates and HTTP share at the measurement point, as bars with whiskers.
fn group_charts(b: &mut String, cmp: &Comparison) {
    let categories: Vec<String> = cmp.groups.iter().map(|g| g.name.clone()).collect();
    figure(
        b,
        svg::bar_chart(&BarChart {
            title: "HTTP and P2P at the measurement point (Mbit/s)",
            y_label: "Mbit/s",
            categories: categories.clone(),
            sets: vec![
                group_bars(cmp, "HTTP at T", svg::HTTP, |g| g.http_at_mbps),
                group_bars(cmp, "P2P at T", svg::P2P, |g| g.p2p_at_mbps),
                group_bars(cmp, "HTTP peak", svg::GREY, |g| g.http_peak_mbps),
            ],
            stacked: false,
            y_cap: None,
        }),
        "Whiskers: 95% confidence interval across repeats (none for single runs).",
    );
    let percent = |m: MeanCi| MeanCi {
        mean: m.mean * 100.0,
        ci95: m.ci95.map(|c| c * 100.0),
        ..m
    };
    figure(
        b,
        one_set_bar_chart(
            "HTTP share at the measurement point (%)",
            "%",
            categories,
            group_bars(cmp, "HTTP share", svg::HTTP, |g| g.http_share.map(percent)),
        ),
        "HTTP / (HTTP + P2P): lower means P2P saved more of the server's bandwidth.",
    );
}

/// HTTP over time of every run, one line each, when there are few enough to tell apart.
fn http_per_run_chart(b: &mut String, cmp: &Comparison) {
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
            b,
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
}

impl Renderer for HtmlRenderer {
    fn run(&self, r: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        let s = &r.summary;
        let mut b = format!("<h1>viewerfleet report: {}</h1>\n", esc(&s.scenario));
        if let Some(reason) = &s.partial_reason {
            let _ = writeln!(b, "<p class=\"partial\">PARTIAL RUN: {}.</p>", esc(reason));
        }
        if let Some(banner) = prose::not_a_finding_banner(s) {
            let _ = writeln!(
                b,
                "<p class=\"notfinding\"><strong>NOT A FINDING</strong>: {}</p>",
                esc(&banner)
            );
        }
        if s.thresholds_failed() {
            let _ = writeln!(
                b,
                "<p class=\"notfinding\"><strong>THRESHOLDS FAILED</strong>: {}</p>",
                esc(&prose::thresholds_line(s))
            );
        }
        list(&mut b, &prose::run_lines(s));
        if !s.thresholds.is_empty() {
            b.push_str("<h2>Thresholds</h2>\n");
            let _ = writeln!(b, "<p>{}</p>", esc(&prose::thresholds_line(s)));
            b.push_str(&sections::thresholds_table(s).html());
        }
        bandwidth_section(&mut b, r);
        if let Some(h) = &s.headroom {
            headroom_section(&mut b, r, h);
        }
        if let Some(c) = &s.churn {
            b.push_str("<h2>Churn: viewers who left and came</h2>\n");
            list(&mut b, &super::churn::lines(c));
        }
        if let Some(c) = &s.connectivity {
            super::connectivity::html_section(&mut b, c);
        }
        per_viewer_section(&mut b, r);
        if let Some(a) = &s.arrival {
            arrival_section(&mut b, r, a);
        }
        qoe_section(&mut b, r);
        if let Some(l) = &s.light {
            super::light::html_section(&mut b, l);
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
        let warnings = cmp.headroom_warnings();
        if let Some((first, rest)) = warnings.split_first() {
            let _ = write!(
                b,
                "<div class=\"notfinding\"><p><strong>{}</strong></p><ul>",
                esc(first)
            );
            for line in rest {
                let _ = write!(b, "<li>{}</li>", esc(line));
            }
            b.push_str("</ul></div>\n");
        }
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
        group_charts(&mut b, cmp);
        http_per_run_chart(&mut b, cmp);
        super::swarm_curve::html_section(&mut b, cmp);
        b.push_str("<h2>Runs</h2><ul>");
        for g in &cmp.groups {
            for r in &g.runs {
                let _ = write!(
                    b,
                    "<li><code>{}</code> ({}): {}{}</li>",
                    esc(&r.name),
                    esc(&r.summary.started_at),
                    esc(&sections::flags(&r.summary)),
                    esc(&r
                        .summary
                        .headroom
                        .as_ref()
                        .map(|h| format!("; {}", h.headline))
                        .unwrap_or_default())
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
