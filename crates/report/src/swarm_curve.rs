//! P2P offload against swarm size: a suite run with `--swarm-sizes` ran each scenario (and
//! mode) once per swarm size N, its real viewers kept and the rest of the swarm light peers.
//! This part of the comparison draws, per scenario@mode, how the swarm's P2P savings at T
//! grow with N, beside the most p2p-media-loader's design allows: every segment enters the
//! swarm over HTTP at least once, so of N members' downloads at least 1/N are HTTP and the
//! savings stay below 1 − 1/N.
//!
//! The figures are the players' table's (every viewer's and every light peer's own
//! counters: the whole swarm), not the exporter's: light peers may run without playback
//! reports, and then the exporter would not count them.

use super::compare::{Comparison, Group};
use super::format;
use super::stats::{mean_ci, MeanCi};
use super::svg::{self, Line};
use super::text_table::Table;
use serde::Serialize;
use std::fmt::Write;

/// Where a compared group sits in a swarm-size sweep (`suite --swarm-sizes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwarmPoint {
    /// The curve it belongs to: the scenario and its mode, `live-normal@tc`.
    pub series: String,
    /// Swarm members: `viewers + light_peers`.
    pub size: u32,
    /// The scenario's real viewers.
    pub viewers: u32,
    pub light_peers: u32,
}

impl SwarmPoint {
    pub fn new(series: &str, viewers: u32, light_peers: u32) -> Self {
        Self {
            series: series.to_string(),
            size: viewers + light_peers,
            viewers,
            light_peers,
        }
    }
}

/// One scenario@mode's offload at each swarm size it ran at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwarmCurve {
    /// The scenario and its mode: `live-normal@tc`.
    pub name: String,
    /// By swarm size, ascending.
    pub points: Vec<CurvePoint>,
}

/// One swarm size of a curve: the compared group's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    /// The compared group (`live-normal@tc@16`).
    pub group: String,
    pub swarm_size: u32,
    pub viewers: u32,
    pub light_peers: u32,
    /// Runs at this size.
    pub n: usize,
    /// The swarm's P2P savings at T (players' table), 0..1, mean over the runs.
    pub p2p_savings: Option<MeanCi>,
    /// The swarm's HTTP share at T (players' table), 0..1.
    pub http_share: Option<MeanCi>,
    /// 1 − 1/N: the most P2P savings p2p-media-loader's design allows a swarm of N.
    pub bound: f64,
    /// The comparison's headroom cell: `ok`, `NOT A FINDING: 2/4 starved`, `1 of 3 NOT A
    /// FINDING`, `unknown`.
    pub headroom: String,
    /// Runs whose P2P figure is not a finding (as the comparison counts them).
    pub not_a_finding_runs: usize,
    pub headroom_unknown_runs: usize,
    /// Light peers' pages judged by the page rule, and those starved, over the runs.
    pub light_pages_judged: u32,
    pub light_pages_starved: u32,
}

impl CurvePoint {
    /// Every run at this size had headroom: the point can be quoted.
    pub(crate) fn is_finding(&self) -> bool {
        self.not_a_finding_runs == 0 && self.headroom_unknown_runs == 0
    }
}

/// 1 − 1/N: p2p-media-loader's bound on the P2P savings of a swarm of N.
pub fn bound(size: u32) -> f64 {
    if size == 0 {
        0.0
    } else {
        1.0 - 1.0 / f64::from(size)
    }
}

/// The curves of a comparison, one per scenario@mode in the comparison's order; none unless
/// its groups hold more than one swarm size.
pub fn curves(cmp: &Comparison) -> Vec<SwarmCurve> {
    let mut curves: Vec<SwarmCurve> = Vec::new();
    for g in &cmp.groups {
        let Some(at) = &g.swarm else { continue };
        let point = point(g, at);
        match curves.iter_mut().find(|c| c.name == at.series) {
            Some(c) => c.points.push(point),
            None => curves.push(SwarmCurve {
                name: at.series.clone(),
                points: vec![point],
            }),
        }
    }
    for c in &mut curves {
        c.points.sort_by_key(|p| p.swarm_size);
    }
    if sizes(&curves).len() > 1 {
        curves
    } else {
        Vec::new()
    }
}

/// Every swarm size of the curves, ascending, each once.
fn sizes(curves: &[SwarmCurve]) -> Vec<u32> {
    let mut sizes: Vec<u32> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.swarm_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

fn point(g: &Group, at: &SwarmPoint) -> CurvePoint {
    let players = |pick: fn(&super::SourceTable) -> Option<f64>| {
        let v: Vec<f64> = g
            .runs
            .iter()
            .filter_map(|r| r.summary.players.as_ref().and_then(pick))
            .collect();
        mean_ci(&v)
    };
    let light = |pick: fn(&super::light::LightReport) -> u32| {
        g.runs
            .iter()
            .filter_map(|r| r.summary.light.as_ref().map(pick))
            .sum()
    };
    CurvePoint {
        group: g.name.clone(),
        swarm_size: at.size,
        viewers: at.viewers,
        light_peers: at.light_peers,
        n: g.runs.len(),
        p2p_savings: players(|p| p.p2p_savings),
        http_share: players(|p| p.http_share),
        bound: bound(at.size),
        headroom: g.stats.headroom_cell(&g.runs),
        not_a_finding_runs: g.stats.cpu_saturated_runs,
        headroom_unknown_runs: g.stats.headroom_unknown_runs,
        light_pages_judged: light(|l| l.groups_judged),
        light_pages_starved: light(|l| l.starved_groups.len() as u32),
    }
}

/// The section's title.
pub const TITLE: &str = "P2P offload against swarm size";

/// What the tables and the plot show, said once above them.
pub(crate) const ABOUT: &str = "Each scenario ran at several swarm sizes N: its real viewers plus \
light peers. P2P savings and HTTP share at T are the players' table's (every viewer's and \
every light peer's own counters: the whole swarm). Bound 1 − 1/N: the most P2P savings \
p2p-media-loader's design allows a swarm of N (every segment enters the swarm over HTTP at \
least once, so at least 1/N of the downloads are HTTP). Headroom as in the table above: a size \
whose runs were not a finding has P2P figures biased towards HTTP; light pages starved are \
light peers' pages whose timers ran late, which biases them the same way.";

const SIZE_HEADER: &str = "Swarm size N (viewers + light peers)";
const BOUND_HEADER: &str = "Bound 1 − 1/N (p2p-media-loader's design)";

/// One curve's table: a row per swarm size.
pub fn table(curve: &SwarmCurve) -> Table {
    let mut t = Table::new(&[
        SIZE_HEADER,
        "n",
        "P2P savings at T",
        "HTTP share at T",
        BOUND_HEADER,
        "Headroom",
    ])
    .with_last_left();
    for p in &curve.points {
        let mut headroom = p.headroom.clone();
        if p.light_pages_starved > 0 {
            let _ = write!(
                headroom,
                "; {}/{} light pages starved",
                p.light_pages_starved, p.light_pages_judged
            );
        }
        t.row(vec![
            format!("{} ({} + {})", p.swarm_size, p.viewers, p.light_peers),
            p.n.to_string(),
            format::mean_ci(p.p2p_savings, 100.0, 1, "%"),
            format::mean_ci(p.http_share, 100.0, 1, "%"),
            format::pct(Some(p.bound)),
            headroom,
        ]);
    }
    t
}

/// The section in `compare.md` (nothing when the comparison has no curve).
pub(crate) fn markdown_section(out: &mut String, cmp: &Comparison) {
    let curves = curves(cmp);
    if curves.is_empty() {
        return;
    }
    let _ = writeln!(out, "## {TITLE}\n\n{ABOUT}\n");
    for c in &curves {
        let _ = writeln!(out, "### {}\n\n{}", c.name, table(c).markdown());
    }
    out.push_str("The plot is in `compare.html`.\n\n");
}

/// The section in `compare.html`: the plot, then one table per curve.
pub(crate) fn html_section(b: &mut String, cmp: &Comparison) {
    let curves = curves(cmp);
    if curves.is_empty() {
        return;
    }
    let _ = writeln!(
        b,
        "<h2>{}</h2>\n<p>{}</p>\n<figure>{}<figcaption>{}</figcaption></figure>",
        svg::esc(TITLE),
        svg::esc(ABOUT),
        plot(&curves),
        svg::esc(
            "x: swarm size N (log scale); y: the swarm's P2P savings at T. Hollow markers: \
             sizes with a run that was not a finding or whose headroom nothing measured; \
             dashed grey: the bound 1 − 1/N."
        )
    );
    for c in &curves {
        let _ = writeln!(b, "<h3>{}</h3>\n{}", svg::esc(&c.name), table(c).html());
    }
}

/// The section under the comparison in the terminal.
pub fn text(cmp: &Comparison) -> String {
    let curves = curves(cmp);
    if curves.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{TITLE} (the swarm's figures, players' table):\n");
    for c in &curves {
        let _ = write!(out, "\n{}\n{}", c.name, table(c).text());
    }
    let _ = writeln!(
        out,
        "\nbound: 1 − 1/N, the most P2P savings p2p-media-loader's design allows a swarm of N"
    );
    out
}

/// The dashed line of the bound and its legend label.
const BOUND_LABEL: &str = "bound 1 − 1/N (p2p-media-loader's design)";
/// Space each side of the outermost sizes, so their markers are not on the plot's edge.
const X_PAD: f64 = 28.0;
/// Rough width of one character at font-size 11 (as `svg`'s legend measures).
const CHAR_W: f64 = 6.5;
/// Height of one legend row under the plot.
const LEGEND_ROW: f64 = 18.0;

/// The plot: P2P savings at T (%) against swarm size on a log scale, one line per curve,
/// and the bound 1 − 1/N dashed. The legend wraps into rows under the x axis so no label
/// runs into another; size labels that would touch the previous one are left out (their
/// tick stays).
pub fn plot(curves: &[SwarmCurve]) -> String {
    let sizes = sizes(curves);
    let (lo, hi) = match (sizes.first(), sizes.last()) {
        (Some(lo), Some(hi)) if hi > lo => (f64::from(*lo), f64::from(*hi)),
        (Some(lo), _) => (f64::from(*lo), f64::from(*lo) * 2.0),
        _ => (1.0, 2.0),
    };
    let mut legend: Vec<(String, &str, bool)> = curves
        .iter()
        .enumerate()
        .map(|(k, c)| (c.name.clone(), color(k), dashed(k)))
        .collect();
    legend.push((BOUND_LABEL.to_string(), svg::GREY, true));
    let rows = legend_rows(&legend);
    let height = svg::H + rows.len() as f64 * LEGEND_ROW + 10.0;
    let mut out = String::new();
    svg::open_svg(&mut out, "P2P savings at T against swarm size (%)", height);
    let top = svg::y_axis(&mut out, 100.0, "P2P savings at T (%)", svg::PLOT_H);
    let sx = |n: f64| {
        svg::LEFT + X_PAD + (n.ln() - lo.ln()) / (hi.ln() - lo.ln()) * (svg::PLOT_W - 2.0 * X_PAD)
    };
    let sy = |y: f64| svg::TOP + svg::PLOT_H - (y / top).clamp(0.0, 1.0) * svg::PLOT_H;
    size_axis(&mut out, &sizes, &sx);
    // The bound, a smooth curve between the smallest and the largest size.
    let steps = 64;
    let bound_points: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let n = lo * (hi / lo).powf(f64::from(i) / f64::from(steps));
            (n, (1.0 - 1.0 / n) * 100.0)
        })
        .collect();
    svg::path(
        &mut out,
        &Line {
            label: BOUND_LABEL.into(),
            color: svg::GREY,
            dashed: true,
            points: &bound_points,
        },
        &sx,
        &sy,
    );
    for (k, c) in curves.iter().enumerate() {
        let points: Vec<(f64, f64)> = c
            .points
            .iter()
            .filter_map(|p| Some((f64::from(p.swarm_size), p.p2p_savings?.mean * 100.0)))
            .collect();
        svg::path(
            &mut out,
            &Line {
                label: c.name.clone(),
                color: color(k),
                dashed: dashed(k),
                points: &points,
            },
            &sx,
            &sy,
        );
        for p in &c.points {
            let Some(s) = p.p2p_savings else { continue };
            let fill = if p.is_finding() { color(k) } else { "#fff" };
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{fill}" stroke="{c}" stroke-width="2"><title>{t}</title></circle>"#,
                x = sx(f64::from(p.swarm_size)),
                y = sy(s.mean * 100.0),
                c = color(k),
                t = svg::esc(&format!(
                    "{}, N = {} ({} + {}): P2P savings {} (bound {}), headroom {}",
                    c.name,
                    p.swarm_size,
                    p.viewers,
                    p.light_peers,
                    format::mean_ci(Some(s), 100.0, 1, "%"),
                    format::pct(Some(p.bound)),
                    p.headroom
                ))
            );
        }
    }
    svg::x_baseline(&mut out);
    legend_svg(&mut out, &rows);
    out.push_str("</svg>");
    out
}

fn color(k: usize) -> &'static str {
    svg::PALETTE[k % svg::PALETTE.len()]
}

/// Curves past the palette's colours are dashed so that two of one colour differ.
fn dashed(k: usize) -> bool {
    k >= svg::PALETTE.len()
}

/// How wide a legend item is: its line sample, gap, label.
fn item_width(label: &str) -> f64 {
    24.0 + CHAR_W * label.chars().count() as f64
}

/// The legend's items in rows that fit between the plot's left and right edges.
fn legend_rows<'a>(items: &'a [(String, &'a str, bool)]) -> Vec<Vec<&'a (String, &'a str, bool)>> {
    let mut rows: Vec<Vec<&(String, &str, bool)>> = vec![Vec::new()];
    let mut x = svg::LEFT;
    for item in items {
        let w = item_width(&item.0);
        let row = rows.last_mut().expect("one row at least");
        if !row.is_empty() && x + w > svg::W - svg::RIGHT {
            rows.push(vec![item]);
            x = svg::LEFT + w + 14.0;
        } else {
            row.push(item);
            x += w + 14.0;
        }
    }
    rows
}

fn legend_svg(out: &mut String, rows: &[Vec<&(String, &str, bool)>]) {
    for (r, row) in rows.iter().enumerate() {
        let y = svg::H + 8.0 + r as f64 * LEGEND_ROW;
        let mut x = svg::LEFT;
        for (label, color, dashed) in row {
            let dash = if *dashed {
                r#" stroke-dasharray="5 3""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x2:.1}" y2="{y:.1}" stroke="{color}" stroke-width="3"{dash}/><text x="{tx:.1}" y="{ty:.1}" font-size="11" fill="#212529">{l}</text>"##,
                x2 = x + 18.0,
                tx = x + 22.0,
                ty = y + 4.0,
                l = svg::esc(label)
            );
            x += item_width(label) + 14.0;
        }
    }
}

/// The swarm sizes' ticks, their labels where they fit, and the axis title.
fn size_axis(out: &mut String, sizes: &[u32], sx: &dyn Fn(f64) -> f64) {
    let y0 = svg::TOP + svg::PLOT_H;
    let mut free_from = f64::NEG_INFINITY;
    for n in sizes {
        let px = sx(f64::from(*n));
        let label = n.to_string();
        let half = CHAR_W * label.len() as f64 / 2.0;
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{y1}" stroke="#adb5bd"/>"##,
            y1 = y0 + 4.0
        );
        if px - half >= free_from {
            let _ = write!(
                out,
                r##"<text x="{px:.1}" y="{ty}" font-size="11" text-anchor="middle" fill="#495057">{label}</text>"##,
                ty = y0 + 17.0
            );
            free_from = px + half + 6.0;
        }
    }
    let _ = write!(
        out,
        r##"<text x="{cx:.1}" y="{ty}" font-size="11" text-anchor="middle" fill="#495057">swarm size N = viewers + light peers (log scale)</text>"##,
        cx = svg::LEFT + svg::PLOT_W / 2.0,
        ty = svg::H - 8.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_one_minus_one_over_n() {
        assert_eq!(format::pct(Some(bound(4))), "75.0%");
        assert_eq!(format::pct(Some(bound(16))), "93.8%");
        assert_eq!(format::pct(Some(bound(64))), "98.4%");
        assert_eq!(format::pct(Some(bound(256))), "99.6%");
        assert_eq!(bound(1), 0.0);
    }

    fn curve(name: &str, sizes: &[u32]) -> SwarmCurve {
        SwarmCurve {
            name: name.into(),
            points: sizes
                .iter()
                .map(|n| CurvePoint {
                    group: format!("{name}@{n}"),
                    swarm_size: *n,
                    viewers: 4.min(*n),
                    light_peers: n - 4.min(*n),
                    n: 1,
                    p2p_savings: mean_ci(&[bound(*n) * 0.8]),
                    http_share: mean_ci(&[1.0 - bound(*n) * 0.8]),
                    bound: bound(*n),
                    headroom: "ok".into(),
                    not_a_finding_runs: 0,
                    headroom_unknown_runs: 0,
                    light_pages_judged: 0,
                    light_pages_starved: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn crowded_size_labels_are_left_out_and_the_legend_wraps() {
        // 100 and 101 sit on one pixel of a log axis from 2 to 4096: one label only.
        let names: Vec<String> = (0..10).map(|i| format!("scenario-{i}@http-only")).collect();
        let curves: Vec<SwarmCurve> = names
            .iter()
            .map(|n| curve(n, &[2, 100, 101, 4096]))
            .collect();
        let svg = plot(&curves);
        assert!(svg.contains(">100</text>") && !svg.contains(">101</text>"));
        assert!(svg.contains(">2</text>") && svg.contains(">4096</text>"));
        // Every legend label lies inside the picture, on rows that do not overlap.
        let items: Vec<(String, &str, bool)> = names
            .iter()
            .map(|n| (n.clone(), "#000", false))
            .chain(std::iter::once((BOUND_LABEL.to_string(), svg::GREY, true)))
            .collect();
        let rows = legend_rows(&items);
        assert!(rows.len() > 1);
        for row in &rows {
            let width: f64 = row.iter().map(|i| item_width(&i.0) + 14.0).sum::<f64>() - 14.0;
            assert!(svg::LEFT + width <= svg::W - svg::RIGHT, "{width}");
        }
        let height = svg::H + rows.len() as f64 * LEGEND_ROW + 10.0;
        assert!(svg.contains(&format!("height=\"{height}\"")), "{height}");
        // Ten curves: the last two are dashed, past the eight colours.
        assert_eq!(svg.matches("stroke-dasharray=\"6 4\"").count(), 1 + 2);
    }
}
