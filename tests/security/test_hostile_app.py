"""Attack 5 of the issue (item 3 of the security work): an application that
owns descriptors the daemon also uses.

A hostile application (rawabi.py: abi.h spoken without the library) on A
clears O_NONBLOCK on every descriptor it got (its control socket, the
context's memfd, doorbell and wakeup), rings the doorbell again and again,
makes the daemon write wakeups it never reads, writes into the wakeup
channel, and finally closes its doorbell. With ABI 1's shared eventfds the
first of these made the daemon block in read() (and a saturated wakeup
counter in write()): every connection and application of the host stalled.
With ABI 2 each side owns its end of a socket pair. Meanwhile two other
applications move data A -> B with metaroce-perf --verify: it verifies, A
answers its control socket throughout, and its RSS and fds stay bounded."""
import fcntl
import json
import os
import subprocess
import threading
import time

import mrattack as X
import mrtest
import rawabi as R
from clienttest import YAML, PerfServer, perf_bin

p = mrtest.Pair("hostileapp", yaml_extra=YAML)
a, b = p.a, p.b
srv = PerfServer(b)
ha = X.Health(a, rss_mib=64, fds=64, udp=False)
res = {}


def client():
    r = subprocess.run([perf_bin(), "client", b.addrs[0], "--port", str(b.port), "--socket",
                        a.app_sock, "--json", "--op", "write", "--size", "256K",
                        "--seconds", "6", "--verify"],
                       capture_output=True, text=True, timeout=120)
    res["rc"], res["out"], res["err"] = r.returncode, r.stdout, r.stderr


t = threading.Thread(target=client)
t.start()
time.sleep(1.0)

h = R.Client(a.app_sock)
st, _ = h.hello(b"hostile")
mrtest.check(st == 0, "the hostile application attached")
st, ctx = h.ctx_create(8)
mrtest.check(st == 0, "it has a context: memfd, doorbell, wakeup")
fds = [ctx.shm, ctx.doorbell, ctx.wakeup]
for fd in list(fds) + [h.s.fileno()]:
    fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, fl & ~os.O_NONBLOCK)
mrtest.check(all(not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK for fd in fds),
             "O_NONBLOCK cleared on every descriptor it got")

lat = []
for i in X.bounded(400, 6.0):
    # ring: a published tail and a byte on the doorbell
    try:
        os.write(ctx.doorbell, b"\1")
    except OSError as e:
        a.dump()
        mrtest.fail("the daemon closed the hostile session early: %s" % e)
    # a bad work request completes at once with BAD_WR; with NEED_WAKEUP
    # set on the CQ the daemon writes a wakeup, which nobody reads
    ctx.set32(ctx.cq_off + 128, ctx.u32(ctx.cq_off + 128) | R.NEED_WAKEUP)
    if ctx.sq_tail - ctx.sq_head() < ctx.sq_entries:
        ctx.post({"opcode": 99, "wr_id": i})
    ctx.cq_head = ctx.u32(ctx.cq_off + 64)  # reap by skipping
    ctx.set32(ctx.cq_off, ctx.cq_head)
    if i % 40 == 0:
        t0 = time.monotonic()
        mrtest.check(a.request("status", timeout=10)["ok"], "A answers while the app rings")
        lat.append(time.monotonic() - t0)
        ha.sample()
    time.sleep(0.01)
try:
    os.write(ctx.wakeup, b"x" * 16)
    wrote = True
except OSError:
    wrote = False
mrtest.check(not wrote, "the wakeup channel is one-way: the application cannot write into it")
st = a.ok("status")["apps"]
hs = [x for x in st["list"] if x["name"] == "hostile"]
mrtest.check(hs and hs[0]["wrs_bad"] > 0, "its bad work requests were taken and completed BAD_WR")

# Closing its end of the doorbell: the daemon sees EOF and ends that session
# (it does not spin on a readable descriptor).
os.close(ctx.doorbell)
gone = X.wait_for(lambda: not [x for x in a.ok("status")["apps"]["list"]
                               if x["name"] == "hostile"], 10)
mrtest.check(gone, "a closed doorbell ends the hostile session")
h.close()

t.join()
print(res.get("out"), res.get("err"))
out = [l for l in (res.get("out") or "").splitlines() if l.startswith("{")]
o = json.loads(out[-1]) if out else {}
mrtest.check(res.get("rc") == 0 and o.get("ok") and o.get("verify_errors") == 0,
             "the other applications' transfer A -> B verified")
r = srv.result(timeout=30)
mrtest.check(r["ok"] and r["verify_errors"] == 0, "the receiving application verified it all")
srv.stop()
print("status latencies during the attack: max %.3f s" % max(lat))
ha.check()
p.close()
