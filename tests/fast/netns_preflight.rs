//! Without root or without `ip`, slot set-up stops with an error that says what is needed,
//! both in the script a cloud node runs and in the fleet.

use std::process::Command;
use viewerfleet::netns::slots::SLOT_SCRIPT;

fn run_script(path_env: &str, as_nobody: bool) -> (i32, String) {
    let mut command = if as_nobody {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/bin/bash",
        ]);
        c
    } else {
        Command::new("/bin/bash")
    };
    let out = command
        .args([
            "-c",
            SLOT_SCRIPT,
            "viewer-slots.sh",
            "up",
            "--prefix",
            "fd00:74::/64",
            "--count",
            "1",
        ])
        .env("PATH", path_env)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn script_without_root_says_so() {
    let (code, stderr) = run_script("/usr/sbin:/usr/bin:/sbin:/bin", true);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("must run as root"), "{stderr}");
}

#[test]
fn script_without_ip_names_iproute2() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/usr/bin/id", dir.path().join("id")).unwrap();
    let (code, stderr) = run_script(&dir.path().to_string_lossy(), false);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("'ip' not found: install iproute2"),
        "{stderr}"
    );
}

#[test]
fn script_rejects_bad_input_with_the_flag_name() {
    let out = Command::new("/bin/bash")
        .args([
            "-c",
            SLOT_SCRIPT,
            "viewer-slots.sh",
            "up",
            "--prefix",
            "10.0.0.0/8",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--prefix must be an IPv6 prefix"),
        "{stderr}"
    );
    let out = Command::new("/bin/bash")
        .args([
            "-c",
            SLOT_SCRIPT,
            "viewer-slots.sh",
            "sideways",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("up, down or status"), "{stderr}");
}
