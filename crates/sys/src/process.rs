//! Child processes, started and stopped one way everywhere: each dies with the controller
//! (`PR_SET_PDEATHSIG`, so even `kill -9` of viewerfleet takes it down), and stopping is
//! SIGTERM, a grace period, then SIGKILL — to the process or to its whole group, so
//! browsers that outlived their driver go too.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Makes `cmd`'s process receive `signal` when this process dies.
pub fn die_with_parent(cmd: &mut std::process::Command, signal: Signal) {
    use std::os::unix::process::CommandExt;
    // Unsafe only because code runs in the child between fork and exec, and std has no
    // safe way to run any (nor a setting for the parent-death signal); the call itself is
    // nix's safe prctl(2), which is async-signal-safe.
    // SAFETY: only the async-signal-safe prctl(2) runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from));
    }
}

/// What `terminate` signals: the process alone, or its process group (started with
/// `process_group(0)`, so the group id is its PID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Process,
    Group,
}

fn signal(pid: u32, scope: Scope, sig: Signal) {
    let raw = pid as i32;
    let target = match scope {
        Scope::Process => Pid::from_raw(raw),
        Scope::Group => Pid::from_raw(-raw),
    };
    let _ = kill(target, sig);
}

/// Stops a child of ours: SIGTERM, up to `grace` for it to exit, then SIGKILL; with
/// `Scope::Group`, whatever is left of its group is killed as well. Reaps the child.
pub async fn terminate(child: &mut tokio::process::Child, scope: Scope, grace: Duration) {
    let Some(pid) = child.id() else {
        return; // already reaped
    };
    signal(pid, scope, Signal::SIGTERM);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tracing::warn!("process {pid} did not stop within {grace:?}; killing it");
        signal(pid, scope, Signal::SIGKILL);
        let _ = child.wait().await;
    }
    if scope == Scope::Group {
        signal(pid, scope, Signal::SIGKILL);
    }
}

/// As `terminate`, for a process group we hold no handle for (e.g. one started by an
/// earlier `viewerfleet grid up`); reaps the leader if it is our child.
pub async fn terminate_group(pgid: u32, grace: Duration) {
    signal(pgid, Scope::Group, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        reap(pgid);
        if !alive(pgid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    kill_group(pgid);
}

/// SIGKILL to a whole process group, at once (a node killed on purpose, a leftover).
pub fn kill_group(pgid: u32) {
    signal(pgid, Scope::Group, Signal::SIGKILL);
    reap(pgid);
}

/// SIGKILL to one process (a leftover of a dead controller).
pub fn kill_process(pid: u32) {
    signal(pid, Scope::Process, Signal::SIGKILL);
}

/// Alive and not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Collects the exit status if the process is our child.
fn reap(pid: u32) {
    use nix::sys::wait::{waitpid, WaitPidFlag};
    let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_escalates_to_sigkill_after_the_grace() {
        // A shell that ignores SIGTERM: only SIGKILL ends it.
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 1; done"])
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        terminate(&mut child, Scope::Process, Duration::from_millis(200)).await;
        assert!(!alive(pid));
        assert!(child.try_wait().unwrap().is_some());
    }

    #[tokio::test]
    async fn terminate_takes_the_whole_group() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0);
        use std::os::unix::process::CommandExt;
        let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
        let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        tokio::io::AsyncBufReadExt::read_line(&mut out, &mut line)
            .await
            .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        assert!(alive(grandchild));
        terminate(&mut child, Scope::Group, Duration::from_secs(5)).await;
        // The grandchild is not ours to reap; it is gone or a zombie waiting for init.
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive(grandchild));
    }
}
