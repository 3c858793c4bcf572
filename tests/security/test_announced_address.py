"""Attack 4: a peer announces another host's address for one of its planes
(SPEC 9.5), to point B's traffic at that host.

An attacker at an address of its own connects to B's ECHO service and
announces, beside its own address for plane 0, a victim's address for plane
1: a UDP socket of this test, on another loopback address, at the port the
attacker announced as its service port, counting what arrives. The attacker
sends ECHO requests and acknowledges none of B's answers, so B sends them
again and again, on every path it may use; it answers B's PROBEs on its own
address, and it forges answers to the PROBEs B sends the victim, guessing
their sequence numbers (it cannot see them). B must send the victim nothing
but PROBEs, and few: no data, no ACKs; its answers keep reaching the
attacker on plane 0 (until B gives up on a peer that acknowledges nothing,
RESET RETRY_EXCEEDED); `show conns` reports the plane whose address is
unproven. Meanwhile A's verified transfer to B, over both planes (whose
addresses B proves with its first PROBEs), runs as usual.
"""
import socket
import struct
import threading
import time

import mrattack as X
import mrtest

p = mrtest.Pair("announce")
a, b = p.a, p.b
o = [int(x) for x in a.addrs[0].split(".")]
used = set(a.addrs) | set(b.addrs)
free_ips = [ip for ip in ("127.%d.%d.%d" % (o[1], o[2], (o[3] + k) % 250 + 2)
                          for k in range(1, 12)) if ip not in used]
evil, victim_ip = free_ips[0], free_ips[1]
# (A's transfer maps B's 64 MiB perf region as it arrives)
hb = X.Health(b, rss_mib=(160 if X.sanitized(b.proc.pid) else 112), fds=160)

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((evil, 0))
u.settimeout(2.0)
port = u.getsockname()[1]
victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
victim.bind((victim_ip, port))
victim.setblocking(False)

bdst = (b.addrs[0], b.port)
ci, ti = X.rand32(), X.rand64()
acc, _ = X.handshake(u, bdst, ci, ti, X.rand64(), X.SVC_ECHO, port,
                     [(0, evil), (1, victim_ip)], max_streams=4, max_paths=8)
mrtest.check(acc is not None and acc["op"] == X.OP["ACCEPT"],
             "B accepted the attacker's connection to ECHO (plane 1 announced at %s, "
             "another host)" % victim_ip)
ca, ta = acc["src"], acc["hs_token"]
u.sendto(X.probe(ca, ci, ta), bdst)
u.setblocking(False)
mrtest.check(X.wait_for(lambda: any(int(c["id"], 16) == ca
                                    for c in X.conns(b, "established")), 5),
             "... and confirmed it")

CTL_MAGIC, T_ECHO_REQ = 0x4D525046, 5


def echo_req(k):
    m = struct.pack(">QQQQQQ", CTL_MAGIC << 32 | T_ECHO_REQ, k, 0, 0, 0, 0)
    return X.data("SEND", ca, ci, ta, k, 0, k, 0, len(m), m, recv_idx=k)


# A's verified transfer runs throughout.
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 4}, timeout=120)))
t.start()

at_victim, at_evil, forged = {}, {}, 0
probe_times = {}  # path id -> arrival times of B's PROBEs at the victim
reset_at = None   # when B's RESET of the connection reached the attacker
for k in range(8):
    u.sendto(echo_req(k), bdst)
end = time.monotonic() + 4.0
early_probes = late_probes = 0
t0 = next_look = time.monotonic()
looks = []  # (state, planes_unproven, planes_proven) of its connection on B
while time.monotonic() < end:
    try:
        while True:
            pkt = u.recv(4096)
            r = X.parse(pkt)
            if not r:
                continue
            at_evil[r["op"]] = at_evil.get(r["op"], 0) + 1
            if r["op"] == X.OP["RESET"] and reset_at is None:
                reset_at = time.monotonic()
            if r["op"] == X.OP["PROBE"] and "seq" in r:
                u.sendto(X.probe_ack(ca, ci, ta, r), bdst)
    except BlockingIOError:
        pass
    try:
        while True:
            pkt = victim.recv(4096)
            r = X.parse(pkt)
            op = r["op"] if r else -1
            at_victim[op] = at_victim.get(op, 0) + 1
            if op == X.OP["PROBE"]:
                probe_times.setdefault(r["path_id"], []).append(time.monotonic())
                if time.monotonic() - t0 < 2.0:
                    early_probes += 1
                else:
                    late_probes += 1
                # what the attacker can send without seeing the PROBE (this
                # test sees it; the attacker does not): its path and
                # generation are easy to guess, its sequence number is not
                # (the first few numbers, and random ones)
                for seq in list(range(1, 9)) + [X.rand32(), X.rand32()]:
                    guess = dict(r, seq=seq)
                    u.sendto(X.probe_ack(ca, ci, ta, guess), bdst)
                    forged += 1
    except BlockingIOError:
        pass
    hb.sample()
    if time.monotonic() >= next_look:
        next_look += 0.25
        for c in X.conns(b):
            if int(c["id"], 16) == ca:
                looks.append((c["state"], c["stats"].get("planes_unproven"),
                              c["stats"].get("planes_proven")))
    time.sleep(0.005)
t.join()

names = {v: k for k, v in X.OP.items()}
print("at the victim: %s; at the attacker: %s; %d forged PROBE answers"
      % ({names.get(k, k): v for k, v in at_victim.items()},
         {names.get(k, k): v for k, v in at_evil.items()}, forged))
data_ops = {X.OP[n] for n in ("WRITE", "WRITE_IMM", "SEND", "SEND_IMM")}
mrtest.check(sum(at_evil.get(op, 0) for op in data_ops) > 0,
             "B's ECHO answers reached the attacker on plane 0 (%d data packets): B "
             "was sending" % sum(at_evil.get(op, 0) for op in data_ops))
mrtest.check(sum(v for k, v in at_victim.items() if k != X.OP["PROBE"]) == 0,
             "the victim got nothing but PROBEs (%s)"
             % {names.get(k, k): v for k, v in at_victim.items()})


# What the backed-off PROBEs of one unanswered path allow: its first, then
# one per timeout, the timeout doubling from the daemon's rto_initial (5 ms)
# up to rto_max (100 ms, the engine's default), until the connection ends.
# Each wait counts at half its length (the first PROBE's arrival may be
# late, which shortens the span seen here), and one PROBE more is allowed:
# about twice what the schedule sends, where a path probing without backing
# off (every 5 ms) would send some ten times that. (The bar was 40 PROBEs in
# all: the 4 paths send 8-14 each, 32-56 in all, as long as the connection
# lives before B gives up on it.)
def probes_allowed(span_s):
    n, waited, wait = 1, 0.0, 0.005
    while waited + wait / 2 <= span_s:
        waited += wait / 2
        n += 1
        wait = min(2 * wait, 0.100)
    return n + 1


per_path = {pid: (len(ts), probes_allowed(ts[-1] - ts[0]))
            for pid, ts in sorted(probe_times.items())}
mrtest.check(at_victim.get(X.OP["PROBE"], 0) > 0 and
             all(n <= allowed for n, allowed in per_path.values()),
             "and few of them, each path backing off: %d in 4 s (%d in the first 2 s, %d "
             "in the next 2); per path (PROBEs, allowed by its backoff): %s"
             % (at_victim.get(X.OP["PROBE"], 0), early_probes, late_probes, per_path))
after = [t for ts in probe_times.values() for t in ts if reset_at and t > reset_at + 0.2]
mrtest.check(reset_at is not None and not after,
             "... and none once B had reset the connection (%s s into the 4; %d after)"
             % ("%.2f" % (reset_at - t0) if reset_at else "no RESET", len(after)))
mrtest.check(looks and all(u == 2 and pr == 0 for _, u, pr in looks),
             "show conns, every 250 ms while the connection lived (%d looks, last %s): "
             "its plane 1 address unproven, the forged answers proved nothing"
             % (len(looks), looks[-1] if looks else None))
mrtest.check(res.get("ok") and res["result"]["verified"],
             "A's transfer verifies (%s Gbit/s)" % res.get("result", {}).get("goodput_gbps"))
u.close()
victim.close()
hb.check()
mrtest.check(a.alive(), "A alive")
p.close()
