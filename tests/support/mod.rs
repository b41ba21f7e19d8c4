//! Helpers shared by the test tiers; each tier includes the ones it needs.

#![allow(dead_code)]

pub mod clip;
pub mod fixtures;
pub mod grid;
pub mod hog;
pub mod internet;
pub mod poll;
pub mod process;
pub mod raw_run;
pub mod refsite;
pub mod schema;

/// A shipped scenario's text (`rel` from the source tree, e.g. `scenarios/local/vod.yaml`)
/// for a copy written elsewhere: its `swarm.fidelity` paths (one, or one per throttling
/// mode), relative to the shipped file, are made absolute so the copy still finds them.
pub fn shipped_scenario(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let dir = path.parent().unwrap().display().to_string();
    let indent_of = |line: &str| line.len() - line.trim_start().len();
    // The indentation of a bare `fidelity:` whose entries (`mode: path`) follow.
    let mut map_at: Option<usize> = None;
    text.lines()
        .map(|line| {
            let indent = indent_of(line);
            if map_at.is_some_and(|at| indent <= at && !line.trim().is_empty()) {
                map_at = None;
            }
            let trimmed = line.trim_start();
            if trimmed == "fidelity:" {
                map_at = Some(indent);
                return line.to_string();
            }
            let value = match map_at {
                Some(_) => trimmed
                    .split_once(": ")
                    .map(|(key, v)| (format!("{key}: "), v)),
                None => trimmed
                    .strip_prefix("fidelity: ")
                    .map(|v| ("fidelity: ".to_string(), v)),
            };
            match value {
                Some((key, v)) if !v.starts_with('/') => {
                    format!("{}{key}{dir}/{v}", &line[..indent])
                }
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Every file under `dir` (recursively) whose bytes contain `needle`: where a secret must
/// not be.
pub fn files_containing(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if String::from_utf8_lossy(&bytes).contains(needle) {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

/// One plain HTTP/1.1 GET of `path` on `base` (`http://host:port`), the whole response
/// (status line, headers and body) as text: what a test reads from a server it started,
/// with no client library between them.
pub fn http_get(base: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
