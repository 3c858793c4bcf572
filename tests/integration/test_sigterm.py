"""SIGTERM during a perf run: the daemon closes its connections and exits 0
promptly; the other daemon and the requester see the run end."""
import threading
import time

import mrtest

p = mrtest.Pair("sigterm")
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(a.request("perf", {"peer": b.peer(), "seconds": 30}, timeout=60)))
t.start()
for _ in range(500):
    if any(c["state"] == "established" for c in b.ok("show conns")):
        break
    time.sleep(0.01)
time.sleep(0.5)
rc, secs = b.stop()
print("receiver stopped in %.2f s with %d" % (secs, rc))
mrtest.check(rc == 0, "receiver exited 0 on SIGTERM")
mrtest.check(secs < 5, "receiver stopped within 5 s")
t.join(30)
mrtest.check(not t.is_alive(), "perf request answered")
mrtest.check(res.get("ok") is False, "perf reports the failure: %s" % res.get("error"))
mrtest.check(a.alive(), "sender alive")
# The sender while its perf runs.
res.clear()
b2 = mrtest.Daemon(p.tmp.name, "b2", b.addrs)


def run_perf():
    try:
        res.update(a.request("perf", {"peer": b2.peer(), "seconds": 30}, timeout=60))
    except ValueError:
        res["closed"] = True  # the stopping daemon closed the control socket


t = threading.Thread(target=run_perf)
t.start()
time.sleep(1.0)
rc, secs = a.stop()
print("sender stopped in %.2f s with %d" % (secs, rc))
mrtest.check(rc == 0 and secs < 5, "sender exited 0 within 5 s")
t.join(30)
mrtest.check(b2.alive(), "receiver alive")
mrtest.check(any(pe["restarts"] == 0 for pe in b2.ok("show peers")), "peer listed")
rc, _ = b2.stop()
mrtest.check(rc == 0, "b2 exited 0")
p.close()
