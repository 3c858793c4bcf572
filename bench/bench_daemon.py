#!/usr/bin/env python3
"""bench_daemon: daemon-to-daemon goodput on loopback against the socket limit
and kernel TCP, side by side in one invocation.

Three workloads, each run --reps times (default 3), medians reported:

  daemon  two metarocd on 127.0.0.{1,2} (two planes), `metaroce-ctl perf`
          A -> B for --seconds (every message verified by B): goodput.
  udp     bench/udp_blast: UDP GSO sender -> UDP GRO + recvmmsg receiver,
          4168-byte datagrams (a MetaRoCE data packet: 72-byte header + 4096):
          the kernel's UDP ceiling on this host (UDP payload Gbit/s).
  tcp     iperf3 -M 4000 over loopback: kernel TCP at (about) the same MSS.

Beside each rate: CPU seconds per GiB delivered (median): both daemons'
CPU during the transfer (/proc), udp_blast's sender and receiver (wait4),
iperf3's own figures for its client and server.

Prints daemon/udp and daemon/tcp (ratios of the medians). The bar is
daemon/tcp >= 0.5, the goal >= 1.0: printed, never enforced (the exit status
is 0 when every run completed and the daemon's data verified, 1 otherwise).
A workload whose tool is missing (iperf3: scripts/install-deps.sh) is
reported as skipped.

  bench_daemon.py --build DIR [--reps N] [--seconds S] [--json] [--quick]
                  [--transport KEY=V,...] [--no-tcp]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# Daemons use BASE_PORT+1/+2, the blaster BASE_PORT+3, iperf3 BASE_PORT+4;
# from the pid, so that two invocations at once (two build trees) do not
# collide.
BASE_PORT = 20000 + (os.getpid() % 2000) * 5


def log(*a):
    print(*a, file=sys.stderr, flush=True)


GIB = float(1 << 30)


def proc_cpu(pid):
    """CPU seconds (user + system) a running process has used."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def wait_cpu(p, timeout):
    """Wait for a child; its CPU seconds (user + system, from wait4)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            p.kill()
            raise subprocess.TimeoutExpired(p.args, timeout)
        time.sleep(0.02)


def daemon_config(tmp, name, port, sports, extra=""):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"""service:
  port: {port}
  control_socket: {tmp}/{name}.sock
  app_socket: {tmp}/{name}.app.sock
  control_group: ""
  state_db: {tmp}/{name}.db
  log_level: warn
services:
  perf: true
planes:
  - name: plane0
    address: 127.0.0.1
    source_ports: {sports}
  - name: plane1
    address: 127.0.0.2
    source_ports: {sports}
""" + extra)
    return path


def run_daemon(build, seconds, extra=""):
    daemon = os.path.join(build, "daemon", "metarocd")
    ctl = os.path.join(build, "cli", "metaroce-ctl")
    tmp = tempfile.mkdtemp(prefix="bench-daemon.")
    procs = []
    try:
        for name, port, sports in (("a", BASE_PORT + 1, "50000-54999"),
                                   ("b", BASE_PORT + 2, "55000-59999")):
            cfg = daemon_config(tmp, name, port, sports, extra)
            procs.append(subprocess.Popen([daemon, "-c", cfg],
                                          stderr=open(os.path.join(tmp, name + ".log"), "w")))
        for name in ("a", "b"):
            for _ in range(200):
                if subprocess.run([ctl, "-s", f"{tmp}/{name}.sock", "status"],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"daemon {name} did not become ready")
        cpu0 = sum(proc_cpu(p.pid) for p in procs)
        r = subprocess.run([ctl, "-j", "-s", f"{tmp}/a.sock", "perf",
                            f"127.0.0.1:{BASE_PORT + 2}", "--seconds", str(seconds)],
                           capture_output=True, text=True, timeout=seconds + 60)
        cpu = sum(proc_cpu(p.pid) for p in procs) - cpu0
        if r.returncode != 0:
            raise RuntimeError("perf failed: " + (r.stderr or r.stdout).strip())
        res = json.loads(r.stdout)
        st = res.get("stats", res)
        out = {"gbps": float(res["goodput_gbps"]), "verified": bool(res.get("verified"))}
        # both daemons' CPU during the transfer, per GiB delivered
        nbytes = res.get("bytes") or res["goodput_gbps"] * 1e9 / 8 * seconds
        out["cpu_s"] = cpu
        out["cpu_s_per_gib"] = cpu / (nbytes / GIB) if nbytes else None
        for k in ("tx_pkts", "retx_pkts", "rto_count"):
            if isinstance(st, dict) and k in st:
                out[k] = st[k]
        return out
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run_udp(blast, seconds):
    port = str(BASE_PORT + 3)
    rx = subprocess.Popen([blast, "recv", port, str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("udp_blast receiver did not start")
        tx = subprocess.Popen([blast, "send", port, str(seconds), "4168"],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        cpu = wait_cpu(tx, seconds + 30)
        if tx.returncode != 0:
            raise RuntimeError("udp_blast sender failed: " + tx.stderr.read().strip())
        out = rx.stdout.read()
        cpu += wait_cpu(rx, seconds + 30)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    res = json.loads(out.strip().splitlines()[-1])
    gbps = float(res["gbps"])
    # sender and receiver, whole runs (the rate is measured over `seconds`)
    return {"gbps": gbps, "cpu_s": cpu,
            "cpu_s_per_gib": cpu / (gbps * 1e9 / 8 * seconds / GIB) if gbps else None}


def run_tcp(iperf3, seconds):
    port = str(BASE_PORT + 4)
    srv = subprocess.Popen([iperf3, "-s", "-1", "-p", port, "-B", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = None
        for _ in range(50):
            r = subprocess.run([iperf3, "-c", "127.0.0.1", "-p", port, "-M", "4000",
                                "-t", str(seconds), "-J"],
                               capture_output=True, text=True, timeout=seconds + 30)
            try:
                res = json.loads(r.stdout)
                end = res["end"]
                gbps = end["sum_received"]["bits_per_second"] / 1e9
            except (ValueError, KeyError):
                time.sleep(0.1)  # the server is not listening yet
                continue
            out = {"gbps": gbps}
            # iperf3's own CPU figures (percent of the run, user + system,
            # sender and receiver): as CPU seconds per GiB received
            cu = end.get("cpu_utilization_percent", {})
            secs = end["sum_received"].get("seconds") or seconds
            nbytes = end["sum_received"].get("bytes")
            if "host_total" in cu and "remote_total" in cu and nbytes:
                cpu = (cu["host_total"] + cu["remote_total"]) / 100 * secs
                out["cpu_s"] = cpu
                out["cpu_s_per_gib"] = cpu / (nbytes / GIB)
            return out
        raise RuntimeError("iperf3 failed: " + (r.stdout + r.stderr)[-300:])
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--blast", help="udp_blast binary (default BUILD/bench/udp_blast)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one 1-second run of each")
    ap.add_argument("--no-tcp", action="store_true")
    ap.add_argument("--transport", default="",
                    help="transport keys for both daemons' configuration, "
                         "e.g. burst_pkts=16,ack_every_pkts=16")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.seconds = 1, 1.0
    blast = a.blast or os.path.join(a.build, "bench", "udp_blast")
    iperf3 = None if a.no_tcp else shutil.which("iperf3")
    extra = ""
    if a.transport:
        extra = "transport:\n" + "".join(
            f"  {k.strip()}: {v.strip()}\n"
            for k, v in (kv.split("=", 1) for kv in a.transport.split(",")))
    work = [("daemon", lambda: run_daemon(a.build, a.seconds, extra)),
            ("udp", lambda: run_udp(blast, a.seconds))]
    if iperf3:
        work.append(("tcp", lambda: run_tcp(iperf3, a.seconds)))
    runs = {name: [] for name, _ in work}
    ok = True
    # Interleave the workloads so that a change in the host's load hits all.
    for rep in range(a.reps):
        for name, fn in work:
            try:
                r = fn()
            except Exception as e:  # a failed run is reported, not fatal
                log(f"bench_daemon: {name} run {rep + 1}: {e}")
                ok = False
                continue
            if name == "daemon" and not r.get("verified"):
                log(f"bench_daemon: daemon run {rep + 1}: data NOT verified")
                ok = False
            runs[name].append(r)
            cpu = r.get("cpu_s_per_gib")
            log(f"  {name:6} run {rep + 1}/{a.reps}: {r['gbps']:.3f} Gbit/s" +
                (f", {cpu:.2f} CPU s/GiB" if cpu is not None else ""))
    med = {k: statistics.median(x["gbps"] for x in v) for k, v in runs.items() if v}
    cpu_med = {}
    for k, v in runs.items():
        c = [x["cpu_s_per_gib"] for x in v if x.get("cpu_s_per_gib") is not None]
        if c:
            cpu_med[k] = statistics.median(c)
    out = {"reps": a.reps, "seconds": a.seconds, "transport": a.transport,
           "median_gbps": med, "median_cpu_s_per_gib": cpu_med,
           "runs": runs, "skipped": [] if iperf3 else ["tcp"]}
    ratios = {}
    if "daemon" in med and med.get("udp"):
        ratios["daemon_over_udp"] = med["daemon"] / med["udp"]
    if "daemon" in med and med.get("tcp"):
        ratios["daemon_over_tcp"] = med["daemon"] / med["tcp"]
    out["ratios"] = ratios
    out["bar_daemon_over_tcp"] = 0.5
    out["goal_daemon_over_tcp"] = 1.0
    out["ok"] = ok
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"daemon-to-daemon loopback, {a.reps} run(s) of {a.seconds:g} s, medians:")
        for k, label in (("daemon", "metarocd A -> B (verified goodput)"),
                         ("udp", "raw UDP GSO/GRO blaster (UDP payload)"),
                         ("tcp", "kernel TCP, iperf3 -M 4000")):
            if k in med:
                cpu = f"  {cpu_med[k]:5.2f} CPU s/GiB" if k in cpu_med else ""
                print(f"  {label:40} {med[k]:7.3f} Gbit/s{cpu}")
            elif k == "tcp" and not iperf3:
                print(f"  {label:40}  skipped" + ("" if a.no_tcp else " (no iperf3: scripts/install-deps.sh)"))
        for k, v in ratios.items():
            print(f"  {k:40} {v:7.3f}")
        if "daemon_over_tcp" in ratios:
            print("  bar daemon/tcp >= 0.5, goal >= 1.0 (printed, not enforced)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
