//! REFERENCE.md cannot drift from the definitions: its command section is generated from the
//! command line's own definition (clap), and its scenario section must name exactly the fields
//! the scenario parser accepts. `VIEWERFLEET_BLESS=1 cargo test --test fast reference`
//! rewrites the generated section after a flag changes.

use clap::{Arg, ArgAction, Command, CommandFactory};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

const REFERENCE: &str = "REFERENCE.md";
const BEGIN: &str = "<!-- generated:commands:begin -->";
const END: &str = "<!-- generated:commands:end -->";

fn reference_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE)
}

/// Markdown table cells hold one line and no bare `|`.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn help_of(arg: &Arg) -> String {
    arg.get_long_help()
        .or_else(|| arg.get_help())
        .map(|h| cell(&h.to_string()))
        .unwrap_or_default()
}

/// `--name`, `-s, --name`, or `<NAME>` for a positional.
fn arg_name(arg: &Arg) -> String {
    if arg.is_positional() {
        let names = arg
            .get_value_names()
            .map(|v| v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap_or_else(|| vec![arg.get_id().to_string().to_uppercase()]);
        let many = matches!(arg.get_action(), ArgAction::Append)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let mut name = format!("<{}>", names.join(" "));
        if many {
            name.push_str("...");
        }
        return format!("`{name}`");
    }
    let mut parts = Vec::new();
    if let Some(short) = arg.get_short() {
        parts.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        parts.push(format!("--{long}"));
    }
    let mut name = parts.join(", ");
    if arg.get_action().takes_values() {
        let value = arg
            .get_value_names()
            .map(|v| {
                v.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| arg.get_id().to_string().to_uppercase());
        let _ = write!(name, " <{value}>");
    }
    format!("`{name}`")
}

/// Default, accepted values, environment variable and repeatability, in one cell.
fn arg_notes(arg: &Arg) -> String {
    let mut notes = Vec::new();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("default `{}`", defaults.join(",")));
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !possible.is_empty() && arg.get_action().takes_values() {
        notes.push(format!("one of {}", possible.join(", ")));
    }
    if let Some(env) = arg.get_env() {
        notes.push(format!("env `{}`", env.to_string_lossy()));
    }
    if matches!(arg.get_action(), ArgAction::Append) && !arg.is_positional() {
        notes.push("repeatable".into());
    }
    if arg.is_required_set() && !arg.is_positional() {
        notes.push("required".into());
    }
    cell(&notes.join("; "))
}

/// The arguments `--help` lists, in its order: positionals, then options (an argument a command changes with
/// `mut_arg` moves to the end of `get_arguments` but keeps its place in `--help`).
fn visible_args(command: &Command) -> Vec<&Arg> {
    let mut args: Vec<&Arg> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| !a.is_global_set())
        .collect();
    args.sort_by_key(|a| (!a.is_positional(), a.get_display_order()));
    args
}

fn render_command(out: &mut String, command: &mut Command, path: &str, depth: usize) {
    let heading = "#".repeat(depth.min(4));
    let _ = writeln!(out, "{heading} `{path}`\n");
    if let Some(about) = command.get_long_about().or_else(|| command.get_about()) {
        for paragraph in about.to_string().split("\n\n") {
            let _ = writeln!(out, "{}\n", cell(paragraph));
        }
    }
    let usage = command.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage: ").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");
    let args = visible_args(command);
    if !args.is_empty() {
        out.push_str("| argument | what it does | notes |\n|---|---|---|\n");
        for arg in args {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                arg_name(arg),
                help_of(arg),
                arg_notes(arg)
            );
        }
        out.push('\n');
    }
    let names: Vec<String> = command
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = command.find_subcommand_mut(&name).expect("listed above");
        render_command(out, sub, &format!("{path} {name}"), depth + 1);
    }
}

/// The command section of REFERENCE.md, from the definition the binary parses with.
fn generated_commands() -> String {
    let mut root = viewerfleet::cli::Cli::command();
    root.build();
    let mut out = String::new();
    out.push_str("Global flags: ");
    let globals: Vec<String> = root
        .get_arguments()
        .filter(|a| a.is_global_set() && !a.is_hide_set())
        .map(|a| format!("{} ({})", arg_name(a), help_of(a)))
        .collect();
    out.push_str(&globals.join(", "));
    out.push_str(", `--help`, `--version`.\n\n");
    let names: Vec<String> = root
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = root.find_subcommand_mut(&name).expect("listed above");
        render_command(&mut out, sub, &format!("viewerfleet {name}"), 3);
    }
    out
}

#[test]
fn reference_describes_every_command_and_flag_as_defined() {
    let path = reference_path();
    let text = std::fs::read_to_string(&path).expect("REFERENCE.md at the repository's root");
    let (head, rest) = text
        .split_once(BEGIN)
        .expect("REFERENCE.md keeps its generated commands between markers");
    let (_, tail) = rest.split_once(END).expect("the end marker");
    let generated = generated_commands();
    let expected = format!("{head}{BEGIN}\n\n{generated}{END}{tail}");
    if std::env::var_os("VIEWERFLEET_BLESS").is_some() {
        std::fs::write(&path, &expected).expect("rewriting REFERENCE.md");
        return;
    }
    assert!(
        text == expected,
        "REFERENCE.md's command section differs from the command line's definition: \
         run `VIEWERFLEET_BLESS=1 cargo test --test fast reference` and review the diff"
    );
}

// --- scenario fields ----------------------------------------------------------------------

/// Sections of a scenario file: the dotted prefix its fields get in the reference, and the
/// YAML that reaches it with `PROBE` where an unknown field goes.
const SECTIONS: &[(&str, &str)] = &[
    ("", "PROBE"),
    ("target.", "target: {PROBE}"),
    ("viewers.", "viewers: {PROBE}"),
    ("viewers.auto.", "viewers: {auto: {PROBE}}"),
    ("viewers.network.", "viewers: {network: {PROBE}}"),
    ("viewers.alt_network.", "viewers: {alt_network: {PROBE}}"),
    (
        "viewers.alt_network.profile.",
        "viewers: {alt_network: {profile: {PROBE}}}",
    ),
    ("viewers.networks[].", "viewers: {networks: [{PROBE}]}"),
    (
        "viewers.networks[].profile.",
        "viewers: {networks: [{profile: {PROBE}}]}",
    ),
    ("viewers.churn.", "viewers: {churn: {PROBE}}"),
    ("viewers.churn.watch.", "viewers: {churn: {watch: {PROBE}}}"),
    (
        "viewers.churn.watch.durations[].",
        "viewers: {churn: {watch: {durations: [{PROBE}]}}}",
    ),
    ("swarm.", "swarm: {PROBE}"),
    ("fleet.", "fleet: {kind: local, PROBE}"),
    ("fleet.", "fleet: {kind: netns, PROBE}"),
    ("fleet.", "fleet: {kind: grid, PROBE}"),
    ("fleet.", "fleet: {kind: hcloud, PROBE}"),
    ("fleet.budget.", "fleet: {kind: hcloud, budget: {PROBE}}"),
];

/// Fields an unknown-field probe cannot list: `fleet.kind` picks the provider's struct, and
/// `fleet.canary` is `true`/`false` or this struct (serde names no fields for either form).
const UNPROBED: &[&str] = &["fleet.kind", "fleet.canary.warmup", "fleet.canary.window"];

/// The field names the parser lists when it meets an unknown field where `yaml` says `PROBE`.
fn accepted_fields(yaml: &str) -> Option<Vec<String>> {
    let text = format!(
        "name: probe\n{}\n",
        yaml.replace("PROBE", "viewerfleet_probe_field: 1")
    );
    let overrides = viewerfleet::model::scenario::Overrides::default();
    let err = viewerfleet::model::scenario::parse(&text, "probe.yaml", &overrides).err()?;
    let message = err.to_string();
    let (_, list) = message.split_once("unknown field `viewerfleet_probe_field`, expected ")?;
    let list = list.strip_prefix("one of ").unwrap_or(list);
    Some(
        list.split(", ")
            .flat_map(|part| part.split(" or "))
            .map(|f| f.trim().trim_matches('`').to_string())
            .filter(|f| !f.is_empty())
            .collect(),
    )
}

#[test]
fn reference_describes_every_scenario_field_the_parser_accepts() {
    let mut accepted: BTreeSet<String> = UNPROBED.iter().map(|f| f.to_string()).collect();
    for (prefix, yaml) in SECTIONS {
        let fields = accepted_fields(yaml).unwrap_or_else(|| {
            panic!("the parser did not list the fields of `{prefix}` for the probe `{yaml}`")
        });
        for field in fields {
            accepted.insert(format!("{prefix}{field}"));
        }
    }
    let text = std::fs::read_to_string(reference_path()).expect("REFERENCE.md");
    let (_, fields_part) = text
        .split_once("## Scenario fields")
        .expect("REFERENCE.md has a `## Scenario fields` section");
    let documented: BTreeSet<String> = fields_part
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|line| line.split_once('`').map(|(name, _)| name.to_string()))
        .collect();
    let missing: Vec<_> = accepted.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&accepted).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "REFERENCE.md's scenario fields differ from the parser's: not described {missing:?}, \
         described but not accepted {stale:?}"
    );
}

// --- README and GUIDE are the manual, RESULTS.md the notebook ---------------------------------------------

/// Markdown prose without fenced blocks (the tool's own output) and without link targets.
fn prose_of(text: &str) -> String {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    // `[words](target)` keeps its words: a date in a link to RESULTS.md is a citation.
    let mut out = String::with_capacity(prose.len());
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 2..];
        rest = rest.find(')').map_or("", |end| &rest[end + 1..]);
    }
    out.push_str(rest);
    out
}

/// `YYYY-MM-DD` dates in `text`, with their context.
fn dates_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    (0..bytes.len().saturating_sub(9))
        .filter(|&i| {
            (0..4).all(|k| digit(i + k))
                && bytes[i + 4] == b'-'
                && digit(i + 5)
                && digit(i + 6)
                && bytes[i + 7] == b'-'
                && digit(i + 8)
                && digit(i + 9)
                && (i == 0 || !digit(i - 1))
        })
        .map(|i| {
            let mut start = i.saturating_sub(60);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (i + 40).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text[start..end].replace('\n', " ")
        })
        .collect()
}

#[test]
fn the_manual_quotes_dated_measurements_only_through_links_to_results() {
    for manual in ["README.md", "GUIDE.md"] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(manual))
            .expect(manual);
        let dates = dates_in(&prose_of(&text));
        assert!(
            dates.is_empty(),
            "{manual} dates a measurement in its prose; move it to RESULTS.md and link it: {dates:#?}"
        );
    }
    // The check itself finds a date in prose and ignores one in a link.
    assert_eq!(dates_in(&prose_of("measured on 2026-12-02 here")).len(), 1);
    assert!(dates_in(&prose_of("see [RESULTS](RESULTS.md#x-2026-12-02) and")).is_empty());
    assert!(dates_in(&prose_of("```\nbench on 2026-12-02\n```\n")).is_empty());
}

// --- links between the manuals resolve -------------------------------------------------------

/// The manuals at the repository's root, which link to each other's headings.
const MANUALS: &[&str] = &[
    "README.md",
    "GUIDE.md",
    "ARCHITECTURE.md",
    "RESULTS.md",
    "BENCHMARKS.md",
    "REFERENCE.md",
];

/// GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, `_`, `-`
/// and spaces kept), each space a hyphen.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Lines outside fenced blocks, with their numbers.
fn unfenced_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// Every heading's anchor; a repeated heading gets `-1`, `-2`, … as on GitHub.
fn anchors_of(text: &str) -> BTreeSet<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in unfenced_lines(text) {
        let level = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let base = anchor_of(&line[level..]);
        let n = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    anchors
}

#[test]
fn links_between_the_manuals_reach_their_headings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let texts: Vec<(&str, String)> = MANUALS
        .iter()
        .map(|m| (*m, std::fs::read_to_string(root.join(m)).expect(m)))
        .collect();
    let anchors: std::collections::BTreeMap<&str, BTreeSet<String>> = texts
        .iter()
        .map(|(m, text)| (*m, anchors_of(text)))
        .collect();
    let mut broken = Vec::new();
    for (manual, text) in &texts {
        for (number, line) in unfenced_lines(text) {
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                rest = &rest[at + 2..];
                let Some(end) = rest.find(')') else { break };
                let target = &rest[..end];
                rest = &rest[end..];
                let Some((file, anchor)) = target.split_once('#') else {
                    continue;
                };
                let file = if file.is_empty() { *manual } else { file };
                if let Some(known) = anchors.get(file) {
                    if !known.contains(anchor) {
                        broken.push(format!("{manual}:{number}: {file}#{anchor}"));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to headings that do not exist (a heading renamed or removed?): {broken:#?}"
    );
    // The anchors are GitHub's: punctuation dropped, an en dash too, repeats numbered.
    assert_eq!(
        anchor_of(" `count: auto`: as many viewers"),
        "count-auto-as-many-viewers"
    );
    assert_eq!(anchor_of("17:40–18:51 UTC"), "17401851-utc");
    assert!(anchors_of("## A\n## A\n").contains("a-1"));
}
