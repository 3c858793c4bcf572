"""Attack 2 in a form the issue's list did not name: a CONNECT flood from
sources that do own their addresses, so every CONNECT carries a valid
cookie (SPEC 9.7).

While A moves a verified transfer to B, an attacker binds 200 UDP ports on
each of two loopback addresses of its own, follows B's RETRY on each (one
cookie per address and port) and then, for at most 8 s, sends validated
CONNECTs with fresh connection ids from all of them, each claiming its own
port as service port (so no single peer's bound of 128 half-open
connections applies). It never confirms one: they stay half-open until they
expire. Meanwhile A and C (which B has never heard of) open 5 connections
each: all 10 succeed. B's half-open table stays within what the attacker's
two addresses may draw from the per-source ACCEPT budget, its ACCEPTs to
them are limited, and its RSS and descriptors stay bounded. Then a second
round confirms what it gets (a PROBE with B's token): B holds at most
transport.max_conns_per_address (200 here) connections from each address
and refuses the rest with REJECT RESOURCES; once the attacker is silent, B
ends those connections by itself ("peer silent", 30 s) and closes their
source-port sockets (MRD_SPORT_IDLE_S=3 here): its descriptors come back
down.
"""
import random
import socket
import threading
import time

import mrattack as X
import mrtest

PER_ADDR = 200
p = mrtest.Pair("cookieflood", extra_env={"MRD_SPORT_IDLE_S": "3"},
                yaml_extra="transport:\n  max_conns_per_address: %d\n" % PER_ADDR)
a, b = p.a, p.b
caddrs = mrtest.addr_base("cookieflood-c")[0:2]
c = mrtest.Daemon(p.tmp.name, "c", caddrs)
evil = mrtest.addr_base("cookieflood-x")[0:2]
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 12}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)
hb = X.Health(b, rss_mib=64, fds=128)
b0 = b.ok("status")["counters"]
bdst = (b.addrs[0], b.port)

# ---- cookies: one per address and port ----------------------------------------
socks = []
for addr in evil:
    for _ in range(200):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((addr, 0))
        s.setblocking(False)
        socks.append({"s": s, "port": s.getsockname()[1], "addr": addr,
                      "inst": X.rand64(), "cookie": 0})


def drain(x, confirm=False):
    """Read what B sent to x: RETRY gives the cookie; ACCEPT is counted
    (and confirmed with a PROBE carrying B's token if confirm)."""
    n = 0
    while True:
        try:
            r = X.parse(x["s"].recv(2048))
        except BlockingIOError:
            return n
        if not r:
            continue
        if r["op"] == X.OP["RETRY"]:
            x["cookie"] = r["cookie"]
        elif r["op"] == X.OP["ACCEPT"]:
            n += 1
            if confirm:
                x["s"].sendto(X.probe(r["src"], r["dst"], r["hs_token"]), bdst)


end = time.monotonic() + 8.0
while time.monotonic() < end and not all(x["cookie"] for x in socks):
    for x in socks:
        if not x["cookie"]:
            x["s"].sendto(X.connect(X.rand32(), X.rand64(), x["inst"], X.SVC_ECHO, x["port"],
                                    [(0, x["addr"])]), bdst)
    time.sleep(0.1)
    for x in socks:
        drain(x)
have = sum(bool(x["cookie"]) for x in socks)
print("cookies: %d of %d ports" % (have, len(socks)))
mrtest.check(have >= len(socks) // 2, "the attacker holds valid cookies for %d ports" % have)
socks = [x for x in socks if x["cookie"]]

# ---- the flood: validated CONNECTs, never confirmed ------------------------------
stop = threading.Event()
sent = [0]
accepts = [0]
confirm = [False]


def flood(seconds):
    rnd = random.Random(5)
    for i in X.bounded(200000, seconds):
        if stop.is_set():
            break
        x = socks[rnd.randrange(len(socks))]
        x["s"].sendto(X.connect(X.rand32(), X.rand64(), x["inst"], X.SVC_ECHO, x["port"],
                                [(0, x["addr"])], token=x["cookie"]), bdst)
        sent[0] += 1
        if i % 200 == 0:
            for y in socks:
                accepts[0] += drain(y, confirm[0])
            time.sleep(0.005)


half_max = [0]


def watch(ft):
    while ft.is_alive():
        half_max[0] = max(half_max[0], b.ok("status")["conns"]["half_open"])
        hb.sample()
        time.sleep(0.05)


ft = threading.Thread(target=flood, args=(8.0,))
ft.start()
wt = threading.Thread(target=watch, args=(ft,))
wt.start()
time.sleep(0.5)
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
b1 = b.ok("status")["counters"]
d = {k: b1[k] - b0[k] for k in ("connects_rx", "connects_validated", "accepts_tx",
                                 "accepts_limited", "half_open_full", "retries_tx")}
print("flood: %d validated CONNECTs sent, %d ACCEPTs came back; B: %s; half-open at most %d"
      % (sent[0], accepts[0], d, half_max[0]))
mrtest.check(flooding, "the connects ran while the flood did")
mrtest.check(ok_a == 5, "A connected to B 5 of 5 times (%d)" % ok_a)
mrtest.check(ok_c == 5, "C (first contact) connected to B 5 of 5 times (%d)" % ok_c)
mrtest.check(d["connects_validated"] >= sent[0] // 2,
             "B took the attacker's cookies as valid (%d)" % d["connects_validated"])
mrtest.check(d["accepts_limited"] > 0, "B limited its ACCEPTs to the attacker (%d)"
             % d["accepts_limited"])
# Per source address 100 ACCEPTs a second, each half-open for 3 s: two
# addresses hold at most 2 x (100 burst + 3 s x 100) = 800; A's and C's few.
mrtest.check(half_max[0] <= 820, "B's half-open table held at most %d (<= 820)" % half_max[0])
hb.check()

# ---- confirmed: established connections from the attacker's addresses ----------
# Each connection's paths hold source-port sockets while they send (probes
# here); 2 x 200 connections of 1 plane pair: at most 1,500 descriptors.
fd1 = X.nfds(b.proc.pid)
hb2 = X.Health(b, rss_mib=64, fds=1500)
b1 = b.ok("status")["counters"]
confirm[0] = True
flood(6.0)
time.sleep(0.5)
for x in socks:
    drain(x, True)
mine = [cn for cn in X.conns(b) if cn.get("peer", "").split(":")[0] in evil and
        cn["state"] in ("established", "half-open")]
b2 = b.ok("status")["counters"]
hb2.sample()
print("held from the attacker: %d connections (%d established); refused over the bound: %d; "
      "B's fds at most %d (%d before)" % (
          len(mine), len([cn for cn in mine if cn["state"] == "established"]),
          b2["conns_per_addr_full"] - b1["conns_per_addr_full"], hb2.fd_max, fd1))
mrtest.check(len(mine) <= 2 * PER_ADDR,
             "B holds at most %d connections from the attacker's 2 addresses (%d)"
             % (2 * PER_ADDR, len(mine)))
mrtest.check(b2["conns_per_addr_full"] > b1["conns_per_addr_full"],
             "... and refused the CONNECTs over that bound (%d)"
             % (b2["conns_per_addr_full"] - b1["conns_per_addr_full"]))
# Silent from now on: B's connections to it end by themselves.
gone = X.wait_for(lambda: not [cn for cn in X.conns(b, "established")
                               if cn.get("peer", "").split(":")[0] in evil], 45, 0.5)
mrtest.check(gone, "B ended the silent attacker's connections by itself (%d as peer silent)"
             % (b.ok("status")["counters"]["conns_silent"] - b1["conns_silent"]))
for x in socks:
    x["s"].close()
t.join()
back = X.wait_for(lambda: X.nfds(b.proc.pid) <= fd1 + 16, 20, 0.5)
mrtest.check(back, "B's descriptors came back down (%d, %d before)"
             % (X.nfds(b.proc.pid), fd1))
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
hb2.check()
mrtest.check(c.alive(), "C alive")
c.stop()
p.close()
