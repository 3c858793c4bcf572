#!/usr/bin/env python3
"""bench_verbs: unmodified perftest through the MetaRoCE verbs library
(metaroce-run) against metaroce-perf on the native API, side by side in one
invocation, on two metarocd on loopback.

Seven workloads, each run --reps times (default 3), interleaved, medians
reported:

  verbs_bw    ib_write_bw -s SIZE -t DEPTH -D SECONDS (1 QP): BW average
              (perftest 6.06 signals every WRITE by default, checked with
              the daemon's counters; with -Q 16 one in 16, and its
              pipeline then drains every 16); verbs_bw_q1: the same with
              -Q 1, a completion per WRITE, as native_bw takes them
  native_bw   metaroce-perf client --op write --size SIZE --depth DEPTH
              --streams 1 --seconds SECONDS --busy-poll (1 connection)
  verbs_read  ib_read_bw -s SIZE -t DEPTH -D SECONDS (1 QP, 16 READs out):
              BW average
  native_read metaroce-perf client --op read, otherwise as native_bw
  verbs_lat   ib_send_lat -s 8 -n COUNT: t_typical (perftest's median of
              half round trips), microseconds
  native_lat  metaroce-perf --pingpong --op send --size 8 --count COUNT
              --busy-poll: p50 of half round trips, microseconds

--only bw,lat runs just those workloads (bw: verbs_bw and native_bw,
q1: verbs_bw_q1, read, lat). --alternate puts native first in every
other rep, so neither side always runs first. --ab-spin adds
verbs_lat_fixed: ib_send_lat with METAROCE_VERBS_SPIN_US=--fixed-spin-us
(default 30: the library's fixed spin before the adaptive one), the three
latency runs of a rep each first in turn. --ab-unsignaled adds
verbs_bw_q16 (ib_write_bw -Q 16: one WRITE in 16 signaled; perftest's
default, here as with -Q 1, signals every WRITE) with
METAROCE_VERBS_UNSIGNALED=1 (no completion written for the unsignaled
WRITEs: MRC_SQE_UNSIGNALED) and verbs_bw_q16_signaled, the same with the
library's default (the daemon writes a completion for every WRITE, which
the library drops), next to each other in each rep. Each run's 1-minute load average and,
for the bandwidth runs, daemon A's counters per work request (completions
written, wakeups, doorbells: status.apps) are printed and in the JSON.

perftest always polls (the verbs library yields the CPU between empty
polls); metaroce-perf uses the library's default (sleep on the wakeup fd at
once) unless --native-busy-poll USEC makes it spin too. Prints the bandwidth ratio verbs/native (bar >= 0.9) and the latency
ratio verbs/native (bar <= 1.2), each as the ratio of the medians and as
the median of the per-rep ratios (a rep's runs are back to back): printed,
never enforced; and, for RDMA READ,
the ratios verbs/native and READ/WRITE (no bar). Exit 0 when every
run completed, 1 otherwise; 77 when perftest or the verbs library is
missing.

  bench_verbs.py --build DIR [--reps N] [--seconds S] [--size BYTES]
                 [--depth D] [--count N] [--native-busy-poll USEC] [--json]
                 [--quick] [--only LIST] [--alternate] [--ab-unsignaled]
                 [--ab-spin] [--fixed-spin-us US]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

PORT = 21000 + os.getpid() % 4000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pair_run(srv_argv, cli_argv, timeout, env=None):
    srv = subprocess.Popen(srv_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env)
    time.sleep(0.5)
    out = ""
    for _ in range(10):
        c = subprocess.run(cli_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
        out = c.stdout
        if c.returncode != 0 and re.search(r"Couldn't connect|refused", out) and srv.poll() is None:
            time.sleep(0.3)
            continue
        break
    try:
        so, _ = srv.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        so, _ = srv.communicate()
    return c.returncode, out, srv.returncode, so


def gbit(mbs):
    # perftest's MB/sec are MiB/s (its format factor is 0x100000), and
    # metaroce-perf reports 10^9 bits per second
    return mbs * 1048576 * 8 / 1e9


def rows(out):
    r = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and all(re.match(r"^[0-9.]+$", x) for x in f[:5]):
            r.append([float(x) for x in f])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--native-busy-poll", type=int, default=0,
                    help="metaroce-perf --busy-poll (0: sleep at once, the default)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="one short run of each")
    ap.add_argument("--only", default="bw,q1,read,lat",
                    help="workloads, comma-separated: bw, q1, read, lat (default: all)")
    ap.add_argument("--alternate", action="store_true",
                    help="native first in every other rep")
    ap.add_argument("--ab-spin", action="store_true",
                    help="also ib_send_lat with a fixed spin (METAROCE_VERBS_SPIN_US="
                         "--fixed-spin-us), the three latency runs of a rep in turn first")
    ap.add_argument("--fixed-spin-us", type=int, default=30)
    ap.add_argument("--ab-unsignaled", action="store_true",
                    help="also ib_write_bw -Q 16 with and without METAROCE_VERBS_UNSIGNALED=1")
    a = ap.parse_args()
    only = set(a.only.split(","))
    if a.quick:
        a.reps, a.seconds, a.count = 1, 1, 200

    build = os.path.abspath(a.build)
    run = os.path.join(build, "verbs", "metaroce-run")
    perf = os.path.join(build, "tools", "perf", "metaroce-perf")
    os.environ["METAROCD"] = os.path.join(build, "daemon", "metarocd")
    for t in ("ib_write_bw", "ib_read_bw", "ib_send_lat"):
        if not shutil.which(t):
            log("SKIP: %s is not installed (perftest)" % t)
            return 77
    if not os.access(run, os.X_OK):
        log("SKIP: %s missing (the verbs library was not built)" % run)
        return 77
    import mrtest

    p = mrtest.Pair("bench-verbs")
    A, B, peer = p.a.app_sock, p.b.app_sock, p.b.addrs[0]
    res = {"verbs_bw": [], "verbs_bw_q1": [], "native_bw": [], "verbs_read": [], "native_read": [],
           "verbs_lat": [], "native_lat": [], "verbs_lat_fixed": [], "verbs_bw_q16": [], "verbs_bw_q16_signaled": []}
    load = {k: [] for k in res}    # 1-minute load average at each run's end
    counters = {k: [] for k in res}  # daemon A's counters per work request
    ok = True
    port = PORT
    to = a.seconds * 10 + 60
    spin = ["--busy-poll", str(a.native_busy_poll)]

    def apps():
        return p.a.ok("status")["apps"]

    def per_wr(before, after):
        n = after["wrs"] - before["wrs"]
        if n <= 0:
            return None
        return {"wrs": n} | {k: round((after[k] - before[k]) / n, 4)
                             for k in ("cqes", "wakeups", "doorbells", "cqes_unsignaled")}

    def verbs_write(key, extra, env=None):
        nonlocal port, ok
        port += 1
        wb = ["ib_write_bw", "-x", "0", "-s", str(a.size), "-t", str(a.depth),
              "-D", str(a.seconds), "-p", str(port)] + extra
        c0 = apps()
        rc, out, src, so = pair_run([run, "-s", B] + wb, [run, "-s", A] + wb + [peer], to, env)
        load[key].append(os.getloadavg()[0])
        counters[key].append(per_wr(c0, apps()))
        r = rows(out)
        if rc or src or not r:
            ok = False
            log("%s failed:\n" % " ".join(wb) + out[-2000:] + so[-1000:])
        else:
            res[key].append(gbit(r[-1][3]))

    def native_write():
        nonlocal ok
        c0 = apps()
        rc, out, src, so = pair_run(
            [perf, "server", "--socket", B, "--once"] + spin,
            [perf, "client", peer, "--socket", A, "--op", "write", "--size", str(a.size),
             "--depth", str(a.depth), "--streams", "1", "--seconds", str(a.seconds),
             "--json"] + spin, to)
        load["native_bw"].append(os.getloadavg()[0])
        counters["native_bw"].append(per_wr(c0, apps()))
        try:
            j = json.loads(out.strip().splitlines()[-1])
            if not j.get("ok"):
                raise ValueError
            res["native_bw"].append(j["gbps"])
        except (ValueError, IndexError, KeyError):
            ok = False
            log("metaroce-perf write failed:\n" + out[-2000:])

    def verbs_lat(key, env=None):
        nonlocal port, ok
        port += 1
        sl = ["ib_send_lat", "-x", "0", "-s", "8", "-n", str(a.count), "-p", str(port)]
        rc, out, src, so = pair_run([run, "-s", B] + sl, [run, "-s", A] + sl + [peer], to, env)
        load[key].append(os.getloadavg()[0])
        r = rows(out)
        if rc or src or not r:
            ok = False
            log("ib_send_lat failed:\n" + out[-2000:] + so[-1000:])
        else:
            res[key].append(r[-1][4])  # t_typical

    def native_lat():
        nonlocal ok
        rc, out, src, so = pair_run(
            [perf, "server", "--socket", B, "--once"] + spin,
            [perf, "client", peer, "--socket", A, "--op", "send", "--size", "8",
             "--pingpong", "--count", str(a.count)] + spin, to)
        load["native_lat"].append(os.getloadavg()[0])
        m = re.search(r"p50 ([0-9.]+) us", out)
        if rc or not m:
            ok = False
            log("metaroce-perf pingpong failed:\n" + out[-2000:])
        else:
            res["native_lat"].append(float(m.group(1)))

    with_unsig = dict(os.environ, METAROCE_VERBS_UNSIGNALED="1")
    with_fixed = dict(os.environ, METAROCE_VERBS_SPIN_US=str(a.fixed_spin_us))
    try:
        for rep in range(a.reps):
            native_first = a.alternate and rep % 2 == 1
            if "bw" in only:
                if native_first:
                    native_write()
                verbs_write("verbs_bw", [])
                if not native_first:
                    native_write()
            if a.ab_unsignaled:
                # the flag on and off, in turn first
                for on in ((True, False) if rep % 2 == 0 else (False, True)):
                    if on:
                        verbs_write("verbs_bw_q16", ["-Q", "16"], with_unsig)
                    else:
                        verbs_write("verbs_bw_q16_signaled", ["-Q", "16"])

            # the same with a completion per WRITE (-Q 1), as metaroce-perf
            # takes them: by default perftest signals one WRITE in DEPTH and
            # waits for it before posting again, so its pipeline drains
            if "q1" in only:
                verbs_write("verbs_bw_q1", ["-Q", "1"])

            if "read" in only:
                port += 1
                rb = ["ib_read_bw", "-x", "0", "-s", str(a.size), "-t", str(a.depth),
                      "-D", str(a.seconds), "-p", str(port)]
                rc, out, src, so = pair_run([run, "-s", B] + rb, [run, "-s", A] + rb + [peer], to)
                load["verbs_read"].append(os.getloadavg()[0])
                r = rows(out)
                if rc or src or not r:
                    ok = False
                    log("ib_read_bw failed:\n" + out[-2000:] + so[-1000:])
                else:
                    res["verbs_read"].append(gbit(r[-1][3]))

                rc, out, src, so = pair_run(
                    [perf, "server", "--socket", B, "--once"] + spin,
                    [perf, "client", peer, "--socket", A, "--op", "read", "--size", str(a.size),
                     "--depth", str(a.depth), "--streams", "1", "--seconds", str(a.seconds),
                     "--json"] + spin, to)
                load["native_read"].append(os.getloadavg()[0])
                try:
                    j = json.loads(out.strip().splitlines()[-1])
                    if not j.get("ok"):
                        raise ValueError
                    res["native_read"].append(j["gbps"])
                except (ValueError, IndexError, KeyError):
                    ok = False
                    log("metaroce-perf read failed:\n" + out[-2000:])

            if "lat" in only:
                sides = ["verbs", "native"] + (["fixed"] if a.ab_spin else [])
                # each side first in turn
                k = rep % len(sides) if a.alternate or a.ab_spin else 0
                for side in sides[k:] + sides[:k]:
                    if side == "native":
                        native_lat()
                    elif side == "verbs":
                        verbs_lat("verbs_lat")
                    else:
                        verbs_lat("verbs_lat_fixed", with_fixed)
    finally:
        p.close()

    med = {k: (statistics.median(v) if v else None) for k, v in res.items()}
    bw_ratio = (med["verbs_bw"] / med["native_bw"]
                if med["verbs_bw"] is not None and med["native_bw"] else None)
    bw_q1_ratio = (med["verbs_bw_q1"] / med["native_bw"]
                   if med["verbs_bw_q1"] is not None and med["native_bw"] else None)
    def paired(k, ref):
        # each rep's runs are back to back: the median of the per-rep
        # ratios follows the load of the moment better than the ratio of
        # the medians on a host whose load moves
        rs = [x / y for x, y in zip(res[k], res[ref]) if y]
        return statistics.median(rs) if rs and len(res[k]) == len(res[ref]) else None
    bw_paired, lat_paired = paired("verbs_bw", "native_bw"), paired("verbs_lat", "native_lat")
    fixed_paired = paired("verbs_lat_fixed", "native_lat")
    adaptive_vs_fixed = paired("verbs_lat", "verbs_lat_fixed")
    q16_paired = paired("verbs_bw_q16", "native_bw")
    q16_sig_paired = paired("verbs_bw_q16_signaled", "native_bw")
    unsig_vs_sig = paired("verbs_bw_q16", "verbs_bw_q16_signaled")
    lat_ratio = (med["verbs_lat"] / med["native_lat"]
                 if med["verbs_lat"] is not None and med["native_lat"] else None)
    read_ratio = (med["verbs_read"] / med["native_read"]
                  if med["verbs_read"] is not None and med["native_read"] else None)
    read_write = (med["native_read"] / med["native_bw"]
                  if med["native_read"] is not None and med["native_bw"] else None)
    out = {"reps": a.reps, "seconds": a.seconds, "size": a.size, "depth": a.depth,
           "native_busy_poll_us": a.native_busy_poll,
           "count": a.count, "runs": res, "median": med,
           "bw_ratio": bw_ratio, "bw_q1_ratio": bw_q1_ratio, "lat_ratio": lat_ratio,
           "bw_ratio_paired": bw_paired, "lat_ratio_paired": lat_paired, "read_ratio": read_ratio,
           "read_write_ratio": read_write, "bw_q16_ratio_paired": q16_paired,
           "bw_q16_signaled_ratio_paired": q16_sig_paired,
           "unsignaled_vs_signaled_paired": unsig_vs_sig, "load": load, "counters": counters,
           "lat_fixed_ratio_paired": fixed_paired, "adaptive_vs_fixed_paired": adaptive_vs_fixed,
           "fixed_spin_us": a.fixed_spin_us if a.ab_spin else None,
           "alternate": a.alternate, "ok": ok}
    if a.json:
        print(json.dumps(out))
    else:
        def f(v, unit):
            return "-" if v is None else "%.3f %s" % (v, unit)
        print("write bandwidth, %d B, depth %d, 1 QP (medians of %d):" % (a.size, a.depth, a.reps))
        print("  ib_write_bw via verbs     %s" % f(med["verbs_bw"], "Gbit/s"))
        print("  metaroce-perf (native)    %s   (busy-poll %d us)"
              % (f(med["native_bw"], "Gbit/s"), a.native_busy_poll))
        print("  ratio verbs/native        %s   (bar >= 0.9)" % f(bw_ratio, "x"))
        print("  median of per-rep ratios  %s" % f(bw_paired, "x"))
        if a.ab_unsignaled:
            print("  ib_write_bw -Q 16, UNSIGNALED=1 %s (per-rep ratio to native %s)"
                  % (f(med["verbs_bw_q16"], "Gbit/s"), f(q16_paired, "x")))
            print("  the same, default         %s   (per-rep ratio to native %s; a CQE per WRITE,"
                  " dropped by the library)"
                  % (f(med["verbs_bw_q16_signaled"], "Gbit/s"), f(q16_sig_paired, "x")))
            print("  -Q 16 flag on/off per rep %s" % f(unsig_vs_sig, "x"))
        for k in ("verbs_bw", "verbs_bw_q16", "verbs_bw_q16_signaled", "native_bw"):
            cs = [c for c in counters[k] if c]
            if cs:
                print("  %-18s per WR (median): cqes %.3f wakeups %.3f doorbells %.3f"
                      % (k, statistics.median(c["cqes"] for c in cs),
                         statistics.median(c["wakeups"] for c in cs),
                         statistics.median(c["doorbells"] for c in cs)))
        print("  load average (1 min) during the runs: %s"
              % " ".join("%.1f" % x for k in load for x in load[k]))
        print("  ib_write_bw -Q 1          %s   (a completion per WRITE, as native)"
              % f(med["verbs_bw_q1"], "Gbit/s"))
        print("  ratio -Q 1/native         %s" % f(bw_q1_ratio, "x"))
        print("RDMA READ bandwidth, %d B, depth %d, 1 QP (medians of %d):"
              % (a.size, a.depth, a.reps))
        print("  ib_read_bw via verbs      %s" % f(med["verbs_read"], "Gbit/s"))
        print("  metaroce-perf (native)    %s" % f(med["native_read"], "Gbit/s"))
        print("  ratio verbs/native        %s" % f(read_ratio, "x"))
        print("  ratio READ/WRITE (native) %s" % f(read_write, "x"))
        print("8-byte SEND latency, half round trip (medians of %d):" % a.reps)
        print("  ib_send_lat via verbs     %s" % f(med["verbs_lat"], "us"))
        print("  metaroce-perf (native)    %s   (busy-poll %d us)"
              % (f(med["native_lat"], "us"), a.native_busy_poll))
        print("  ratio verbs/native        %s   (bar <= 1.2)" % f(lat_ratio, "x"))
        print("  median of per-rep ratios  %s" % f(lat_paired, "x"))
        if a.ab_spin:
            print("  fixed %d us spin          %s   (per-rep ratio to native %s)"
                  % (a.fixed_spin_us, f(med["verbs_lat_fixed"], "us"), f(fixed_paired, "x")))
            print("  adaptive/fixed per rep    %s" % f(adaptive_vs_fixed, "x"))
            print("  load average (1 min) during the latency runs: %s"
                  % " ".join("%.1f" % x for k in ("verbs_lat", "verbs_lat_fixed", "native_lat")
                             for x in load[k]))
        print("ok" if ok else "FAILED: some runs did not complete")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
