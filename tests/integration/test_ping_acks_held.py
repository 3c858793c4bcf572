"""A ping whose answers the echo server cannot retire for a while: the
initiator's ACKs are held back, so none of the server's replies completes
(a SEND completes when the peer has acknowledged it) and each holds one of
the server's control send slots. The server must still answer every echo
(queued until a slot frees), and the ping must end with all its round
trips. Before the queue, the reply that found every slot busy was dropped
and the ping waited until its control client gave up.

A relay (the conformance suite's badpeer.py, transparent) sits between A
and B, one plane each. While it holds, it keeps every ACK from A to B for
HOLD_S (short of B's retry budget), then passes them on in order.
"""
import os
import struct
import sys
import tempfile
import threading
import time

import mrtest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conform"))
sys.path.insert(0, os.path.join(HERE, "..", "security"))
import badpeer  # noqa: E402
import mrattack as mra  # noqa: E402

COUNT = 20
SLOTS = 8  # the server's control send slots (NCTL in daemon/perf.c)
HOLD_S = 0.15  # B gives up on unacknowledged packets after ~0.5 s here


class AckHoldRelay(badpeer.Relay):
    def __init__(self, listen, target):
        super().__init__("none", listen, target)
        self.hold = False
        self.since = 0.0
        self.queue = []
        self.replies = set()
        self.held = 0
        self.peak = 0

    def start_hold(self):
        self.replies = set()
        self.since = time.time()
        self.hold = True

    def release(self):
        self.hold = False
        q, self.queue = self.queue, []
        for args in q:
            super().upstream(*args)

    def tick(self):
        # the hold ends on time even when nothing else comes
        if self.hold and time.time() - self.since > HOLD_S:
            self.release()

    def upstream(self, data, src, tos):
        if self.hold and len(data) >= 2 and data[1] == mra.OP["ACK"]:
            self.held += 1
            self.queue.append((data, src, tos))
            return
        super().upstream(data, src, tos)

    def downstream(self, data, src, tos):
        if self.hold and len(data) >= 72 and data[1] == mra.OP["SEND"]:
            # (stream, message number) of B's control messages: replies
            self.replies.add(struct.unpack_from(">HxxI", data, 28))
            self.peak = max(self.peak, len(self.replies))
        super().downstream(data, src, tos)


addrs = mrtest.addr_base("ping_acks_held")
tmp = tempfile.TemporaryDirectory(prefix="mrd-ping-acks-held-")
a = mrtest.Daemon(tmp.name, "a", [addrs[0]])
b = mrtest.Daemon(tmp.name, "b", [addrs[2]], port=19792)
relay = AckHoldRelay((addrs[3], 19793), (addrs[2], 19792))
threading.Thread(target=relay.run, args=(relay.tick, 0.01), daemon=True).start()

# Through the relay, ACKs flowing: the path works.
r = a.request("ping", {"peer": "%s:19793" % addrs[3], "count": 2}, timeout=30)
mrtest.check(r.get("ok"), "ping through the relay: %s" % r)

relay.start_hold()
t0 = time.time()
r = a.request("ping", {"peer": "%s:19793" % addrs[3], "count": COUNT}, timeout=60)
took = time.time() - t0
print("ping with ACKs held: %.1f s, %d ACKs held, %d replies sent while held, reply %s"
      % (took, relay.held, relay.peak, r))
# B's slots all held unacknowledged replies: the next one had to wait.
mrtest.check(relay.peak >= SLOTS,
             "B sent %d replies while none was acknowledged (its %d slots)" % (relay.peak, SLOTS))
mrtest.check(r.get("ok") and len(r["result"]["rtt_us"]) == COUNT,
             "all %d round trips answered" % COUNT)
mrtest.check(max(r["result"]["rtt_us"]) >= HOLD_S * 1e6 * 0.5,
             "one reply waited for a slot until the ACKs came (longest round trip %.0f us)"
             % max(r["result"]["rtt_us"]))
mrtest.check(took < 15, "the ping ended in %.1f s" % took)
mrtest.check(b.alive() and a.alive(), "both daemons still run")
for d in (a, b):
    rc, _ = d.stop()
    mrtest.check(rc == 0, "%s exits 0" % d.name)
tmp.cleanup()
