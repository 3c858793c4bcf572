"""Item 8 of the issue: one program may not hold every application session.
With apps.max_sessions_per_user 4 (64 by default), a user's fifth HELLO is
refused with MRC_ERR_LIMIT and counted; a session closed makes room again;
the daemon and a verified transfer carry on."""
import threading
import time

import mrattack as X
import mrtest
import rawabi as R

p = mrtest.Pair("quota", yaml_extra="apps:\n  max_sessions_per_user: 4\n")
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 4}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)  # its buffers are in the baseline
hb = X.Health(b, rss_mib=64, fds=32, udp=False)
held = []
for i in range(4):
    c = R.Client(b.app_sock)
    mrtest.check(c.hello(b"hog%d" % i)[0] == 0, "session %d of this user attached" % (i + 1))
    held.append(c)
c = R.Client(b.app_sock)
st, _ = c.hello(b"hog4")
mrtest.check(st == R.ERR["LIMIT"], "the fifth session of the same user: MRC_ERR_LIMIT")
mrtest.check(c.eof(), "... and it is closed")
c.close()
mrtest.check(b.ok("status")["apps"]["sessions_quota"] == 1, "counted as sessions_quota")
held.pop().close()
time.sleep(0.3)
c = R.Client(b.app_sock)
mrtest.check(c.hello(b"again")[0] == 0, "after one closed, the user attaches again")
c.close()
for c in held:
    c.close()
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"], "the transfer A->B verified")
hb.check()
p.close()
