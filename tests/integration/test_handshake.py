"""Two daemons on loopback: handshake, status, show * JSON fields, ping."""
import mrtest

p = mrtest.Pair("handshake")
a, b = p.a, p.b
st = a.ok("status")
for k in ("version", "instance_id", "uptime_s", "planes", "conns", "counters", "datapath"):
    mrtest.check(k in st, "status has %s" % k)
mrtest.check(st["planes"] == 2, "two planes")

r = a.ok("ping", {"peer": b.peer(), "count": 3}, timeout=30)
mrtest.check(len(r["rtt_us"]) == 3 and r["min_us"] > 0, "ping: 3 round trips")
# PROBE round trips per path: every active path of the connection was probed,
# answers came back on every path (the daemon echoes on, uncounted, while a
# PROBE is out: on a loaded host the answers of one plane's socket can come
# a loop iteration after the echo; a PROBE still out after that is the only
# one allowed to be missing), each RTT positive and below a second.
pr = r["probes"]
active = [x for x in r["paths"] if x["state"] == "active"]
mrtest.check(len(pr) >= 1 and len(pr) >= len(active) and
             all(x["sent"] >= 1 and x["answered"] >= 1 and x["answered"] <= x["sent"] and
                 x["sent"] - x["answered"] <= 1 and len(x["rtt_us"]) == x["answered"] and
                 all(0 < v < 1e6 for v in x["rtt_us"]) for x in pr),
             "ping: PROBE round trips on %d paths: %s" % (
                 len(pr), [(x["path"], x["sent"], x["answered"], x.get("min_us")) for x in pr]))
mrtest.check(r["conn"]["plane_pairs"] == 2, "handshake paired both planes")
mrtest.check(r["conn"]["mtu"] == 4096, "negotiated mtu 4096")

peers = a.ok("show peers")
mrtest.check(len(peers) == 1 and peers[0]["instance_id"] == b.ok("status")["instance_id"],
             "A knows B's instance id")
conns_b = b.ok("show conns")
mrtest.check(len(conns_b) == 1 and conns_b[0]["role"] == "acceptor", "B has the acceptor side")
# the handshake's round trip and the initial timeout it gave each engine:
# at least timers.rto_initial (default 5 ms; test_rto_initial.py: the rule)
for name, c in (("initiator", r["conn"]), ("acceptor", conns_b[0])):
    mrtest.check(c.get("handshake_rtt_us", 0) > 0 and c.get("rto_initial_us", 0) >= 5000,
                 "%s: handshake_rtt_us %s, rto_initial_us %s" % (
                     name, c.get("handshake_rtt_us"), c.get("rto_initial_us")))

# show paths while a connection lives: run a short perf in the background
# through a second control connection and look at the paths meanwhile.
import threading
res = {}
t = threading.Thread(target=lambda: res.update(a.request("perf", {"peer": b.peer(), "seconds": 1.5})))
t.start()
paths, one = [], []
for _ in range(100):
    paths = [x for x in a.ok("show paths") if x["state"] == "active"]
    if paths:
        one = a.ok("show paths", {"conn": paths[0]["conn"]})
        break
    mrtest.time.sleep(0.02)
t.join()
mrtest.check(len(paths) >= 2, "show paths lists active paths during perf")
for k in ("conn", "id", "gen", "plane", "state", "sport", "local", "remote", "cwnd",
          "inflight", "srtt_us", "min_rtt_us", "tx_pkts", "retx_pkts", "lost_pkts",
          "ce_pkts", "rx_pkts"):
    mrtest.check(k in paths[0], "path field %s" % k)
mrtest.check(res.get("ok") and res["result"]["verified"], "short perf verified%s" % (
    "" if res.get("ok") else ": %s" % res.get("error")))
mrtest.check(one and all(x["conn"] == paths[0]["conn"] for x in one), "show paths --conn filters")
r = a.request("show paths", {"conn": "zz"})
mrtest.check(not r["ok"] and r["error"]["code"] == "bad_request", "bad conn id refused")
p.close()
