"""Attack 3 against the daemon's budget from one address: the connections
with one peer IP address may hold at most transport.address_memory_share
of transport.memory together (SPEC 14.4), so peers at one address cannot
take the whole budget and make every other peer's messages wait.

An application on B hands out the rkey of a 64 MiB region; an attacker at
an address of its own (a loopback address neither daemon uses) opens 3
connections at MTU 256 and sends the first packets of ever more 64 MiB
WRITEs on each, finishing none. Each connection may hold 8 MiB, all of B's
connections 24 MiB, one address 50 % of that (12 MiB): without the share
the three connections would hold all 24 MiB. The attacker's connections
together stay within 12 MiB, the allocations past it are refused, counted
(engine_memory_refused_address) and answered NAK RNR; then, with the
attacker still holding its share, A (another address) starts a verified
transfer to B, whose new connection needs memory the attacker did not get:
it verifies.
"""
import threading
import time

import mrattack as X
import mrtest

CONN_MIB, ALL_MIB, SHARE, NCONN = 8, 24, 50, 3
ADDR_MIB = ALL_MIB * SHARE // 100
p = mrtest.Pair("memaddr", yaml_extra="transport:\n  conn_memory: %dMiB\n  memory: %dMiB\n"
                "  address_memory_share: %d\n" % (CONN_MIB, ALL_MIB, SHARE))
a, b = p.a, p.b
# an address of the attacker's own: the same /24 as A's plane0, another host
o = [int(x) for x in a.addrs[0].split(".")]
used = set(a.addrs) | set(b.addrs)
evil = next(ip for ip in ("127.%d.%d.%d" % (o[1], o[2], (o[3] + k) % 250 + 2)
                          for k in range(1, 10)) if ip not in used)
hb = X.Health(b, rss_mib=(2 * ALL_MIB + 32 if X.sanitized(b.proc.pid) else ALL_MIB + 24),
              fds=160)
b0 = b.ok("status")["counters"]

SVC = 0x4d454d33  # "MEM3"
app, region, rkey = X.victim_app(b, SVC)
bdst = (b.addrs[0], b.port)
conns = X.attacker_conns(b, evil, SVC, NCONN)
ids = {c["ca"] for c in conns}

# 3 x 3000 message starts of 64 MiB: each needs tracking memory (32 KiB at
# MTU 256), more than the 24 MiB all three connections could hold without
# the share; then 3 x 600 starts of 4 KiB messages, whose tracking is small
# enough to take the crumbs the large ones left. The attacker answers B's
# PROBEs, so its connections (and what they hold) live on.
naks = {}
X.flood_starts(conns, bdst, region, rkey, 3600, 10.0, naks,
               size=lambda i: 64 << 20 if i < 3000 else 4096, answer_to=bdst, sample=hb.sample)
hb.sample()
st = b.ok("status")["counters"]
held = {int(c["id"], 16): c["memory"] for c in X.conns(b) if int(c["id"], 16) in ids}
total = sum(m["bytes"] for m in held.values())
print("NAKs by reason %s; engine memory %d bytes; attacker's connections %d bytes: %s"
      % (naks, st["engine_memory"], total, {"%08x" % k: v for k, v in held.items()}))
mrtest.check(all(m["address_limit"] == ADDR_MIB << 20 for m in held.values()),
             "show conns reports the address's share (%d MiB)" % ADDR_MIB)
mrtest.check(all(m["address_bytes"] <= ADDR_MIB << 20 for m in held.values()),
             "the attacker's address held at most its share (%d <= %d bytes)"
             % (max(m["address_bytes"] for m in held.values()), ADDR_MIB << 20))
mrtest.check(total > CONN_MIB << 20,
             "its connections together held more than one connection's budget (%d bytes): "
             "the address's share, not each connection's, is what stopped them" % total)
mrtest.check(st["engine_memory"] <= (ADDR_MIB + 2) << 20,
             "B's engines hold the attacker's share and little else (%d bytes)"
             % st["engine_memory"])
mrtest.check(st["engine_memory_refused_address"] > b0["engine_memory_refused_address"]
             and naks.get(4, 0) > 0,
             "allocations past the share refused and counted (%d), answered NAK RNR (%d)"
             % (st["engine_memory_refused_address"] - b0["engine_memory_refused_address"],
                naks.get(4, 0)))

# The attacker still holds its share (and answers B's PROBEs, so its
# connections live on): a transfer from another address starts now, on a
# new connection that has no memory of its own yet.
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 3}, timeout=120)))
t.start()
while t.is_alive():
    for c in conns:
        X.drain(c, naks, bdst)
    time.sleep(0.005)
mrtest.check(res.get("ok") and res["result"]["verified"],
             "a transfer A->B started during the attack verified: %s"
             % res.get("result", res).get("verified"))
for c in conns:
    X.drain(c, naks, bdst)
still = sum(c["memory"]["bytes"] for c in X.conns(b, "established") if int(c["id"], 16) in ids)
mrtest.check(still > CONN_MIB << 20,
             "the attacker held its share throughout (%d bytes after the transfer)" % still)
# B's end of the transfer maps a 64 MiB receive region as data arrives and
# unmaps it when the connection ends: the RSS bound is about the attack, so
# it is read once A's connection is gone (on a busy host the last sample
# could come before that, and counted the region: 65 MB against 48 MiB).
mrtest.check(X.wait_for(lambda: all(int(c["id"], 16) in ids for c in X.conns(b)), 10),
             "A's transfer connection on B ended (its receive region released)")
for c in conns:
    c["u"].close()
app.close()
hb.check()
mrtest.check(a.alive(), "A alive")
p.close()
