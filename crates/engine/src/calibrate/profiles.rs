//! Browser profiles `calibrate` compares: what a user gets from a plain ChromeDriver
//! set-up (`default`), viewerfleet's viewers (`project`: its flags and the decode lever),
//! the same with several viewers per browser (`packed`), and user-defined variants
//! (`--profile NAME=BASE --flag … per_browser=N video_track=on|off`).

use crate::model::scenario::BrowserSetup;
use crate::model::scenario::MAX_PER_BROWSER;
use serde::{Deserialize, Serialize};

/// Viewers per browser of the built-in `packed` profile: `calibrate`'s default 4 viewers
/// in one browser.
pub const PACKED_PER_BROWSER: u32 = 4;

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

/// A named way to start viewers: Chromium flags, the decode lever, viewers per browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowserProfile {
    pub name: String,
    pub flags: Vec<String>,
    /// The decode lever (deselect the video track; see `viewer::NO_VIDEO_TRACK_SCRIPT`).
    #[serde(default)]
    pub no_video_track: bool,
    /// Viewers per browser (BiDi user contexts in one session when above 1).
    #[serde(default = "one")]
    pub per_browser: u32,
}

fn one() -> u32 {
    1
}

impl BrowserProfile {
    /// viewerfleet's viewers: the project's flags and the decode lever, a browser each.
    pub fn project() -> Self {
        let setup = BrowserSetup::project();
        Self {
            name: "project".into(),
            flags: setup.flags,
            no_video_track: setup.no_video_track,
            per_browser: 1,
        }
    }

    /// `project` with `PACKED_PER_BROWSER` viewers per browser.
    pub fn packed() -> Self {
        Self {
            name: "packed".into(),
            per_browser: PACKED_PER_BROWSER,
            ..Self::project()
        }
    }

    pub fn default_chromedriver() -> Self {
        Self {
            name: "default".into(),
            flags: DEFAULT_FLAGS.iter().map(|s| s.to_string()).collect(),
            no_video_track: false,
            per_browser: 1,
        }
    }

    /// How its browsers are started.
    pub fn setup(&self) -> BrowserSetup {
        BrowserSetup {
            name: self.name.clone(),
            flags: self.flags.clone(),
            no_video_track: self.no_video_track,
        }
    }

    /// The `calibrate` arguments that measure this profile again: `--profiles NAME` for a
    /// built-in one, else `--profiles default` and a `--profile` definition on top of
    /// `default` (its flags removed or added, its packing and decode lever).
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let built_in = [
            Self::default_chromedriver(),
            Self::project(),
            Self::packed(),
        ];
        if built_in.contains(self) {
            return vec!["--profiles".into(), self.name.clone()];
        }
        let base = Self::default_chromedriver();
        let mut words = vec![format!("{}=default", self.name)];
        words.extend(
            base.flags
                .iter()
                .filter(|f| !self.flags.contains(f))
                .map(|f| format!("-{f}")),
        );
        words.extend(
            self.flags
                .iter()
                .filter(|f| !base.flags.contains(f))
                .cloned(),
        );
        words.push(format!("per_browser={}", self.per_browser));
        words.push(format!(
            "video_track={}",
            if self.no_video_track { "off" } else { "on" }
        ));
        vec![
            "--profiles".into(),
            "default".into(),
            "--profile".into(),
            words.join(" "),
        ]
    }

    /// `4 per browser, no video track` or `own browser, decoding`, for tables.
    pub fn levers(&self) -> String {
        let packing = match self.per_browser {
            1 => "a browser each".to_string(),
            n => format!("{n} per browser"),
        };
        let track = if self.no_video_track {
            "video track off"
        } else {
            "decoding video"
        };
        format!("{packing}, {track}")
    }
}

/// Resolves `--profiles a,b` and `--profile NAME=BASE --flag …` into the list to measure,
/// in the order given (built-in names first, then custom ones).
pub fn resolve(names: &[String], custom: &[String]) -> Result<Vec<BrowserProfile>, String> {
    let mut known = vec![
        BrowserProfile::default_chromedriver(),
        BrowserProfile::project(),
        BrowserProfile::packed(),
    ];
    let mut chosen = Vec::new();
    for name in names {
        let profile = known
            .iter()
            .find(|p| &p.name == name)
            .cloned()
            .ok_or_else(|| {
                format!("--profiles: unknown profile `{name}`; built-in profiles are `default`, `project` and `packed` (define others with --profile NAME=BASE --flag …)")
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
        return Err(
            "no profile to measure: give --profiles default,project,packed or --profile".into(),
        );
    }
    Ok(chosen)
}

/// `lean=project --in-process-gpu --no-zygote`: a base profile's flags plus more; a flag
/// written `-FLAG` (one dash, then the flag with its dashes) removes that base flag;
/// `per_browser=N` and `video_track=on|off` set the profile's packing and decode lever.
fn parse_custom(definition: &str, known: &[BrowserProfile]) -> Result<BrowserProfile, String> {
    let usage = "expected NAME=BASE --flag … [per_browser=N] [video_track=on|off], e.g. `lean=project --in-process-gpu`";
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
    let mut profile = BrowserProfile {
        name: name.to_string(),
        ..base.clone()
    };
    let flags = &mut profile.flags;
    for word in words {
        if let Some(n) = word.strip_prefix("per_browser=") {
            profile.per_browser = n
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_PER_BROWSER).contains(n))
                .ok_or_else(|| {
                    format!("--profile {definition:?}: `{word}`: per_browser takes 1 to {MAX_PER_BROWSER}")
                })?;
        } else if let Some(v) = word.strip_prefix("video_track=") {
            profile.no_video_track = match v {
                "off" => true,
                "on" => false,
                _ => {
                    return Err(format!(
                        "--profile {definition:?}: `{word}`: video_track takes `on` (decode video) or `off` (the decode lever)"
                    ))
                }
            };
        } else if let Some(removed) = word.strip_prefix("-").filter(|w| w.starts_with("--")) {
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
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::scenario::CHROMIUM_FLAGS;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn built_in_profiles_in_the_order_given() {
        let got = resolve(&names(&["project", "default"]), &[]).unwrap();
        assert_eq!(got[0], BrowserProfile::project());
        assert_eq!(got[1], BrowserProfile::default_chromedriver());
        let packed = &resolve(&names(&["packed"]), &[]).unwrap()[0];
        assert_eq!(
            (packed.per_browser, packed.no_video_track),
            (PACKED_PER_BROWSER, true)
        );
        assert_eq!(packed.flags, BrowserProfile::project().flags);
        assert!(!BrowserProfile::default_chromedriver().no_video_track);
    }

    #[test]
    fn custom_profiles_set_packing_and_the_decode_lever() {
        let got = resolve(
            &[],
            &names(&[
                "eight=packed per_browser=8",
                "decoding=project video_track=on",
            ]),
        )
        .unwrap();
        assert_eq!((got[0].per_browser, got[0].no_video_track), (8, true));
        assert_eq!((got[1].per_browser, got[1].no_video_track), (1, false));
        assert_eq!(got[1].levers(), "a browser each, decoding video");
        assert_eq!(got[0].levers(), "8 per browser, video track off");
        let err = |defs: &[&str]| resolve(&[], &names(defs)).unwrap_err();
        assert!(err(&["x=project per_browser=0"]).contains("per_browser takes 1 to 16"));
        assert!(err(&["x=project per_browser=many"]).contains("per_browser takes 1 to 16"));
        assert!(err(&["x=project video_track=maybe"]).contains("video_track takes `on`"));
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
    fn a_profile_is_named_again_by_its_calibrate_arguments() {
        for profile in [
            BrowserProfile::default_chromedriver(),
            BrowserProfile::packed(),
        ] {
            assert_eq!(profile.cli_args(), ["--profiles", profile.name.as_str()]);
        }
        let custom = resolve(
            &[],
            &names(&["lean=packed ---window-size=640,360 --in-process-gpu per_browser=8"]),
        )
        .unwrap()
        .remove(0);
        let args = custom.cli_args();
        assert_eq!(args[..3], ["--profiles", "default", "--profile"]);
        let again = resolve(&names(&["default"]), &args[3..]).unwrap();
        let sorted = |p: &BrowserProfile| {
            let mut flags = p.flags.clone();
            flags.sort();
            (p.name.clone(), flags, p.no_video_track, p.per_browser)
        };
        assert_eq!(sorted(&again[1]), sorted(&custom));
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
