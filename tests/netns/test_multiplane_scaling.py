"""Multiplane scaling on rate-limited planes (docs/netns.md).

Two daemons in namespaces joined by 4 veth planes, each bounded by tc tbf
at the plane rate R on both ends, each connection keeping its 4 initial
paths per plane (PATHS). PERF_RUNS rounds; in each, a verified
`metaroce-ctl perf` from A to B runs once with k = 4, 2 and 1 planes in
service (plane0 .. plane(k-1); the others drained on both daemons), in an
order that turns from round to round. The median of the one-plane goodputs
G(1) must be at least 0.85 R (the one plane is really saturated: the tbf,
not the daemons, is the bottleneck), and the median over the rounds of
G(k) / G(1), both of the same round, at least 0.9 k. The daemons' CPU use
during the runs is printed and must stay below 90 % of a core: a CPU-bound
daemon would measure itself, not the planes.

Why rounds: on a loaded host (users' CI machines, operators' servers) the
load changes several times over within a minute. Measured one plane count
after the other (a fabric each), a 2-plane run that fell into a busier
minute than the 1-plane runs came out 1.66 x one plane (daemon A waited for
a CPU 24 % of the time, against 5 %); paired by round, the same host's load
falls on every plane count alike.

R is what the daemons can carry on this host now, so that the test measures
the planes on any build and any load: MR_PLANE_RATE if set, otherwise the
fabric is built without tbf, an unshaped verified perf on its 4 planes
measures the goodput C that this build gets through on this host as loaded
as it is, and R = min(200mbit, C / 6 / 4) (netnslib plane_rate: the four
planes together at a sixth of C; SHARE says why). A sanitizer build, or a
host busy with other jobs, gets a lower R; the assertions are the same.

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


def use_planes(f, k, total):
    """Plane0 .. plane(k-1) in service on both daemons, the rest drained
    (a drained plane carries no data; its paths only probe)."""
    for name in "ab":
        for i in range(total):
            r = f.ctl_json(name, "plane", "undrain" if i < k else "drain", "plane%d" % i)
            f.check(r["drained"] == (i >= k),
                    "%s: plane%d %s (%s)" % (name, i, "in service" if i < k else "drained", r))


def plane_text(res):
    return ", ".join("%s %.0f %d %d %d" % (
        pl, by_plane(res["paths"], "tx_bytes")[pl] * 8 / res["seconds"] / 1e6,
        by_plane(res["paths"], "retx_pkts")[pl], by_plane(res["paths"], "lost_pkts")[pl],
        sum(p["plane_name"] == pl for p in res["paths"]))
        for pl in sorted({p["plane_name"] for p in res["paths"]}))


runs = {k: [] for k in PLANES}
ratios = {k: [] for k in PLANES if k > 1}
total = max(PLANES)
# One fabric of the most planes, built without tbf: an unshaped run sizes
# the planes' rate to what these daemons carry on this host now (netnslib
# plane_rate: the busiest run's planes together at SHARE of it, at most
# DEFAULT_RATE per plane). Then every round measures every plane count
# once, the others drained, in an order that turns from round to round, so
# that a change of the host's load during the test (it changes several
# times over within a minute) falls on all plane counts alike, and each
# round's k-plane goodput is compared with the one-plane goodput of the same
# round.
f = Fabric(tbf=None, planes=total, full=True)
try:
    f.start("a", yaml_extra=PATHS)
    f.start("b", yaml_extra=PATHS)
    rate = f.plane_rate(DEFAULT_RATE, total, share=SHARE)
    f.set_rate(rate)
    order = sorted(PLANES, reverse=True)
    snap = f.load_snapshot(["a", "b"])
    cpu0 = {n: f.cpu_seconds(n) for n in "ab"}
    t0 = time.monotonic()
    for rnd in range(PERF_RUNS):
        got = {}
        for k in order[rnd % len(order):] + order[:rnd % len(order)]:
            use_planes(f, k, total)
            res = f.perf("a", "b", PERF_SECONDS)
            planes_used = {p["plane_name"] for p in res["paths"] if p["tx_bytes"] > 0}
            f.check(planes_used == {"plane%d" % i for i in range(k)},
                    "%d planes: data on plane0..plane%d only (%s)"
                    % (k, k - 1, ", ".join(sorted(planes_used))))
            got[k] = res["goodput_gbps"]
            runs[k].append(got[k])
            print("  round %d, %d plane(s): %.3f Gbit/s; per plane Mbit/s sent, retransmitted "
                  "and lost packets, paths: %s" % (rnd + 1, k, got[k], plane_text(res)))
        if 1 in got:
            for k in ratios:
                ratios[k].append(got[k] / got[1])
    wall = time.monotonic() - t0
    cpu = {n: (f.cpu_seconds(n) - cpu0[n]) / wall for n in "ab"}
    print("planes of %s; daemons: %s" % (rate, f.load_text(snap)))
    f.check(max(cpu.values()) < 0.9, "the daemons are not CPU-bound (A %.0f %%, B %.0f %%)"
            % (cpu["a"] * 100, cpu["b"] * 100))
    f.stop("a")
    f.stop("b")
finally:
    f.close()

for k in PLANES:
    print("%d plane(s): goodput %s Gbit/s, median %.3f" % (
        k, ", ".join("%.3f" % g for g in runs[k]), statistics.median(runs[k])))
if 1 in runs:
    one = statistics.median(runs[1])
    mrtest.check(one * 1e9 >= 0.85 * rate_bps(rate),
                 "one plane saturated: %.3f Gbit/s of payload on a %s plane (%.0f %%)"
                 % (one, rate, 100 * one * 1e9 / rate_bps(rate)))
    for k in sorted(ratios):
        r = statistics.median(ratios[k])
        mrtest.check(r >= 0.9 * k, "%d planes: median of the rounds' ratios to one plane %.2f "
                     ">= 0.9 x %d (rounds: %s)"
                     % (k, r, k, ", ".join("%.2f" % x for x in ratios[k])))
