"""CE marking on one plane (docs/netns.md).

Two daemons joined by two planes, each bounded by tc tbf at the plane rate
R, each connection limited to one path per plane. Verified perfs from A to
B run first unmarked, then with nftables setting CE on MARK_PCT % of the
ECT packets that arrive at B on plane1 (fabric.sh ecn b 1 MARK_PCT), RUNS
of each. `metaroce-ctl -j show paths`, taken on both daemons during each
marked run, must show the marks on plane1's paths only: at A (the sender,
CE echoed in ACKs: ce_pkts / acked_pkts) and at B (the receiver: rx_ce_pkts
/ rx_pkts) the fraction on plane1 is MARK_PCT % within a factor of 1.5, on
plane0 below 1 %. The congestion controller cuts the marked paths and so
holds plane1's queue short: in A's view mid-run (show paths of the live
connection, SAMPLES times from a quarter to three quarters of each run,
averaged), in the median of the runs, plane1's window is at most a third of
plane0's and its queueing delay (srtt - min_rtt, which a busy host's delays
swell too) at most half of plane0's. Every run verifies every byte. The unmarked runs
lose at most 10 % of each plane's packets to the tbf's full queue (the
controller cuts a path whose losses come behind a standing queue;
FINDINGS.md 3) and must fill the planes (median goodput at least 60 % of
their rate), and so
must the marked ones: at these rates a plane's bandwidth-delay product is
below a packet, so a cut window still fills it and what the marks change
is the queue, not the rate (a plane whose BDP is many packets would lose
rate to them). Plane1's share of the bytes A sent is printed, not judged:
it falls, but by retransmissions the marked plane's short queue spares it
while the unmarked one's full tbf queue drops packets (docs/netns.md). The
daemon's telemetry (`history paths`, sampled every 100 ms) must agree:
ecn_fraction below 1 % on every sample of both planes unmarked and of
plane0 marked, a median of MARK_PCT % within a factor 2 on plane1.

R is what the daemons can carry on this host now, so that the comparison
measures the network and the transport on any build and any load:
MR_PLANE_RATE if set, otherwise the fabric is built without tbf, an
unshaped verified perf measures the goodput C that this build gets through
on this host as loaded as it is, and R = min(250mbit, C / 2 / 2)
(netnslib plane_rate; half of C for the two planes, not the third the
other tests leave, because of the window floor below), set on both ends
of both planes.

Why one path per plane: a window cannot go below one packet, and DCTCP-like
control at a 10 % marked fraction holds each path's window at a few
packets, so a plane of n paths carries about n x a few MTUs per round trip
whatever the marks: a rate that a fast plane loses to the marks and a slow
one does not (which is the controller doing its job: there the windows are
above the plane's bandwidth-delay product). The engine opens paths up to
paths.max_per_plane (16) when it wants more window than its paths hold
(tests/netns/FINDINGS.md, observations); with 8-10 paths on plane1 at a
sanitizer build's 1.3 ms RTT, that floor was 0.23 Gbit/s of a 250 Mbit/s
plane and the marked rate fell only to 87 % of the unmarked one (the test
used to skip there); with 2 paths and the plane at 48 Mbit/s (a host at
load average 8) the share did not move. One path keeps the marked rate the
controller's down to about 50 Mbit/s planes.

The daemons' own host ECN (CE when a receive socket's queue is deep) is
off (MRD_NO_HOST_ECN=1): a busy host would otherwise mark both planes.

Needs root, network namespaces, tc and nftables: exits 77 (skipped),
saying why, otherwise.
"""
import os
import statistics
import time

from netnslib import Fabric, by_plane, rate_bps

DEFAULT_RATE = "250mbit"
MARK_PCT = 10
SHARE = 1 / 2  # of the unshaped goodput, for the two planes together
PERF_SECONDS = 3
RUNS = 3
SAMPLES = 5  # of A's paths in each marked run, from a quarter to three quarters of it
PATHS = "paths:\n  initial_per_plane: 1\n  max_per_plane: 1\n"
MIN_PKTS = 200  # a path's fraction is judged on at least this many packets


def fractions(paths, num, den, plane="plane_name"):
    """[(plane, path id, num / den, den)] of the paths with den >= MIN_PKTS.
    A receiver's rx_* counters are of the peer's path with that id, on the
    plane named by rx_plane_name (the two ends number their paths apart)."""
    return [(p.get(plane), p["id"], p[num] / p[den], p[den]) for p in paths
            if p[den] >= MIN_PKTS]


def live_paths(name):
    """Daemon `name`'s paths of its established connections: an ended one
    stays listed for a second (SPEC 11.5), and the first samples of a run
    would count the run before it."""
    live = {c["id"] for c in f.ctl_json(name, "show", "conns") if c["state"] == "established"}
    return [p for p in f.ctl_json(name, "show", "paths")
            if p["conn"] in live and p["state"] != "closed"]


def share1(res):
    tx = by_plane(res["paths"], "tx_bytes")
    return tx.get("plane1", 0) / max(1, sum(tx.values()))


def queue_us(p):
    """A path's queueing delay now: smoothed RTT above its smallest, us."""
    return max(0.0, p["srtt_us"] - p["min_rtt_us"])


f = Fabric(planes=2, full=True)
try:
    # Telemetry every 100 ms: the daemon's own per-path ECN fraction.
    # The fabric's marks are what this test follows. The daemon's own host
    # marks (datapath.c: CE when its socket's receive queue is deep, as on
    # loopback) appear on either plane whenever a busy host delays the
    # receiver, so they are off here.
    no_host_ecn = {"MRD_NO_HOST_ECN": "1"}
    f.start("a", extra_env=no_host_ecn, yaml_extra="telemetry:\n  interval: 100ms\n" + PATHS)
    f.start("b", extra_env=no_host_ecn, yaml_extra="telemetry:\n  interval: 100ms\n" + PATHS)
    # The planes' rate, sized to what these daemons carry on this host now
    # (netnslib plane_rate: a third of an unshaped run's goodput, at most
    # DEFAULT_RATE per plane), then tbf on both ends of both planes.
    RATE = f.plane_rate(DEFAULT_RATE, 2, share=SHARE)
    f.set_rate(RATE)

    # ---- unmarked ------------------------------------------------------------
    s_base, g_base = [], []
    snap = f.load_snapshot(["a", "b"])
    t_base = time.time()
    for _ in range(RUNS):
        base = f.perf("a", "b", PERF_SECONDS)
        ce = by_plane(base["paths"], "ce_pkts")
        acked = by_plane(base["paths"], "acked_pkts")
        f.check(all(ce[p] < 0.01 * max(1, acked[p]) for p in ("plane0", "plane1")),
                "unmarked: CE on less than 1 %% of the packets of each plane (%s)" % ", ".join(
                    "%s %d of %d" % (p, ce[p], acked[p]) for p in sorted(ce)))
        # tbf drops instead of marking: the controller must see that a queue
        # stands behind the losses and cut (proto/cc.c); waiting for 40 % of
        # a round trip's packets to be lost, it lost 15-27 % of them here
        # (tests/netns/FINDINGS.md 3).
        tx, lost = by_plane(base["paths"], "tx_pkts"), by_plane(base["paths"], "lost_pkts")
        f.check(all(lost[p] <= 0.10 * max(1, tx[p]) for p in ("plane0", "plane1")),
                "unmarked: tbf's drops cost at most 10 %% of the packets sent on each plane "
                "(%s)" % ", ".join("%s %d of %d" % (p, lost[p], tx[p]) for p in sorted(tx)))
        print("unmarked: lost %s" % ", ".join("%s %d of %d" % (p, lost[p], tx[p])
                                             for p in sorted(tx)))
        s_base.append(share1(base))
        g_base.append(base["goodput_gbps"])
        print("unmarked: %.3f Gbit/s, plane1 carried %.1f %% of the bytes"
              % (base["goodput_gbps"], 100 * s_base[-1]))

    # The premise: the planes, not the hosts, limit the traffic (a machine
    # too slow or too loaded for this test fails here, saying so).
    g = statistics.median(g_base)
    f.check(g * 1e9 >= 0.6 * 2 * rate_bps(RATE), "unmarked: the two planes carry most of "
            "their capacity (median %.3f Gbit/s of 2 x %s)" % (g, RATE))

    # ---- plane1 marked ---------------------------------------------------------
    t_base_end = time.time()
    f.fabric("ecn", "b", 1, MARK_PCT)
    t_mark = time.time()
    want = MARK_PCT / 100.0
    s_mark, g_mark, w_ratio, q_ratio = [], [], [], []
    for _ in range(RUNS):
        marks0 = f.nft_counter("b", "ecn", 1)
        run = f.perf_start("a", "b", PERF_SECONDS)
        # A's windows and queues, sampled SAMPLES times through the run's
        # middle: one sample catches a window anywhere on its sawtooth
        # (single samples of plane1 here ranged 0.02-0.42 of plane0's).
        time.sleep(PERF_SECONDS * 0.25)
        samples = []
        for i in range(SAMPLES):
            if i:
                time.sleep(PERF_SECONDS * 0.5 / (SAMPLES - 1))
            samples.append(live_paths("a"))
        # The operator's view of the live connection, on both ends.
        pa = samples[-1]
        pb = live_paths("b")
        rc, res, text = f.perf_wait(run)
        f.check(rc == 0 and res is not None, "marked perf answered%s" % (
            "" if res is not None else ": " + text.strip()[:300]))
        f.check_verified(res)
        marks = f.nft_counter("b", "ecn", 1) - marks0
        f.check(marks > 0, "nftables marked %d packets on plane1" % marks)
        for pv in samples:
            print("A mid-run: %s" % ", ".join(
                "%s#%d cwnd %d srtt %d us min_rtt %d us" % (p["plane_name"], p["id"],
                                                          p["cwnd"], p["srtt_us"],
                                                          p["min_rtt_us"])
                for p in pv))
        for side, paths, num, den, pl in (("A", pa, "ce_pkts", "acked_pkts", "plane_name"),
                                          ("B", pb, "rx_ce_pkts", "rx_pkts", "rx_plane_name")):
            fr = fractions(paths, num, den, pl)
            print("%s: per-path %s / %s: %s" % (side, num, den, ", ".join(
                "%s#%d %.3f of %d" % x for x in fr)))
            on1 = [x for x in fr if x[0] == "plane1"]
            on0 = [x for x in fr if x[0] == "plane0"]
            f.check(on1 and on0, "%s: paths with at least %d packets on both planes"
                    % (side, MIN_PKTS))
            tot1 = sum(p[num] for p in paths if p.get(pl) == "plane1")
            den1 = sum(p[den] for p in paths if p.get(pl) == "plane1")
            f.check(want / 1.5 <= tot1 / den1 <= want * 1.5,
                    "%s: plane1's CE fraction %.3f is %d %% within a factor 1.5" % (
                        side, tot1 / den1, MARK_PCT))
            f.check(all(want / 2 <= x[2] <= want * 2 for x in on1),
                    "%s: every plane1 path reports it (within a factor 2 of %d %%)"
                    % (side, MARK_PCT))
            f.check(all(x[2] < 0.01 for x in on0),
                    "%s: every plane0 path below 1 %% (max %.4f)"
                    % (side, max(x[2] for x in on0)))
        tx, lost = by_plane(res["paths"], "tx_pkts"), by_plane(res["paths"], "lost_pkts")
        print("marked: lost %s" % ", ".join("%s %d of %d" % (p, lost[p], tx[p])
                                           for p in sorted(tx)))
        s_mark.append(share1(res))
        g_mark.append(res["goodput_gbps"])
        # Each plane's window and queueing delay, averaged over the samples.
        w = {n: statistics.mean(by_plane(pv, "cwnd").get(n, 0) for pv in samples)
             for n in ("plane0", "plane1")}
        q = {n: statistics.mean(max([queue_us(p) for p in pv if p["plane_name"] == n]
                                    or [0.0]) for pv in samples)
             for n in ("plane0", "plane1")}
        w_ratio.append(w.get("plane1", 0) / max(1, w.get("plane0", 0)))
        q_ratio.append(q["plane1"] / max(1.0, q["plane0"]))
        print("A mid-run, mean of %d samples: plane1's window %.3f of plane0's, its "
              "queueing delay %.0f us against %.0f us"
              % (len(samples), w_ratio[-1], q["plane1"], q["plane0"]))
        print("marked: %.3f Gbit/s, plane1 carried %.1f %% of the bytes"
              % (res["goodput_gbps"], 100 * s_mark[-1]))

    t_mark_end = time.time()
    print("daemons during the runs: %s" % f.load_text(snap))

    # The daemon's telemetry (`history paths`): ecn_fraction per path and
    # interval, from A's samples of the runs' connections.
    rows = f.ctl_json("a", "history", "paths", "--since", "5m", "--limit", "100000")["rows"]

    def ecn(lo, hi, plane):
        return [r["ecn_fraction"] for r in rows if lo <= r["ts"] <= hi and
                r["plane"] == plane and r["tx_bytes_per_s"] > 0 and
                r.get("resolution", "raw") == "raw"]
    for plane in ("plane0", "plane1"):
        b = ecn(t_base, t_base_end, plane)
        f.check(len(b) >= 5 and max(b) < 0.01, "history paths, unmarked: %d samples of %s, "
                "ecn_fraction below 1 %% (max %.4f)" % (len(b), plane, max(b or [-1])))
    m0, m1 = ecn(t_mark, t_mark_end, "plane0"), ecn(t_mark, t_mark_end, "plane1")
    f.check(len(m0) >= 5 and max(m0) < 0.01, "history paths, marked: %d samples of plane0, "
            "ecn_fraction below 1 %% (max %.4f)" % (len(m0), max(m0 or [-1])))
    f.check(len(m1) >= 5 and want / 2 <= statistics.median(m1) <= want * 2,
            "history paths, marked: %d samples of plane1, median ecn_fraction %.3f (%d %% "
            "within a factor 2)" % (len(m1), statistics.median(m1) if m1 else -1, MARK_PCT))

    # The marks' effect: plane1's window cut and its queue held short, at no
    # cost in rate (medians of 3 runs, R = 250 Mbit/s, release, ASan quiet
    # and beside stress-ng --cpu 2: windows 0.08-0.21 of plane0's; queueing
    # delays, release and loaded ASan, 0.07-0.17). One sample at three quarters of each run was judged until
    # a CI run failed at 0.44: a path re-pathed on the marked plane took its
    # new route's minimum RTT from a sample through plane1's queue (1.3 ms
    # for ~30 us), was taken to be across sites, raised to 1 MB and never
    # cut by a mark again (proto/cc.c hint_floor(), proto/conn.c
    # cut_drained(): both now use the plane's smallest RTT).
    wr, qr = statistics.median(w_ratio), statistics.median(q_ratio)
    f.check(wr <= 1 / 3, "marked: plane1's window at most a third of plane0's "
            "(median %.3f)" % wr)
    f.check(qr <= 1 / 2, "marked: plane1's queueing delay at most half of plane0's "
            "(median %.3f)" % qr)
    gm = statistics.median(g_mark)
    f.check(gm * 1e9 >= 0.6 * 2 * rate_bps(RATE), "marked: the two planes still carry most "
            "of their capacity (median %.3f Gbit/s of 2 x %s)" % (gm, RATE))
    print("plane1's share of the bytes A sent: median %.1f %% unmarked, %.1f %% marked"
          % (100 * statistics.median(s_base), 100 * statistics.median(s_mark)))

    f.fabric("ecn", "b", 1, 0)
    f.stop("a")
    f.stop("b")
finally:
    f.close()
