"""Random, truncated and wrong-token datagrams at the service port are
counted by reason and dropped; the daemon keeps running and working."""
import os
import random
import socket
import struct
import threading
import time

import mrtest

p = mrtest.Pair("garbage")
a, b = p.a, p.b
addr = (b.addrs[0], b.port)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((a.addrs[0], 0))
u.settimeout(0.2)
rnd = random.Random(1)

before = b.ok("status")["counters"]
# Truncated: shorter than the 28-byte header.
for n in range(0, 28):
    u.sendto(bytes(rnd.randrange(256) for _ in range(n)), addr)
# Bad version and unknown opcodes.
for _ in range(50):
    u.sendto(bytes([7]) + bytes(rnd.randrange(256) for _ in range(60)), addr)
    u.sendto(bytes([1, 0x7f]) + bytes(rnd.randrange(256) for _ in range(60)), addr)
# Pure noise of every length.
for _ in range(500):
    u.sendto(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 1500))), addr)
# Well-formed packets of the test vectors, for connections that do not exist.
data_dir = os.environ.get("MRP_TEST_DATA")
if data_dir:
    wire = os.path.join(data_dir, "wire")
    for name in sorted(os.listdir(wire)):
        if name.endswith(".bin"):
            with open(os.path.join(wire, name), "rb") as f:
                pkt = f.read()
            u.sendto(pkt, addr)
            u.sendto(pkt[: len(pkt) // 2], addr)  # truncated


def data_pkt(dst, src, token, payload=b"x" * 64):
    """A SEND packet (SPEC 5.1): common header + data extension + payload."""
    hdr = struct.pack(">BBHHHIIQI", 1, 0x03, 0x0003, 0, 0, dst, src, token, 0)
    ext = struct.pack(">HHIIIIQQII", 0, len(payload), 0, 0, len(payload), 0, 0, 0, 0, 0)
    return hdr + ext + payload


# Wrong token on a live connection: run a perf and aim at B's side of it.
res = {}
t = threading.Thread(target=lambda: res.update(a.request("perf", {"peer": b.peer(), "seconds": 2})))
t.start()
conn = None
for _ in range(200):
    live = [c for c in b.ok("show conns") if c["state"] == "established"]
    if live:
        conn = live[0]
        break
    time.sleep(0.01)
mrtest.check(conn is not None, "found B's live connection")
dst, src = int(conn["id"], 16), int(conn["peer_id"], 16)
for i in range(100):
    u.sendto(data_pkt(dst, src, 0x1234567890 + i), addr)
u.sendto(data_pkt(0x01020304, 0x0a0b0c0d, 42), addr)  # unknown connection
nak = None
try:
    nak = u.recvfrom(2048)[0]
except socket.timeout:
    pass
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"], "perf verified despite the noise")
mrtest.check(nak is not None and len(nak) == 60 and nak[1] == 0x11,
             "NAK UNKNOWN_CONN answered to an unknown connection")

after = b.ok("status")["counters"]
d0, d1 = before["drops"], after["drops"]
print({k: d1[k] - d0[k] for k in d1 if d1[k] != d0[k]})
mrtest.check(d1["TRUNCATED"] - d0["TRUNCATED"] >= 28, "truncated datagrams counted")
mrtest.check(d1["VERSION"] - d0["VERSION"] >= 50, "bad versions counted")
mrtest.check(d1["OPCODE"] - d0["OPCODE"] >= 50, "unknown opcodes counted")
mrtest.check(d1["TOKEN"] - d0["TOKEN"] >= 100, "wrong tokens counted")
mrtest.check(d1["NOCONN"] - d0["NOCONN"] >= 1, "unknown connections counted")
mrtest.check(after["drops_total"] - before["drops_total"] >= 700, "drops total")
mrtest.check(b.alive() and a.alive(), "daemons alive")
mrtest.check(a.ok("ping", {"peer": b.peer(), "count": 2}, timeout=30)["count"] == 2,
             "still working")
p.close()
