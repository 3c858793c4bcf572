"""Attack 6 spread over many clients, a form the issue's list did not name:
24 control clients each pipeline `metrics` and `show conns` requests for a
bounded time (at most 6 s) and never read a reply. Each client alone stops
being read at 4 MiB of unread replies, which for 24 of them would be 96 MiB;
the daemon also bounds all clients together: once 64 MiB of replies wait, a
client with replies of its own waiting is not read. The peak of replies
queued stays within 64 MiB plus, per client, its socket buffer and two
replies, another client is
answered throughout, a verified transfer A -> B runs meanwhile, and when the
clients then read, each gets its replies in order.
"""
import json
import socket
import threading
import time

import mrattack as X
import mrtest

N = 24
p = mrtest.Pair("ctlmany")
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 10}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)
# the replies themselves (up to 64 MiB) and, under AddressSanitizer, its
# allocator's rounding and quarantine
ha = X.Health(a, rss_mib=160 if X.sanitized(a.proc.pid) else 112, fds=N + 16, udp=False)


def reply_len(cmd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(a.sock)
    s.sendall(json.dumps({"v": 1, "cmd": cmd}).encode() + b"\n")
    out = b""
    while not out.endswith(b"\n"):
        out += s.recv(1 << 20)
    s.close()
    return len(out)


biggest = max(reply_len("metrics"), reply_len("show conns"))
reqs = b"".join(json.dumps({"v": 1, "id": i, "cmd": "metrics" if i % 2 else "show conns"})
                .encode() + b"\n" for i in range(500))
clients = []
for _ in range(N):
    s = socket.socket(socket.AF_UNIX)
    s.connect(a.sock)
    s.setblocking(False)
    clients.append(s)
sent = [0] * N
t0 = a.ok("status")["counters"]
lat = []
end = time.monotonic() + 6.0
while time.monotonic() < end:
    blocked = 0
    for k, s in enumerate(clients):
        try:
            sent[k] += s.send(reqs)
        except BlockingIOError:
            blocked += 1
    ha.sample()
    q0 = time.monotonic()
    if not a.request("status", timeout=10)["ok"]:
        mrtest.fail("A did not answer another client")
    lat.append(time.monotonic() - q0)
    if blocked == N:
        time.sleep(0.05)
st = a.ok("status")["counters"]
peak = st["ctl_replies_queued_peak"]
# A reply the kernel took into the client's socket buffer counts as queued
# until libuv reports it written, but does not hold its client back: each
# client adds its socket buffer and a reply or two past the mark.
with open("/proc/sys/net/core/wmem_default") as f:
    sockbuf = int(f.read())
bound = (64 << 20) + N * (sockbuf + 2 * biggest)
print("%d clients sent %d bytes of requests; replies queued: peak %d bytes (bound %d: 64 MiB "
      "+ %d clients x (%d + 2 x %d bytes)), now %d; clients paused %d times; status latency "
      "max %.3f s" % (N, sum(sent), peak, bound, N, sockbuf, biggest, st["ctl_replies_queued"],
                      st["ctl_clients_paused"] - t0["ctl_clients_paused"], max(lat)))
mrtest.check(peak > 32 << 20, "the clients did fill the daemon's queues (%d bytes)" % peak)
mrtest.check(peak <= bound, "replies queued for all clients stayed within %d bytes (%d)"
             % (bound, peak))
mrtest.check(st["ctl_clients_dropped"] == t0["ctl_clients_dropped"],
             "no client was dropped (each stayed under 32 MiB)")
# Now they read: each gets its first 100 replies, in order.
okc = 0
for s in clients:
    s.setblocking(True)
    s.settimeout(20)
    buf, ids = b"", []
    while len(ids) < 100:
        d = s.recv(1 << 20)
        if not d:
            break
        buf += d
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            ids.append(json.loads(line)["id"])
    okc += ids[:100] == list(range(100))
    s.close()
mrtest.check(okc == N, "once they read, %d of %d clients got their replies in order" % (okc, N))
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
ha.check()
p.close()
