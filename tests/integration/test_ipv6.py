"""IPv6: two daemons on ::1 (different service ports, disjoint source
ports), handshake and a verified perf run."""
import random
import socket
import tempfile

import mrtest

try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind(("::1", 0))
    s.close()
except OSError as e:
    mrtest.skip("no IPv6 loopback here: %s" % e)
tmp = tempfile.TemporaryDirectory(prefix="mrd-ipv6-")
port = random.Random().randrange(20000, 30000)
a = mrtest.Daemon(tmp.name, "a", ["::1"], port=port, sports="40000-44999")
b = mrtest.Daemon(tmp.name, "b", ["::1"], port=port + 1, sports="45000-49999")
r = a.ok("perf", {"peer": b.peer(), "seconds": 1}, timeout=60)
mrtest.check(r["verified"] and r["bytes"] > 0, "perf over IPv6 verified (%.2f Gbit/s)" % r["goodput_gbps"])
mrtest.check(r["paths"][0]["remote"].startswith("[::1]:"), "paths are IPv6")
for d in (a, b):
    rc, _ = d.stop()
    mrtest.check(rc == 0, "%s exited 0" % d.name)
tmp.cleanup()
