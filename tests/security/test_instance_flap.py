"""Attack 1 in orderings the issue's list did not name: a host that owns an
address of A's host (another process there) completes handshake after
handshake with B in A's name (A's service port), each naming a new
instance id, and confirms each with B's token, while A moves a verified
transfer to B and opens new ECHO connections to B. Before each new
instance it also sends, from its own port, a NAK UNKNOWN_CONN for A's
connection with a guessed token_echo and a CONNECT with a wrong cookie.

Each confirmed handshake is authenticated, so B records the attacker's
instance as A's and challenges A's connections; A answers every challenge,
and every one of A's own handshakes flips the record back and challenges
the attacker's connections (those it stops answering end as "peer
restarted"). Nothing of A's ends: its connection is still established after
the attack, the transfer verifies, all of A's pings succeed, the forged
NAKs are dropped as TOKEN, and B's RSS and fds stay bounded.
"""
import socket
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("instflap", extra_env={"MRD_SPORT_IDLE_S": "3"})
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 10}, timeout=120)))
t.start()
live = X.wait_for(lambda: X.conns(b, "established"), 20)
mrtest.check(live, "B has A's established perf connection")
victim = live[0]
time.sleep(1.0)
# A's own pings open a connection each, whose paths cache source-port
# sockets until they sit idle (3 s here, 30 s by default): A's descriptors
# grow with them. B's grow more: the attacker's connections announce A's
# addresses and service port, where A ignores their PROBEs, so their paths
# fail and re-port (a new source port each time) until the connection ends
# (about 70 sockets per connection in a release build, fewer under ASan);
# they close once idle, below.
ha, hb = X.Health(a, fds=1024), X.Health(b, fds=4096)
fdb0 = X.nfds(b.proc.pid)
b0 = b.ok("status")["counters"]
bdst = (b.addrs[0], b.port)
addrs = [(0, a.addrs[0]), (1, a.addrs[1])]

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((a.addrs[0], 0))
u.settimeout(2.0)
cookie = 0
mine = []
stop = threading.Event()
pings = {"ok": 0, "n": 0}


def pinger():
    while not stop.is_set():
        r = a.request("ping", {"peer": b.peer(), "count": 1}, timeout=60)
        pings["n"] += 1
        pings["ok"] += bool(r.get("ok"))
        if not r.get("ok"):
            print("ping failed:", r)
        time.sleep(0.1)


pt = threading.Thread(target=pinger)
pt.start()
rounds = 0
for i in X.bounded(30, 7.0):
    # a guessed NAK UNKNOWN_CONN for A's connection and a guessed cookie
    u.sendto(X.nak_unknown(int(victim["id"], 16), X.rand32(), X.rand64()), bdst)
    u.sendto(X.connect(X.rand32(), X.rand64(), X.rand64(), X.SVC_ECHO, a.port, addrs,
                       token=X.rand64()), bdst)
    ci, ti, inst = X.rand32(), X.rand64(), X.rand64()
    acc, cookie = X.handshake(u, bdst, ci, ti, inst, X.SVC_ECHO, a.port, addrs,
                              cookie=cookie)
    if acc is None or acc["op"] != X.OP["ACCEPT"]:
        print("round %d: no ACCEPT (%s)" % (i, acc))
        continue
    u.sendto(X.probe(acc["src"], ci, acc["hs_token"]), bdst)
    mine.append((acc["src"], ci, acc["hs_token"]))
    rounds += 1
    # answer B's challenges of our earlier connections: any packet with
    # B's token on them
    for (cid, myci, tok) in mine[-8:]:
        u.sendto(X.probe(cid, myci, tok, ack_req=False), bdst)
    hb.sample()
    time.sleep(0.2)
# A's transfer is still running: its connection must still be there.
now = [c for c in X.conns(b) if c["id"] == victim["id"]]
stop.set()
pt.join()
t.join()
u.close()
print("%d confirmed handshakes with new instance ids; A's pings %d of %d"
      % (rounds, pings["ok"], pings["n"]))
mrtest.check(rounds >= 10, "the attacker confirmed %d handshakes in A's name" % rounds)
mrtest.check(now and now[0]["state"] == "established",
             "A's connection on B is still established after the attack (%s)"
             % (now[0]["state"] if now else "gone"))
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res))
mrtest.check(pings["n"] >= 5 and pings["ok"] == pings["n"],
             "all of A's pings to B succeeded meanwhile (%d of %d)" % (pings["ok"], pings["n"]))
b1 = b.ok("status")["counters"]
d = {k: b1[k] - b0[k] for k in ("challenges", "challenges_answered", "peer_restarts",
                                 "cookies_bad")}
d["drops_token"] = b1["drops"]["TOKEN"] - b0["drops"]["TOKEN"]
print(d)
# The attacker's own connections that it stopped answering end as "peer
# restarted" when A's next handshake challenges them (they are filed under
# A's address and service port); A's never do (above).
mrtest.check(d["peer_restarts"] <= rounds,
             "restarts recognised: only of the attacker's instances (%d of %d)"
             % (d["peer_restarts"], rounds))
mrtest.check(d["challenges"] > 0, "B challenged (%d connections)" % d["challenges"])
mrtest.check(d["drops_token"] >= rounds, "the guessed NAKs were dropped as TOKEN (%d)"
             % d["drops_token"])
mrtest.check(d["cookies_bad"] >= rounds, "the guessed cookies were refused (%d)"
             % d["cookies_bad"])
ha.check()
hb.check()
back = X.wait_for(lambda: X.nfds(b.proc.pid) <= fdb0 + 32, 20, 0.5)
mrtest.check(back, "B's descriptors came back down after the attack (%d, %d before, %d at most)"
             % (X.nfds(b.proc.pid), fdb0, hb.fd_max))
p.close()
