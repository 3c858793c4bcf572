"""Attacks 6 and 7 of the issue: hostile control clients.

6. A client pipelines `metrics` (and `show conns`) requests as fast as it can
   for a bounded time (at most 6 s, at most 200,000 requests) and never reads
   a reply. The daemon stops reading it once 4 MiB of replies wait (the
   counter ctl_clients_paused says so): its RSS stays bounded, it answers
   other clients, and a verified transfer A -> B runs meanwhile. When the
   client then reads, its replies arrive in order.
7. Error texts with multi-byte characters cut by the 256-byte message buffer,
   and request bytes that are not UTF-8: every error reply still has its
   "error" object and parses as UTF-8 JSON.
"""
import json
import socket
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("ctlflood")
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 8}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)
ha = X.Health(a, rss_mib=64, fds=32, udp=False)

# ---- 6. a reply flood -----------------------------------------------------------
fl = socket.socket(socket.AF_UNIX)
fl.connect(a.sock)
fl.setblocking(False)
reqs = b"".join(json.dumps({"v": 1, "id": i, "cmd": "metrics" if i % 2 else "show conns"})
                .encode() + b"\n" for i in range(1000))
sent_bytes = 0
blocked = 0
for _ in X.bounded(200, 6.0):
    try:
        sent_bytes += fl.send(reqs)
    except BlockingIOError:
        blocked += 1
        time.sleep(0.02)  # the daemon stopped reading us: our buffer is full
    ha.sample()
    if blocked > 50:
        break
print("flooding client: %d bytes of requests sent, %d times blocked" % (sent_bytes, blocked))
st = a.ok("status", timeout=10)  # another client is answered meanwhile
mrtest.check(st["counters"]["ctl_clients_paused"] >= 1,
             "the daemon stopped reading the client that does not read (paused %d)"
             % st["counters"]["ctl_clients_paused"])
ha.sample()
# Now it reads: replies come, in order, each a JSON object with its id.
fl.setblocking(True)
fl.settimeout(20)
buf, ids = b"", []
end = time.monotonic() + 20
while len(ids) < 200 and time.monotonic() < end:
    d = fl.recv(1 << 20)
    if not d:
        break
    buf += d
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        ids.append(json.loads(line)["id"])
fl.close()
mrtest.check(len(ids) >= 200 and ids[:200] == list(range(200)),
             "once it reads, its replies arrive in order (%d read)" % len(ids))

# ---- 7. error texts ------------------------------------------------------------
def raw(line):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(a.sock)
    s.sendall(line + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    return json.loads(out.decode("utf-8"))  # strict: invalid UTF-8 raises


for name, line in [
        ("unknown command cut inside a character",
         json.dumps({"v": 1, "id": 1, "cmd": "x" + "\u00e9" * 80}, ensure_ascii=False).encode()),
        ("a peer of 3-byte characters quoted past 256 bytes",
         json.dumps({"v": 1, "id": 2, "cmd": "ping",
                     "args": {"peer": "\u20ac" * 200}}, ensure_ascii=False).encode()),
        ("a peer of 4-byte characters quoted past 256 bytes",
         json.dumps({"v": 1, "id": 3, "cmd": "perf",
                     "args": {"peer": "a" + "\U0001F600" * 100, "seconds": 1}},
                    ensure_ascii=False).encode()),
        ("a request that is not UTF-8", b'{"v": 1, "id": 4, "cmd": "\xff\xfe"}'),
        ("a parse error at a cut character", b'{"v": 1, "cmd": "\xe2\x82'),
]:
    r = raw(line)
    mrtest.check(r.get("ok") is False and isinstance(r.get("error"), dict) and
                 r["error"].get("code") and isinstance(r["error"].get("message"), str),
                 "%s: the reply has its error (%s: %.60s...)" % (
                     name, r.get("error", {}).get("code"), r.get("error", {}).get("message")))

t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
ha.check()
p.close()
