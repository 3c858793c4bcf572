"""Attack 5: more peers than the daemon keeps records of.

B remembers up to 4,096 peer endpoints (instance ids for restart
detection, RETRY cookies); past that, a new one takes the place of the peer
that has been without connections longest. A host with many addresses of
its own (an IPv6 prefix; loopback here) completes handshakes from 4,600 of
them, each connection confirmed and then RESET: 4,096, then (their
connections' tombstones expired) 504 more, then 200 more while A runs a
verified transfer to B. B keeps at most 4,096 peer records, forgets the oldest idle ones first
(the first addresses of the churn, never A, whose connection is open),
takes every new peer, and A's transfer verifies. B's CPU per handshake is
printed for the first 4,096 peers and for the 504 past the limit (each of
which evicts one), measured with nothing else running.
"""
import os
import socket
import struct
import threading
import time

import mrattack as X
import mrtest

NPEERS = 4800
p = mrtest.Pair("peerchurn")
a, b = p.a, p.b
used = set(a.addrs) | set(b.addrs)
base = next(n for n in range(250, 100, -1)
            if not any(ip.startswith("127.%d." % n) for ip in used))
addrs = ["127.%d.%d.%d" % (base, 1 + i // 250, 1 + i % 250) for i in range(NPEERS)]
# (A's transfer maps B's 64 MiB perf region as it arrives; each of the 4,600
# connections' paths opened a source-port socket, which the datapath keeps
# in its bounded pool until idle: UDP sockets are left out of the fd bound)
hb = X.Health(b, rss_mib=(192 if X.sanitized(b.proc.pid) else 128), fds=64, udp=False)
bdst = (b.addrs[0], b.port)


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        st = f.read().rsplit(")", 1)[1].split()
    return (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def churn(ips):
    """Handshakes from each address in turn, each confirmed and then RESET:
    (completed, failed, B's CPU seconds)."""
    done = failed = 0
    c0 = cpu(b.proc.pid)
    for i, ip in enumerate(ips):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((ip, 0))
        u.settimeout(1.0)
        ci, ti = X.rand32(), X.rand64()
        acc, _ = X.handshake(u, bdst, ci, ti, X.rand64(), X.SVC_ECHO, u.getsockname()[1],
                             [(0, ip)], tries=20, max_streams=4, max_paths=4)
        if acc is None or acc["op"] != X.OP["ACCEPT"]:
            failed += 1
            u.close()
            continue
        ca, ta = acc["src"], acc["hs_token"]
        u.sendto(X.probe(ca, ci, ta), bdst)
        u.sendto(X.hdr("RESET", ca, ci, ta) + struct.pack(">HH", 1, 0), bdst)
        u.close()
        done += 1
        if i % 200 == 0:
            hb.sample()
    return done, failed, cpu(b.proc.pid) - c0


def known():
    return {pe["address"].rsplit(":", 1)[0]: pe for pe in b.ok("show peers")}


d1, f1, cpu1 = churn(addrs[:4096])
mrtest.check(f1 == 0 and len(known()) <= 4096,
             "4,096 handshakes from 4,096 addresses accepted (%d failed), %d peers known"
             % (f1, len(known())))
# Their connections are freed once their tombstones expire (SPEC 11.5, 1 s);
# a peer with a connection, even a tombstone, is never forgotten.
time.sleep(1.5)
d2, f2, cpu2 = churn(addrs[4096:4600])
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 3}, timeout=180)))
t.start()
time.sleep(0.5)
d3, f3, _ = churn(addrs[4600:])
have = known()
t.join()
print("B's CPU per handshake: %.0f us for the first 4,096 peers, %.0f us for the next %d, "
      "past the limit (each evicting one)" % (1e6 * cpu1 / max(d1, 1), 1e6 * cpu2 / max(d2, 1), d2))
mrtest.check(f2 == 0 and f3 == 0, "every handshake past the limit accepted too (%d and %d "
             "failed)" % (f2, f3))
mrtest.check(len(have) <= 4096, "B keeps at most 4,096 peer records (%d)" % len(have))
mrtest.check(addrs[-1] in have and addrs[4095] in have,
             "the newest peers are kept (%s, %s)" % (addrs[4095], addrs[-1]))
gone_first = sum(1 for ip in addrs[:NPEERS - 4096] if ip not in have)
mrtest.check(gone_first == NPEERS - 4096,
             "the oldest idle ones were forgotten first (%d of the first %d gone)"
             % (gone_first, NPEERS - 4096))
mrtest.check(any(ip in have and have[ip]["conns"] > 0 for ip in a.addrs),
             "A, whose connection was open meanwhile, is still known")
mrtest.check(res.get("ok") and res["result"]["verified"],
             "A's transfer during the churn verifies (%s Gbit/s)"
             % res.get("result", {}).get("goodput_gbps"))
hb.check()
mrtest.check(a.alive(), "A alive")
p.close()
