//! The workspace's crate graph is its layering: each crate's workspace dependencies are
//! exactly those ARCHITECTURE.md's crate table names, and the report crate builds without
//! an async runtime, a WebDriver client or the cloud API (a report is rebuilt from a run
//! folder on any machine).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// What `cargo <args>` prints, in the workspace, offline (the build has every package).
fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(args)
        .args(["--offline", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `cargo metadata` of the workspace's own packages.
fn metadata() -> serde_json::Value {
    serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--no-deps"])).unwrap()
}

/// Short name (`model` for `viewerfleet-model`, `viewerfleet` for the binary).
fn short(name: &str) -> String {
    name.strip_prefix("viewerfleet-")
        .unwrap_or(name)
        .to_string()
}

/// ARCHITECTURE.md's crate table: crate → its workspace dependencies.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let mut table = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(name) = cells
            .get(1)
            .and_then(|c| c.strip_prefix("`viewerfleet"))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        // The crate table's rows name a folder; the other tables of crates do not.
        let folder = cells.get(2).copied().unwrap_or("");
        if !(folder.starts_with("`crates/") || folder.starts_with("`.`")) {
            continue;
        }
        let name = short(&format!("viewerfleet{name}"));
        let deps: BTreeSet<String> = cells[3]
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && *d != "—")
            .map(String::from)
            .collect();
        table.insert(name, deps);
    }
    table
}

#[test]
fn each_crate_depends_on_the_crates_architecture_md_names_and_no_other() {
    let meta = metadata();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let mut actual = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        if !members.contains(package["id"].as_str().unwrap()) || name == "viewerfleet-kit" {
            continue;
        }
        let deps: BTreeSet<String> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap())
            .filter(|d| d.starts_with("viewerfleet-"))
            .map(short)
            .collect();
        actual.insert(short(name), deps);
    }
    assert_eq!(
        actual,
        documented(),
        "the workspace (left) and ARCHITECTURE.md's crate table (right) disagree"
    );
}

#[test]
fn the_report_crate_builds_without_a_runtime_a_webdriver_client_or_the_cloud_api() {
    // Every package the report's normal (non-dev, non-build) dependencies pull in, on this
    // platform.
    let tree = cargo(&[
        "tree",
        "-p",
        "viewerfleet-report",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    let names: BTreeSet<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains("viewerfleet-model") && names.contains("serde"),
        "{names:?}"
    );
    for heavy in ["tokio", "fantoccini", "hcloud", "reqwest", "hyper", "axum"] {
        assert!(
            !names.contains(heavy),
            "the report crate pulls in {heavy}: {names:?}"
        );
    }
}

/// How many items a crate's sources declare `pub`, `pub(crate)`/`pub(super)` and private:
/// functions, types, traits, constants, statics, modules, macros and (for the first two)
/// re-exports; fields and methods' `self` not told apart from functions, tests included.
fn declared_items(dir: &Path) -> [usize; 3] {
    const KINDS: [&str; 13] = [
        "fn ",
        "async fn ",
        "unsafe fn ",
        "const fn ",
        "struct ",
        "enum ",
        "const ",
        "static ",
        "mod ",
        "use ",
        "trait ",
        "type ",
        "macro_rules! ",
    ];
    let is_item = |rest: &str| KINDS.iter().any(|k| rest.starts_with(k));
    let mut counts = [0; 3];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let line = line.trim_start();
                if let Some(rest) = line.strip_prefix("pub ") {
                    counts[0] += usize::from(is_item(rest));
                } else if let Some(rest) = line
                    .strip_prefix("pub(crate) ")
                    .or_else(|| line.strip_prefix("pub(super) "))
                {
                    counts[1] += usize::from(is_item(rest));
                } else if !line.starts_with("use ") && is_item(line) {
                    counts[2] += 1;
                }
            }
        }
    }
    counts
}

#[test]
fn architecture_md_counts_each_crates_public_items_as_the_sources_declare_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("### Public items per crate")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Public items per crate\"");
    let mut rows = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(name) = cells
            .get(1)
            .and_then(|c| c.strip_prefix("`viewerfleet-"))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        let numbers: Vec<usize> = cells[2..5].iter().map(|c| c.parse().unwrap()).collect();
        rows.insert(name.to_string(), numbers);
    }
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let counted = declared_items(&dir.join("src")).to_vec();
        match rows.get(&name) {
            Some(row) if *row == counted => {}
            Some(row) => wrong.push(format!(
                "viewerfleet-{name}: the table says {row:?}, the sources declare {counted:?}"
            )),
            None => wrong.push(format!(
                "viewerfleet-{name}: no row; the sources declare {counted:?}"
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md, \"Public items per crate\" (pub, pub(crate)/pub(super), private) is out of date; put in these counts (and say why an API grew):\n{}",
        wrong.join("\n")
    );
}
