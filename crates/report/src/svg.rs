//! Inline SVG plots for the HTML reports: line charts over time and grouped/stacked bar
//! charts. Plain SVG text, no scripts, no fonts to fetch, so a report prints and works offline.

use std::fmt::Write;

pub(super) const W: f64 = 760.0;
pub(super) const H: f64 = 310.0;
pub(super) const LEFT: f64 = 64.0;
pub(super) const RIGHT: f64 = 16.0;
pub(super) const TOP: f64 = 46.0;
pub(super) const BOTTOM: f64 = 46.0;

/// Colours: HTTP orange, P2P blue, upload green, others.
pub const HTTP: &str = "#d9480f";
pub const P2P: &str = "#1c7ed6";
pub const UP: &str = "#2b8a3e";
pub(crate) const GREY: &str = "#495057";
pub(crate) const PALETTE: [&str; 8] = [
    "#d9480f", "#1c7ed6", "#2b8a3e", "#ae3ec9", "#f08c00", "#0b7285", "#c2255c", "#5c940d",
];

/// Escapes text for SVG/HTML.
pub(crate) fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One line of a line chart.
pub(crate) struct Line<'a> {
    pub label: String,
    pub color: &'a str,
    pub dashed: bool,
    pub points: &'a [(f64, f64)],
}

/// A line chart over time (x in seconds) with an optional shaded band (the steady window).
pub(crate) struct LineChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub lines: Vec<Line<'a>>,
    pub band: Option<(f64, f64, &'a str)>,
    /// Fix the y range's top (e.g. 1.0 for shares); otherwise from the data.
    pub y_max: Option<f64>,
}

/// Round tick step for a range.
fn nice_step(range: f64, ticks: f64) -> f64 {
    let raw = (range / ticks).max(1e-12);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let step = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    step * mag
}

pub(super) fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || (v.fract() == 0.0 && v.abs() >= 1.0) {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

pub(super) fn open_svg(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{t}"><title>{t}</title><rect x="0" y="0" width="{W}" height="{height}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold" fill="#212529">{t}</text>"##,
        t = esc(title)
    );
}

/// Width of text at font size 11 (an average glyph of the sans-serif fonts reports use).
pub(super) fn text_width(text: &str) -> f64 {
    6.5 * text.chars().count() as f64
}

/// One legend row's height, when the legend runs in rows under the plot.
pub(super) const LEGEND_ROW: f64 = 16.0;

/// Where each legend item goes: one row at the top right when the items fit beside the
/// title's line, else rows under the plot starting at its left edge (`rows` > 0), so no item
/// is ever cut off at the plot's edge.
struct LegendLayout {
    /// (x, row) per item; row 0 = the top line when `rows` is 0.
    places: Vec<(f64, usize)>,
    /// Rows under the plot (0: the legend sits at the top).
    rows: usize,
}

fn item_width(label: &str) -> f64 {
    24.0 + text_width(label)
}

fn legend_layout(items: &[(String, &str, bool)]) -> LegendLayout {
    let total: f64 = items.iter().map(|(l, _, _)| item_width(l) + 10.0).sum();
    if total <= PLOT_W * 0.75 {
        let mut x = W - RIGHT;
        let mut places = vec![(0.0, 0); items.len()];
        for (i, (label, _, _)) in items.iter().enumerate().rev() {
            x -= item_width(label) + 10.0;
            places[i] = (x, 0);
        }
        return LegendLayout { places, rows: 0 };
    }
    let (mut x, mut row) = (LEFT, 0);
    let mut places = Vec::with_capacity(items.len());
    for (label, _, _) in items {
        let width = item_width(label) + 10.0;
        if x > LEFT && x + width > W - RIGHT {
            x = LEFT;
            row += 1;
        }
        places.push((x, row));
        x += width;
    }
    LegendLayout {
        places,
        rows: if items.is_empty() { 0 } else { row + 1 },
    }
}

/// The space a legend in rows adds under the plot.
fn legend_extra(layout: &LegendLayout) -> f64 {
    if layout.rows == 0 {
        0.0
    } else {
        layout.rows as f64 * LEGEND_ROW + 6.0
    }
}

/// Draws the legend; `below` is the y of the first row when it runs under the plot.
fn legend(out: &mut String, items: &[(String, &str, bool)], layout: &LegendLayout, below: f64) {
    for ((label, color, dashed), (x, row)) in items.iter().zip(&layout.places) {
        let y = if layout.rows == 0 {
            31.0
        } else {
            below + *row as f64 * LEGEND_ROW
        };
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
            l = esc(label)
        );
    }
}

pub(super) fn y_axis(out: &mut String, y_max: f64, y_label: &str, plot_h: f64) -> f64 {
    y_axis_capped(out, y_max, None, y_label, plot_h)
}

/// The y axis up to `y_max` rounded up to a tick, never above `cap` (100 for percentages:
/// a whisker above 100% is cut at the top, not drawn on an axis that runs to 150%).
pub(super) fn y_axis_capped(
    out: &mut String,
    y_max: f64,
    cap: Option<f64>,
    y_label: &str,
    plot_h: f64,
) -> f64 {
    let y_max = cap.map_or(y_max, |c| y_max.min(c));
    let step = nice_step(y_max, 5.0);
    let top = (y_max / step).ceil().max(1.0) * step;
    let top = cap.map_or(top, |c| top.min(c));
    let mut v = 0.0;
    while v <= top + step * 1e-6 {
        let y = TOP + plot_h - v / top * plot_h;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#dee2e6"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end" fill="#495057">{v}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            v = fmt_tick(v)
        );
        v += step;
    }
    let _ = write!(
        out,
        r##"<text transform="translate(14 {cy:.1}) rotate(-90)" font-size="11" text-anchor="middle" fill="#495057">{l}</text>"##,
        cy = TOP + plot_h / 2.0,
        l = esc(y_label)
    );
    top
}

/// Height of the plotting area, between the title and legend above and the x axis below.
pub(super) const PLOT_H: f64 = H - TOP - BOTTOM;
/// Width of the plotting area, right of the y axis.
pub(super) const PLOT_W: f64 = W - LEFT - RIGHT;

/// Renders a line chart; time axis in seconds (minutes when long).
pub(crate) fn line_chart(chart: &LineChart) -> String {
    let items: Vec<(String, &str, bool)> = chart
        .lines
        .iter()
        .map(|l| (l.label.clone(), l.color, l.dashed))
        .collect();
    let legend_places = legend_layout(&items);
    let mut out = String::new();
    open_svg(&mut out, chart.title, H + legend_extra(&legend_places));
    let all = || chart.lines.iter().flat_map(|l| l.points.iter());
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let data_y = all()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let y_max = chart
        .y_max
        .unwrap_or(if data_y > 0.0 { data_y * 1.05 } else { 1.0 });
    let top = y_axis(&mut out, y_max, chart.y_label, PLOT_H);
    let sx = |x: f64| LEFT + x / x_max * PLOT_W;
    let sy = |y: f64| TOP + PLOT_H - (y / top).clamp(0.0, 1.0) * PLOT_H;
    if let Some((a, b, label)) = chart.band {
        if b > a {
            band(&mut out, sx(a), sx(b), label);
        }
    }
    time_axis(&mut out, x_max, &sx);
    for line in &chart.lines {
        path(&mut out, line, &sx, &sy);
    }
    legend(&mut out, &items, &legend_places, H + 6.0);
    out.push_str("</svg>");
    out
}

/// The shaded band between `x_from` and `x_to` (pixels), labelled at its top.
fn band(out: &mut String, x_from: f64, x_to: f64, label: &str) {
    let _ = write!(
        out,
        r##"<rect x="{x:.1}" y="{TOP}" width="{w:.1}" height="{PLOT_H}" fill="#fff3bf" opacity="0.7"/><text x="{tx:.1}" y="{ty}" font-size="10" text-anchor="middle" fill="#826a00">{l}</text>"##,
        x = x_from,
        w = (x_to - x_from).max(1.0),
        tx = (x_from + x_to) / 2.0,
        ty = TOP + 11.0,
        l = esc(label)
    );
}

/// Ticks and title of the time axis, in minutes once the data is longer than 5 minutes.
fn time_axis(out: &mut String, x_max: f64, sx: &dyn Fn(f64) -> f64) {
    let minutes = x_max > 300.0;
    let unit = if minutes { 60.0 } else { 1.0 };
    let step = nice_step(x_max / unit, 8.0) * unit;
    let mut x = 0.0;
    while x <= x_max + 1e-6 {
        let px = sx(x);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{y1}" stroke="#adb5bd"/><text x="{px:.1}" y="{ty}" font-size="11" text-anchor="middle" fill="#495057">{v}</text>"##,
            y0 = TOP + PLOT_H,
            y1 = TOP + PLOT_H + 4.0,
            ty = TOP + PLOT_H + 17.0,
            v = fmt_tick(x / unit)
        );
        x += step;
    }
    let _ = write!(
        out,
        r##"<text x="{cx:.1}" y="{ty}" font-size="11" text-anchor="middle" fill="#495057">time since start ({u})</text>"##,
        cx = LEFT + PLOT_W / 2.0,
        ty = H - 8.0,
        u = if minutes { "min" } else { "s" },
    );
    x_baseline(out);
}

/// One line as an SVG path (nothing for a line without points).
pub(super) fn path(
    out: &mut String,
    line: &Line,
    sx: &dyn Fn(f64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) {
    if line.points.is_empty() {
        return;
    }
    let mut d = String::new();
    for (i, (x, y)) in line.points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{:.1},{:.1}",
            if i == 0 { "M" } else { " L" },
            sx(*x),
            sy(*y)
        );
    }
    let dash = if line.dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = write!(
        out,
        r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="2"{dash}/>"#,
        c = line.color
    );
}

/// The x axis line along the bottom of the plotting area.
pub(super) fn x_baseline(out: &mut String) {
    let _ = write!(
        out,
        r##"<line x1="{LEFT}" y1="{yb}" x2="{xr}" y2="{yb}" stroke="#868e96"/>"##,
        yb = TOP + PLOT_H,
        xr = W - RIGHT
    );
}

/// One set of bars (one colour) across the categories; value with optional ± error.
pub(crate) struct BarSet<'a> {
    pub label: String,
    pub color: &'a str,
    pub values: Vec<Option<(f64, Option<f64>)>>,
}

/// Grouped bars (side by side) or stacked bars per category.
pub(crate) struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub categories: Vec<String>,
    pub sets: Vec<BarSet<'a>>,
    pub stacked: bool,
    /// The y axis never runs above this (100 for percentages).
    pub y_cap: Option<f64>,
}

/// Renders bars per category, grouped side by side or stacked, with ± whiskers where a
/// value has an error.
pub(crate) fn bar_chart(chart: &BarChart) -> String {
    let items: Vec<(String, &str, bool)> = chart
        .sets
        .iter()
        .map(|s| (s.label.clone(), s.color, false))
        .collect();
    let legend_places = legend_layout(&items);
    let n = chart.categories.len().max(1);
    let labels = CategoryLabels::new(&chart.categories, PLOT_W / n as f64);
    let height = H + labels.extra + legend_extra(&legend_places);
    let mut out = String::new();
    open_svg(&mut out, chart.title, height);
    let data_max = (0..n).map(|i| category_top(chart, i)).fold(0.0, f64::max);
    let top = y_axis_capped(
        &mut out,
        if data_max > 0.0 { data_max * 1.05 } else { 1.0 },
        chart.y_cap,
        chart.y_label,
        PLOT_H,
    );
    let layout = BarLayout::new(chart, top);
    for (i, category) in chart.categories.iter().enumerate() {
        category_bars(&mut out, chart, &layout, i, category);
        labels.draw(&mut out, i, category, LEFT + layout.slot * (i as f64 + 0.5));
    }
    x_baseline(&mut out);
    legend(&mut out, &items, &legend_places, H + labels.extra + 6.0);
    out.push_str("</svg>");
    out
}

/// Longest category label drawn; longer ones end in `…` (the full name is the bar's tooltip).
const LABEL_CHARS: usize = 40;

/// How the categories' names go under the bars so no two overlap: level when every name
/// fits its slot, else turned (steeper as slots narrow: lines of text one slot apart are
/// `slot × sin(angle)` apart), and only every n-th named when even upright ones would touch.
struct CategoryLabels {
    /// Degrees from level (0: level).
    angle: f64,
    every: usize,
    /// Height the turned labels add under the plot.
    extra: f64,
}

impl CategoryLabels {
    /// Distance between two turned labels' baselines that keeps them apart (font 11).
    const LINE: f64 = 14.0;

    fn new(categories: &[String], slot: f64) -> Self {
        let widest = categories
            .iter()
            .map(|c| text_width(&shorten(c)))
            .fold(0.0, f64::max);
        if widest <= slot - 6.0 {
            return Self {
                angle: 0.0,
                every: 1,
                extra: 0.0,
            };
        }
        let every = (Self::LINE / slot).ceil().max(1.0) as usize;
        let spacing = slot * every as f64;
        let apart = (Self::LINE / spacing).clamp(0.5, 1.0).asin();
        // The first name, turned, reaches `widest × cos(angle)` left of its bar: steep
        // enough that it stays inside the picture.
        let room = LEFT + slot / 2.0 - 2.0;
        let inside = (room / widest).clamp(0.0, 1.0).acos();
        let angle = apart.max(inside).to_degrees();
        let extra = widest * angle.to_radians().sin() + 11.0 * angle.to_radians().cos();
        Self {
            angle,
            every,
            extra: extra.ceil(),
        }
    }

    fn draw(&self, out: &mut String, i: usize, category: &str, cx: f64) {
        if i % self.every != 0 {
            return;
        }
        let y = TOP + PLOT_H + 16.0;
        let name = esc(&shorten(category));
        if self.angle == 0.0 {
            let _ = write!(
                out,
                r##"<text class="category" x="{cx:.1}" y="{y}" font-size="11" text-anchor="middle" fill="#495057">{name}</text>"##,
            );
        } else {
            let _ = write!(
                out,
                r##"<text class="category" x="{cx:.1}" y="{y}" font-size="11" text-anchor="end" fill="#495057" transform="rotate(-{a:.1} {cx:.1} {y})"><title>{full}</title>{name}</text>"##,
                a = self.angle,
                full = esc(category),
            );
        }
    }
}

fn shorten(name: &str) -> String {
    if name.chars().count() <= LABEL_CHARS {
        name.to_string()
    } else {
        let mut short: String = name.chars().take(LABEL_CHARS - 1).collect();
        short.push('…');
        short
    }
}

/// How high category `i` reaches: its stack, or its highest bar with the whisker on top.
fn category_top(chart: &BarChart, i: usize) -> f64 {
    let values = chart
        .sets
        .iter()
        .filter_map(|s| s.values.get(i).copied().flatten());
    if chart.stacked {
        values.map(|v| v.0).sum()
    } else {
        values
            .map(|(v, e)| v + e.unwrap_or(0.0))
            .fold(0.0, f64::max)
    }
}

/// The geometry every bar of one chart shares: one slot per category, 80% of it for bars.
struct BarLayout {
    stacked: bool,
    /// The y axis' top value.
    top: f64,
    slot: f64,
    inner: f64,
    /// Width of one bar.
    per_set: f64,
}

impl BarLayout {
    fn new(chart: &BarChart, top: f64) -> Self {
        let n = chart.categories.len().max(1);
        let slot = PLOT_W / n as f64;
        let inner = slot * 0.8;
        let per_set = if chart.stacked {
            inner
        } else {
            inner / chart.sets.len().max(1) as f64
        };
        Self {
            stacked: chart.stacked,
            top,
            slot,
            inner,
            per_set,
        }
    }

    fn sy(&self, y: f64) -> f64 {
        TOP + PLOT_H - (y / self.top).clamp(0.0, 1.0) * PLOT_H
    }

    /// Left edge of set `k`'s bar in category `i`.
    fn bar_x(&self, i: usize, k: usize) -> f64 {
        let x0 = LEFT + self.slot * i as f64 + (self.slot - self.inner) / 2.0;
        if self.stacked {
            x0
        } else {
            x0 + self.per_set * k as f64
        }
    }
}

/// Category `i`'s bars (each set's, stacked from 0 or side by side) and its label.
fn category_bars(out: &mut String, chart: &BarChart, layout: &BarLayout, i: usize, category: &str) {
    let mut base = 0.0;
    for (k, set) in chart.sets.iter().enumerate() {
        let Some((v, err)) = set.values.get(i).copied().flatten() else {
            continue;
        };
        let x = layout.bar_x(i, k);
        let (y_top, y_bottom) = (layout.sy(base + v), layout.sy(base));
        let _ = write!(
            out,
            r#"<rect x="{x:.2}" y="{y_top:.1}" width="{w:.2}" height="{h:.1}" fill="{c}"><title>{cat}: {l} {v}</title></rect>"#,
            w = layout.per_set.max(0.5),
            h = (y_bottom - y_top).max(0.0),
            c = set.color,
            cat = esc(category),
            l = esc(&set.label),
            v = fmt_tick(v)
        );
        if let Some(e) = err.filter(|e| *e > 0.0) {
            whisker(out, layout, x + layout.per_set / 2.0, base + v, e);
        }
        if chart.stacked {
            base += v;
        }
    }
}

/// An error bar of ± `err` around `value`, centred on `cx`, cut off at 0.
fn whisker(out: &mut String, layout: &BarLayout, cx: f64, value: f64, err: f64) {
    let _ = write!(
        out,
        r##"<line x1="{cx:.1}" y1="{a:.1}" x2="{cx:.1}" y2="{b:.1}" stroke="#212529" stroke-width="1.5"/><line x1="{l:.1}" y1="{a:.1}" x2="{r:.1}" y2="{a:.1}" stroke="#212529"/><line x1="{l:.1}" y1="{b:.1}" x2="{r:.1}" y2="{b:.1}" stroke="#212529"/>"##,
        a = layout.sy(value + err),
        b = layout.sy((value - err).max(0.0)),
        l = cx - 4.0,
        r = cx + 4.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(7.0, 5.0), 2.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
    }

    #[test]
    fn a_percentage_axis_stops_at_100_even_with_whiskers_above() {
        let chart = |y_cap| {
            bar_chart(&BarChart {
                title: "share",
                y_label: "%",
                categories: vec!["a".into(), "b".into()],
                sets: vec![BarSet {
                    label: "HTTP share".into(),
                    color: HTTP,
                    values: vec![Some((97.0, Some(30.0))), Some((40.0, None))],
                }],
                stacked: false,
                y_cap,
            })
        };
        let capped = chart(Some(100.0));
        assert!(capped.contains(">100</text>"), "{capped}");
        assert!(!capped.contains(">120</text>") && !capped.contains(">150</text>"));
        // Without the cap the whisker sets the axis.
        assert!(chart(None).contains(">150</text>"));
    }

    #[test]
    fn long_category_names_turn_and_short_ones_stay_level() {
        let short = CategoryLabels::new(&["a".into(), "b".into()], 300.0);
        assert_eq!((short.angle, short.every), (0.0, 1));
        let names: Vec<String> = (0..10)
            .map(|i| format!("live-high-half-p2p-off@http-only-{i}"))
            .collect();
        let long = CategoryLabels::new(&names, PLOT_W / 10.0);
        assert!(long.angle >= 30.0 && long.angle <= 90.0, "{}", long.angle);
        assert!(long.extra > 100.0);
        // Too many for even upright names: every n-th only.
        let many: Vec<String> = (0..200).map(|i| format!("run-{i}")).collect();
        assert!(CategoryLabels::new(&many, PLOT_W / 200.0).every > 1);
    }

    #[test]
    fn line_chart_escapes_labels_and_draws_paths() {
        let pts = [(0.0, 1.0), (10.0, 2.0)];
        let svg = line_chart(&LineChart {
            title: "a <b>",
            y_label: "Mbit/s",
            lines: vec![Line {
                label: "x&y".into(),
                color: HTTP,
                dashed: false,
                points: &pts,
            }],
            band: Some((2.0, 5.0, "steady")),
            y_max: None,
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("a &lt;b&gt;") && svg.contains("x&amp;y"));
        assert!(svg.contains("<path d=\"M"));
    }
}
