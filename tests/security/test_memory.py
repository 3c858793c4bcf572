"""Attack 3 of the issue: memory. An application on B listens and hands its
peers the rkey of a 64 MiB region (as any RDMA application does). A peer
connects to it at the smallest MTU (256 bytes) and sends the first packets
of ever more WRITE messages of 64 MiB into that region, none of which it
finishes: every one makes B's engine track a message of 262,144 packets (a
32 KiB bitmap). 6,000 such packets (2 MB) used to grow B by about 190 MiB.
B now accounts what each connection's engine holds and refuses, before
allocating, what passes the connection's budget (transport.conn_memory,
16 MiB in this test) with NAK RNR. Meanwhile A's verified transfer to B
runs; B's RSS grows by less than the budget plus 24 MiB (more room under
AddressSanitizer, below)."""
import random
import socket
import threading
import time

import mrattack as X
import mrtest
import rawabi as R

BUDGET_MIB = 16
p = mrtest.Pair("memory", yaml_extra="transport:\n  conn_memory: %dMiB\n" % BUDGET_MIB)
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 8}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
mrtest.check(X.perf_region_warm(b), "A's transfer has filled B's perf region (%d MiB) before "
             "B's RSS is taken" % (X.PERF_REGION >> 20))
# The bound: the connection's budget plus 24 MiB; under AddressSanitizer,
# whose allocator adds redzones and size-class rounding to every block and
# keeps 16 MiB of freed memory (the transfer's) in quarantine, twice the
# budget plus 32 MiB. Without the budget the attack grows B by ~190 MiB.
slack = 2 * BUDGET_MIB + 32 if X.sanitized(b.proc.pid) else BUDGET_MIB + 24
hb = X.Health(b, rss_mib=slack, fds=64)
b0 = b.ok("status")["counters"]

SVC = 0x4d454d31  # "MEM1"
app = R.Client(b.app_sock)
mrtest.check(app.hello(b"victim")[0] == 0, "an application attached to B")
st, ctx = app.ctx_create(8)
region = R.Region(64 << 20)
st, keys = app.mr_reg(region, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
mrtest.check(st == 0, "it registered a 64 MiB region for remote writes")
rkey = keys[1]
mrtest.check(app.listen(SVC, ctx.id)[0] == 0, "it listens on a service")

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((a.addrs[0], 0))
u.settimeout(2.0)
myport = u.getsockname()[1]
bdst = (b.addrs[0], b.port)
ci, ti = X.rand32(), X.rand64()
acc, _ = X.handshake(u, bdst, ci, ti, X.rand64(), SVC, myport, [(0, a.addrs[0])],
                     mtu=256, max_streams=64, max_paths=4)
mrtest.check(acc is not None and acc["op"] == X.OP["ACCEPT"] and acc["mtu"] == 256,
             "the attacker has a connection to the application at MTU 256")
ca, ta = acc["src"], acc["hs_token"]
u.sendto(X.probe(ca, ci, ta), bdst)
mrtest.check(X.wait_for(lambda: [c for c in X.conns(b) if int(c["id"], 16) == ca and
                                 c["state"] == "established"], 5), "... confirmed")

MSG = 64 << 20
payload = bytes(256)
rnd = random.Random(3)
naks = {}
u.setblocking(False)
sent = 0
psn = 0
for i in X.bounded(6000, 10.0):
    stream, msn = i % 64, 1 + i // 64  # msn 0 never comes: nothing completes
    u.sendto(X.data("WRITE", ca, ci, ta, psn, stream, msn, 0, MSG, payload,
                    remote_addr=region.addr, rkey=rkey), bdst)
    psn += 1
    sent += 1
    if i % 200 == 0:
        time.sleep(0.01)
        hb.sample()
    try:
        while True:
            r = X.parse(u.recv(2048))
            if r and r["op"] == X.OP["NAK"]:
                naks[r["reason"]] = naks.get(r["reason"], 0) + 1
    except BlockingIOError:
        pass
time.sleep(0.5)
try:
    while True:
        r = X.parse(u.recv(2048))
        if r and r["op"] == X.OP["NAK"]:
            naks[r["reason"]] = naks.get(r["reason"], 0) + 1
except BlockingIOError:
    pass
hb.sample()
mine = [c for c in X.conns(b) if int(c["id"], 16) == ca]
print("sent %d first packets of 64 MiB WRITEs; NAKs by reason %s; B's side: %s"
      % (sent, naks, mine[0].get("memory") if mine else None))
b1 = b.ok("status")["counters"]
mrtest.check(mine and mine[0]["memory"]["peak"] <= BUDGET_MIB << 20,
             "the attacker's connection held at most its budget (peak %d bytes)"
             % (mine[0]["memory"]["peak"] if mine else -1))
mrtest.check(b1["engine_memory_refused"] > b0["engine_memory_refused"],
             "allocations past the budget were refused (%d)"
             % (b1["engine_memory_refused"] - b0["engine_memory_refused"]))
mrtest.check(naks.get(4, 0) > 0, "... and answered NAK RNR (%d)" % naks.get(4, 0))
u.close()
app.close()
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
hb.check()
p.close()
