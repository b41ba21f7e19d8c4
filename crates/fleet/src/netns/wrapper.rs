//! The Chromium wrapper: ChromeDriver stays in the root namespace and starts this script
//! as its "browser binary"; the script enters the viewer's slot and execs the real
//! Chromium there, as a user of its own and with Chromium's sandbox where the kernel allows
//! it (`browser_exec`, the same shell code as a Grid node's `grid/slot-chromium.sh`).
//! DevTools then runs over `--remote-debugging-pipe` (a pipe crosses namespaces and users,
//! a TCP port would not).

use crate::model::isolation::BrowserIsolation;
use std::path::{Path, PathBuf};

/// The shell functions that start a slot's Chromium (`browser_exec`) and say how it runs
/// (`browser_isolation`): the block of `grid/slot-chromium.sh` between its markers, so a
/// Grid node's browsers and the netns fleet's start alike.
pub(crate) fn browser_exec_block() -> &'static str {
    const SCRIPT: &str = include_str!("../../../../grid/slot-chromium.sh");
    const START: &str = "# >>> browser_exec";
    const END: &str = "# <<< browser_exec\n";
    let from = SCRIPT
        .find(START)
        .expect("slot-chromium.sh holds the browser_exec block");
    let to = SCRIPT[from..].find(END).expect("the block ends") + from + END.len();
    &SCRIPT[from..to]
}

/// Writes `<dir>/chromium-<ns>` (mode 0755) that runs `chromium` inside namespace `ns`.
pub(crate) fn write_chromium_wrapper(
    dir: &Path,
    ns: &str,
    ip: &Path,
    chromium: &Path,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("chromium-{ns}"));
    let script = format!(
        "#!/bin/sh\n# viewerfleet: run Chromium inside network namespace {ns}\nset -u\n{}browser_exec {} {ns} {} \"$@\"\n",
        browser_exec_block(),
        shell_quote(&ip.to_string_lossy()),
        shell_quote(&chromium.to_string_lossy()),
    );
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Chromium arguments a slot's browser needs: DevTools over a pipe, and the target's
/// plain-HTTP origin treated as secure (the P2P loader needs `crypto.subtle`).
pub(crate) fn slot_chromium_args(target_origin: &str) -> Vec<String> {
    vec![
        "--remote-debugging-pipe".into(),
        format!("--unsafely-treat-insecure-origin-as-secure={target_origin}"),
    ]
}

/// How a slot's browsers will run on this machine, asked of the same shell code (as root it
/// makes the browser user on first use). `None` when the shell cannot answer.
pub fn probe_isolation() -> Option<BrowserIsolation> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{}browser_isolation", browser_exec_block()))
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_isolation(&String::from_utf8_lossy(&out.stdout))
}

/// `user=<name> own=yes|no sandbox=on|off` (`own` follows from the user's name).
fn parse_isolation(line: &str) -> Option<BrowserIsolation> {
    let (mut user, mut sandbox) = (None, None);
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some(("user", u)) if !u.is_empty() => user = Some(u.to_string()),
            Some(("sandbox", s)) => sandbox = Some(s == "on"),
            _ => {}
        }
    }
    Some(BrowserIsolation {
        user: user?,
        sandbox: sandbox?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_execs_chromium_in_the_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_chromium_wrapper(
            dir.path(),
            "vf12ab-3",
            Path::new("/usr/sbin/ip"),
            Path::new("/usr/lib/chromium/chromium"),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text
            .contains("browser_exec '/usr/sbin/ip' vf12ab-3 '/usr/lib/chromium/chromium' \"$@\""));
        assert!(text.contains("browser_exec() {") && text.contains("setpriv --reuid"));
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
        let syntax = std::process::Command::new("sh")
            .arg("-n")
            .arg(&path)
            .status()
            .unwrap();
        assert!(syntax.success(), "{text}");
    }

    #[test]
    fn isolation_is_read_from_the_wrappers_own_words() {
        let on = parse_isolation("user=viewerfleet-browser own=yes sandbox=on\n").unwrap();
        assert!(on.sandbox && on.own_user());
        assert!(on.sentence().contains("with Chromium's sandbox"));
        let off = parse_isolation("user=viewerfleet-browser own=yes sandbox=off").unwrap();
        assert!(off
            .sentence()
            .contains("without Chromium's sandbox: this kernel"));
        let theirs = parse_isolation("user=ann own=no sandbox=off").unwrap();
        assert!(theirs.sentence().contains("controller's user (ann)"));
        assert!(parse_isolation("user= own=yes sandbox=on").is_none());
        assert!(parse_isolation("").is_none());
    }
}
