//! The Chromium wrapper: ChromeDriver stays in the root namespace and starts this script
//! as its "browser binary"; the script enters the viewer's slot and execs the real
//! Chromium there. DevTools then runs over `--remote-debugging-pipe` (a pipe crosses
//! namespaces, a TCP port would not).

use std::path::{Path, PathBuf};

/// Writes `<dir>/chromium-<ns>` (mode 0755) that runs `chromium` inside namespace `ns`.
pub fn write_chromium_wrapper(
    dir: &Path,
    ns: &str,
    ip: &Path,
    chromium: &Path,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("chromium-{ns}"));
    let script = format!(
        "#!/bin/sh\n# viewerfleet: run Chromium inside network namespace {ns}\nexec {} netns exec {ns} {} \"$@\"\n",
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
pub fn slot_chromium_args(target_origin: &str) -> Vec<String> {
    vec![
        "--remote-debugging-pipe".into(),
        format!("--unsafely-treat-insecure-origin-as-secure={target_origin}"),
    ]
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
        assert!(text.contains(
            "exec '/usr/sbin/ip' netns exec vf12ab-3 '/usr/lib/chromium/chromium' \"$@\""
        ));
        assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    }
}
