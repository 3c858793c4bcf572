"""The initial retransmission timeout from the handshake: each end measures
the handshake's round trip (the initiator CONNECT to ACCEPT, the acceptor
ACCEPT to the initiator's first packet) and starts its engine's timeout at
three of them where that is longer than timers.rto_initial, at most
timers.rto_max; `show conns` says both. Loopback's round trip is tens of
microseconds, far below the default rto_initial (5 ms): with rto_initial
(and rto_min) at 1 us, the three round trips decide on both ends."""
import mrtest

INIT_US, MAX_US = 1.0, 100000.0


def rule(conn):
    hs = conn["handshake_rtt_us"]
    if not 0 < hs <= 1023000:
        return min(INIT_US, MAX_US)
    return min(MAX_US, max(INIT_US, 3 * hs))


p = mrtest.Pair("rto_initial", yaml_extra="timers:\n  rto_min: 1us\n  rto_initial: 1us\n")
a, b = p.a, p.b
r = a.ok("ping", {"peer": b.peer(), "count": 1}, timeout=30)
ca = r["conn"]
cb = [c for c in b.ok("show conns") if c["role"] == "acceptor"]
mrtest.check(len(cb) == 1, "B has the acceptor side: %s" % cb)
for name, c in (("initiator", ca), ("acceptor", cb[0])):
    mrtest.check(0 < c["handshake_rtt_us"] < 1023000,
                 "%s measured the handshake: %s us" % (name, c["handshake_rtt_us"]))
    mrtest.check(abs(c["rto_initial_us"] - rule(c)) < 0.01 and c["rto_initial_us"] > INIT_US,
                 "%s: initial timeout %s us = 3 x handshake %s us" % (
                     name, c["rto_initial_us"], c["handshake_rtt_us"]))
p.close()
