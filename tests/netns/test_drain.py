"""Plane drain and undrain during live traffic; a drain survives a restart
(docs/netns.md).

Two daemons joined by two planes, each bounded by tc tbf at MR_PLANE_RATE
(default 250mbit), with that link_speed, telemetry every 100 ms. During a verified perf from A to
B, `metaroce-ctl -j plane drain plane1` on A: the reply says drained and
persisted; after the in-flight data has moved (0.3 s), plane1's paths send
no new data for 2 s (their tx_bytes do not change), the plane's tx_bytes
grow by no more than a few probes (< 64 KiB) while plane0's carry the
traffic, `show planes` says admin_state drained, and the telemetry of that
window (`history planes`) has plane1 drained with utilization below 1 %.
`plane undrain plane1`: plane1 carries data again. The perf ends with every
byte verified and no verification error; `history events` holds
plane.drained and plane.restored.

Then plane1 is drained again and A restarted (SIGTERM, start): A comes
back with plane1 drained (admin_state drained); a verified perf sends
nothing on plane1; after `plane undrain plane1` the next verified perf does.

Needs root, network namespaces, tc and nftables: exits 77 (skipped),
saying why, otherwise.
"""
import os
import time

from netnslib import Fabric, by_plane, rate_bps, wait_for

RATE = os.environ.get("MR_PLANE_RATE", "250mbit")
PERF_SECONDS = 8
DRAIN_AT = 2.0
DRAINED_FOR = 2.0
SETTLE = 0.3          # s for the in-flight data to move off the plane
PROBE_BYTES = 65536   # what a drained plane may still send (path probes)


def data_tx(f, name, plane):
    """tx_bytes of the paths on `plane` of daemon `name` (data, all conns)."""
    return by_plane(f.req(name, "show paths"), "tx_bytes").get(plane, 0)


def plane_field(f, name, plane, field):
    return f.planes(name)[plane][field]


f = Fabric(tbf=RATE, planes=2, full=True)
try:
    # link_speed = the tbf rate: utilization is relative to the real capacity.
    conf = dict(yaml_extra="telemetry:\n  interval: 100ms\n",
                plane_extra="    link_speed: %dMbps\n" % (rate_bps(RATE) / 1e6))
    f.start("a", **conf)
    f.start("b", **conf)

    bg = f.perf_start("a", "b", PERF_SECONDS)
    start = time.time()
    f.check(wait_for(lambda: data_tx(f, "a", "plane0") > 0 and data_tx(f, "a", "plane1") > 0,
                     3), "traffic on both planes before the drain")
    time.sleep(max(0, start + DRAIN_AT - time.time()))

    # ---- drain ---------------------------------------------------------------
    r = f.ctl_json("a", "plane", "drain", "plane1")
    f.check(r["drained"] and r["persisted"] and r["admin_state"] == "drained" and
            r["changed"], "plane drain plane1: drained, persisted (%s)" % r)
    time.sleep(SETTLE)
    t_lo = time.time()
    d1, p1, p0 = (data_tx(f, "a", "plane1"), plane_field(f, "a", "plane1", "tx_bytes"),
                  data_tx(f, "a", "plane0"))
    time.sleep(DRAINED_FOR)
    d1e, p1e, p0e = (data_tx(f, "a", "plane1"), plane_field(f, "a", "plane1", "tx_bytes"),
                     data_tx(f, "a", "plane0"))
    t_hi = time.time()
    pl = f.planes("a")["plane1"]
    f.check(pl["admin_state"] == "drained" and pl["drained"] and pl["oper_state"] == "up",
            "show planes: plane1 drained (admin), link up")
    f.check(d1e == d1, "plane1's paths sent no data while drained (%d -> %d bytes)" % (d1, d1e))
    f.check(p1e - p1 < PROBE_BYTES, "plane1 sent %d bytes in %.0f s while drained (probes at "
            "most)" % (p1e - p1, DRAINED_FOR))
    f.check((p0e - p0) * 8 / DRAINED_FOR >= 0.8 * rate_bps(RATE),
            "plane0 carried the traffic at >= 80 %% of its %s (%.3f Gbit/s)"
            % (RATE, (p0e - p0) * 8 / DRAINED_FOR / 1e9))
    f.check(bg.poll() is None, "perf still running")

    # ---- undrain -------------------------------------------------------------
    r = f.ctl_json("a", "plane", "undrain", "plane1")
    f.check(not r["drained"] and r["admin_state"] == "in-service" and r["changed"],
            "plane undrain plane1: in service")
    d1 = data_tx(f, "a", "plane1")
    f.check(wait_for(lambda: data_tx(f, "a", "plane1") > d1 + 65536, 2.0),
            "plane1 carries data again (+%d bytes)" % (data_tx(f, "a", "plane1") - d1))

    rc, res, text = f.perf_wait(bg)
    f.check(rc == 0 and res is not None, "perf answered%s" % (
        "" if res is not None else ": " + text.strip()[:300]))
    f.check_verified(res)

    # The telemetry of the drained window (samples every 100 ms).
    rows = f.ctl_json("a", "history", "planes", "--since", "1m", "--limit", "100000")["rows"]
    win = [x for x in rows if x["plane"] == "plane1" and t_lo + 0.2 <= x["ts"] <= t_hi - 0.2]
    f.check(len(win) >= 5 and all(x["state"] == "drained" for x in win) and
            all(x["utilization"] < 0.01 for x in win),
            "history planes: %d samples of plane1 in the window, all drained, utilization "
            "< 1 %% (max %.4f)" % (len(win), max([x["utilization"] for x in win] or [-1])))
    busy = [x for x in rows if x["plane"] == "plane0" and t_lo + 0.2 <= x["ts"] <= t_hi - 0.2]
    f.check(busy and max(x["utilization"] for x in busy) > 0.8,
            "history planes: plane0 busy meanwhile (utilization up to %.2f)"
            % max([x["utilization"] for x in busy] or [0]))
    ev = f.ctl_json("a", "history", "events", "--since", "1m", "--limit", "1000")["rows"]
    kinds = [(x["kind"], x.get("plane")) for x in ev]
    f.check(("plane.drained", "plane1") in kinds and ("plane.restored", "plane1") in kinds,
            "history events: plane.drained and plane.restored of plane1")

    # ---- a drain survives a restart ------------------------------------------
    r = f.ctl_json("a", "plane", "drain", "plane1")
    f.check(r["drained"] and r["persisted"], "plane1 drained again")
    f.stop("a")
    f.start("a", **conf)
    pl = f.planes("a")["plane1"]
    f.check(pl["drained"] and pl["admin_state"] == "drained",
            "after a restart plane1 is still drained (%s, by %r)"
            % (pl["admin_state"], pl.get("drained_by")))
    res = f.perf("a", "b", 2)
    tx = by_plane(res["paths"], "tx_bytes")
    f.check(tx.get("plane1", 0) == 0 and tx.get("plane0", 0) > 0,
            "a new connection sends nothing on the drained plane (plane0 %d bytes, plane1 %d)"
            % (tx.get("plane0", 0), tx.get("plane1", 0)))
    f.ctl_json("a", "plane", "undrain", "plane1")
    res = f.perf("a", "b", 2)
    tx = by_plane(res["paths"], "tx_bytes")
    f.check(tx.get("plane1", 0) > 0, "after undrain plane1 carries data (%d bytes)"
            % tx.get("plane1", 0))
    f.stop("a")
    f.stop("b")
finally:
    f.close()
