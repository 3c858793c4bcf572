"""Attack 3 against the daemon's budget (transport.memory) rather than one
connection's: an application on B hands out the rkey of a 64 MiB region;
an attacker opens 3 connections to it at MTU 256 and sends the first
packets of ever more 64 MiB WRITEs on each, finishing none. Each connection
may hold 8 MiB (transport.conn_memory), all of B's connections together
12 MiB (transport.memory), so the daemon-wide budget is what stops the
third: B's engines never hold more than 12 MiB, the allocations past it are
refused and answered NAK RNR, and B's RSS grows by less than the budget
plus 24 MiB (more under AddressSanitizer). A's verified transfer to B runs
meanwhile.

The daemon-wide budget is first come, first served: a connection that needs
new memory while the attacker holds all of it is refused too (NAK RNR,
retried by its sender). What a connection frees stays its own, up to 1 MiB
(daemon/membudget.h), so the perf transfer here, which needs little beyond
what it held before the attack, reuses what its completed messages freed
and verifies (before that reserve, the attacker took that memory as it was
freed and the transfer failed "receiver not ready" in about half the runs);
peers at other addresses are protected by the share of one address
(transport.address_memory_share, test_memory_address.py), which this test
sets to 100 % since its attacker uses A's own address.
"""
import threading

import mrattack as X
import mrtest

CONN_MIB, ALL_MIB, NCONN = 8, 12, 3
# (address_memory_share 100: the attacker shares A's address here, and this
# test is about the daemon-wide budget; test_memory_address.py is about the
# share of one address)
p = mrtest.Pair("memall", yaml_extra="transport:\n  conn_memory: %dMiB\n  memory: %dMiB\n"
                "  address_memory_share: 100\n" % (CONN_MIB, ALL_MIB))
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 8}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
mrtest.check(X.perf_region_warm(b), "A's transfer has filled B's perf region (%d MiB) before "
             "B's RSS is taken" % (X.PERF_REGION >> 20))
slack = 2 * ALL_MIB + 32 if X.sanitized(b.proc.pid) else ALL_MIB + 24
# fds: the transfer's paths and the 3 connections' (4 paths each) source ports
hb = X.Health(b, rss_mib=slack, fds=160)
b0 = b.ok("status")["counters"]

SVC = 0x4d454d32  # "MEM2"
app, region, rkey = X.victim_app(b, SVC)
bdst = (b.addrs[0], b.port)
conns = X.attacker_conns(b, a.addrs[0], SVC, NCONN)
ids = {c["ca"] for c in conns}

naks = {}
X.flood_starts(conns, bdst, region, rkey, 3000, 8.0, naks, sample=hb.sample)
hb.sample()
st = b.ok("status")["counters"]
held = {int(c["id"], 16): c["memory"] for c in X.conns(b) if int(c["id"], 16) in ids}
print("NAKs by reason %s; engine memory %d bytes; per connection %s"
      % (naks, st["engine_memory"], {"%08x" % k: v for k, v in held.items()}))
mrtest.check(st["engine_memory"] <= ALL_MIB << 20,
             "B's engines hold at most transport.memory (%d <= %d bytes)"
             % (st["engine_memory"], ALL_MIB << 20))
mrtest.check(all(m["peak"] <= CONN_MIB << 20 for m in held.values()),
             "each connection held at most its own budget")
mrtest.check(sum(m["bytes"] for m in held.values()) > (ALL_MIB - CONN_MIB) << 20,
             "the attackers together held more than one connection's budget: the "
             "daemon-wide budget is what stopped them")
mrtest.check(st["engine_memory_refused"] > b0["engine_memory_refused"] and naks.get(4, 0) > 0,
             "allocations past it refused (%d), answered NAK RNR (%d)"
             % (st["engine_memory_refused"] - b0["engine_memory_refused"], naks.get(4, 0)))
for c in conns:
    c["u"].close()
app.close()
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
hb.check()
mrtest.check(a.alive(), "A alive")
p.close()
