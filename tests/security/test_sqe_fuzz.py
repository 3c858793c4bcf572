"""Hostile work requests in combinations the issue's list did not name: an
application (rawabi.py: libclient/abi.h spoken without the library) on B
with a connection to a listener on A posts 3,000 submission entries, each
either a valid WRITE into the listener's region (its bytes checked at A) or
one built valid and then broken in one to three of the ways abi.h forbids:
an unknown opcode, a flag bit abi.h does not define (MRC_SQE_UNSIGNALED
alone is valid: it only drops the completion of a success), nonzero
reserved bytes, a stream past the
connection's, another or no connection handle, an unknown lkey, a buffer
before, past the end of or wrapping around its region, a length over
2 GiB, a remote address or rkey on a SEND or RECV, an immediate without
_IMM, an address with length 0, a READ into a region without local write.

Every entry completes exactly once with its wr_id; the valid ones succeed
and the broken ones never do, and they change nothing at A. The connection
stays up (every check is local), B answers its control socket throughout,
a verified transfer A -> B runs meanwhile, and B's RSS and descriptors
(other than its UDP sockets: mrattack.Health) stay bounded.
"""
import random
import threading
import time

import mrattack as X
import mrtest
import rawabi as R

SVC = 0x53514546  # "SQEF"
OP_READ = 6
p = mrtest.Pair("sqefuzz")
a, b = p.a, p.b
res = {}
t = threading.Thread(target=lambda: res.update(
    a.request("perf", {"peer": b.peer(), "seconds": 10}, timeout=120)))
t.start()
mrtest.check(X.wait_for(lambda: X.conns(b, "established"), 20), "A's transfer to B runs")
time.sleep(1.0)
# (more room under AddressSanitizer: its quarantine and size classes; one
# run grew 51 MiB there, most runs a few)
hb = X.Health(b, rss_mib=96 if X.sanitized(b.proc.pid) else 64, fds=32, udp=False)

la = R.Client(a.app_sock)
la.hello(b"listener")
st, actx = la.ctx_create(8)
ASIZE = 1 << 20
aregion = R.Region(ASIZE)
st, (alkey, arkey) = la.mr_reg(aregion, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
mrtest.check(st == 0 and la.listen(SVC, actx.id, 4)[0] == 0, "A: a listener with a 1 MiB region")

cb = R.Client(b.app_sock)
cb.hello(b"hostile")
st, bctx = cb.ctx_create(16)
BSIZE = 1 << 20
bregion = R.Region(BSIZE)
st, (blkey, _) = cb.mr_reg(bregion, R.ACCESS_LOCAL_WRITE)
rregion = R.Region(1 << 16)  # read-only for the daemon: no LOCAL_WRITE
st2, (rlkey, _) = cb.mr_reg(rregion, 0)
mrtest.check(st == 0 and st2 == 0, "B: a hostile application with two regions")
other = R.Client(b.app_sock)  # another session: its handles are not the hostile one's
other.hello(b"other")
st, octx = other.ctx_create(8)
oregion = R.Region(1 << 16)
st, (olkey, _) = other.mr_reg(oregion, R.ACCESS_LOCAL_WRITE)
st, conn = cb.connect(a.addrs[0], a.port, SVC, bctx.id, nstreams=4)
ev = cb.event()
mrtest.check(st == 0 and ev.event == R.EV_ESTABLISHED, "B: connected to A's listener (%r)" % ev)
nstreams = ev.nstreams
ev = la.event()
mrtest.check(ev.event == R.EV_INCOMING, "A: the connection came in")

rnd = random.Random(1212)
for i in range(0, BSIZE, 4096):
    bregion.mm[i:i + 4096] = rnd.randbytes(4096)


def valid_write():
    ln = rnd.choice([1, 7, 100, 4096, 65536, rnd.randrange(1, 200000)])
    # Offset k of B's region always goes to offset k of A's: what A holds
    # does not depend on the order in which overlapping WRITEs land.
    src = dst = rnd.randrange(0, min(ASIZE, BSIZE) - ln + 1)
    # (not WRITE_IMM: it would take a receive A's application never posts)
    q = {"opcode": R.OP_WRITE, "conn": conn, "stream": rnd.randrange(nstreams),
         "addr": bregion.addr + src, "lkey": blkey, "len": ln,
         "remote_addr": aregion.addr + dst, "rkey": arkey}
    return q, (src, dst, ln)


def base(op):
    if op in (R.OP_WRITE, R.OP_WRITE_IMM):
        q = valid_write()[0]
        if op == R.OP_WRITE_IMM:
            q.update(opcode=op, imm=rnd.getrandbits(32))
        return q
    q = {"opcode": op, "conn": conn, "stream": rnd.randrange(nstreams),
         "addr": bregion.addr, "lkey": blkey, "len": 64}
    if op == OP_READ:
        q.update(remote_addr=aregion.addr, rkey=arkey)
    if op == R.OP_SEND_IMM:
        q["imm"] = 5
    return q


def m_opcode(q):
    q["opcode"] = rnd.choice([0, 7, 8, 0x40, 0x80, 255])


def m_flags(q):
    # every value from 2 up has a bit besides MRC_SQE_UNSIGNALED (bit 0)
    q["flags"] = rnd.randrange(2, 256)


def m_reserved(q):
    r = bytearray(16)
    r[rnd.randrange(16)] = rnd.randrange(1, 256)
    q["reserved"] = bytes(r)


def m_stream(q):
    q["stream"] = rnd.choice([nstreams, nstreams + 1, 1024, 65535])


def m_conn(q):
    q["conn"] = rnd.choice([0, conn + 1, conn ^ 0x80000000, 0xffffffff])


def m_lkey(q):
    # lkeys name regions within a session: another session's may have the
    # same number as one of ours, and then it is ours
    q["lkey"] = rnd.choice([k for k in (0, olkey, olkey + 1, blkey ^ 0x5a5a0000,
                                        blkey + 1, 0xffffffff) if k not in (blkey, rlkey)])
    q["len"] = q["len"] or 64


def m_addr(q):
    ln = q["len"] or 64
    q["len"] = ln
    q["addr"] = rnd.choice([bregion.addr - 1, bregion.addr + BSIZE - ln + 1,
                            bregion.addr + BSIZE, 0, (1 << 64) - ln // 2 - 1,
                            oregion.addr])


def m_len(q):
    q["len"] = rnd.choice([0x80000001, 0xffffffff, BSIZE + 1])


def m_remote_on_local(q):
    q["opcode"] = rnd.choice([R.OP_SEND, R.OP_RECV])
    q["imm"] = 0
    if rnd.random() < 0.5:
        q["remote_addr"] = aregion.addr
    else:
        q["rkey"] = arkey


def m_imm(q):
    q["opcode"] = rnd.choice([R.OP_WRITE, R.OP_SEND, R.OP_RECV])
    q["imm"] = rnd.randrange(1, 1 << 32)


def m_zero_len(q):
    q["len"] = 0
    q["addr"] = q["addr"] or bregion.addr


def m_read_ro(q):
    q.update(opcode=OP_READ, addr=rregion.addr, lkey=rlkey, len=64,
             remote_addr=aregion.addr, rkey=arkey, imm=0)


MUTS = [m_opcode, m_flags, m_reserved, m_stream, m_conn, m_lkey, m_addr, m_len,
        m_remote_on_local, m_imm, m_zero_len, m_read_ro]
# m_zero_len and m_remote_on_local / m_imm cannot break an entry by
# themselves in every combination: each is applied so that the result is
# invalid by the rules above (zero length with an address, a remote field on
# SEND/RECV, an immediate without _IMM).

N = 3000
sent = {}
shadow = bytearray(ASIZE)
done = 0
stat = {"valid": 0, "broken": 0}
statuses = {}
wr = 0
lat = []
while wr < N:
    batch = []
    for _ in range(min(8, N - wr)):
        wr += 1
        if rnd.random() < 0.3:
            q, w = valid_write()
            q["wr_id"] = wr
            sent[wr] = ("valid", w)
            stat["valid"] += 1
        else:
            q = base(rnd.choice([R.OP_WRITE, R.OP_WRITE_IMM, R.OP_SEND, R.OP_SEND_IMM,
                                 R.OP_RECV, OP_READ]))
            muts = rnd.sample(MUTS, rnd.randrange(1, 4))
            for m in muts:
                m(q)
            q["wr_id"] = wr
            sent[wr] = ("broken", ([m.__name__ for m in muts], dict(q)))
            stat["broken"] += 1
        batch.append(q)
    bctx.post(*batch)
    for c in bctx.reap(len(batch), timeout=30):
        kind, info = sent.pop(c["wr_id"], (None, None))
        if kind is None:
            mrtest.fail("a completion for no posted entry, or a second one: %r" % c)
        statuses[(kind, c["status"])] = statuses.get((kind, c["status"]), 0) + 1
        if kind == "valid":
            if c["status"] != 0:
                mrtest.fail("valid WRITE %d failed: %r" % (c["wr_id"], c))
            src, dst, ln = info
            shadow[dst:dst + ln] = bregion.mm[src:src + ln]
        elif c["status"] == 0:
            mrtest.fail("a broken entry succeeded: %r %r" % (info, c))
    if wr % 400 < 8:
        t0 = time.monotonic()
        mrtest.check(b.request("status", timeout=10)["ok"], "B answers (%d posted)" % wr)
        lat.append(time.monotonic() - t0)
        hb.sample()
print("posted %s; completions by (kind, status): %s" % (stat, sorted(statuses.items())))
mrtest.check(not sent, "every entry completed exactly once (%d left)" % len(sent))
mrtest.check(bytes(aregion.mm) == bytes(shadow),
             "A's region holds exactly what the valid WRITEs wrote")
st = b.ok("status")["apps"]
hs = [x for x in st["list"] if x["name"] == "hostile"]
mrtest.check(hs and hs[0]["wrs_bad"] >= stat["broken"] // 2,
             "B counted the broken entries (%d)" % (hs[0]["wrs_bad"] if hs else -1))
# The connection is still up: one more WRITE succeeds.
q, (src, dst, ln) = valid_write()
q["wr_id"] = 999999
bctx.post(q)
c = bctx.reap(1)[0]
mrtest.check(c["status"] == 0 and bytes(aregion.mm[dst:dst + ln]) == bytes(bregion.mm[src:src + ln]),
             "the connection is still up: a last WRITE lands")
for x in (cb, other, la):
    x.close()
t.join()
mrtest.check(res.get("ok") and res["result"]["verified"],
             "the transfer A->B verified: %s" % res.get("result", res).get("verified"))
print("B's status latencies: max %.3f s" % max(lat or [0.0]))
hb.check()
p.close()
