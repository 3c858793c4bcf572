"""Path steering to a new source port on a live connection (docs/netns.md).

Two daemons joined by two planes (tc tbf at MR_PLANE_RATE, default
250mbit). During a verified perf from A to B, one active path of the
connection on plane1 is moved with `metaroce-ctl -j path steer CONN PATH
--port N` to a free source port N. Asserted: the reply names the new port;
the path comes back healthy on it (state active; RTT sampled anew: more
than 100 packets acknowledged after the steer and srtt changed; carrying
data: more than 100 packets sent after the steer); B really receives packets from 10.201.0.1:N (an nftables
counter in B's namespace); the path's packets no longer leave from the old
port (the counter on the old port stops); `history events` holds
path.steered; the perf ends with every byte verified.

Needs root, network namespaces, tc and nftables: exits 77 (skipped),
saying why, otherwise.
"""
import os
import re
import subprocess
import time

from netnslib import Fabric, wait_for

RATE = os.environ.get("MR_PLANE_RATE", "250mbit")
PERF_SECONDS = 8


def nft(f, *args):
    r = subprocess.run(["ip", "netns", "exec", f.ns["b"], "nft"] + list(args),
                       capture_output=True, text=True)
    f.check(r.returncode == 0, "nft %s%s" % (" ".join(args), "" if r.returncode == 0
                                             else ": " + r.stderr.strip()))
    return r.stdout


def sport_count(f, port):
    """packets B received on plane1 from A's source port `port`."""
    out = nft(f, "list", "chain", "inet", "mrsteer", "pre")
    m = re.search(r"udp sport %d counter packets (\d+)" % port, out)
    return int(m.group(1)) if m else 0


def path(f, conn, pid):
    return next((p for p in f.req("a", "show paths", {"conn": conn}) if p["id"] == pid), None)


f = Fabric(tbf=RATE, planes=2, full=True)
try:
    f.start("a")
    f.start("b")
    bg = f.perf_start("a", "b", PERF_SECONDS)
    f.check(wait_for(lambda: [c for c in f.req("a", "show conns")
                              if c["state"] == "established"], 3), "A's connection established")
    conn = next(c["id"] for c in f.req("a", "show conns") if c["state"] == "established")
    f.check(wait_for(lambda: [p for p in f.req("a", "show paths", {"conn": conn})
                              if p["plane_name"] == "plane1" and p["state"] == "active" and
                              p["tx_pkts"] > 100], 3), "an active path on plane1 carrying data")
    time.sleep(1.0)
    old = max((p for p in f.req("a", "show paths", {"conn": conn})
               if p["plane_name"] == "plane1" and p["state"] == "active"),
              key=lambda p: p["tx_pkts"])
    used = {p["sport"] for p in f.req("a", "show paths")}
    lo, hi = (int(x) for x in f.planes("a")["plane1"]["source_ports"].split("-"))
    new_port = next(p for p in range(lo + 1000, hi) if p not in used)
    print("steering conn %s path %d (gen %d) from port %d to %d" % (
        conn, old["id"], old["gen"], old["sport"], new_port))

    # Count what B receives from the old and the new port on plane1.
    nft(f, "add", "table", "inet", "mrsteer")
    nft(f, "add", "chain", "inet", "mrsteer", "pre",
        "{ type filter hook prerouting priority -300; policy accept; }")
    for port in (old["sport"], new_port):
        nft(f, "add", "rule", "inet", "mrsteer", "pre", "iifname", "veth-b1", "ip", "saddr",
            f.addr("a", 1), "udp", "sport", str(port), "counter")
    time.sleep(0.3)
    f.check(sport_count(f, old["sport"]) > 0 and sport_count(f, new_port) == 0,
            "before: B receives from port %d, nothing from %d" % (old["sport"], new_port))

    r = f.ctl_json("a", "path", "steer", conn, old["id"], "--port", new_port)
    f.check(r["sport"] == new_port and r["path"] == old["id"],
            "path steer: path %d now on port %d (state %s, gen %s, %s)"
            % (r["path"], r["sport"], r.get("state"), r.get("gen"), r.get("detail")))
    t_steer = time.monotonic()
    before = path(f, conn, old["id"])
    t_active = wait_for(lambda: (path(f, conn, old["id"]) or {}).get("state") == "active" and
                        time.monotonic(), 3.0)
    f.check(bool(t_active), "the path is active again %.0f ms after the steer (right after "
            "it: state %s, srtt %s us, %d packets sent)" % (
                ((t_active or 0) - t_steer) * 1e3, before["state"], before["srtt_us"],
                before["tx_pkts"]))

    def healthy():
        p = path(f, conn, old["id"])
        return (p is not None and p["sport"] == new_port and p["state"] == "active" and
                p["srtt_us"] > 0 and p["srtt_us"] != before["srtt_us"] and
                p["tx_pkts"] > before["tx_pkts"] + 100 and
                p["acked_pkts"] > before["acked_pkts"] + 100) and p
    now = wait_for(healthy, 3.0)
    f.check(bool(now), "the path is healthy on port %d after %.0f ms: %s" % (
        new_port, (time.monotonic() - t_steer) * 1e3,
        {k: (now or path(f, conn, old["id"]) or {}).get(k) for k in
         ("state", "sport", "gen", "local", "srtt_us", "min_rtt_us", "tx_pkts", "acked_pkts")}))
    n_new = sport_count(f, new_port)
    f.check(n_new > 100, "B received %d packets from port %d" % (n_new, new_port))
    n_old = sport_count(f, old["sport"])
    time.sleep(0.5)
    f.check(sport_count(f, old["sport"]) == n_old,
            "nothing from the old port %d any more" % old["sport"])
    f.check(now["local"].endswith(":%d" % new_port), "show paths: local %s" % now["local"])

    rc, res, text = f.perf_wait(bg)
    f.check(rc == 0 and res is not None, "perf answered%s" % (
        "" if res is not None else ": " + text.strip()[:300]))
    f.check_verified(res)
    ev = f.ctl_json("a", "history", "events", "--since", "1m", "--limit", "1000")["rows"]
    st = [x for x in ev if x["kind"] == "path.steered"]
    f.check(len(st) == 1 and str(new_port) in (st[0].get("detail") or ""),
            "history events: path.steered (%s)" % (st[:1],))
    f.stop("a")
    f.stop("b")
finally:
    f.close()
