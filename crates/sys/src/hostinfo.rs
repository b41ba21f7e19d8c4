//! Host facts (CPU, memory, kernel, tool versions) for manifests, and resource samples from
//! procfs during a run: the load generator's CPU must be watched, or a saturated generator
//! passes for a saturated server.

use crate::model::rawdata::HostInfo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

pub fn host_info() -> HostInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_default();
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_default();
    HostInfo {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_string(),
        cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        cpu_model,
        mem_total_bytes: meminfo().0,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        os,
    }
}

/// Versions of the external programs a run depends on (first line of `--version`).
pub fn tool_versions(programs: &[(&str, &str, &[&str])]) -> BTreeMap<String, String> {
    programs
        .iter()
        .filter_map(|(name, program, args)| {
            let out = Command::new(program).args(*args).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let first = text.lines().next()?.trim().to_string();
            Some((name.to_string(), first))
        })
        .collect()
}

/// The source tree this binary was built from, when the running binary still lies in it
/// (`target/…` below it) or in the build's own target folder (`CARGO_TARGET_DIR` elsewhere).
/// A copied or installed binary has none: it never takes files, or a git commit, from a
/// build tree that may have moved on or gone.
pub fn source_tree() -> Option<&'static Path> {
    static TREE: LazyLock<Option<PathBuf>> = LazyLock::new(|| {
        let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
        tree_of(&exe)
    });
    TREE.as_deref()
}

/// [`source_tree`] for a binary at `exe` (a canonical path).
pub fn tree_of(exe: &Path) -> Option<PathBuf> {
    // This crate lies in `crates/sys` of the workspace.
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2)?;
    // OUT_DIR is `<target>/<profile>/build/<crate>-<hash>/out`.
    let profile_dir = Path::new(env!("OUT_DIR")).ancestors().nth(3);
    let inside = |dir: &Path| dir.canonicalize().is_ok_and(|d| exe.starts_with(d));
    (inside(tree) || profile_dir.is_some_and(inside)).then(|| tree.to_path_buf())
}

/// The git commit of the source tree this binary runs from (see [`source_tree`]), if that
/// is a checkout.
pub fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(source_tree()?)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// (total, available) memory in bytes.
pub fn meminfo() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|l| l.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("MemTotal:"), field("MemAvailable:"))
}

/// Busy and steal shares of all cores between two reads of `/proc/stat`.
#[derive(Debug, Default)]
pub struct CpuMeter {
    last: Option<CpuTotals>,
}

/// What the cores did between two reads, as shares of the time, 0..=1.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuShares {
    /// Running anything (user, system, interrupts), steal included: the share a
    /// guest could not give to its own work.
    pub busy: f64,
    /// Taken by the hypervisor for other guests.
    pub steal: f64,
}

impl CpuMeter {
    /// Returns the shares since the previous call (None on the first call).
    pub fn sample(&mut self) -> Option<CpuShares> {
        let now = read_cpu_totals()?;
        let previous = self.last.replace(now);
        now.since(&previous?)
    }
}

/// Jiffies over all cores, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct CpuTotals {
    busy: u64,
    steal: u64,
    total: u64,
}

impl CpuTotals {
    fn since(&self, before: &CpuTotals) -> Option<CpuShares> {
        let total = self.total.saturating_sub(before.total);
        (total > 0).then(|| CpuShares {
            busy: self.busy.saturating_sub(before.busy) as f64 / total as f64,
            steal: self.steal.saturating_sub(before.steal) as f64 / total as f64,
        })
    }
}

fn read_cpu_totals() -> Option<CpuTotals> {
    parse_cpu_totals(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn parse_cpu_totals(text: &str) -> Option<CpuTotals> {
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice (guest time is
    // already counted in user and nice).
    let idle = values.get(3)? + values.get(4).unwrap_or(&0);
    let total: u64 = values.iter().take(8).sum();
    Some(CpuTotals {
        busy: total - idle,
        steal: values.get(7).copied().unwrap_or(0),
        total,
    })
}

/// The share of time at least one task waited for a CPU, between two reads of
/// `/proc/pressure/cpu` (Linux pressure stall information; absent on kernels without it).
/// Busy near 100% says the cores are used; pressure says work is kept waiting.
#[derive(Debug, Default)]
pub struct PressureMeter {
    last: Option<(u64, std::time::Instant)>,
}

impl PressureMeter {
    pub fn sample(&mut self) -> Option<f64> {
        let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
        let stalled_us = parse_pressure_some_total(&text)?;
        let now = std::time::Instant::now();
        let (before_us, before) = self.last.replace((stalled_us, now))?;
        let elapsed_us = now.duration_since(before).as_micros() as f64;
        (elapsed_us > 0.0)
            .then(|| (stalled_us.saturating_sub(before_us) as f64 / elapsed_us).clamp(0.0, 1.0))
    }
}

/// The `total=` (µs) of the `some` line of a pressure file.
fn parse_pressure_some_total(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with("some "))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

pub fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn clock_ticks() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as f64,
        _ => 100.0,
    }
}

/// CPU seconds (user + system) and RSS bytes of one process and all its descendants.
pub fn process_tree_usage(root: u32) -> Option<(f64, u64)> {
    let procs = all_processes();
    let members = tree_members(&procs, root);
    let mut cpu = 0.0;
    let mut rss = 0;
    let mut found = false;
    for p in procs.iter().filter(|p| members.contains(&p.pid)) {
        found = true;
        cpu += p.cpu_s;
        rss += p.rss_bytes;
    }
    found.then_some((cpu, rss))
}

/// Proportional set size of one process in bytes (`/proc/<pid>/smaps_rollup`): shared
/// pages are split among the processes that map them, so PSS sums over many browsers do
/// not count shared libraries many times the way RSS sums do.
pub fn pss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    parse_pss_kb(&text).map(|kb| kb * 1024)
}

fn parse_pss_kb(smaps_rollup: &str) -> Option<u64> {
    smaps_rollup.lines().find_map(|line| {
        let rest = line.strip_prefix("Pss:")?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Raises the open-files soft limit to the hard limit and returns it: every viewer holds
/// a WebDriver connection, and the common default of 1024 would stop a run near 1000.
pub fn raise_open_files_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    // An unlimited hard limit still stops at the kernel's nr_open.
    let ceiling = if hard == RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(soft)
    } else {
        hard
    };
    if soft < ceiling && setrlimit(Resource::RLIMIT_NOFILE, ceiling, hard).is_ok() {
        return ceiling;
    }
    soft
}

/// What a group of processes used: CPU seconds since the previous sample, PSS now, and
/// how many processes there are now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GroupUsage {
    pub cpu_s: f64,
    pub pss_bytes: u64,
    pub processes: u32,
}

/// Samples the processes whose command name is `comm` (e.g. `chromium`): all of them on the
/// host, and those running below `root` (the controller's own browsers, started by it or
/// its children). CPU is counted per process since the previous sample, so a process that
/// exits takes only its own time along, and one that started since counts from its start.
#[derive(Debug)]
pub struct ProcessGroupMeter {
    comm: String,
    root: u32,
    /// CPU seconds of every process of the group at the previous sample.
    previous: std::collections::HashMap<u32, f64>,
}

impl ProcessGroupMeter {
    /// A meter whose first sample counts CPU from now.
    pub fn new(comm: &str, root: u32) -> Self {
        let previous = all_processes()
            .into_iter()
            .filter(|p| p.comm == comm)
            .map(|p| (p.pid, p.cpu_s))
            .collect();
        Self {
            comm: comm.to_string(),
            root,
            previous,
        }
    }

    /// `(all of the group, the group below root)` since the previous sample.
    pub fn sample(&mut self) -> (GroupUsage, GroupUsage) {
        self.sample_in(&process_table())
    }

    /// [`Self::sample`] from a table read once for several meters.
    pub fn sample_in(&mut self, table: &ProcessTable) -> (GroupUsage, GroupUsage) {
        let procs = &table.0;
        let below: std::collections::HashSet<u32> =
            tree_members(procs, self.root).into_iter().collect();
        let (mut all, mut own) = (GroupUsage::default(), GroupUsage::default());
        let mut now = std::collections::HashMap::new();
        for p in procs.iter().filter(|p| p.comm == self.comm) {
            let cpu = (p.cpu_s - self.previous.get(&p.pid).copied().unwrap_or(0.0)).max(0.0);
            let pss = pss_bytes(p.pid).unwrap_or(0);
            now.insert(p.pid, p.cpu_s);
            for (usage, member) in [(&mut all, true), (&mut own, below.contains(&p.pid))] {
                if member {
                    usage.cpu_s += cpu;
                    usage.pss_bytes += pss;
                    usage.processes += 1;
                }
            }
        }
        self.previous = now;
        (all, own)
    }
}

/// The host's processes at one moment, read once and shared by several
/// [`ProcessGroupMeter`]s (a walk of /proc per meter per sample is the same work twice).
#[derive(Debug)]
pub struct ProcessTable(Vec<ProcStat>);

/// Reads the host's processes.
pub fn process_table() -> ProcessTable {
    ProcessTable(all_processes())
}

#[derive(Debug)]
struct ProcStat {
    pid: u32,
    ppid: u32,
    comm: String,
    cpu_s: f64,
    rss_bytes: u64,
}

/// `root` and every process below it.
fn tree_members(procs: &[ProcStat], root: u32) -> Vec<u32> {
    let mut members = vec![root];
    let mut i = 0;
    while i < members.len() {
        let parent = members[i];
        members.extend(procs.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
        i += 1;
    }
    members
}

fn all_processes() -> Vec<ProcStat> {
    let ticks = clock_ticks();
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096)
        .max(4096) as u64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(pid, &stat, ticks, page)
    })
    .collect()
}

fn parse_stat(pid: u32, stat: &str, ticks: f64, page: u64) -> Option<ProcStat> {
    // The command name is in parentheses and may itself hold spaces or parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    // fields[0] is state (field 3); utime is field 14, stime 15, rss 24.
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let rss_pages: u64 = fields.get(21)?.parse().ok()?;
    Some(ProcStat {
        pid,
        ppid,
        comm,
        cpu_s: (utime + stime) / ticks,
        rss_bytes: rss_pages * page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_meter_tells_the_processes_below_its_root_from_the_rest() {
        // A process of the group below this test process, and one that is not (its parent
        // is a shell that exits, so it is re-parented away from this process).
        let mut mine = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let theirs = std::process::Command::new("sh")
            .args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
            .output()
            .unwrap();
        let theirs: i32 = String::from_utf8_lossy(&theirs.stdout)
            .trim()
            .parse()
            .unwrap();
        let mut meter = ProcessGroupMeter::new("sleep", std::process::id());
        let (all, own) = meter.sample();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(theirs),
            nix::sys::signal::Signal::SIGKILL,
        );
        mine.kill().unwrap();
        mine.wait().unwrap();
        assert!(own.processes >= 1, "{own:?}");
        assert!(all.processes > own.processes, "{all:?} {own:?}");
        assert!(
            own.pss_bytes > 0 && all.pss_bytes >= own.pss_bytes,
            "{all:?} {own:?}"
        );
        assert!(
            own.cpu_s >= 0.0 && all.cpu_s >= own.cpu_s,
            "{all:?} {own:?}"
        );
    }

    #[test]
    fn pss_is_read_from_smaps_rollup() {
        let text = "55d0-7ffe ---p 00000000 00:00 0  [rollup]\nRss:              204800 kB\nPss:               51234 kB\nPss_Anon:          40000 kB\n";
        assert_eq!(parse_pss_kb(text), Some(51234));
        assert_eq!(parse_pss_kb("Rss: 1 kB\n"), None);
        // This process exists and maps something.
        assert!(pss_bytes(std::process::id()).is_some_and(|b| b > 0));
    }

    #[test]
    fn the_open_files_limit_is_the_hard_limit_after_raising() {
        use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
        let raised = raise_open_files_limit();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(raised, soft);
        assert!(hard == RLIM_INFINITY || soft == hard);
    }

    #[test]
    fn stat_with_odd_command_name() {
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 100 1000 25 18446744073709551615";
        let p = parse_stat(42, line, 100.0, 4096).unwrap();
        assert_eq!(p.comm, "a (b) c");
        assert_eq!(p.ppid, 7);
        assert!((p.cpu_s - 3.0).abs() < 1e-9);
        assert_eq!(p.rss_bytes, 25 * 4096);
    }

    #[test]
    fn own_process_is_measured() {
        let (cpu, rss) = process_tree_usage(std::process::id()).unwrap();
        assert!(cpu >= 0.0 && rss > 0);
        let mut meter = CpuMeter::default();
        assert!(meter.sample().is_none());
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        let shares = meter.sample();
        assert!(shares.is_none_or(|s| (0.0..=1.0).contains(&s.busy) && s.steal <= s.busy));
    }

    #[test]
    fn steal_is_counted_as_busy_and_apart() {
        let before = parse_cpu_totals("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n").unwrap();
        let after = parse_cpu_totals("cpu  200 0 100 1000 10 0 5 135 20 0\n").unwrap();
        let shares = after.since(&before).unwrap();
        // 450 jiffies: 100 user + 50 system + 100 steal busy, 200 idle.
        assert!((shares.busy - 250.0 / 450.0).abs() < 1e-9, "{shares:?}");
        assert!((shares.steal - 100.0 / 450.0).abs() < 1e-9, "{shares:?}");
        assert_eq!(before.since(&before), None);
    }

    #[test]
    fn pressure_total_is_read_from_the_some_line() {
        let text = "some avg10=23.57 avg60=11.54 avg300=3.91 total=14422725\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_pressure_some_total(text), Some(14422725));
        assert_eq!(parse_pressure_some_total("full total=3\n"), None);
    }
}
