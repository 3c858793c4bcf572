"""Attack 2 of the security suite: a CONNECT flood (SPEC 9.7, 14.3).

While A moves a verified transfer to B, a bounded flood of CONNECTs (at most
40,000 in at most 8 s, loopback only) arrives at B from thousands of forged
sources, with bad cookies, without the RETRY capability, and, when a raw
socket is available, spoofed from A's own address and port. Meanwhile A
(which holds a cookie from its transfer's handshake) and C (a daemon B has
never heard of, so it must follow a RETRY) each open 5 new connections: all
10 succeed. B keeps no state for the forged sources: its half-open table
holds only the real attempts, its RSS and fds stay bounded."""
import random
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("connflood")
a, b = p.a, p.b
caddrs = mrtest.addr_base("connflood-c")[0:2]
c = mrtest.Daemon(p.tmp.name, "c", caddrs)
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 10}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)
hb = X.Health(b, rss_mib=64, fds=128)
b0 = b.ok("status")["counters"]
bdst = (b.addrs[0], b.port)

stop = threading.Event()
sent = [0]


def flood():
    rnd = random.Random(12)
    sp = X.Spoofer()
    socks = []
    if not sp.available():
        print("note: no raw socket (not root): forged sources are sockets of this "
              "process on random loopback addresses; none is A's own port")
        for _ in range(64):
            s = X.socket.socket(X.socket.AF_INET, X.socket.SOCK_DGRAM)
            s.bind(("127.%d.%d.%d" % (rnd.randrange(1, 255), rnd.randrange(256),
                                      rnd.randrange(1, 255)), 0))
            socks.append(s)
    for i in X.bounded(40000, 8.0):
        if stop.is_set():
            break
        kind = i % 4
        caps = X.CAP_IMM | X.CAP_MULTIPLANE | (0 if kind == 3 else X.CAP_RETRY)
        token = X.rand64() if kind == 2 else 0  # a guessed cookie
        pkt = X.connect(X.rand32(), X.rand64(), X.rand64(), X.SVC_ECHO, 19791,
                        [(0, "127.0.0.1")], token=token, caps=caps)
        if sp.available():
            if kind == 1:   # in A's name, from A's address and service port
                src = (a.addrs[0], a.port)
            else:
                src = ("127.%d.%d.%d" % (rnd.randrange(1, 255), rnd.randrange(256),
                                         rnd.randrange(1, 255)), rnd.randrange(1024, 65535))
            sp.send(pkt, src, bdst)
        else:
            socks[i % len(socks)].sendto(pkt, bdst)
        sent[0] += 1
        if i % 500 == 0:
            time.sleep(0.005)  # bounded rate: about 5,000-10,000 a second
    sp.close()
    for s in socks:
        s.close()


ft = threading.Thread(target=flood)
ft.start()
time.sleep(0.5)
half_max = [0]


def watch():
    while ft.is_alive():
        half_max[0] = max(half_max[0], b.ok("status")["conns"]["half_open"])
        hb.sample()
        time.sleep(0.05)


wt = threading.Thread(target=watch)
wt.start()
ok_a = ok_c = 0
for i in range(5):
    ra = a.request("ping", {"peer": b.peer(), "count": 1}, timeout=60)
    rc = c.request("ping", {"peer": b.peer(), "count": 1}, timeout=60)
    ok_a += bool(ra.get("ok"))
    ok_c += bool(rc.get("ok"))
    if not ra.get("ok") or not rc.get("ok"):
        print("connect failed:", ra, rc)
flooding = ft.is_alive()
ft.join()
wt.join()
t.join()
print("flood: %d CONNECTs sent" % sent[0])
mrtest.check(flooding, "the connects ran while the flood did")
mrtest.check(ok_a == 5, "A (holding a cookie) connected to B 5 of 5 times (%d)" % ok_a)
mrtest.check(ok_c == 5, "C (first contact, a RETRY) connected to B 5 of 5 times (%d)" % ok_c)
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res))
b1 = b.ok("status")["counters"]
d = {k: b1[k] - b0[k] for k in ("connects_rx", "connects_validated", "retries_tx",
                                 "retries_limited", "cookies_bad", "rejects_tx",
                                 "answers_limited", "accepts_tx")}
print(d)
mrtest.check(d["connects_rx"] >= sent[0] // 2, "B received the flood (%d)" % d["connects_rx"])
# 10 real attempts of at most 10 CONNECT transmissions each (a slow,
# sanitizer-built initiator retransmits more).
mrtest.check(d["connects_validated"] <= 100,
             "only the real initiators passed address validation (%d CONNECTs)"
             % d["connects_validated"])
known = sorted(pe["address"] for pe in b.ok("show peers"))
mrtest.check(len(known) == 2 and all(k.split(":")[0] in (a.addrs[0], caddrs[0]) for k in known),
             "B knows exactly two peers, A and C: no forged source got state (%s)" % known)
mrtest.check(d["cookies_bad"] >= sent[0] // 8, "guessed cookies refused (%d)" % d["cookies_bad"])
mrtest.check(d["retries_tx"] + d["retries_limited"] >= sent[0] // 4,
             "RETRY answered or limited for cookie-less CONNECTs")
mrtest.check(half_max[0] <= 4, "B's half-open table held at most %d (<= 4)" % half_max[0])
hb.check()
mrtest.check(c.alive(), "C alive")
c.stop()
p.close()
