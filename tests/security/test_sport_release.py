"""Connections that come and go leave no source-port sockets behind for long.

Each path of a connection sends from a source-port socket of its own (its
ECMP entropy), which the daemon caches. A socket that no path holds any
more (its connection ended, its path moved to another port) is closed once
it has been unused for 1 s (MRD_SPORT_ORPHAN_S), not after the 30 s that a
socket a path may still send from is kept. Before, a peer that opened
connection after connection (or made paths re-port) held hundreds of the
daemon's descriptors for 30 s after it stopped (and security/connect_flood
failed now and then on its descriptor bound).

While A moves a verified transfer to B, A and B each open ECHO connections
to the other one after another (8 paths each: two planes, 4 paths a plane).
Both daemons' descriptors grow with them, and come back within a few
seconds of the last one (well inside the 30 s idle time) to what they were
at the start plus one per source port that the transfer's paths hold (it
opens more paths as it goes) and one per port they left in the last 3 s
(a sender moves paths off congested routes); once the transfer is over,
to what they were at the start.
"""
import threading
import time

import mrattack as X
import mrtest

NPINGS = 25      # connections each way
BACK_S = 8.0     # orphans close 1-2 s after their connection is freed (its
                 # tombstone: 1 s); room for a loaded host, far below 30 s

p = mrtest.Pair("sportrel")
a, b = p.a, p.b
fa0, fb0 = X.nfds(a.proc.pid), X.nfds(b.proc.pid)
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 15}, timeout=120)), daemon=True)
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.5)
# With the transfer's connection open: its paths' sockets on both sides.
fa1, fb1 = X.nfds(a.proc.pid), X.nfds(b.proc.pid)
print("fds at start: A %d, B %d; with the transfer: A %d, B %d" % (fa0, fb0, fa1, fb1))
# (the bound on descriptors is not the point here: each connection's 8
# sockets are open while it is)
hb = X.Health(b, rss_mib=64, fds=1024)
ha = X.Health(a, rss_mib=64, fds=1024)
c0 = {d.name: d.ok("status")["counters"] for d in (a, b)}

stop = threading.Event()


def watch():
    while not stop.is_set():
        ha.sample()
        hb.sample()
        time.sleep(0.02)


wt = threading.Thread(target=watch, daemon=True)
wt.start()
oks = {"a": 0, "b": 0}


def pings(src, dst):
    for _ in range(NPINGS):
        r = src.request("ping", {"peer": dst.peer(), "count": 1}, timeout=60)
        oks[src.name] += bool(r.get("ok"))
        if not r.get("ok"):
            print("%s ping failed: %s" % (src.name, r))


ths = [threading.Thread(target=pings, args=(a, b), daemon=True),
       threading.Thread(target=pings, args=(b, a), daemon=True)]
t_pings = time.monotonic()
for x in ths:
    x.start()
for x in ths:
    x.join()
t_end = time.monotonic()
print("%d connections each way in %.1f s" % (NPINGS, t_end - t_pings))
mrtest.check(t.is_alive(), "the pings ran while the transfer did")
mrtest.check(oks["a"] == NPINGS and oks["b"] == NPINGS,
             "every ping went through (A %d, B %d of %d)" % (oks["a"], oks["b"], NPINGS))
# The connections opened sockets: the test has something to see.
mrtest.check(hb.fd_max - fb1 >= 16 and ha.fd_max - fa1 >= 16,
             "the connections opened source-port sockets (B up to %d fds, A up to %d, "
             "from %d and %d)" % (hb.fd_max, ha.fd_max, fb1, fa1))



def held(d):
    """The source ports the paths of d's established connections hold now:
    the transfer's (it opens more paths as it goes), not those of the ended
    pings waiting out their last second (SPEC 11.5), whose sockets must go."""
    return len({x["local"] for c in X.conns(d, "established")
                for x in d.ok("show paths", {"conn": c["id"]})})


def moves(d):
    """Re-ports and re-paths of d's established connections so far: each
    leaves a port that closes 1-2 s later (a slow sender under load moves
    dozens of paths a second off congested routes)."""
    return sum(c["stats"]["reports"] + c["stats"]["repaths"] for c in X.conns(d, "established"))


def settled(d, base, hist):
    """d holds at most its descriptors at the start, one socket per port
    its paths hold, one per port they left in the last 3 s, and 4 more."""
    now, m = time.monotonic(), moves(d)
    hist.append((now, m))
    recent = m - min(x for t, x in hist if t >= now - 3.0)
    n, h = X.nfds(d.proc.pid), held(d)
    last[d.name] = (n, base, h, recent)
    return n <= base + h + recent + 4


backs, last = {}, {}
for d, base in ((a, fa0), (b, fb0)):
    hist = []
    back = X.wait_for(lambda: settled(d, base, hist), BACK_S - (time.monotonic() - t_end), 0.1)
    backs[d.name] = time.monotonic() - t_end
    mrtest.check(back, "%s's descriptors came back within %.0f s of the last ping to those at "
                 "the start, one per port its open paths hold, one per port they left in the "
                 "last 3 s, and 4: %d <= %d + %d + %d + 4 (by kind %s; connections %s)"
                 % ((d.name, BACK_S) + last[d.name] +
                    (X.fd_kinds(d.proc.pid), [(c["id"], c["state"]) for c in X.conns(d)])))
print("back after %.1f s (A), %.1f s (B)" % (backs["a"], backs["b"]))
for d in (a, b):
    c1 = d.ok("status")["counters"]
    n = c1["sport_orphans_closed"] - c0[d.name]["sport_orphans_closed"]
    i = c1["sport_idle_closed"] - c0[d.name]["sport_idle_closed"]
    print("%s: %d orphan source-port sockets closed, %d idle ones" % (d.name, n, i))
    mrtest.check(n >= 16, "%s counted the orphans it closed (%d)" % (d.name, n))
stop.set()
wt.join()
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % (res["result"]["verified"] if res.get("ok")
                                                 else res))
# Its connection's paths kept their sockets while it ran: it is over now,
# and its sockets go too.
gone = X.wait_for(lambda: X.nfds(b.proc.pid) <= fb0 + 4 and X.nfds(a.proc.pid) <= fa0 + 4,
                  BACK_S, 0.1)
mrtest.check(gone, "after the transfer, both daemons are back to their descriptors at start "
             "(A %d of %d, B %d of %d)" % (X.nfds(a.proc.pid), fa0, X.nfds(b.proc.pid), fb0))
ha.check()
hb.check()
p.close()
