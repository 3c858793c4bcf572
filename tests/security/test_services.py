"""The daemon's own services (item 3 of the issue): PERF hands any peer an
rkey, so it is off unless the configuration turns it on, and PERF and ECHO
can be limited to configured peer addresses (services.perf, perf_peers,
echo_peers; applied by a reload).

B starts with PERF on (as the test harness configures it). Reloaded with
PERF off, A's perf is refused (no such service); with PERF and ECHO limited
to C's address, A's perf and ping are refused (REJECT REFUSED), C's perf
verifies and its ping answers; a raw CONNECT from another address gets
REJECT REFUSED.

B's descriptors are judged once its connections are over: each path of a
connection holds a source-port socket while it lives (C's transfer opens
dozens), and those of ended connections close 1-2 s later
(security/sport_release), so a count taken as the last one ends measures
how many paths it had, not a leak. Within BACK_S of the end, B must be back
to its descriptors at the start and a few more."""
import os
import signal
import socket
import time

import mrattack as X
import mrtest

p = mrtest.Pair("services")
a, b = p.a, p.b
c = mrtest.Daemon(p.tmp.name, "c", mrtest.addr_base("services-c")[0:2])
BACK_S = 8.0  # as security/sport_release: orphans close 1-2 s after their
              # connection is freed; room for a loaded host, far below 30 s
hb = X.Health(b, rss_mib=64, fds=8)
conf0 = open(b.conf).read()
mrtest.check("  perf: true\n" in conf0, "the harness turns PERF on")


def reload(services):
    with open(b.conf, "w") as f:
        f.write(conf0.replace("services:\n  perf: true\n", "services:\n" + services))
    b.proc.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    mrtest.check(b.alive() and b.request("status")["ok"], "B reloaded")


r = a.request("perf", {"peer": b.peer(), "seconds": 1}, timeout=60)
mrtest.check(r.get("ok") and r["result"]["verified"], "PERF on: A's perf to B verifies")

reload("  perf: false\n")
r = a.request("perf", {"peer": b.peer(), "seconds": 1}, timeout=60)
mrtest.check(not r.get("ok") and "no such service" in r["error"]["message"],
             "PERF off: A's perf is refused: %s" % r.get("error"))

reload("  perf: true\n  perf_peers: %s/32\n  echo_peers: \"%s, ::1\"\n"
       % (c.addrs[0], c.addrs[0]))
r = a.request("perf", {"peer": b.peer(), "seconds": 1}, timeout=60)
mrtest.check(not r.get("ok") and "refused" in r["error"]["message"],
             "PERF for C only: A's perf is refused: %s" % r.get("error"))
r = c.request("perf", {"peer": b.peer(), "seconds": 1}, timeout=60)
mrtest.check(r.get("ok") and r["result"]["verified"], "... C's perf verifies")
r = a.request("ping", {"peer": b.peer(), "count": 1}, timeout=60)
mrtest.check(not r.get("ok") and "refused" in r["error"]["message"],
             "ECHO for C only: A's ping is refused: %s" % r.get("error"))
r = c.request("ping", {"peer": b.peer(), "count": 1}, timeout=60)
mrtest.check(r.get("ok"), "... C's ping answers")

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((a.addrs[1], 0))
u.settimeout(2.0)
ans, _ = X.handshake(u, (b.addrs[0], b.port), X.rand32(), X.rand64(), X.rand64(), X.SVC_PERF,
                     u.getsockname()[1], [(0, a.addrs[1])])
u.close()
mrtest.check(ans is not None and ans["op"] == X.OP["REJECT"] and ans["reason"] == 4,
             "a raw CONNECT to PERF from elsewhere: REJECT REFUSED")
mrtest.check(X.wait_for(lambda: not X.conns(b) and X.nfds(b.proc.pid) < hb.fd0 + hb.fds,
                        BACK_S, 0.1),
             "B's connections ended and its descriptors came back within %.0f s: %d from %d "
             "at the start (by kind %s)" % (BACK_S, X.nfds(b.proc.pid), hb.fd0,
                                            X.fd_kinds(b.proc.pid)))
hb.check()
c.stop()
p.close()
