//! One `Table` rendered as Markdown, HTML or plain text: every table of a report and a
//! comparison is built once and rendered by each format.

/// A table rendered in several formats; the first column is left-aligned, others right.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Leading columns aligned left (text); the rest are numbers, aligned right…
    pub left: usize,
    /// …except the last one when it holds notes.
    pub last_left: bool,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            left: 1,
            last_left: false,
        }
    }

    /// Aligns the last column left (free text).
    pub fn with_last_left(mut self) -> Self {
        self.last_left = true;
        self
    }

    fn is_left(&self, i: usize) -> bool {
        i < self.left || (self.last_left && i + 1 == self.headers.len())
    }

    /// Aligns the first `n` columns left.
    pub fn with_left(mut self, n: usize) -> Self {
        self.left = n;
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n|{}\n",
            self.headers
                .iter()
                .map(|h| cell(h))
                .collect::<Vec<_>>()
                .join(" | "),
            self.headers
                .iter()
                .enumerate()
                .map(|(i, _)| if self.is_left(i) { "---|" } else { "---:|" })
                .collect::<String>()
        );
        for row in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }

    pub fn text(&self) -> String {
        let cols = self.headers.len();
        let width = |i: usize| {
            std::iter::once(&self.headers[i])
                .chain(self.rows.iter().filter_map(|r| r.get(i)))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if self.is_left(i) {
                        format!("{c:<w$}", w = widths[i])
                    } else {
                        format!("{c:>w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1)));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    pub fn html(&self) -> String {
        use super::svg::esc;
        // In a box of its own: a wide table scrolls there instead of widening the page.
        let mut out = String::from("<div class=\"tablebox\"><table><thead><tr>");
        for h in &self.headers {
            out.push_str(&format!("<th>{}</th>", esc(h)));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for (i, c) in row.iter().enumerate() {
                let class = if self.is_left(i) {
                    ""
                } else {
                    " class=\"num\""
                };
                out.push_str(&format!("<td{class}>{}</td>", esc(c)));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
        out
    }
}
