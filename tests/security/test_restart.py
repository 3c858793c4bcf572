"""Attack 1, the other side: a real restart of A still ends B's connections
of A's old instance. A is killed (SIGKILL: no CLOSE, no RESET) while it
moves data to B, and starts again on the same addresses and port. Its first
handshake with B names a new instance; B challenges the old connection,
nobody answers for it, and B ends it with "peer restarted"."""
import os
import signal
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("restart")
a, b = p.a, p.b
res = {}


def transfer():
    try:  # A is killed in the middle: its control socket just closes
        res.update(a.request("perf", {"peer": b.peer(), "seconds": 30}, timeout=120))
    except (OSError, ValueError):
        pass


t = threading.Thread(target=transfer, daemon=True)
t.start()
old = X.wait_for(lambda: X.conns(b, "established"), 20)
mrtest.check(old, "B has A's established connection")
old_id = old[0]["id"]
time.sleep(1.0)
hb = X.Health(b, fds=256)  # the new connection's paths: source-port sockets
b0 = b.ok("status")["counters"]
a.proc.send_signal(signal.SIGKILL)
a.proc.wait()
t.join(10)
# The same daemon again: same configuration, addresses and port, a new
# instance id.
a2 = mrtest.Daemon(p.tmp.name, "a", a.addrs, port=a.port)
p.a = a2
r = a2.request("ping", {"peer": b.peer(), "count": 2}, timeout=60)
mrtest.check(r.get("ok"), "the restarted A connects to B: %s" % r)
gone = X.wait_for(lambda: not [c for c in X.conns(b) if c["id"] == old_id
                               and c["state"] == "established"], 15, 0.05)
mrtest.check(gone, "B ended the old instance's connection")
b1 = b.ok("status")["counters"]
mrtest.check(b1["peer_restarts"] == b0["peer_restarts"] + 1,
             "B recognised one restart of A (%d)" % (b1["peer_restarts"] - b0["peer_restarts"]))
peers = b.ok("show peers")
mrtest.check(any(pe["instance_id"] == a2.ok("status")["instance_id"] for pe in peers),
             "B records A's new instance")
hb.check()
p.close()
