//! Browser profiles `calibrate` compares: the project's flags, what a user gets from a
//! plain ChromeDriver set-up, and user-defined variants (`--profile NAME=BASE --flag …`).

use crate::viewer::CHROMIUM_FLAGS;
use serde::{Deserialize, Serialize};

/// The flags a headless P2P viewer cannot play without on one machine, and nothing else:
/// what a plain ChromeDriver script starts (ChromeDriver adds its own automation flags to
/// both profiles alike).
pub const DEFAULT_FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--autoplay-policy=no-user-gesture-required",
    "--allow-loopback-in-peer-connection",
    "--disable-features=WebRtcHideLocalIpsWithMdns",
];

/// A named set of Chromium flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowserProfile {
    pub name: String,
    pub flags: Vec<String>,
}

impl BrowserProfile {
    pub fn project() -> Self {
        Self {
            name: "project".into(),
            flags: CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub fn default_chromedriver() -> Self {
        Self {
            name: "default".into(),
            flags: DEFAULT_FLAGS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Resolves `--profiles a,b` and `--profile NAME=BASE --flag …` into the list to measure,
/// in the order given (built-in names first, then custom ones).
pub fn resolve(names: &[String], custom: &[String]) -> Result<Vec<BrowserProfile>, String> {
    let mut known = vec![
        BrowserProfile::default_chromedriver(),
        BrowserProfile::project(),
    ];
    let mut chosen = Vec::new();
    for name in names {
        let profile = known
            .iter()
            .find(|p| &p.name == name)
            .cloned()
            .ok_or_else(|| {
                format!("--profiles: unknown profile `{name}`; built-in profiles are `default` and `project` (define others with --profile NAME=BASE --flag …)")
            })?;
        chosen.push(profile);
    }
    for definition in custom {
        let profile = parse_custom(definition, &known)?;
        if known.iter().any(|p| p.name == profile.name) {
            return Err(format!(
                "--profile {definition:?}: the name `{}` is already taken; choose another",
                profile.name
            ));
        }
        known.push(profile.clone());
        chosen.push(profile);
    }
    if chosen.is_empty() {
        return Err("no profile to measure: give --profiles default,project or --profile".into());
    }
    Ok(chosen)
}

/// `lean=project --in-process-gpu --no-zygote`: a base profile's flags plus more; a flag
/// written `-FLAG` (one dash, then the flag with its dashes) removes that base flag.
fn parse_custom(definition: &str, known: &[BrowserProfile]) -> Result<BrowserProfile, String> {
    let usage = "expected NAME=BASE --flag …, e.g. `lean=project --in-process-gpu`";
    let (name, rest) = definition
        .split_once('=')
        .ok_or_else(|| format!("--profile {definition:?}: {usage}"))?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "--profile {definition:?}: the name must be letters, digits, `-` or `_`"
        ));
    }
    let mut words = rest.split_whitespace();
    let base_name = words
        .next()
        .ok_or_else(|| format!("--profile {definition:?}: {usage}"))?;
    let base = known.iter().find(|p| p.name == base_name).ok_or_else(|| {
        format!("--profile {definition:?}: unknown base profile `{base_name}` ({usage})")
    })?;
    let mut flags = base.flags.clone();
    for word in words {
        if let Some(removed) = word.strip_prefix("-").filter(|w| w.starts_with("--")) {
            let before = flags.len();
            flags.retain(|f| f != removed);
            if flags.len() == before {
                return Err(format!(
                    "--profile {definition:?}: `{removed}` is not in `{base_name}`, so it cannot be removed"
                ));
            }
        } else if word.starts_with("--") {
            flags.push(word.to_string());
        } else {
            return Err(format!(
                "--profile {definition:?}: `{word}` is not a flag (flags start with `--`)"
            ));
        }
    }
    Ok(BrowserProfile {
        name: name.to_string(),
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn built_in_profiles_in_the_order_given() {
        let got = resolve(&names(&["project", "default"]), &[]).unwrap();
        assert_eq!(got[0], BrowserProfile::project());
        assert_eq!(got[1], BrowserProfile::default_chromedriver());
    }

    #[test]
    fn custom_profiles_add_and_remove_flags_of_their_base() {
        let got = resolve(
            &[],
            &names(&["lean=project --in-process-gpu ---window-size=640,360"]),
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "lean");
        assert!(got[0].flags.contains(&"--in-process-gpu".to_string()));
        assert!(!got[0].flags.iter().any(|f| f.starts_with("--window-size")));
        assert_eq!(got[0].flags.len(), CHROMIUM_FLAGS.len());
        // A later custom profile may build on an earlier one.
        let got = resolve(
            &[],
            &names(&["a=default --mute-audio", "b=a --disable-gpu"]),
        )
        .unwrap();
        assert_eq!(got[1].flags.len(), DEFAULT_FLAGS.len() + 2);
    }

    #[test]
    fn bad_definitions_name_the_problem() {
        let err = |defs: &[&str]| resolve(&[], &names(defs)).unwrap_err();
        assert!(err(&["lean"]).contains("expected NAME=BASE"));
        assert!(err(&["lean=nothing --x"]).contains("unknown base profile `nothing`"));
        assert!(err(&["lean=project in-process-gpu"]).contains("is not a flag"));
        assert!(err(&["project=default --x"]).contains("already taken"));
        assert!(err(&["l=default ---disable-gpu"]).contains("cannot be removed"));
        assert!(err(&["bad name=default"]).contains("letters, digits"));
        assert!(resolve(&names(&["mystery"]), &[])
            .unwrap_err()
            .contains("unknown profile `mystery`"));
        assert!(resolve(&[], &[]).unwrap_err().contains("no profile"));
    }
}
