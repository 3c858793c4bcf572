#!/usr/bin/env python3
"""bench_client: application-to-application performance through libmetaroce
and two metarocd on loopback, against kernel references, side by side in
one invocation.

Five workloads, each run --reps times (default 3), interleaved, medians
reported:

  bw        metaroce-perf client --op write, 1 connection of 4 streams,
            --size 256 KiB --depth 4 (4 MiB in flight; --bw changes them):
            goodput (Gbit/s)
  tcp       iperf3 -M 4000 over loopback: kernel TCP at (about) the same MSS
  lat       metaroce-perf --pingpong: 8-byte SEND ping-pong, latency p50 and
            p99 (half the round trip, microseconds)
  sockperf  sockperf ping-pong over UDP loopback, 14-byte messages (its
            minimum): latency p50 and p99 (half the round trip)
  rate      metaroce-perf client --op send --size 64, 4 streams, depth 256:
            messages per second

Prints bw/tcp (bar >= 0.5), lat/sockperf at p50 (bar <= 3) and the message
rate (goal >= 1 M msg/s): printed, never enforced. The exit status is 0
when every run completed with nothing lost, duplicated or failed (with
--verify, or in --quick, every byte checked too), 1 otherwise. A workload
whose tool is missing (iperf3, sockperf: scripts/install-deps.sh) is
reported as skipped.

  bench_client.py --build DIR [--reps N] [--seconds S] [--json] [--quick]
                  [--verify] [--busy-poll USEC] [--daemon-busy-poll USEC]
                  [--transport KEY=V,...] [--bw "PERF ARGS"] [--pin-hosts]
                  [--unsignaled]

--pin-hosts runs the two ping-pongs as on two hosts of one core each: daemon
A and the client pinned to one CPU, daemon B and the server to another, and
sockperf's client and server likewise. Unpinned, where the scheduler puts
the four processes decides the latency on a 2-core machine (a wake-up of a
process on the other CPU costs tens of microseconds in a VM).

--unsignaled posts the pings and the echoes unsignaled (metaroce-perf
--unsignaled), as verbs programs post most sends: no send completions.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# Daemons use BASE_PORT+1/+2, iperf3 BASE_PORT+3, sockperf BASE_PORT+4;
# from the pid, so that two invocations at once do not collide (and not
# the ports of bench_daemon.py's range for the same pid).
BASE_PORT = 30000 + (os.getpid() % 2000) * 5


def log(*a):
    print(*a, file=sys.stderr, flush=True)


GIB = float(1 << 30)


def proc_cpu(pid):
    """CPU seconds (user + system) a running process has used."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    """CPU seconds of the children waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def daemon_config(tmp, name, port, sports, extra=""):
    path = os.path.join(tmp, name + ".yaml")
    transport = ""
    if "transport:\n" in extra:
        # the caller's transport keys
        head, tail = extra.split("transport:\n", 1)
        transport = "transport:\n" + tail
        extra = head
    with open(path, "w") as f:
        f.write(f"""service:
  port: {port}
  control_socket: {tmp}/{name}.sock
  control_group: ""
  app_socket: {tmp}/{name}.app.sock
  app_group: ""
  state_db: {tmp}/{name}.db
  log_level: warn
planes:
  - name: plane0
    address: 127.0.0.1
    source_ports: {sports}
  - name: plane1
    address: 127.0.0.2
    source_ports: {sports}
""" + transport + extra)
    return path


class Daemons:
    """Two metarocd, A and B, and a metaroce-perf server on B."""

    def __init__(self, build, extra, env, busy):
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="bench-client.")
        self.procs = []
        daemon = os.path.join(build, "daemon", "metarocd")
        ctl = os.path.join(build, "cli", "metaroce-ctl")
        self.perf = os.path.join(build, "tools", "perf", "metaroce-perf")
        for name, port, sports in (("a", BASE_PORT + 1, "50000-54999"),
                                   ("b", BASE_PORT + 2, "55000-59999")):
            cfg = daemon_config(self.tmp, name, port, sports, extra)
            self.procs.append(subprocess.Popen(
                [daemon, "-c", cfg], env=env,
                stderr=open(os.path.join(self.tmp, name + ".log"), "w")))
        for name in ("a", "b"):
            for _ in range(200):
                if subprocess.run([ctl, "-s", f"{self.tmp}/{name}.sock", "status"],
                                  capture_output=True).returncode == 0:
                    break
                time.sleep(0.05)
            else:
                self.close()
                raise RuntimeError(f"daemon {name} did not become ready")
        self.server = subprocess.Popen([self.perf, "server", "--socket",
                                        f"{self.tmp}/b.app.sock", "--json",
                                        "--busy-poll", str(busy)],
                                       stdout=subprocess.PIPE, text=True)
        if not self.server.stdout.readline().startswith("listening"):
            self.close()
            raise RuntimeError("metaroce-perf server did not start")

    def pin(self, cpus):
        """--pin-hosts: daemon A (and the client, see client()) on cpus[0],
        daemon B and the server on cpus[1]; None: every CPU again."""
        every = os.sched_getaffinity(0)
        for pid, i in ((self.procs[0].pid, 0), (self.procs[1].pid, 1), (self.server.pid, 1)):
            for t in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(t), {cpus[i]} if cpus else every)

    def client(self, args, seconds, busy, cpu=None):
        cmd = [self.perf, "client", "127.0.0.2", "--port", str(BASE_PORT + 2),
               "--socket", f"{self.tmp}/a.app.sock", "--json"] + args
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        if busy:
            cmd += ["--busy-poll", str(busy)]
        # CPU of everything in the path: both daemons and the server (from
        # /proc, running), the client (waited for)
        running = [p.pid for p in self.procs] + [self.server.pid]
        cpu0 = sum(proc_cpu(p) for p in running) + children_cpu()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
        self.cpu_s = sum(proc_cpu(p) for p in running) + children_cpu() - cpu0
        out = None
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                out = json.loads(line)
        if r.returncode != 0 or not out or not out["ok"]:
            raise RuntimeError("metaroce-perf %s failed (exit %d): %s %s"
                               % (" ".join(args), r.returncode, r.stdout.strip()[-300:],
                                  r.stderr.strip()[-300:]))
        # The server's line for this client, to cross-check.
        srv = json.loads(self.server.stdout.readline())
        if not srv["ok"]:
            raise RuntimeError("metaroce-perf server: %s" % srv)
        return out, srv

    def close(self):
        # The application first: it must not see its daemon go away.
        for group in ([self.server] if getattr(self, "server", None) else [], self.procs):
            for p in group:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in group:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_metaroce(a, extra, env):
    """One rep of bw, lat and rate on a fresh pair of daemons."""
    d = Daemons(a.build, extra, env, a.busy_poll)
    res = {}
    try:
        v = ["--verify"] if a.verify else []
        out, srv = d.client(["--op", "write"] + a.bw.split() + ["--seconds", str(a.seconds)] + v,
                            a.seconds, a.busy_poll)
        res["bw"] = {"gbps": out["gbps"], "messages": out["messages"],
                     "verified": out["verify"] and out["server_verified"] > 0}
        nbytes = out["gbps"] * 1e9 / 8 * a.seconds
        if nbytes:
            res["bw"]["cpu_s_per_gib"] = d.cpu_s / (nbytes / GIB)
        if a.pin_hosts:
            d.pin(a.pin_hosts)
        u = ["--unsignaled"] if a.unsignaled else []
        out, srv = d.client(["--pingpong", "--seconds", str(a.seconds)] + u + v, a.seconds,
                            a.busy_poll, a.pin_hosts[0] if a.pin_hosts else None)
        if a.pin_hosts:
            d.pin(None)
        res["lat"] = {"p50_us": out["lat_us_p50"], "p99_us": out["lat_us_p99"],
                      "p999_us": out["lat_us_p999"], "round_trips": out["messages"],
                      "verified": out["verify"]}
        out, srv = d.client(["--op", "send", "--size", "64", "--streams", "4", "--depth", "256",
                             "--seconds", str(a.seconds)] + v, a.seconds, a.busy_poll)
        if srv["received"] != out["messages"]:
            raise RuntimeError("rate: %d sent, %d received" % (out["messages"], srv["received"]))
        res["rate"] = {"msg_per_s": out["msg_rate"], "messages": out["messages"],
                       "verified": out["verify"] and srv["verified"] == out["messages"]}
    finally:
        d.close()
    return res


def run_tcp(iperf3, seconds):
    port = str(BASE_PORT + 3)
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
                out = {"gbps": end["sum_received"]["bits_per_second"] / 1e9}
            except (ValueError, KeyError):
                time.sleep(0.1)  # the server is not listening yet
                continue
            # iperf3's own CPU figures (client and server, percent of the run)
            cu = end.get("cpu_utilization_percent", {})
            secs = end["sum_received"].get("seconds") or seconds
            nbytes = end["sum_received"].get("bytes")
            if "host_total" in cu and "remote_total" in cu and nbytes:
                out["cpu_s_per_gib"] = ((cu["host_total"] + cu["remote_total"]) / 100 * secs
                                        / (nbytes / GIB))
            return out
        raise RuntimeError("iperf3 failed: " + (r.stdout + r.stderr)[-300:])
    finally:
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def run_sockperf(sockperf, seconds, pin=None):
    port = str(BASE_PORT + 4)
    # --pin-hosts: the server on the second CPU, the client on the first
    srv_pre, cli_pre = (["taskset", "-c", str(pin[1])], ["taskset", "-c", str(pin[0])]) \
        if pin else ([], [])
    srv = subprocess.Popen(srv_pre + [sockperf, "server", "-i", "127.0.0.1", "-p", port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = subprocess.run(cli_pre + [sockperf, "ping-pong", "-i", "127.0.0.1", "-p", port,
                                      "-t", str(max(1, int(seconds))), "-m", "14"],
                           capture_output=True, text=True, timeout=seconds + 30)
        txt = r.stdout + r.stderr
        pct = {m.group(1): float(m.group(2))
               for m in re.finditer(r"percentile (\d+\.\d+) =\s+([\d.]+)", txt)}
        if "50.000" not in pct or "99.000" not in pct:
            raise RuntimeError("sockperf: no percentiles in its output: " + txt[-300:])
        return {"p50_us": pct["50.000"], "p99_us": pct["99.000"], "p999_us": pct.get("99.900")}
    finally:
        srv.send_signal(signal.SIGINT)
        try:
            srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="one 1-second run of each, every byte verified")
    ap.add_argument("--verify", action="store_true",
                    help="metaroce-perf --verify in every run (costs throughput)")
    ap.add_argument("--busy-poll", type=int, default=0,
                    help="metaroce-perf --busy-poll USEC (the applications spin)")
    ap.add_argument("--daemon-busy-poll", type=int, default=0,
                    help="MRD_BUSY_POLL_US for both daemons")
    ap.add_argument("--bw", default="--size 256K --depth 4 --streams 4",
                    help="metaroce-perf arguments of the bandwidth run (one connection)")
    ap.add_argument("--transport", default="",
                    help="transport keys for both daemons, e.g. burst_pkts=16")
    ap.add_argument("--pin-hosts", action="store_true",
                    help="the ping-pong as on two hosts: daemon A and the client on one "
                         "CPU, daemon B and the server on another; sockperf's client and "
                         "server likewise")
    ap.add_argument("--unsignaled", action="store_true",
                    help="the ping-pong's pings and echoes posted unsignaled")
    a = ap.parse_args()
    if a.pin_hosts:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2 or not shutil.which("taskset"):
            ap.error("--pin-hosts needs two CPUs and taskset")
        a.pin_hosts = cpus[:2]
    if a.quick:
        a.reps, a.seconds, a.verify = 1, 1.0, True
    iperf3 = shutil.which("iperf3")
    sockperf = shutil.which("sockperf")
    extra = ""
    if a.transport:
        extra = "transport:\n" + "".join(
            f"  {k.strip()}: {v.strip()}\n"
            for k, v in (kv.split("=", 1) for kv in a.transport.split(",")))
    env = dict(os.environ)
    if a.daemon_busy_poll:
        env["MRD_BUSY_POLL_US"] = str(a.daemon_busy_poll)
    runs = {"bw": [], "lat": [], "rate": [], "tcp": [], "sockperf": []}
    ok = True
    # Interleave the workloads so that a change in the host's load hits all.
    for rep in range(a.reps):
        try:
            r = run_metaroce(a, extra, env)
            for k, v in r.items():
                if a.verify and not v.get("verified"):
                    log(f"bench_client: {k} run {rep + 1}: data NOT verified")
                    ok = False
                runs[k].append(v)
            log(f"  run {rep + 1}/{a.reps}: bw {r['bw']['gbps']:.3f} Gbit/s, "
                f"lat p50 {r['lat']['p50_us']:.1f} us, rate {r['rate']['msg_per_s'] / 1e6:.3f} M/s")
        except Exception as e:  # a failed run is reported, not fatal
            log(f"bench_client: metaroce run {rep + 1}: {e}")
            ok = False
        for name, tool, fn in (("tcp", iperf3, lambda t: run_tcp(t, a.seconds)),
                               ("sockperf", sockperf,
                                lambda t: run_sockperf(t, a.seconds, a.pin_hosts))):
            if not tool:
                continue
            try:
                r = fn(tool)
                runs[name].append(r)
                log(f"  {name} run {rep + 1}/{a.reps}: {r}")
            except Exception as e:
                log(f"bench_client: {name} run {rep + 1}: {e}")
                ok = False

    def med(k, f):
        v = [x[f] for x in runs[k] if x.get(f) is not None]
        return statistics.median(v) if v else None

    m = {"bw_gbps": med("bw", "gbps"), "tcp_gbps": med("tcp", "gbps"),
         "lat_p50_us": med("lat", "p50_us"), "lat_p99_us": med("lat", "p99_us"),
         "sockperf_p50_us": med("sockperf", "p50_us"),
         "sockperf_p99_us": med("sockperf", "p99_us"),
         "rate_msg_per_s": med("rate", "msg_per_s"),
         "bw_cpu_s_per_gib": med("bw", "cpu_s_per_gib"),
         "tcp_cpu_s_per_gib": med("tcp", "cpu_s_per_gib")}
    ratios = {}
    if m["bw_gbps"] is not None and m["tcp_gbps"]:
        ratios["bw_over_tcp"] = m["bw_gbps"] / m["tcp_gbps"]
    if m["lat_p50_us"] is not None and m["sockperf_p50_us"]:
        ratios["lat_over_sockperf_p50"] = m["lat_p50_us"] / m["sockperf_p50_us"]
    if m["lat_p99_us"] is not None and m["sockperf_p99_us"]:
        ratios["lat_over_sockperf_p99"] = m["lat_p99_us"] / m["sockperf_p99_us"]
    skipped = [k for k, t in (("tcp", iperf3), ("sockperf", sockperf)) if not t]
    out = {"reps": a.reps, "seconds": a.seconds, "verify": a.verify, "bw_args": a.bw,
           "busy_poll_us": a.busy_poll, "daemon_busy_poll_us": a.daemon_busy_poll,
           "transport": a.transport, "pin_hosts": a.pin_hosts,
           "unsignaled": a.unsignaled, "median": m, "ratios": ratios,
           "runs": runs,
           "skipped": skipped, "bar_bw_over_tcp": 0.5, "bar_lat_over_sockperf": 3.0,
           "goal_rate_msg_per_s": 1e6, "ok": ok}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"application-to-application loopback, {a.reps} run(s) of {a.seconds:g} s, medians:")

        def line(label, v, unit):
            print(f"  {label:52} " + (f"{v:9.3f} {unit}" if v is not None else "  skipped"))
        line("metaroce-perf write " + a.bw, m["bw_gbps"], "Gbit/s")
        line("  CPU (daemons, client, server)", m["bw_cpu_s_per_gib"], "s/GiB")
        line("kernel TCP, iperf3 -M 4000", m["tcp_gbps"], "Gbit/s")
        line("  CPU (iperf3 client, server)", m["tcp_cpu_s_per_gib"], "s/GiB")
        pp = "metaroce-perf 8-byte SEND ping-pong" + (" (unsignaled)" if a.unsignaled else "")
        line(pp + ", p50", m["lat_p50_us"], "us")
        line(pp + ", p99", m["lat_p99_us"], "us")
        line("sockperf UDP ping-pong (14 B), p50", m["sockperf_p50_us"], "us")
        line("sockperf UDP ping-pong (14 B), p99", m["sockperf_p99_us"], "us")
        line("metaroce-perf 64-byte SEND, 4 streams x 256", m["rate_msg_per_s"] and
             m["rate_msg_per_s"] / 1e6, "M msg/s")
        for k, v in ratios.items():
            print(f"  {k:52} {v:9.3f}")
        print("  bars: bw/tcp >= 0.5, lat/sockperf (p50) <= 3, rate >= 1 M msg/s "
              "(printed, not enforced)")
        for k in skipped:
            print(f"  {k} skipped (not installed: scripts/install-deps.sh)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
