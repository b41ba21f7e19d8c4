//! `gc` removes only leftovers: project-prefixed slot groups whose owner is dead (or
//! unrecorded), never groups whose run is alive, never manual ones, never foreign names.
//! Needs root and iproute2. Names carry this test's PID so nothing else is touched.

use std::process::Command;
use viewerfleet::model::scenario::LinkProfile;
use viewerfleet::netns::gc::gc_local;
use viewerfleet::netns::slots::SlotNetwork;

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn namespaces() -> Vec<String> {
    ip(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn gc_removes_only_dead_project_leftovers() {
    let tag = format!("vf{:04x}", std::process::id() & 0xffff);
    let bash = std::path::PathBuf::from("/bin/bash");
    let mut child = Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    let dead = SlotNetwork::new(
        "fd00:71::/64",
        &format!("{tag}a-"),
        bash.clone(),
        Some(dead_pid),
    )
    .unwrap();
    let alive = SlotNetwork::new(
        "fd00:72::/64",
        &format!("{tag}b-"),
        bash.clone(),
        Some(std::process::id()),
    )
    .unwrap();
    let manual = SlotNetwork::new("fd00:73::/64", &format!("{tag}c-"), bash, None).unwrap();
    let foreign_ns = format!("x{tag}gc");
    let foreign_link = format!("x{tag}d");

    let link = LinkProfile {
        download_kbps: Some(1000),
        upload_kbps: Some(500),
        latency_ms: None,
    };
    dead.up(0, 2, link).await.unwrap();
    alive.up(0, 1, link).await.unwrap();
    manual.up(0, 1, LinkProfile::UNLIMITED).await.unwrap();
    ip(&["netns", "add", &foreign_ns]);
    let foreign_peer = format!("x{tag}e");
    ip(&[
        "link",
        "add",
        &foreign_link,
        "type",
        "veth",
        "peer",
        "name",
        &foreign_peer,
    ]);
    assert!(
        link_exists(&foreign_link),
        "could not make the foreign veth"
    );
    // A browser orphaned by the crash, still running inside the dead run's slot.
    let mut orphan = Command::new("ip")
        .args(["netns", "exec", &dead.ns_name(1), "sleep", "300"])
        .spawn()
        .unwrap();

    let result = std::panic::AssertUnwindSafe(async {
        let dry = gc_local(true, Some(&tag)).unwrap();
        assert_eq!(dry.len(), 3, "{dry:?}");
        let would_remove: Vec<_> = dry.iter().filter(|g| g.kept_because.is_none()).collect();
        assert_eq!(would_remove.len(), 1);
        assert_eq!(would_remove[0].group, format!("{tag}a-"));
        assert_eq!(would_remove[0].namespaces.len(), 2);
        assert!(would_remove[0].links.contains(&format!("{tag}a-br")));
        assert!(
            namespaces().contains(&dead.ns_name(0)),
            "a dry run removed something"
        );

        let done = gc_local(false, Some(&tag)).unwrap();
        let kept: Vec<_> = done.iter().filter_map(|g| g.kept_because.clone()).collect();
        assert!(kept.iter().any(|k| k.contains("alive")), "{kept:?}");
        assert!(kept.iter().any(|k| k.contains("manual")), "{kept:?}");
        let now = namespaces();
        assert!(!now.contains(&dead.ns_name(0)) && !now.contains(&dead.ns_name(1)));
        assert!(!link_exists(&format!("{tag}a-br")) && !link_exists(&format!("{tag}a-0h")));
        assert!(
            now.contains(&alive.ns_name(0)),
            "gc removed a live run's slot"
        );
        assert!(now.contains(&manual.ns_name(0)), "gc removed a manual slot");
        assert!(
            now.contains(&foreign_ns),
            "gc removed a namespace outside the project"
        );
        assert!(
            link_exists(&foreign_link),
            "gc removed a link outside the project"
        );
        let status = orphan.wait().unwrap();
        assert!(
            !status.success(),
            "the orphaned process in the leftover slot was not ended"
        );
    })
    .catch_unwind();
    use futures::FutureExt;
    let outcome = result.await;

    let _ = orphan.kill();
    let _ = orphan.wait();
    let _ = dead.down(0, 2).await;
    alive.down(0, 1).await.unwrap();
    manual.down(0, 1).await.unwrap();
    ip(&["netns", "del", &foreign_ns]);
    ip(&["link", "del", &foreign_link]);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
