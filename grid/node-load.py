#!/usr/bin/env python3
"""viewerfleet node load endpoint: CPU, memory and browsers (their user, sandbox) of a Grid
node's machine as Prometheus text (0.0.4) on GET /metrics, which the controller samples
during a run (a starved browser falls back from P2P to HTTP). Named in the node's stereotype
("viewerfleet:load"); run by `viewerfleet grid up --local` (one per node, on 127.0.0.1:0:
the URL is stdout's first line) and on cloud nodes by viewerfleet-load.service.
--allow ADDR|CIDR,…: the only clients (others get 403). --cgroup PATH|auto|none: the
browsers' cgroup, v2 or v1 cpu (v1 reads cpuacct and cgroup2 at the same path). --once:
print one exposition. Standard library only; an unreadable file leaves its metric out.
"""

import argparse
import http.server
import ipaddress
import os
import pwd
import socket
import sys

TCK = os.sysconf("SC_CLK_TCK")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, ValueError):
        return None


def keyed(text):
    """`key value` lines (cpu.stat, meminfo) as numbers."""
    out = {}
    for line in (text or "").splitlines():
        f = line.replace(":", " ").split()
        try:
            out[f[0]] = float(f[1])
        except (IndexError, ValueError):
            pass
    return out


def mounts():
    """(mount point, fs type, options) of the cgroup mounts."""
    out = []
    for line in (read("/proc/self/mountinfo") or "").splitlines():
        a, _, b = line.partition(" - ")
        a, b = a.split(), b.split()
        if len(a) >= 5 and len(b) >= 3 and b[0] in ("cgroup", "cgroup2"):
            out.append((a[4].replace("\\040", " "), b[0], set(b[2].split(","))))
    return out


class Cgroup:
    def __init__(self, path):
        ms = mounts()
        v2 = [m[0] for m in ms if m[1] == "cgroup2"]
        cpu = [m[0] for m in ms if m[1] == "cgroup" and "cpu" in m[2]]
        acct = [m[0] for m in ms if m[1] == "cgroup" and "cpuacct" in m[2]]
        if path == "auto":
            for _, ctl, rel in (l.split(":", 2) for l in (read("/proc/self/cgroup") or "").splitlines()):
                if (cpu and "cpu" in ctl.split(",")) or (not cpu and v2 and ctl == ""):
                    path = os.path.join((cpu or v2)[0], rel.lstrip("/"))
        owner = max((m for m in ms if (path + "/").startswith(m[0].rstrip("/") + "/")),
                    key=lambda m: len(m[0]), default=None)
        if owner is None or (owner[1] == "cgroup" and "cpu" not in owner[2]):
            raise SystemExit("--cgroup %s: neither a cgroup v2 nor a v1 cpu cgroup" % path)
        rel = path[len(owner[0]):].strip("/")
        self.path, self.v2 = path, owner[1] == "cgroup2"
        # v1: usage from cpuacct, pressure from a cgroup2 hierarchy, at the same path.
        self.acct = path if "cpuacct" in owner[2] else acct and os.path.join(acct[0], rel)
        if self.v2:
            self.psi = os.path.join(path, "cpu.pressure")
        else:
            self.psi = v2 and os.path.join(v2[0], rel, "cpu.pressure")

    def file(self, name):
        return read(os.path.join(self.path, name))

    def quota(self):
        if self.v2:
            f = (self.file("cpu.max") or "max").split()
            return None if f[0] == "max" else int(f[0]) / int(f[1])
        q, p = self.file("cpu.cfs_quota_us"), self.file("cpu.cfs_period_us")
        return int(q) / int(p) if q and p and int(q) > 0 else None

    def usage(self, stat):
        if self.v2:
            return stat["usage_usec"] / 1e6 if "usage_usec" in stat else None
        u = self.acct and read(os.path.join(self.acct, "cpuacct.usage"))
        if u:
            return int(u) / 1e9
        # No cpuacct: the CPU time of the processes in it now (exited ones are lost).
        return sum(cpu_seconds(p) for p in self.pids())

    def pids(self):
        return {int(p) for d, _, _ in os.walk(self.path)
                for p in (read(os.path.join(d, "cgroup.procs")) or "").split()}


def cpu_seconds(pid):
    f = (read("/proc/%d/stat" % pid) or ")").rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TCK if len(f) > 12 else 0.0


def pressure(path):
    for line in (read(path) or "").splitlines():
        if line.startswith("some ") and "total=" in line:
            return int(line.rsplit("total=", 1)[1].split()[0]) / 1e6
    return None


def exposition(cg, comm):
    out = []

    def add(name, kind, text, *series):
        series = [(l, v) for l, v in series if v is not None]
        if series:
            out.append("# HELP %s %s\n# TYPE %s %s" % (name, text, name, kind))
            out.extend("%s%s %r" % (name, "{%s}" % l if l else "", float(v)) for l, v in series)

    j = [int(v) for v in (read("/proc/stat") or "cpu").split("\n", 1)[0].split()[1:]]
    if len(j) >= 8:
        idle = j[3] + j[4]
        add("viewerfleet_node_cpu_seconds_total", "counter",
            "CPU time of all cores; busy: all but idle and iowait (steal included).",
            ('mode="busy"', (sum(j[:8]) - idle) / TCK), ('mode="steal"', j[7] / TCK),
            ('mode="idle"', idle / TCK))
    add("viewerfleet_node_cpus", "gauge", "Online CPUs.", ("", os.sysconf("SC_NPROCESSORS_ONLN")))
    psi = None
    if cg and os.path.isdir(cg.path):
        stat = keyed(cg.file("cpu.stat"))
        add("viewerfleet_node_cgroup_cpu_quota_cores", "gauge", "CPU quota of the browsers' cgroup, cores.",
            ("", cg.quota()))
        add("viewerfleet_node_cgroup_cpu_usage_seconds_total", "counter", "CPU time of the browsers' cgroup.",
            ("", cg.usage(stat)))
        add("viewerfleet_node_cgroup_cpu_periods_total", "counter", "Quota periods with runnable tasks.",
            ("", stat.get("nr_periods")))
        add("viewerfleet_node_cgroup_cpu_throttled_periods_total", "counter", "Periods that used up the quota.",
            ("", stat.get("nr_throttled")))
        psi = cg.psi and pressure(cg.psi)
    add("viewerfleet_node_cpu_pressure_seconds_total", "counter",
        "Time some task waited for a CPU (PSI).",
        ('scope="cgroup"', psi) if psi is not None else ('scope="machine"', pressure("/proc/pressure/cpu")))
    mem = {k: v * 1024 for k, v in keyed(read("/proc/meminfo")).items()}
    add("viewerfleet_node_memory_total_bytes", "gauge", "Memory.", ("", mem.get("MemTotal")))
    add("viewerfleet_node_memory_available_bytes", "gauge", "MemAvailable.", ("", mem.get("MemAvailable")))
    add("viewerfleet_node_load1", "gauge", "Load average, 1 minute.", ("", os.getloadavg()[0]))
    if cg:
        pids = cg.pids() if os.path.isdir(cg.path) else set()
    else:
        pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    browsers = [p for p in pids if (read("/proc/%d/comm" % p) or "").strip() == comm]
    pss = [keyed(read("/proc/%d/smaps_rollup" % p)).get("Pss") for p in browsers]
    pss = [kb for kb in pss if kb is not None]
    where = " in the cgroup" if cg else ""
    add("viewerfleet_node_browsers_pss_bytes", "gauge", "PSS of the browser processes" + where + ".",
        ("", sum(pss) * 1024))
    add("viewerfleet_node_browser_processes", "gauge", "Browser processes" + where + ".", ("", len(pss)))
    ways = {}
    for w in filter(None, map(isolation, browsers)):
        ways[w] = ways.get(w, 0) + 1
    add("viewerfleet_node_browsers", "gauge", "Browsers (top-level processes)" + where + " by user and sandbox"
        " (off: --no-sandbox).", *(('user="%s",sandbox="%s"' % w, n) for w, n in sorted(ways.items())))
    return "\n".join(out) + "\n"


def isolation(pid):
    """(user, on|off) of a browser: real uid, --no-sandbox; None for a helper (--type=)."""
    argv = (read("/proc/%d/cmdline" % pid) or "").replace("\0", " ").split()  # helpers rewrite it
    uid = [l.split()[1] for l in (read("/proc/%d/status" % pid) or "").splitlines() if l[:4] == "Uid:"]
    if not argv or not uid or any(a.startswith("--type=") for a in argv):
        return None
    try:
        user = pwd.getpwuid(int(uid[0])).pw_name.replace("\\", "\\\\").replace('"', '\\"')
    except KeyError:
        user = uid[0]
    return user, "off" if "--no-sandbox" in argv else "on"


def serve(args, cg, allowed):
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    v6 = ":" in host

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, code, body, kind="text/plain; charset=utf-8"):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self):
            a = ipaddress.ip_address(self.client_address[0].split("%")[0])
            a = getattr(a, "ipv4_mapped", None) or a
            if not any(a in n for n in allowed):
                return self.answer(403, "forbidden: for the controller only\n")
            if self.command != "GET" or self.path.split("?")[0] != "/metrics":
                return self.answer(404, "not found: GET /metrics\n")
            try:
                body = exposition(cg, args.browser_comm)
            except Exception as e:  # a bug must not take the endpoint down
                return self.answer(500, "reading the node's load: %r\n" % e)
            self.answer(200, body, "text/plain; version=0.0.4; charset=utf-8")

        do_HEAD = do_POST = do_PUT = do_DELETE = do_GET

        def log_message(self, *_):
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if v6 else socket.AF_INET
        daemon_threads = True

    server = Server((host, int(port)), Handler)
    h, p = server.server_address[:2]
    print("http://%s:%d/metrics" % ("[%s]" % h if v6 else h, p), flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the parent may stop reading stdout
    server.serve_forever()


def main():
    ap = argparse.ArgumentParser(description="viewerfleet node load endpoint")
    ap.add_argument("--listen", default="127.0.0.1:9465")
    ap.add_argument("--allow", default="127.0.0.0/8,::1")
    ap.add_argument("--cgroup", default="none")
    ap.add_argument("--browser-comm", default="chromium")
    ap.add_argument("--once", action="store_true")
    args = ap.parse_args()
    try:
        allowed = [ipaddress.ip_network(a.strip(), strict=False) for a in args.allow.split(",") if a.strip()]
    except ValueError as e:
        ap.error("--allow: %s" % e)
    cg = None if args.cgroup == "none" else Cgroup(args.cgroup)
    if args.once:
        sys.stdout.write(exposition(cg, args.browser_comm))
    else:
        serve(args, cg, allowed)


if __name__ == "__main__":
    main()
