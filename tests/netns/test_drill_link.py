"""A failover drill that sets a real link down during live verified traffic
(docs/netns.md).

Two daemons joined by two planes, each bounded by tc tbf at MR_PLANE_RATE
(default 250mbit) and configured with that link_speed, so that the drill's
redistribution target is the surviving plane's capacity. Live application
traffic runs in the background: `metaroce-perf client --verify` on A
(through libmetaroce and A's daemon) to `metaroce-perf server` on B, WRITE_IMM
of 64 KiB on 4 streams, every byte and every completion checked; during it,
`metaroce-ctl -j drill plane plane1 --peer B --duration 3s --link` on A sets
veth-a1 down through netlink, keeps it down 3 s, and restores it.

Asserted: the drill passes and its report says the link was taken out and
restored, detection within 10 ms (by the report, and from the kernel's
link-down notification, seen by a netlink listener of the test's own, to
the daemon's plane-down log line), zero lost and zero duplicated completions
and no verification error in the drill's own verified traffic; the
surviving plane carried at least 90 % of its capacity while plane1 was out:
by the report (redistribution to 90 % of the capacity reached while out)
and, independently, by the bytes B received on plane0 in a 1.5 s window
starting 0.5 s into the outage, read every 50 ms (each reading dated at the
middle of its request; the series, the daemons' waits for a CPU and the
mean are printed): at least 90 % in the median 50 ms step, so that a
daemon starved of CPU by other work for part of the window does not fail
a transport that fills the plane whenever it runs; plane1 carried
nothing then and carries traffic again after the drill; the application's
run ends with zero lost or duplicated completions, no verification error,
no failed completion, and every message verified by the server; `history
drills` holds the same report.

Needs root, network namespaces, tc and nftables: exits 77 (skipped),
saying why, otherwise.
"""
import json
import os
import subprocess
import sys
import time

from netnslib import Fabric, rate_bps, wait_for

RATE = os.environ.get("MR_PLANE_RATE", "250mbit")
PERF_SECONDS = 12
DRILL_AT = 2.0      # s into the perf
DRILL_OUT = 3       # s the plane stays out
DETECT_MAX_MS = 10.0



MPERF = os.environ.get("MRC_PERF", "")
if not MPERF or not os.access(MPERF, os.X_OK):
    print("SKIP: MRC_PERF is not set to the metaroce-perf binary")
    sys.exit(77)

cap_gbps = rate_bps(RATE) / 1e9   # one plane; one survives
f = Fabric(tbf=RATE, planes=2, full=True)
server = client = None
try:
    pe = "    link_speed: %dMbps\n" % (rate_bps(RATE) / 1e6)
    f.start("a", plane_extra=pe)
    f.start("b", plane_extra=pe)

    # The live traffic: two applications through libmetaroce.
    srv_out = open(f.path("mperf-server.json"), "w+")
    server = subprocess.Popen(["ip", "netns", "exec", f.ns["b"], MPERF, "server", "--socket",
                               f.socks["b"] + ".app", "--once", "--json"],
                              stdout=srv_out, stderr=subprocess.STDOUT)
    time.sleep(0.5)
    cli_out = open(f.path("mperf-client.json"), "w+")
    client = subprocess.Popen(["ip", "netns", "exec", f.ns["a"], MPERF, "client", f.addr("b"),
                               "--socket", f.socks["a"] + ".app", "--op", "write_imm",
                               "--size", "65536", "--streams", "4", "--depth", "16",
                               "--seconds", str(PERF_SECONDS), "--verify", "--json"],
                              stdout=cli_out, stderr=subprocess.STDOUT)
    start = time.time()
    f.check(wait_for(lambda: f.plane_tx("a", "plane0") > 0 and f.plane_tx("a", "plane1") > 0, 3),
            "traffic on both planes before the drill")
    time.sleep(max(0, start + DRILL_AT - time.time()))

    # An observer of our own: when does the kernel announce veth-a1 down?
    link_down_at = f.watch_link_down("a", "veth-a1")
    out = open(f.path("drill.json"), "w+")
    drill = subprocess.Popen([f.ctl, "-s", f.socks["a"], "-j", "drill", "plane", "plane1",
                              "--peer", f.addr("b"), "--duration", "%ds" % DRILL_OUT, "--link"],
                             stdout=out, stderr=subprocess.STDOUT)
    # ---- while plane1 is out ------------------------------------------------
    t_out = wait_for(lambda: f.planes("a")["plane1"]["state"] == "down" and time.monotonic(),
                     2.0)
    f.check(bool(t_out), "plane1 down (link) on A during the drill")
    link = subprocess.run(["ip", "-n", f.ns["a"], "-o", "link", "show", "veth-a1"],
                          capture_output=True, text=True).stdout
    f.check("state DOWN" in link and ",UP" not in link and "<UP" not in link,
            "the kernel has veth-a1 administratively down: %s" % link.split(">")[0])
    time.sleep(0.5)  # redistribution, measured by the drill itself
    tx1 = f.plane_tx("a", "plane1")
    # B's plane0 byte count every 50 ms for 1.5 s. Each reading is dated at
    # the middle of its request, so that this process waiting for a CPU
    # after an answer does not count as time the link was idle; the
    # series is printed for triage.
    wait0 = {h: f.wait_seconds(h) for h in ("a", "b")}
    series = []
    while not series or series[-1][0] - series[0][0] < 1.5:
        q0 = time.monotonic()
        rx = f.planes("b")["plane0"]["rx_bytes"]
        q1 = time.monotonic()
        series.append(((q0 + q1) / 2, rx, q1 - q0))
        time.sleep(0.05)
    (t0, rx0, _), (t1, rx0_end, _) = series[0], series[-1]
    tx1_end = f.plane_tx("a", "plane1")
    still_down = f.planes("a")["plane1"]["state"] == "down"
    f.check(still_down, "plane1 still out at the end of the measuring window")
    surv = (rx0_end - rx0) * 8 / (t1 - t0) / 1e9
    steps = [(y[1] - x[1]) * 8 / (y[0] - x[0]) / 1e9 for x, y in zip(series, series[1:])]
    med = sorted(steps)[len(steps) // 2]
    print("B's plane0 in Mbit/s, every ~50 ms: %s" % " ".join("%.0f" % (x * 1e3) for x in steps))
    print("longest request %.1f ms; daemons waited for a CPU during the window: %s" % (
        1e3 * max(s[2] for s in series),
        ", ".join("%s %.0f ms" % (h, 1e3 * (f.wait_seconds(h) - wait0[h])) for h in wait0)))
    for c in f.req("a", "show conns"):
        if c["state"] == "established":
            print("A conn %s while out: %s" % (c["id"], {k: c["stats"][k] for k in (
                "pacing_bps", "qwnd", "rate_hint_bps", "npaths_active", "rto_count",
                "lost_pkts")}))
    print("B received %.3f Gbit/s on plane0 while plane1 was out (capacity %.3f; median "
          "of the 50 ms steps %.3f)" % (surv, cap_gbps, med))
    # The median step, not the mean: a daemon that waited for a CPU
    # (printed above; on a host loaded with other work, daemons here
    # waited 0.9 s of these 1.5 s) idles the link for that long whatever
    # the transport does; a surviving plane the transport does not fill
    # is below the bar in most steps.
    f.check(med >= 0.9 * cap_gbps, "the surviving plane carried >= 90 %% of its capacity in "
            "most 50 ms steps (median %.0f %%, mean %.0f %%)"
            % (100 * med / cap_gbps, 100 * surv / cap_gbps))
    f.check(tx1_end == tx1, "plane1's paths sent nothing while out (%d -> %d packets)"
            % (tx1, tx1_end))

    try:
        rc = drill.wait(60)
    except subprocess.TimeoutExpired:
        drill.kill()
        rc = None
    out.seek(0)
    text = out.read()
    try:
        rep = json.loads(text)
    except ValueError:
        rep = None
    f.check(rep is not None, "drill report%s" % ("" if rep else ": " + text.strip()[:400]))
    print("drill report: detection %.3f ms, redistribution %s ms, tx Gbit/s %s, perf %s"
          % (rep["detection_ms"], rep["redistribution_ms"], rep["tx_gbps"], rep["perf"]))
    f.check(rc == 0 and rep["pass"], "drill exit 0 and pass (exit %s)" % rc)
    f.check(rep["action"] == "link" and rep["interface"] == "veth-a1" and rep["taken_out"] and
            rep["restored"] and not rep["cancelled"],
            "the link was taken out and restored (out %.3f s)" % rep["out_s"])
    f.check(rep["detection_ms"] is not None and 0 <= rep["detection_ms"] <= DETECT_MAX_MS,
            "report: detected within %d ms (%.3f ms)" % (DETECT_MAX_MS, rep["detection_ms"]))
    # Independently: from the kernel's link-down notification (seen by our
    # own netlink listener) to the daemon's plane-down log line, written
    # once every connection has been told.
    t_k = link_down_at()
    f.check(t_k is not None, "our netlink listener saw veth-a1 go down")
    t_log = f.log_time("a", r"plane plane1: down", t_k - 0.05)
    f.check(t_log is not None, "A logged plane1 down")
    lat = (t_log - t_k) * 1e3
    print("kernel link-down notification -> daemon's plane-down log line: %.3f ms" % lat)
    f.check(lat <= DETECT_MAX_MS, "the daemon acted within %d ms of the kernel's "
            "notification (%.3f ms)" % (DETECT_MAX_MS, lat))
    p = rep["perf"]
    f.check(p is not None and p["completions"] > 0 and p["lost_completions"] == 0 and
            p["duplicated_completions"] == 0 and p["verify_errors"] == 0 and p["verified"],
            "drill traffic: %s completions, 0 lost, 0 duplicated, 0 verification errors"
            % (p and p["completions"]))
    # The report's own view of "afterwards": the redistribution time is when
    # the surviving plane first sent its target (90 % of the lesser of the
    # pre-drill rate and its capacity) over 50 ms; the target must be 90 %
    # of the capacity (the planes were full before), reached while out.
    f.check(rep["redistribution_target_gbps"] >= 0.9 * 0.99 * cap_gbps and
            rep["redistribution_ms"] is not None and
            rep["redistribution_ms"] < rep["out_s"] * 1e3,
            "report: redistributed to %.3f Gbit/s (90 %% of %.3f) after %s ms (tx while out, "
            "averaged over the outage: %.3f Gbit/s)" % (
                rep["redistribution_target_gbps"], cap_gbps, rep["redistribution_ms"],
                rep["tx_gbps"]["during_surviving_planes"]))

    # ---- after ---------------------------------------------------------------
    f.check(wait_for(lambda: f.planes("a")["plane1"]["state"] == "up", 2.0),
            "plane1 up again after the drill")
    tx1 = f.plane_tx("a", "plane1")
    f.check(wait_for(lambda: f.plane_tx("a", "plane1") > tx1 + 100, 3.0),
            "plane1 carries traffic again")

    try:
        rc = client.wait(PERF_SECONDS + 60)
    except subprocess.TimeoutExpired:
        client.kill()
        rc = client.wait()
    cli_out.seek(0)
    text = cli_out.read()
    res = None
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except ValueError:
                pass
    f.check(res is not None, "metaroce-perf client answered%s" % (
        "" if res is not None else ": " + text.strip()[-300:]))
    print("application traffic: %s" % json.dumps(res))
    f.check(rc == 0 and res["ok"] and res["messages"] > 0 and res["lost"] == 0 and
            res["duplicated"] == 0 and res["verify_errors"] == 0 and res["bad_status"] == 0 and
            res["server_verified"] == res["messages"],
            "metaroce-perf --verify across the drill: %d messages (%.3f Gbit/s), 0 lost, "
            "0 duplicated, 0 verification errors, 0 failed, %d verified by the server"
            % (res["messages"], res["gbps"], res["server_verified"]))

    hist = f.ctl_json("a", "history", "drills")
    rows = [r for r in hist["rows"] if r["id"] == rep["id"]]
    f.check(len(rows) == 1 and rows[0]["report"]["detection_ms"] == rep["detection_ms"] and
            rows[0]["report"]["pass"] == rep["pass"] and
            rows[0]["report"]["perf"] == rep["perf"],
            "history drills holds the report (drill %d)" % rep["id"])
    f.stop("a")
    f.stop("b")
finally:
    for p in (client, server):
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
    f.close()
