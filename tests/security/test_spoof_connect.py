"""Attack 1 of the security suite: CONNECTs sent in A's name (A's address,
A's service port, a new instance id) while A moves a verified transfer to B.

SPEC 9.4/9.6/9.7/14.2: no packet without B's token changes established or
half-open state. B answers the forged CONNECT with a RETRY (to the real A,
which drops it) and keeps nothing. A second attacker that owns an address of
A's host (another process there) follows the RETRY: its token-less NAK
UNKNOWN_CONN discards the half-open connection and confirms nothing; then it
completes a handshake with a new instance id. B challenges its connections
of A's instance with PROBEs carrying A's token; A answers, nothing is reset,
the transfer verifies.
"""
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("spoofconn")
a, b = p.a, p.b

res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 10}, timeout=120)))
t.start()
live = X.wait_for(lambda: X.conns(b, "established"), 20)
mrtest.check(live, "B has A's established perf connection")
victim = live[0]
time.sleep(1.0)  # the transfer at full speed: its buffers are in the baseline
# B's fds: the attacker's own connection opens paths, and B caches a
# source-port socket per path it sends on (idle ones are not closed yet), so
# B's bound is wider than A's.
ha, hb = X.Health(a), X.Health(b, fds=256)
b0 = b.ok("status")["counters"]
peer_addrs = [(0, a.addrs[0]), (1, a.addrs[1])]

# 1. The exact forgery: from A's address and service port (raw socket).
sp = X.Spoofer()
if sp.available():
    for i in X.bounded(20, 3.0):
        pkt = X.connect(X.rand32(), X.rand64(), X.rand64(), X.SVC_PERF, a.port, peer_addrs)
        sp.send(pkt, (a.addrs[0], a.port), (b.addrs[0], b.port))
        time.sleep(0.05)
        hb.sample()
else:
    print("note: no raw socket (not root): the exact forgery from A's own port is skipped")
sp.close()

# 2. From another port of A's address, claiming A's service port: this
#    attacker gets the ACCEPT, answers it with a token-less NAK UNKNOWN_CONN
#    (which must confirm nothing), then completes the handshake with the
#    acceptor's token (a real new connection of a "new instance").
u = X.socket.socket(X.socket.AF_INET, X.socket.SOCK_DGRAM)
u.bind((a.addrs[0], 0))
u.settimeout(2.0)
ci, ti, inst = X.rand32(), X.rand64(), X.rand64()
bdst = (b.addrs[0], b.port)
acc, cookie = X.handshake(u, bdst, ci, ti, inst, X.SVC_PERF, a.port, peer_addrs)
mrtest.check(acc is not None and acc["op"] == X.OP["ACCEPT"] and cookie != 0,
             "B answered the CONNECT with RETRY, then the CONNECT with its cookie with ACCEPT")
ca, ta = acc["src"], acc["hs_token"]
mine = [c for c in X.conns(b) if int(c["id"], 16) == ca]
mrtest.check(mine and mine[0]["state"] == "half-open", "B's connection is half-open")
u.sendto(X.nak_unknown(ca, ci, ti), bdst)
gone = X.wait_for(lambda: not [c for c in X.conns(b) if int(c["id"], 16) == ca
                               and c["state"] != "ended"], 5)
mrtest.check(gone, "NAK UNKNOWN_CONN discarded the half-open connection, confirmed nothing")

ci2, ti2 = X.rand32(), X.rand64()
acc, _ = X.handshake(u, bdst, ci2, ti2, inst, X.SVC_PERF, a.port, peer_addrs, cookie=cookie)
mrtest.check(acc is not None and acc["op"] == X.OP["ACCEPT"],
             "second CONNECT, with the cookie, accepted")
u.sendto(X.probe(acc["src"], ci2, acc["hs_token"]), bdst)
est = X.wait_for(lambda: [c for c in X.conns(b) if int(c["id"], 16) == acc["src"]
                          and c["state"] == "established"], 5)
mrtest.check(est, "a PROBE with B's token confirms the attacker's own connection")
u.close()

# Still the same connection, still established, while the transfer runs.
time.sleep(3.0)  # longer than the challenge (2.5 s)
now = [c for c in X.conns(b) if c["id"] == victim["id"]]
t.join()
# (on a busy host the attack may outlast the transfer: then A closed the
# connection when its perf was done, which is not the attack's doing)
mrtest.check(now and (now[0]["state"] == "established" or
                      (now[0]["state"] == "ended" and
                       now[0].get("end_reason") == "closed by peer")),
             "A's connection on B survived the forged handshakes (%s)" % now)
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res))
b1 = b.ok("status")["counters"]
mrtest.check(b1["peer_restarts"] == b0["peer_restarts"], "B saw no restart of A")
mrtest.check(b1["challenges"] > b0["challenges"] and
             b1["challenges_answered"] == b1["challenges"] - b0["challenges"] + b0["challenges_answered"],
             "every challenge of A's connections was answered (%d)"
             % (b1["challenges"] - b0["challenges"]))
mrtest.check(b1["half_open_discarded"] > b0["half_open_discarded"],
             "half-open connections discarded by NAK UNKNOWN_CONN: %d"
             % (b1["half_open_discarded"] - b0["half_open_discarded"]))
ha.check()
hb.check()
p.close()
