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
import socket
import threading
import time

import mrattack as X
import mrtest
import rawabi as R

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
app = R.Client(b.app_sock)
mrtest.check(app.hello(b"victim")[0] == 0, "an application attached to B")
st, ctx = app.ctx_create(8)
region = R.Region(64 << 20)
st, keys = app.mr_reg(region, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
rkey = keys[1]
mrtest.check(st == 0 and app.listen(SVC, ctx.id)[0] == 0,
             "it listens with a 64 MiB region for remote writes")

bdst = (b.addrs[0], b.port)
conns = []
for k in range(NCONN):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((evil, 0))
    u.settimeout(2.0)
    ci, ti = X.rand32(), X.rand64()
    acc, _ = X.handshake(u, bdst, ci, ti, X.rand64(), SVC, u.getsockname()[1],
                         [(0, evil)], mtu=256, max_streams=64, max_paths=4)
    mrtest.check(acc is not None and acc["op"] == X.OP["ACCEPT"],
                 "attacker connection %d from %s accepted" % (k, evil))
    u.sendto(X.probe(acc["src"], ci, acc["hs_token"]), bdst)
    u.setblocking(False)
    conns.append({"u": u, "ca": acc["src"], "ci": ci, "ta": acc["hs_token"], "psn": 0})
ids = {c["ca"] for c in conns}
mrtest.check(X.wait_for(lambda: len([c for c in X.conns(b, "established")
                                     if int(c["id"], 16) in ids]) == NCONN, 5),
             "... all %d confirmed" % NCONN)

MSG = 64 << 20
payload = bytes(256)
naks = {}


def drain(c):
    """Count B's NAKs and answer its PROBEs, so that B keeps the attacker's
    connections (and what they hold) for as long as the test needs."""
    try:
        while True:
            r = X.parse(c["u"].recv(2048))
            if r and r["op"] == X.OP["NAK"]:
                naks[r["reason"]] = naks.get(r["reason"], 0) + 1
            elif r and r["op"] == X.OP["PROBE"] and "seq" in r:
                c["u"].sendto(X.probe_ack(c["ca"], c["ci"], c["ta"], r), bdst)
    except BlockingIOError:
        pass


# 3 x 3000 message starts of 64 MiB: each needs tracking memory (32 KiB at
# MTU 256), more than the 24 MiB all three connections could hold without
# the share; then 3 x 600 starts of 4 KiB messages, whose tracking is small
# enough to take the crumbs the large ones left.
for c in conns:
    for i in X.bounded(3600, 10.0):
        stream, msn = i % 64, 1 + i // 64  # msn 0 never comes: nothing completes
        size = MSG if i < 3000 else 4096
        c["u"].sendto(X.data("WRITE", c["ca"], c["ci"], c["ta"], c["psn"], stream, msn, 0,
                             size, payload, remote_addr=region.addr, rkey=rkey), bdst)
        c["psn"] += 1
        if i % 200 == 0:
            time.sleep(0.01)
            hb.sample()
            drain(c)
time.sleep(0.5)
for c in conns:
    drain(c)
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
        drain(c)
    time.sleep(0.005)
mrtest.check(res.get("ok") and res["result"]["verified"],
             "a transfer A->B started during the attack verified: %s"
             % res.get("result", res).get("verified"))
for c in conns:
    drain(c)
still = sum(c["memory"]["bytes"] for c in X.conns(b, "established") if int(c["id"], 16) in ids)
mrtest.check(still > CONN_MIB << 20,
             "the attacker held its share throughout (%d bytes after the transfer)" % still)
for c in conns:
    c["u"].close()
app.close()
hb.check()
mrtest.check(a.alive(), "A alive")
p.close()
