//! What a scenario file may be before any YAML parser sees it: a regular file, at most
//! [`MAX_SCENARIO_BYTES`], UTF-8, nested at most [`MAX_NESTING`] levels deep.
//!
//! These checks come first because the parser's cost is not linear in every input: a
//! file of `name:` followed by 100,000 `[` kept it busy for 70 s (the time grows with the
//! square of the depth), and `/dev/zero` never ends. The nesting check reads the text once,
//! counts `[`/`{` levels (outside quotes and comments) and block levels (indentation,
//! `- ` and `? `), and stops at the first level above the limit.

use std::io::Read;
use std::path::Path;

/// Largest scenario file read. The shipped ones are under 2 KiB.
pub const MAX_SCENARIO_BYTES: u64 = 1024 * 1024;

/// Deepest nesting accepted. A scenario needs 5 levels (`viewers.alt_network.profile.…`);
/// the rest is room for flow style (`{…}`, `[…]`) and lists.
pub const MAX_NESTING: usize = 32;

/// Why a scenario file was refused before parsing, and where.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refusal {
    pub line: Option<usize>,
    pub message: String,
}

fn refusal(line: Option<usize>, message: String) -> Refusal {
    Refusal { line, message }
}

/// Reads a scenario file: a regular file of at most [`MAX_SCENARIO_BYTES`] of UTF-8 text.
/// Devices, FIFOs and folders are refused without being opened for reading.
pub(super) fn read_scenario_file(path: &Path) -> Result<String, Refusal> {
    let meta = std::fs::metadata(path)
        .map_err(|e| refusal(None, format!("cannot read the scenario file: {e}")))?;
    if !meta.is_file() {
        return Err(refusal(
            None,
            format!(
                "is {}, not a scenario file; give the path of a YAML file (e.g. scenarios/local/vod.yaml)",
                crate::rawdata::file_kind(&meta)
            ),
        ));
    }
    if meta.len() > MAX_SCENARIO_BYTES {
        return Err(too_large(meta.len()));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| refusal(None, format!("cannot read the scenario file: {e}")))?;
    let mut bytes = Vec::new();
    // The file may grow after the size was read: never read more than the limit (+1 to tell).
    file.take(MAX_SCENARIO_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refusal(None, format!("cannot read the scenario file: {e}")))?;
    if bytes.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = good.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        refusal(
            Some(line),
            format!(
                "is not UTF-8 text (a byte that is not UTF-8 at column {column}); save the file as UTF-8"
            ),
        )
    })
}

fn too_large(bytes: u64) -> Refusal {
    refusal(
        None,
        format!(
            "is {bytes} bytes; a scenario file may have at most {MAX_SCENARIO_BYTES} bytes (1 MiB; the shipped ones are under 2 KiB)"
        ),
    )
}

/// Checks text that did not come from a file (tests, tools) the same way.
pub(super) fn check_text(text: &str) -> Result<(), Refusal> {
    if text.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(too_large(text.len() as u64));
    }
    check_nesting(text, MAX_NESTING)
}

/// Refuses text nested more than `max` levels deep, naming the line where it gets too deep.
///
/// Linear in the text. It follows YAML where nesting begins: `[`/`{` open a level where a
/// value may start (and anywhere inside another `[…]`/`{…}`), quotes and comments hide
/// brackets, and in block style each deeper indentation and each `- `/`? ` on a line opens
/// one. Quoted text in block style is taken to end with its line, so a quote the scanner
/// misreads can never hide brackets on later lines.
pub(super) fn check_nesting(text: &str, max: usize) -> Result<(), Refusal> {
    let mut scanner = NestingScanner::new(max);
    for (index, raw_line) in text.split('\n').enumerate() {
        let line = raw_line.strip_suffix('\r').unwrap_or(raw_line).as_bytes();
        scanner.line(index + 1, line)?;
    }
    Ok(())
}

/// What the nesting scan knows at the end of a line, to read the next one.
struct NestingScanner {
    max: usize,
    /// Open `[`/`{` levels.
    flow: usize,
    /// Block levels, by their indentation.
    indents: Vec<usize>,
    /// Inside a quoted string opened by this quote character.
    quote: Option<u8>,
    /// A value (and so a quote or a bracket) may start here.
    node_start: bool,
    /// Inside the text of a `|`/`>` block scalar whose key is indented this much.
    block_scalar_parent: Option<usize>,
}

impl NestingScanner {
    fn new(max: usize) -> Self {
        Self {
            max,
            flow: 0,
            indents: Vec::new(),
            quote: None,
            node_start: true,
            block_scalar_parent: None,
        }
    }

    fn too_deep(&self, line: usize, column: usize, what: &str) -> Refusal {
        refusal(
            Some(line),
            format!(
                "{what} at column {column} opens nesting level {}: files nested more than {} levels are refused before parsing (a scenario needs 5); look for an unclosed `[` or `{{`",
                self.max + 1,
                self.max
            ),
        )
    }

    /// One line: its indentation opens or closes block levels (in block style, outside
    /// quotes), then its characters are read.
    fn line(&mut self, line_no: usize, line: &[u8]) -> Result<(), Refusal> {
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let blank = line[indent..].iter().all(|&b| b == b' ' || b == b'\t');
        if let Some(parent) = self.block_scalar_parent {
            if blank || indent > parent {
                return Ok(());
            }
            self.block_scalar_parent = None;
        }
        let mut block_levels = self.indents.len();
        let block_style = self.flow == 0 && self.quote.is_none();
        if block_style {
            if blank || line[indent] == b'#' {
                return Ok(());
            }
            while self.indents.last().is_some_and(|&top| top > indent) {
                self.indents.pop();
            }
            if self.indents.last() != Some(&indent) {
                self.indents.push(indent);
            }
            block_levels = self.indents.len();
            if block_levels > self.max {
                return Err(self.too_deep(line_no, indent + 1, "indentation"));
            }
            self.node_start = true;
        }
        let from = if block_style { indent } else { 0 };
        self.characters(line_no, line, from, indent, block_levels)?;
        if self.flow == 0 {
            // Block style: a quote the scanner took to begin here ends with the line.
            self.quote = None;
        }
        Ok(())
    }

    /// The line's characters from `i` on, `block_levels` deep before the first: brackets,
    /// `- `/`? `, comments, block scalars, tags and anchors.
    fn characters(
        &mut self,
        line_no: usize,
        line: &[u8],
        mut i: usize,
        indent: usize,
        mut block_levels: usize,
    ) -> Result<(), Refusal> {
        while i < line.len() {
            let c = line[i];
            let next = line.get(i + 1).copied();
            if let Some(q) = self.quote {
                i += self.quoted(q, c, next);
                continue;
            }
            let space_after = matches!(next, None | Some(b' ' | b'\t'));
            let after_space = i == 0 || matches!(line[i - 1], b' ' | b'\t');
            match c {
                b' ' | b'\t' => {}
                b'#' if after_space => break,
                b'\'' | b'"' if self.node_start => self.quote = Some(c),
                b'[' | b'{' if self.node_start || self.flow > 0 => {
                    self.flow += 1;
                    if self.flow + block_levels > self.max {
                        let what = if c == b'[' { "`[`" } else { "`{`" };
                        return Err(self.too_deep(line_no, i + 1, what));
                    }
                    self.node_start = true;
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    self.node_start = false;
                }
                b',' if self.flow > 0 => self.node_start = true,
                b':' if self.flow > 0 || space_after => self.node_start = true,
                b'-' | b'?' if self.flow == 0 && self.node_start && space_after => {
                    block_levels += 1;
                    if block_levels > self.max {
                        return Err(self.too_deep(line_no, i + 1, "`- `"));
                    }
                }
                b'|' | b'>' if self.flow == 0 && self.node_start => {
                    self.block_scalar_parent = Some(indent);
                    break;
                }
                b'!' | b'&' | b'*' if self.node_start => {
                    // A tag or an anchor: the value (maybe quoted) follows it.
                    while i + 1 < line.len() && !matches!(line[i + 1], b' ' | b'\t') {
                        i += 1;
                    }
                    self.node_start = c != b'*';
                }
                _ => self.node_start = false,
            }
            i += 1;
        }
        Ok(())
    }

    /// Reads `c` inside a string quoted with `q`; returns how many bytes it took (two for
    /// an escape or a doubled single quote).
    fn quoted(&mut self, q: u8, c: u8, next: Option<u8>) -> usize {
        match (q, c) {
            (b'\'', b'\'') if next == Some(b'\'') => 2,
            (b'"', b'\\') => 2,
            (b'\'', b'\'') | (b'"', b'"') => {
                self.quote = None;
                self.node_start = false;
                1
            }
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, max: usize) -> bool {
        check_nesting(text, max).is_ok()
    }

    #[test]
    fn brackets_count_outside_quotes_and_comments_only() {
        assert!(depth_ok("a: [[[1]]]\n", 4));
        assert!(!depth_ok("a: [[[[1]]]]\n", 4));
        assert!(depth_ok("a: \"[[[[[[\"\n", 2));
        assert!(depth_ok("a: '[[[[''[['\n", 2));
        assert!(depth_ok("a: 1 # [[[[[[\n", 2));
        // Inside a plain scalar of block style, brackets are text.
        assert!(depth_ok("description: see [[[[[[ here\n", 2));
        // A quote inside a flow list only starts a string where a value starts.
        assert!(!depth_ok("a: [x \"y, [[[[[ \"]\n", 4));
        assert!(!depth_ok("a: [!!str \"]]]]\", [[[[\n", 4));
    }

    #[test]
    fn block_levels_count_indentation_and_dashes() {
        assert!(depth_ok("a:\n  b:\n    c: 1\n", 3));
        assert!(!depth_ok("a:\n  b:\n    c:\n      d: 1\n", 3));
        assert!(!depth_ok("a: - - - - x\n", 3));
        assert!(depth_ok("a: |\n  [[[[[[\n      {{{{{\nb: 1\n", 2));
    }

    #[test]
    fn a_block_quote_never_hides_later_lines() {
        assert!(!depth_ok("key: a\n  \"b\nother: [[[[[[\n\"\n", 4));
    }

    #[test]
    fn the_reported_line_is_where_it_gets_too_deep() {
        let err = check_nesting("name: x\nfleet: [[[[[[[[\n", 4).unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("column 11"), "{}", err.message);
    }
}
