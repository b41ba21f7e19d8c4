//! The layers of `src/`, checked: a module may use modules of its own layer or below,
//! never above, and the modules of one layer never form a cycle; only the commands see
//! the command-line types. ARCHITECTURE.md draws the same table; a change to one is a
//! change to both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, bottom first.
const LAYERS: &[(&str, &[&str])] = &[
    ("model", &["model"]),
    ("sys", &["sys"]),
    (
        "parts",
        &[
            "viewer", "target", "netns", "metrics", "refsite", "report", "cloud", "grid", "stun",
        ],
    ),
    ("fleets", &["fleet"]),
    ("engine", &["engine"]),
    ("orchestration", &["suite", "ladder", "calibrate"]),
    ("commands", &["commands", "cli", "lib", "main"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `src/fleet/grid.rs` → `fleet`, `src/lib.rs` → `lib`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// `(line, module)` for every `crate::<module>` outside comments and string literals.
fn crate_uses(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(pos) = rest.find("crate::") {
            let before = &rest[..pos];
            let after = &rest[pos + "crate::".len()..];
            rest = after;
            // `$crate::` in macros names the defining crate; quotes mean a string.
            if before.ends_with('$') || before.matches('"').count() % 2 == 1 {
                continue;
            }
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

struct Edge {
    from: String,
    to: String,
    at: String,
}

fn edges() -> Vec<Edge> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut edges = Vec::new();
    for file in &files {
        let from = module_of(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for (line, to) in crate_uses(&text) {
            if to != from {
                edges.push(Edge {
                    from: from.clone(),
                    to,
                    at: format!("{}:{line}", file.strip_prefix(&src).unwrap().display()),
                });
            }
        }
    }
    edges
}

#[test]
fn every_module_has_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let unknown: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(&src, f))
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "modules without a layer (add them to LAYERS here and to ARCHITECTURE.md): {unknown:?}"
    );
}

#[test]
fn no_module_uses_a_layer_above_its_own() {
    let upward: Vec<String> = edges()
        .into_iter()
        .filter_map(|e| {
            let (from, to) = (layer_of(&e.from)?, layer_of(&e.to)?);
            (to > from).then(|| {
                format!(
                    "{}: `{}` ({}) uses `{}` ({})",
                    e.at, e.from, LAYERS[from].0, e.to, LAYERS[to].0
                )
            })
        })
        .collect();
    assert!(upward.is_empty(), "upward uses:\n{}", upward.join("\n"));
}

#[test]
fn only_the_commands_see_the_command_line() {
    let leaks: Vec<String> = edges()
        .into_iter()
        .filter(|e| e.to == "cli" && !["commands", "lib", "main"].contains(&e.from.as_str()))
        .map(|e| format!("{}: `{}` uses the CLI types", e.at, e.from))
        .collect();
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

/// A cycle in `graph`, if any, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn top_level_modules_form_no_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut at: BTreeMap<(String, String), String> = BTreeMap::new();
    for e in edges() {
        graph
            .entry(e.from.clone())
            .or_default()
            .insert(e.to.clone());
        at.entry((e.from, e.to)).or_insert(e.at);
    }
    if let Some(cycle) = find_cycle(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                format!(
                    "{} → {} ({})",
                    w[0],
                    w[1],
                    at[&(w[0].clone(), w[1].clone())]
                )
            })
            .collect();
        panic!("dependency cycle:\n{}", steps.join("\n"));
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let cycle = find_cycle(&graph).unwrap();
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
    let acyclic: BTreeMap<String, BTreeSet<String>> =
        [("a".to_string(), ["b".to_string()].into())].into();
    assert!(find_cycle(&acyclic).is_none());
    assert_eq!(
        crate_uses("use crate::fleet::X; // crate::engine\nlet s = \"crate::report\";"),
        vec![(1, "fleet".to_string())]
    );
}
