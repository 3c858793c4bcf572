"""Multiplane scaling on rate-limited planes (docs/netns.md).

For k = 1, 2 and 4 planes, two daemons in namespaces joined by k veth
planes, each bounded by tc tbf at the plane rate R on both ends, each
connection keeping its 4 initial paths per plane (PATHS). A verified
`metaroce-ctl perf` from A to B is run PERF_RUNS times; the median goodput
G(k) must be at least 0.9 * k * G(1), and G(1) at least 0.85 R (the one
plane is really saturated: the tbf, not the daemons, is the bottleneck).
The daemons' CPU use during the runs is printed and must stay below 90 % of
a core: a CPU-bound daemon would measure itself, not the planes.

R is what the daemons can carry on this host now, so that the test measures
the planes on any build and any load: MR_PLANE_RATE if set, otherwise the
first fabric, of the most planes (4), is built without tbf, an unshaped
verified perf on it measures the goodput C that this build gets through on
this host as loaded as it is, and R = min(200mbit, C / 6 / 4) (netnslib
plane_rate: the four planes together at a sixth of C; SHARE says why). The plane counts
run from the most to the fewest, so that the run that asks most of the host
follows the calibration at once. A sanitizer build, or a host busy with
other jobs, gets a lower R; the assertions are the same.

MR_SCALING_PLANES="1 2 4" (default) chooses the plane counts. Needs root,
network namespaces and tc: exits 77 (skipped), saying why, otherwise.
"""
import os
import statistics
import time

import mrtest
from netnslib import Fabric, by_plane, rate_bps

DEFAULT_RATE = "200mbit"
PLANES = [int(k) for k in os.environ.get("MR_SCALING_PLANES", "1 2 4").split()]
PERF_SECONDS = 3
PERF_RUNS = 3
# The share of the unshaped goodput the busiest run's planes may take
# together. A third was not enough on a host whose load comes in bursts:
# beside stress-ng and other jobs (load average 7-10) the 4-plane runs fell
# short at 125-193 Mbit/s per plane (a third of calibrations of 1.5-2.3
# Gbit/s) and held at 17-120.
SHARE = 1 / 6
# Each connection keeps its 4 initial paths per plane (the engine may open
# up to 16 when it wants more window than they hold; FINDINGS.md,
# observations): 16 paths of at least one 4 KiB packet in
# flight each overflow a slow plane's tbf queue and keep retransmitting.
PATHS = "paths:\n  initial_per_plane: 4\n  max_per_plane: 4\n"


goodput = {}
rate = None
# The most planes first: that fabric is built without tbf, and an unshaped
# run on it sizes the planes' rate to what these daemons carry on this host
# now (netnslib plane_rate: the busiest run's planes together at SHARE of
# it, at most DEFAULT_RATE per plane); every fabric then has that rate. The
# run that asks most of the host comes right after the calibration (this
# host's load can change several times over within a minute).
for k in sorted(PLANES, reverse=True):
    f = Fabric(tbf=rate, planes=k, full=True)
    try:
        f.start("a", yaml_extra=PATHS)
        f.start("b", yaml_extra=PATHS)
        if rate is None:
            rate = f.plane_rate(DEFAULT_RATE, k, share=SHARE)
            f.set_rate(rate)
        runs = []
        snap = f.load_snapshot(["a", "b"])
        cpu0 = {n: f.cpu_seconds(n) for n in "ab"}
        t0 = time.monotonic()
        for _ in range(PERF_RUNS):
            res = f.perf("a", "b", PERF_SECONDS)
            planes_used = {p["plane_name"] for p in res["paths"] if p["tx_bytes"] > 0}
            f.check(len(planes_used) == k, "%d planes: data on every plane (%s)"
                    % (k, ", ".join(sorted(planes_used))))
            runs.append(res["goodput_gbps"])
            print("  run: %.3f Gbit/s; per plane Mbit/s sent, retransmitted and lost "
                  "packets, paths: %s" % (res["goodput_gbps"], ", ".join(
                      "%s %.0f %d %d %d" % (pl, by_plane(res["paths"], "tx_bytes")[pl] * 8
                                            / res["seconds"] / 1e6,
                                            by_plane(res["paths"], "retx_pkts")[pl],
                                            by_plane(res["paths"], "lost_pkts")[pl],
                                            sum(p["plane_name"] == pl for p in res["paths"]))
                      for pl in sorted(planes_used))))
        wall = time.monotonic() - t0
        cpu = {n: (f.cpu_seconds(n) - cpu0[n]) / wall for n in "ab"}
        goodput[k] = statistics.median(runs)
        print("%d plane(s) of %s: goodput %s Gbit/s, median %.3f; daemons: %s"
              % (k, rate, ", ".join("%.3f" % g for g in runs), goodput[k], f.load_text(snap)))
        f.check(max(cpu.values()) < 0.9, "%d planes: the daemons are not CPU-bound "
                "(A %.0f %%, B %.0f %%)" % (k, cpu["a"] * 100, cpu["b"] * 100))
        f.stop("a")
        f.stop("b")
    finally:
        f.close()

if 1 in goodput:
    one = goodput[1]
    mrtest.check(one * 1e9 >= 0.85 * rate_bps(rate),
                 "one plane saturated: %.3f Gbit/s of payload on a %s plane (%.0f %%)"
                 % (one, rate, 100 * one * 1e9 / rate_bps(rate)))
    for k in PLANES:
        if k > 1:
            mrtest.check(goodput[k] >= 0.9 * k * one,
                         "%d planes: %.3f Gbit/s >= 0.9 x %d x %.3f (ratio %.2f)"
                         % (k, goodput[k], k, one, goodput[k] / one))
