"""The daemon's side of the application ABI, spoken raw (rawabi.py, no
libmetaroce): two daemons on loopback, hostile sessions that must be refused
or closed without harming anyone else, and a well-behaved end-to-end
exchange (register, listen/connect, RECV + SEND, WRITE_IMM into the peer's
region, every byte and completion checked), then a perf between the daemons
that must still verify, and a clean SIGTERM (ASan checks leaks at exit).
"""
import os
import socket
import struct
import time

import mrtest
import rawabi as R
from mrtest import check

SVC = 0x41505031  # "APP1"


def nfds(d):
    return len(os.listdir("/proc/%d/fd" % d.proc.pid))


def status(d):
    return d.ok("status")["apps"]


p = mrtest.Pair("appabi", yaml_extra="apps:\n  max_sessions: 4\n  max_contexts: 4\n"
                "  max_regions: 8\n  max_region_bytes: 16MiB\n")
A, B = p.a, p.b
fds0 = nfds(A)

# ---- HELLO ---------------------------------------------------------------------
c = R.Client(A.app_sock)
st, _ = c.hello(version=R.ABI_VERSION + 1)
check(st == R.ERR["VERSION"], "HELLO with ABI version %d: MRC_ERR_VERSION" % (R.ABI_VERSION + 1))
c.close()
c = R.Client(A.app_sock)
st, _ = c.hello(version=1)
check(st == R.ERR["VERSION"], "HELLO with ABI version 1 (shared eventfds): MRC_ERR_VERSION")
check(c.eof(), "... and the session is closed")
c.close()

c = R.Client(A.app_sock)
st, _, _ = c.call(R.CTX_CREATE, R.U32X2.pack(8, 0))
check(st == R.ERR["VERSION"], "a first message that is not HELLO: MRC_ERR_VERSION")
check(c.eof(), "... and the session is closed")
c.close()

good = R.Client(A.app_sock)  # a well-behaved session, alive throughout
st, rep = good.hello(b"good")
check(st == 0 and rep[0] == R.ABI_VERSION and rep[2] == 4 and rep[3] == 8 and
      rep[4] == 1024 and rep[5] == 64,
      "HELLO: version and the configured limits (4 contexts, 8 regions, 1024 conns, "
      "64 listeners)")
check(rep[6] == 16 << 20 and rep[7] == 2 and rep[8] == 4096,
      "HELLO: 16 MiB of regions, 2 planes, MTU 4096")
check(rep[10] == R.FEAT_UNSIGNALED, "HELLO: features MRC_FEAT_UNSIGNALED (%#x)" % rep[10])

# ---- malformed requests ----------------------------------------------------------
c = R.Client(A.app_sock)
check(c.hello()[0] == 0, "second session attached")
seq = c.send(R.CTX_CREATE, R.U32X2.pack(8, 0) + b"\0\0\0\0")
check(c.reply(seq)[0] == R.ERR["INVAL"], "CTX_CREATE with 4 extra bytes: MRC_ERR_INVAL")
seq = c.send(R.CTX_DESTROY, R.U32X2.pack(1, 0)[:4])
check(c.reply(seq)[0] == R.ERR["INVAL"], "CTX_DESTROY 4 bytes short: MRC_ERR_INVAL")
check(c.call(R.CTX_DESTROY, R.U32X2.pack(1, 7))[0] == R.ERR["INVAL"],
      "CTX_DESTROY with reserved != 0: MRC_ERR_INVAL")
check(c.call(R.MR_DEREG, R.U32X2.pack(12345, 0))[0] == R.ERR["NOENT"],
      "MR_DEREG of an unknown lkey: MRC_ERR_NOENT")
check(c.call(99, b"")[0] == R.ERR["INVAL"], "unknown message type: MRC_ERR_INVAL")
st, ctx = c.ctx_create(8, 8)
check(st == R.ERR["INVAL"], "CQ smaller than twice the SQ: MRC_ERR_INVAL")
st, ctx = c.ctx_create(12)
check(st == R.ERR["INVAL"], "SQ size not a power of two: MRC_ERR_INVAL")
st, ctx = c.ctx_create(8)
check(st == 0 and ctx.sq_entries == 8 and ctx.cq_entries == 16,
      "CTX_CREATE 8: SQ 8, CQ 16, three fds, the header as abi.h says")
seals = R.fcntl.fcntl(ctx.shm, R.F_GET_SEALS)
check(seals & (R.F_SEAL_SHRINK | R.F_SEAL_GROW | R.F_SEAL_SEAL) ==
      R.F_SEAL_SHRINK | R.F_SEAL_GROW | R.F_SEAL_SEAL, "the context memfd is sealed")
check(ctx.u32(ctx.sq_off + 128) & R.NEED_WAKEUP, "SQ NEED_WAKEUP set: the daemon sleeps")
# fds where none belong (the daemon must close them: its fd count is checked below)
pr, pw = os.pipe()
check(c.call(R.LISTEN, R.LISTEN_REQ.pack(SVC, ctx.id, 0, 0, 0, 0), [pr, pw])[0] ==
      R.ERR["INVAL"], "LISTEN carrying two fds: MRC_ERR_INVAL")
check(c.listen(0x50455246, ctx.id)[0] == R.ERR["BUSY"], "LISTEN on the daemon's PERF service: MRC_ERR_BUSY")
check(c.listen(SVC, 999)[0] == R.ERR["NOENT"], "LISTEN on an unknown context: NOENT")
# MR_REG
unsealed = R.Region(1 << 16, seal=False)
check(c.mr_reg(unsealed, R.ACCESS_LOCAL_WRITE)[0] == R.ERR["INVAL"],
      "MR_REG of a memfd without F_SEAL_SHRINK: refused (MRC_ERR_INVAL)")
reg = R.Region(1 << 16)
check(c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, fds=[pr])[0] == R.ERR["INVAL"],
      "MR_REG of a pipe: MRC_ERR_INVAL")
check(c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, fds=[])[0] == R.ERR["INVAL"],
      "MR_REG without an fd: MRC_ERR_INVAL")
check(c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, fds=[reg.fd, reg.fd])[0] == R.ERR["INVAL"],
      "MR_REG with two fds: MRC_ERR_INVAL")
check(c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, offset=100, length=4096)[0] == R.ERR["INVAL"],
      "MR_REG at an offset not page-aligned: MRC_ERR_INVAL")
check(c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, length=(1 << 16) + 1)[0] == R.ERR["INVAL"],
      "MR_REG beyond the end of the memfd: MRC_ERR_INVAL")
check(c.mr_reg(reg, 0x80)[0] == R.ERR["INVAL"], "MR_REG with unknown access bits: INVAL")
st, keys = c.mr_reg(reg, R.ACCESS_LOCAL_WRITE, offset=4096, length=8192)
check(st == 0 and keys[1] != 0, "MR_REG of a sealed memfd at offset 4096: lkey and rkey")
check(c.call(R.MR_DEREG, R.U32X2.pack(keys[0], 0))[0] == 0, "MR_DEREG")
check(c.call(R.MR_DEREG, R.U32X2.pack(keys[0], 0))[0] == R.ERR["NOENT"],
      "MR_DEREG again: MRC_ERR_NOENT")
os.close(pr)
os.close(pw)
# the good session is unaffected
st, gctx = good.ctx_create(8)
check(st == 0, "the other session is served meanwhile")
# a header whose length is not the datagram's: answered, then closed
seq = c.send(R.CTX_DESTROY, R.U32X2.pack(1, 0), hdr_len=100)
check(c.reply(seq)[0] == R.ERR["INVAL"] and c.eof(),
      "header length != datagram length: MRC_ERR_INVAL, session closed")
c.close()
ctx = None

# ---- MRC_MSG_MR_BOUNDS: a region narrowed to exact bytes --------------------------
MR_BOUNDS = 12
BOUNDS = struct.Struct("<IIQQ")
c = R.Client(A.app_sock)
c.hello()
breg = R.Region(1 << 16)
st, bkeys = c.mr_reg(breg, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
check(st == 0, "MR_REG for MR_BOUNDS")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 0, breg.addr + 7, 50003))[0] == 0,
      "MR_BOUNDS inside the region: accepted")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 0, breg.addr + 7, 1 << 16))[0] == R.ERR["INVAL"],
      "MR_BOUNDS past the region's end: INVAL")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 0, breg.addr - 1, 10))[0] == R.ERR["INVAL"],
      "MR_BOUNDS before the region: INVAL")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 0, breg.addr, 0))[0] == R.ERR["INVAL"],
      "MR_BOUNDS of 0 bytes: INVAL")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 0, (1 << 64) - 8, 16))[0] == R.ERR["INVAL"],
      "MR_BOUNDS wrapping around: INVAL")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0] ^ 0x10000, 0, breg.addr, 8))[0] == R.ERR["NOENT"],
      "MR_BOUNDS of an unknown lkey: NOENT")
check(c.call(MR_BOUNDS, BOUNDS.pack(bkeys[0], 1, breg.addr, 8))[0] == R.ERR["INVAL"],
      "MR_BOUNDS reserved: INVAL")
c.close()

# ---- MRC_MSG_DEVINFO: the daemon's planes and service port ------------------------
DEVINFO = 11
c = R.Client(A.app_sock)
c.hello()
st, d, fds = c.call(DEVINFO, R.U32X2.pack(0, 0))
check(st == 0 and len(d) == 16 + 32 * 16 and not fds, "DEVINFO: a reply of 528 bytes")
port, nplanes, mtu, max_msg, _ = struct.unpack_from("<HHIII", d)
check(port == A.port and nplanes == len(A.addrs) and mtu >= 256 and max_msg > 0,
      "DEVINFO: service port %d, %d planes, mtu %d" % (port, nplanes, mtu))
for i, addr in enumerate(A.addrs):
    fam, up, _, pmtu, speed, raw = struct.unpack_from("<BBHIQ16s", d, 16 + 32 * i)
    check(fam == 4 and socket.inet_ntoa(raw[:4]) == addr and raw[4:] == b"\0" * 12 and
          pmtu >= mtu, "DEVINFO plane %d: %s, mtu %d, up %d" % (i, addr, pmtu, up))
check(d[16 + 32 * nplanes:] == b"\0" * (32 * (16 - nplanes)), "DEVINFO: unused entries zero")
check(c.call(DEVINFO, R.U32X2.pack(1, 0))[0] == R.ERR["INVAL"], "DEVINFO flags 1: INVAL")
check(c.call(DEVINFO, R.U32X2.pack(0, 7))[0] == R.ERR["INVAL"], "DEVINFO reserved: INVAL")
check(c.call(DEVINFO, b"\0" * 4)[0] == R.ERR["INVAL"], "DEVINFO of 4 bytes: INVAL")
check(c.call(DEVINFO, R.U32X2.pack(0, 0))[0] == 0, "the session still answers")
c.close()

# garbage again and again
c = R.Client(A.app_sock)
c.hello()
for i in range(70):
    try:
        c.send(77, b"x" * (i % 9))
    except OSError:
        break
check(c.eof(), "a session sending garbage again and again is closed")
c.close()

# replies the application does not read: queued in order, up to a bound
c = R.Client(A.app_sock)
c.hello()
st, qctx = c.ctx_create(8)
busy = R.LISTEN_REQ.pack(0x50455246, qctx.id, 0, 0, 0, 0)
seqs = [c.send(R.LISTEN, busy) for i in range(1000)]
got_all = all(c.reply(q)[0] == R.ERR["BUSY"] for q in seqs)
check(got_all, "1000 requests sent before reading: 1000 replies, in order")
c.s.setblocking(False)
sent, t = 0, time.time() + 20
while sent < 20000 and time.time() < t:
    try:
        c.send(R.LISTEN, busy)
        sent += 1
    except BlockingIOError:
        time.sleep(0.001)
    except OSError:
        break
c.s.setblocking(True)
check(c.eof(timeout=10), "a session that never reads its replies is closed (after %d "
      "requests)" % sent)
c.close()

# an oversized datagram
c = R.Client(A.app_sock)
c.hello()
c.send_raw(R.HDR.pack(R.CTX_CREATE, 2000, 1, 0, 0) + b"\0" * 1976)
check(c.eof(), "a datagram above MRC_MSG_MAX closes the session")
c.close()

time.sleep(0.2)
check(nfds(A) == fds0 + 3, "the daemon holds no fd it was sent: the good session's "
      "socket and its context's two socket pair ends are all it gained (%d -> %d)"
      % (fds0, nfds(A)))
idle = R.Client(A.app_sock)  # never sends anything (checked at the end)
t_idle = time.time()
s = status(A)
check(s["requests_bad"] >= 20 and s["sessions_refused"] == 0 and s["sessions"] == 1,
      "status: bad requests counted (%d), one session open" % s["requests_bad"])

# ---- the end-to-end exchange ----------------------------------------------------
la = R.Client(A.app_sock)
la.hello(b"listener")
st, actx = la.ctx_create(8)
aregion = R.Region(1 << 20)
st, (alkey, arkey) = la.mr_reg(aregion, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
check(st == 0, "A: region of 1 MiB, local and remote write")
st, lid = la.listen(SVC, actx.id, 4)
check(st == 0, "A: LISTEN on an application service")
check(good.listen(SVC, gctx.id)[0] == R.ERR["BUSY"],
      "another session's LISTEN on the same service: MRC_ERR_BUSY")

cb = R.Client(B.app_sock)
cb.hello(b"connector")
st, bctx = cb.ctx_create(16)
bregion = R.Region(1 << 20)
st, (blkey, brkey) = cb.mr_reg(bregion, R.ACCESS_LOCAL_WRITE)
st, bad_conn = cb.connect(A.addrs[0], A.port, 0x7777, bctx.id)
check(st == 0, "B: CONNECT to a service nobody listens on returns a handle")
ev = cb.event()
check(ev.event == R.EV_FAILED and ev.conn == bad_conn and ev.status == R.ERR["REJECTED"],
      "... then EVENT FAILED with MRC_ERR_REJECTED (%r)" % ev)
st, dead = cb.connect(A.addrs[0], A.port + 1, SVC, bctx.id)
ev = cb.event(timeout=10)
check(st == 0 and ev.event == R.EV_FAILED and ev.conn == dead and
      ev.status == R.ERR["UNREACHABLE"],
      "CONNECT to a port no daemon answers on: EVENT FAILED, MRC_ERR_UNREACHABLE (%r)" % ev)
check(cb.connect(A.addrs[0], A.port, SVC, bctx.id, mask=0x4)[0] == R.ERR["INVAL"],
      "CONNECT with a planes_mask of no plane we have: MRC_ERR_INVAL")
check(cb.connect(A.addrs[0], A.port, SVC, bctx.id, paths=17)[0] == R.ERR["INVAL"],
      "CONNECT with initial_paths above paths.max_per_plane: MRC_ERR_INVAL")
check(cb.connect("a.example", A.port, SVC, bctx.id)[0] == R.ERR["INVAL"],
      "CONNECT to a host name (only numeric addresses): MRC_ERR_INVAL")
st, conn_b = cb.connect(A.addrs[0], A.port, SVC, bctx.id, nstreams=8)
check(st == 0, "B: CONNECT to A's service")
ev = cb.event()
check(ev.event == R.EV_ESTABLISHED and ev.conn == conn_b and ev.ctx_id == bctx.id and
      ev.nstreams == 4, "B: EVENT ESTABLISHED, 8 streams asked, the listener's 4 (%r)" % ev)
# SPEC 9.3: B's daemon confirms the connection at once (a PROBE), though B's
# application sends nothing yet: A's INCOMING comes well before the first
# idle probe (timers.probe_interval, 1 s).
t_est = time.time()
ev = la.event(timeout=0.5)
check(ev.event == R.EV_INCOMING and ev.listener_id == lid and ev.ctx_id == actx.id and
      ev.nstreams == 4, "A: EVENT INCOMING on its listener, 4 streams, %.1f ms after B's "
      "ESTABLISHED (%r)" % ((time.time() - t_est) * 1e3, ev))
conn_a = ev.conn
check(cb.events == [] and ev.peer != "", "events carry the peer's address")

# RECV at A, SEND from B
msg = os.urandom(100000)
bregion.mm[0:len(msg)] = msg
actx.post({"wr_id": 11, "opcode": R.OP_RECV, "conn": conn_a, "stream": 1,
           "addr": aregion.addr + 4096, "lkey": alkey, "len": 200000})
time.sleep(0.05)
bctx.post({"wr_id": 21, "opcode": R.OP_SEND_IMM, "conn": conn_b, "stream": 1,
           "addr": bregion.addr, "lkey": blkey, "len": len(msg), "imm": 0xabcdef})
cq = bctx.reap(1)[0]
check(cq["wr_id"] == 21 and cq["status"] == 0 and cq["opcode"] == R.OP_SEND_IMM and
      cq["conn"] == conn_b, "B: SEND_IMM completes (%r)" % cq)
cq = actx.reap(1)[0]
check(cq["wr_id"] == 11 and cq["status"] == 0 and cq["opcode"] == R.WC_OP_RECV and
      cq["byte_len"] == len(msg) and cq["flags"] == R.WITH_IMM and cq["imm"] == 0xabcdef and
      cq["stream"] == 1 and cq["conn"] == conn_a, "A: RECV completes with imm (%r)" % cq)
check(bytes(aregion.mm[4096:4096 + len(msg)]) == msg, "A: the 100000 bytes arrived intact")

# MR_DEREG of a region a posted RECV uses: gone from the lookups at once, but
# mapped in the daemon until the RECV completes.
def maps(d):
    with open("/proc/%d/maps" % d.proc.pid) as f:
        return sum("memfd:rawabi" in line for line in f)


mreg = R.Region(1 << 16)
st, (mlkey, mrkey) = la.mr_reg(mreg, R.ACCESS_LOCAL_WRITE)
n_maps = maps(A)
actx.post({"wr_id": 13, "opcode": R.OP_RECV, "conn": conn_a, "stream": 3,
           "addr": mreg.addr, "lkey": mlkey, "len": 1000})
time.sleep(0.05)
check(la.call(R.MR_DEREG, R.U32X2.pack(mlkey, 0))[0] == 0, "A: MR_DEREG with a RECV posted in it")
check(maps(A) == n_maps, "... still mapped in the daemon (%d mappings)" % n_maps)
actx.post({"wr_id": 14, "opcode": R.OP_RECV, "conn": conn_a, "stream": 3,
           "addr": mreg.addr, "lkey": mlkey, "len": 1000})
cq = actx.reap(1)[0]
check(cq["wr_id"] == 14 and cq["status"] == R.WC["LOC_PROT"],
      "a new RECV with the deregistered lkey: LOC_PROT")
bctx.post({"wr_id": 29, "opcode": R.OP_SEND, "conn": conn_b, "stream": 3,
           "addr": bregion.addr + 7, "lkey": blkey, "len": 1000})
cb_, ca_ = bctx.reap(1)[0], actx.reap(1)[0]
check(cb_["status"] == 0 and ca_["wr_id"] == 13 and ca_["status"] == 0 and
      ca_["byte_len"] == 1000 and bytes(mreg.mm[0:1000]) == bytes(bregion.mm[7:1007]),
      "the RECV posted before MR_DEREG still receives its 1000 bytes")
time.sleep(0.05)
check(maps(A) == n_maps - 1, "its completion unmapped the region in the daemon (%d -> %d)"
      % (n_maps, maps(A)))

# WRITE_IMM from B into A's region (consumes a RECV at A)
data = os.urandom(300000)
bregion.mm[65536:65536 + len(data)] = data
actx.post({"wr_id": 12, "opcode": R.OP_RECV, "conn": conn_a, "stream": 0})
time.sleep(0.05)
bctx.post({"wr_id": 22, "opcode": R.OP_WRITE_IMM, "conn": conn_b, "stream": 0,
           "addr": bregion.addr + 65536, "lkey": blkey, "len": len(data),
           "remote_addr": aregion.addr + 500000, "rkey": arkey, "imm": 7})
cq = bctx.reap(1)[0]
check(cq["wr_id"] == 22 and cq["status"] == 0, "B: WRITE_IMM completes (%r)" % cq)
cq = actx.reap(1)[0]
check(cq["wr_id"] == 12 and cq["status"] == 0 and cq["opcode"] == R.WC_OP_RECV_WRITE_IMM and
      cq["imm"] == 7 and cq["byte_len"] == len(data), "A: RECV_WRITE_IMM with imm 7 (%r)" % cq)
check(bytes(aregion.mm[500000:500000 + len(data)]) == data,
      "A: the 300000 written bytes are in its region")

# While B's context has a send outstanding, its SQ stays awake (NEED_WAKEUP
# clear): the daemon looks at it on every turn of its loop, so a request
# published then needs no doorbell and is still taken. Once nothing is
# outstanding, the SQ sleeps on its doorbell again.
big = 512 << 10
bregion.mm[0:big] = os.urandom(big)
# Eight 512 KiB WRITEs keep the connection busy for milliseconds, so that on
# a loaded host the test still gets to publish the next request before they
# all complete (one alone completed first in 18 of 20 tries under load).
nbig = 8
awake = 0
for k in range(20):
    ids = [1000 + 10 * k + j for j in range(nbig + 1)]
    bctx.post(*[{"wr_id": ids[j], "opcode": R.OP_WRITE, "conn": conn_b, "stream": 0,
                 "addr": bregion.addr, "lkey": blkey, "len": big,
                 "remote_addr": aregion.addr + (1 << 20) - big, "rkey": arkey}
                for j in range(nbig)])
    t_end = time.time() + 1
    while bctx.sq_head() != bctx.sq_tail and time.time() < t_end:
        pass  # until the daemon took them
    quiet = bctx.post_quiet({"wr_id": ids[nbig], "opcode": R.OP_WRITE, "conn": conn_b,
                             "stream": 0, "addr": bregion.addr + big, "lkey": blkey,
                             "len": 4096, "remote_addr": aregion.addr + 4096, "rkey": arkey})
    cqs = bctx.reap(nbig + 1)
    check([c["wr_id"] for c in cqs] == ids and all(c["status"] == 0 for c in cqs),
          "B: %d WRITEs of 512 KiB and a 4 KiB one posted %s complete in order (%r)"
          % (nbig, "without a doorbell while the first were outstanding" if quiet else
             "with a doorbell (the SQ slept)", cqs))
    awake += quiet
    if awake >= 3:
        break
check(awake >= 3, "B's SQ stayed awake while a WRITE was outstanding in %d of %d tries"
      % (awake, k + 1))
check(bytes(aregion.mm[(1 << 20) - big:1 << 20]) == bytes(bregion.mm[0:big]) and
      bytes(aregion.mm[4096:8192]) == bytes(bregion.mm[big:big + 4096]),
      "A: the written bytes are in its region")
t_end = time.time() + 5
while not bctx.sq_sleeps() and time.time() < t_end:
    time.sleep(0.001)
check(bctx.sq_sleeps(), "with nothing outstanding, B's SQ sleeps on its doorbell again")

# Remote errors end the connection (as an RDMA QP goes to the error state):
# each gets a connection of its own; both applications see it end. The
# receiver NAKs the packet and resets the connection, so the writer's
# completion is the NAK's status or RESET, whichever arrives first; what
# matters here is that nothing was written where it must not be.
def reconnect():
    st, cb_conn = cb.connect(A.addrs[0], A.port, SVC, bctx.id, nstreams=8)
    ev = cb.event()
    assert st == 0 and ev.event == R.EV_ESTABLISHED, ev
    ev = la.event()
    assert ev.event == R.EV_INCOMING, ev
    return ev.conn, cb_conn


def remote_error(wr_id, remote_addr, rkey, want, what):
    global conn_a, conn_b
    bctx.post({"wr_id": wr_id, "opcode": R.OP_WRITE, "conn": conn_b, "addr": bregion.addr,
               "lkey": blkey, "len": 100, "remote_addr": remote_addr, "rkey": rkey})
    cq = bctx.reap(1)[0]
    eb, ea = cb.event(), la.event()
    check(cq["wr_id"] == wr_id and cq["status"] in (R.WC[want], R.WC["RESET"]) and
          eb.event == R.EV_RESET and eb.conn == conn_b and ea.conn == conn_a and
          ea.event in (R.EV_RESET, R.EV_CLOSED),
          "B: WRITE %s: %s, then both ends see the connection end (%r; %r, %r)"
          % (what, want, cq, eb, ea))
    conn_a, conn_b = reconnect()


# MRC_SQE_UNSIGNALED: no completion on success; an entry without it (as an
# older library writes them) completes as before, and its completion comes
# after those of the unsignaled entries before it (one stream, in order).
q0 = status(B)["cqes_unsignaled"]
src = os.urandom(6 * 4096)
bregion.mm[0:len(src)] = src
bctx.post(*[{"wr_id": 4000 + k, "opcode": R.OP_WRITE, "conn": conn_b, "stream": 2,
             "flags": R.SQE_UNSIGNALED if k < 5 else 0, "addr": bregion.addr + 4096 * k,
             "lkey": blkey, "len": 4096, "remote_addr": aregion.addr + 600000 + 4096 * k,
             "rkey": arkey} for k in range(6)])
cqs = bctx.reap(1)
time.sleep(0.2)
check(len(cqs) == 1 and cqs[0]["wr_id"] == 4005 and cqs[0]["status"] == 0 and
      bctx.cq_ready() == 0,
      "5 unsignaled WRITEs and one without the flag: one completion, the last one's (%r, "
      "%d more)" % (cqs, bctx.cq_ready()))
check(bytes(aregion.mm[600000:600000 + len(src)]) == src,
      "A: the bytes of all 6 WRITEs are in its region")
check(status(B)["cqes_unsignaled"] - q0 == 5,
      "status: 5 completions not written (cqes_unsignaled %d -> %d)"
      % (q0, status(B)["cqes_unsignaled"]))
# unsignaled SEND: the receiver's completion still comes, the sender's not
actx.post({"wr_id": 4100, "opcode": R.OP_RECV, "conn": conn_a, "stream": 2,
           "addr": aregion.addr + 700000, "lkey": alkey, "len": 4096})
time.sleep(0.05)
bctx.post({"wr_id": 4101, "opcode": R.OP_SEND, "conn": conn_b, "stream": 2,
           "flags": R.SQE_UNSIGNALED, "addr": bregion.addr, "lkey": blkey, "len": 100},
          {"wr_id": 4102, "opcode": R.OP_WRITE, "conn": conn_b, "stream": 2, "len": 0})
ca_, cb_ = actx.reap(1)[0], bctx.reap(1)
time.sleep(0.1)
check(ca_["wr_id"] == 4100 and ca_["status"] == 0 and ca_["byte_len"] == 100 and
      [c["wr_id"] for c in cb_] == [4102] and bctx.cq_ready() == 0,
      "an unsignaled SEND: the peer's RECV completes, the sender sees only the next "
      "request's completion (%r; %r)" % (ca_, cb_))

check(bytes(bregion.mm[0:100]).count(0) < 10, "B's source bytes are not zero")
remote_error(23, aregion.addr, arkey ^ 1, "REM_ACCESS", "with a wrong rkey")
check(bytes(aregion.mm[0:100]) == bytes(100), "A's region is untouched")
# An unsignaled WRITE that fails still completes, with its error, and the
# requests behind it (unsignaled or not) complete flushed: RC semantics.
before = bytes(aregion.mm[0:12288])
bctx.post({"wr_id": 4200, "opcode": R.OP_WRITE, "conn": conn_b, "flags": R.SQE_UNSIGNALED,
           "addr": bregion.addr, "lkey": blkey, "len": 100, "remote_addr": aregion.addr,
           "rkey": arkey ^ 1},
          {"wr_id": 4201, "opcode": R.OP_WRITE, "conn": conn_b, "flags": R.SQE_UNSIGNALED,
           "addr": bregion.addr, "lkey": blkey, "len": 100,
           "remote_addr": aregion.addr + 4096, "rkey": arkey},
          {"wr_id": 4202, "opcode": R.OP_WRITE, "conn": conn_b, "addr": bregion.addr,
           "lkey": blkey, "len": 100, "remote_addr": aregion.addr + 8192, "rkey": arkey})
cqs = bctx.reap(3)
eb, ea = cb.event(), la.event()
check([c["wr_id"] for c in cqs] == [4200, 4201, 4202] and
      cqs[0]["status"] in (R.WC["REM_ACCESS"], R.WC["RESET"]) and
      all(c["status"] in (R.WC["FLUSHED"], R.WC["RESET"]) for c in cqs[1:]) and
      eb.event == R.EV_RESET and ea.event in (R.EV_RESET, R.EV_CLOSED),
      "an unsignaled WRITE with a wrong rkey: its error, then the two behind it flushed, and "
      "the connection ends (%r; %r, %r)" % (cqs, eb, ea))
check(bytes(aregion.mm[0:12288]) == before and before[4096:4196] != bytes(bregion.mm[0:100]),
      "A's region is untouched by all three")
conn_a, conn_b = reconnect()
remote_error(24, aregion.addr + (1 << 20) - 50, arkey, "REM_BOUNDS",
             "past the end of A's region")
roreg = R.Region(1 << 16)
st, (rolkey, rorkey) = la.mr_reg(roreg, R.ACCESS_LOCAL_WRITE, app_addr=0)
remote_error(25, 0, rorkey, "REM_ACCESS", "into a region without remote write")
check(bytes(roreg.mm[0:100]) == bytes(100), "the region without remote write is untouched")
# another session's rkey is invisible to this connection
greg = R.Region(1 << 16)
st, (glkey, grkey) = good.mr_reg(greg, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE,
                                 app_addr=0)
remote_error(26, 0, grkey, "REM_ACCESS", "with the rkey of another session on A")
check(bytes(greg.mm[0:100]) == bytes(100), "the other session's region is untouched")
# a deregistered region is gone at once
dreg = R.Region(1 << 16)
st, (dlkey, drkey) = la.mr_reg(dreg, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
check(la.call(R.MR_DEREG, R.U32X2.pack(dlkey, 0))[0] == 0, "A: MR_DEREG")
remote_error(27, dreg.addr, drkey, "REM_ACCESS", "into a deregistered region")
check(bytes(dreg.mm[0:100]) == bytes(100), "the deregistered region is untouched")

# ---- invalid work requests: completions, never a crash -----------------------------
tmp = R.Region(1 << 16)
st, (stale_lkey, _) = cb.mr_reg(tmp, R.ACCESS_LOCAL_WRITE)
cb.call(R.MR_DEREG, R.U32X2.pack(stale_lkey, 0))
st, (reused, _) = cb.mr_reg(tmp, R.ACCESS_LOCAL_WRITE)
check(st == 0 and reused != stale_lkey and (reused ^ stale_lkey) & 0xfffff == 0,
      "a region registered after a deregistration reuses the slot with a new lkey")
bad = [
    ({"opcode": 9, "conn": conn_b}, "BAD_WR", "unknown opcode"),
    ({"opcode": R.OP_SEND, "conn": conn_b ^ 0x5555}, "BAD_WR", "unknown connection"),
    ({"opcode": R.OP_SEND, "conn": conn_a}, "BAD_WR", "the other daemon's handle"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "flags": 0x80}, "BAD_WR", "an unknown flag"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "flags": R.SQE_UNSIGNALED | 2}, "BAD_WR",
     "an unknown flag with UNSIGNALED"),
    ({"opcode": R.OP_RECV, "conn": conn_b, "flags": R.SQE_UNSIGNALED}, "BAD_WR",
     "an unsignaled RECV"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "reserved": b"\1" + b"\0" * 15}, "BAD_WR",
     "reserved bytes set"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "stream": 4}, "BAD_WR", "stream 4 of 4"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "rkey": 5}, "BAD_WR", "SEND with an rkey"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "addr": bregion.addr, "lkey": blkey ^ 0x100,
      "len": 10}, "LOC_PROT", "unknown lkey"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "addr": bregion.addr, "lkey": stale_lkey,
      "len": 10}, "LOC_PROT", "the lkey of a deregistered region whose slot is reused"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "addr": bregion.addr + (1 << 20) - 5,
      "lkey": blkey, "len": 10}, "LOC_PROT", "buffer past the region"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "addr": bregion.addr - 1, "lkey": blkey,
      "len": 10}, "LOC_PROT", "buffer before the region"),
    ({"opcode": R.OP_SEND, "conn": conn_b, "addr": (1 << 64) - 4, "lkey": blkey,
      "len": 10}, "LOC_PROT", "address range that wraps"),
]
for i, (q, want, what) in enumerate(bad):
    q["wr_id"] = 1000 + i
    bctx.post(q)
    cq = bctx.reap(1)[0]
    check(cq["wr_id"] == 1000 + i and cq["status"] == R.WC[want],
          "SQE with %s: %s (%r)" % (what, want, cq))
reg_ro = R.Region(1 << 16)
st, (rol, _) = cb.mr_reg(reg_ro, 0)
bctx.post({"wr_id": 2000, "opcode": R.OP_RECV, "conn": conn_b, "addr": 0, "lkey": rol,
           "len": 0})
cq = bctx.reap(1)[0]
check(cq["status"] == R.WC["BAD_WR"], "zero-length RECV naming a region: BAD_WR")
bctx.post({"wr_id": 2001, "opcode": R.OP_RECV, "conn": conn_b, "addr": reg_ro.addr,
           "lkey": rol, "len": 64})
cq = bctx.reap(1)[0]
check(cq["wr_id"] == 2001 and cq["status"] == R.WC["LOC_PROT"],
      "RECV into a region without local write: LOC_PROT (%r)" % cq)
sb = status(B)
check(sb["wrs_bad"] == len(bad) + 2 and sb["wr_bad"].get("LKEY") == 2,
      "status: bad work requests counted by reason (%r)" % sb["wr_bad"])

# ---- CQ credit: a full CQ stops the daemon taking requests ------------------------
# B's context: SQ 16, CQ 32. 32 RECVs fill the credit; a 33rd (bad) request
# must stay in the SQ until completions are reaped.
for k in range(4):
    bctx.post(*[{"wr_id": 3000 + 8 * k + j, "opcode": R.OP_RECV, "conn": conn_b,
                 "stream": 2, "addr": bregion.addr, "lkey": blkey, "len": 64}
                for j in range(8)])
    t = time.time() + 5
    while bctx.sq_head() != bctx.sq_tail and time.time() < t:
        time.sleep(0.005)
check(bctx.sq_head() == bctx.sq_tail, "32 RECVs taken (the CQ's 32 credits)")
bctx.post({"wr_id": 3999, "opcode": 9, "conn": conn_b})
time.sleep(0.3)
check(bctx.sq_head() == bctx.sq_tail - 1 and bctx.cq_ready() == 0,
      "the 33rd request waits in the SQ: no credit left")
# A sends 5 messages: 5 RECVs complete, their CQEs hold the credit still
aregion.mm[0:64] = b"m" * 64
actx.post(*[{"wr_id": 40 + j, "opcode": R.OP_SEND, "conn": conn_a, "stream": 2,
             "addr": aregion.addr, "lkey": alkey, "len": 64} for j in range(5)])
check(all(c["status"] == 0 for c in actx.reap(5)), "A: 5 SENDs complete")
time.sleep(0.3)
check(bctx.cq_ready() == 5 and bctx.sq_head() == bctx.sq_tail - 1,
      "5 RECV completions in B's CQ; the request still waits (completions unreaped)")
got = bctx.reap(5)
check([c["wr_id"] for c in got] == list(range(3000, 3005)) and
      all(c["status"] == 0 and c["byte_len"] == 64 for c in got),
      "B reaps the 5 RECVs in order")
cq = bctx.reap(1)[0]
check(cq["wr_id"] == 3999 and cq["status"] == R.WC["BAD_WR"],
      "reaping gives credit back: the waiting request is taken (BAD_WR)")

# ---- ends of connections ---------------------------------------------------------
# A closes its session with the connection up: B sees the connection end and
# its 27 remaining RECVs flushed; A's daemon resets it.
la.close()
ev = cb.event()
check(ev.event in (R.EV_RESET, R.EV_CLOSED) and ev.conn == conn_b,
      "B: the peer application went away: EVENT %s (%r)" %
      ("RESET" if ev.event == R.EV_RESET else "CLOSED", ev))
got = bctx.reap(27)
check(sorted(c["wr_id"] for c in got) == list(range(3005, 3032)) and
      all(c["status"] in (R.WC["FLUSHED"], R.WC["RESET"]) for c in got),
      "B: the 27 outstanding RECVs complete flushed")
bctx.post({"wr_id": 5000, "opcode": R.OP_SEND, "conn": conn_b})
cq = bctx.reap(1)[0]
check(cq["status"] == R.WC["FLUSHED"],
      "a request on the connection that ended: FLUSHED (the app could not know), not BAD_WR")
check(cb.call(R.CLOSE, R.U32X2.pack(conn_b, 0))[0] == R.ERR["NOENT"],
      "CLOSE of the ended connection: MRC_ERR_NOENT")
time.sleep(0.2)
check(status(A)["sessions"] == 1 and status(A)["regions"] == 1,
      "A: the closed session's regions are gone (only the good session's remains)")

# graceful CLOSE from the application
la = R.Client(A.app_sock)
la.hello(b"listener2")
st, actx = la.ctx_create(8)
st, lid = la.listen(SVC, actx.id)
check(st == 0, "the service is free again after its session ended")
st, conn_b = cb.connect(A.addrs[1], A.port, SVC, bctx.id, paths=3, mask=0x2)
check(st == 0 and cb.event().event == R.EV_ESTABLISHED,
      "B: connected again, planes_mask 0x2 and 3 initial paths")
conn_a = la.event().conn
cv = [x for x in B.ok("show conns") if x["id"] == "%08x" % conn_b][0]
check(cv["plane_pairs"] == 1, "planes_mask 0x2: one plane pair (%d)" % cv["plane_pairs"])
pv = B.ok("show paths", {"conn": "%08x" % conn_b})
check(len(pv) == 3 and all(x["plane_name"] == "p1" for x in pv),
      "3 paths, all on plane p1 (%r)" % [(x["id"], x["plane_name"]) for x in pv])
av = [x for x in A.ok("show conns") if x["id"] == "%08x" % conn_a][0]
check(av["plane_pairs"] == 1, "the acceptor pairs only the advertised plane too")
check(la.call(R.CTX_DESTROY, R.U32X2.pack(actx.id, 0))[0] == R.ERR["BUSY"],
      "CTX_DESTROY of a context with a connection: MRC_ERR_BUSY")
check(cb.call(R.CLOSE, R.U32X2.pack(conn_b, 0))[0] == 0, "B: CLOSE")
ev = cb.event()
check(ev.event == R.EV_CLOSED, "B: EVENT CLOSED (%r)" % ev)
ev = la.event()
check(ev.event == R.EV_CLOSED and ev.conn == conn_a, "A: EVENT CLOSED (%r)" % ev)
check(la.call(R.UNLISTEN, R.U32X2.pack(lid, 0))[0] == 0, "A: UNLISTEN")
check(la.call(R.CTX_DESTROY, R.U32X2.pack(actx.id, 0))[0] == 0,
      "A: CTX_DESTROY once nothing uses the context")
st, conn_x = cb.connect(A.addrs[0], A.port, SVC, bctx.id)
ev = cb.event()
check(ev.event == R.EV_FAILED and ev.status == R.ERR["REJECTED"],
      "after UNLISTEN a CONNECT is rejected")

# ---- random work requests ---------------------------------------------------------
# Random opcodes, flags, handles, keys, addresses and lengths, some valid:
# every one gets exactly one completion, with a status the ABI knows. A valid
# one may end the connection (a random rkey, a SEND nobody receives): then
# the test connects again. The peer's region takes whatever valid WRITEs
# carry. (Receives are left out: they complete only when data comes.)
import random
rnd = random.Random(20261129)
st, fctx = la.ctx_create(32)
st, flid = la.listen(SVC + 1, fctx.id, 4)
fregion = R.Region(1 << 20)
st, (flkey, frkey) = la.mr_reg(fregion, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
st, fconn_b = cb.connect(A.addrs[0], A.port, SVC + 1, bctx.id)
check(st == 0 and cb.event().event == R.EV_ESTABLISHED, "a connection for random work requests")
ev = la.event()
assert ev.event == R.EV_INCOMING
fconn_a = ev.conn
posted, got, reconnects = set(), [], 0


def pick(*choices):
    return rnd.choice(choices)


def wait_end(cl, conn):
    while True:
        ev = cl.event()
        if ev.conn == conn and ev.event in (R.EV_CLOSED, R.EV_RESET):
            return


def refresh(done):
    """A completion that ends the connection: wait for both ends, connect anew."""
    global fconn_a, fconn_b, reconnects
    if not any(c["status"] not in (R.WC["SUCCESS"], R.WC["BAD_WR"], R.WC["LOC_PROT"])
               for c in done):
        return
    wait_end(cb, fconn_b)
    wait_end(la, fconn_a)
    st, fconn_b = cb.connect(A.addrs[0], A.port, SVC + 1, bctx.id)
    ev = cb.event()
    assert st == 0 and ev.event == R.EV_ESTABLISHED, ev
    ev = la.event()
    assert ev.event == R.EV_INCOMING, ev
    fconn_a = ev.conn
    reconnects += 1


for k in range(1000):
    good_f = rnd.random() < 0.85
    q = {"wr_id": 100000 + k,
         "opcode": pick(1, 1, 1, 2, 2, 3) if good_f else pick(0, 6, 255, 1, 3),
         "flags": 0 if good_f else pick(0, 2, 0x80),
         "stream": pick(0, 1, 3) if good_f else pick(0, 4, 65535),
         "conn": fconn_b if good_f else pick(fconn_b, conn_b, 0, rnd.getrandbits(32)),
         "addr": pick(bregion.addr, bregion.addr, bregion.addr + rnd.randrange(1 << 20), 0,
                      rnd.getrandbits(64)),
         "lkey": pick(blkey, blkey, blkey, 0, rnd.getrandbits(32)),
         "len": pick(1, 100, 4096, 65536, rnd.randrange(1 << 21), rnd.getrandbits(32)),
         "remote_addr": pick(fregion.addr, fregion.addr + rnd.randrange(1 << 19),
                             rnd.getrandbits(64)),
         "rkey": pick(frkey, frkey, frkey, rnd.getrandbits(32)),
         "reserved": b"\0" * 16 if good_f else pick(b"\0" * 16, bytes([1] + [0] * 15))}
    if q["opcode"] in (R.OP_WRITE_IMM, R.OP_SEND_IMM):
        q["imm"] = 5
    if q["opcode"] not in (R.OP_WRITE, R.OP_WRITE_IMM) and good_f:
        q["remote_addr"] = q["rkey"] = 0
    posted.add(q["wr_id"])
    bctx.post(q)
    done = bctx.reap(1, timeout=20)
    got += done
    refresh(done)
ids = [c["wr_id"] for c in got]
check(sorted(ids) == sorted(posted),
      "1000 random work requests: one completion each (%d)" % len(got))
check(all(c["status"] <= R.WC["BAD_WR"] for c in got), "every status is one the ABI defines")
hist = {}
for c in got:
    hist[c["status"]] = hist.get(c["status"], 0) + 1
print("statuses:", {k2: hist[k2] for k2 in sorted(hist)}, "reconnects:", reconnects)
check(hist.get(R.WC["BAD_WR"], 0) > 50 and hist.get(R.WC["LOC_PROT"], 0) > 50 and
      hist.get(R.WC["SUCCESS"], 0) > 50,
      "the daemon refused many (BAD_WR %d, LOC_PROT %d) and posted many (SUCCESS %d)"
      % (hist.get(R.WC["BAD_WR"], 0), hist.get(R.WC["LOC_PROT"], 0),
         hist.get(R.WC["SUCCESS"], 0)))
check(cb.call(R.CLOSE, R.U32X2.pack(fconn_b, 1))[0] == 0, "B: CLOSE with abort")
wait_end(cb, fconn_b)
wait_end(la, fconn_a)
check(A.alive() and B.alive(), "both daemons alive after the random requests")

# ---- random control messages -----------------------------------------------------
for k in range(40):
    c = R.Client(A.app_sock)
    if k % 2:
        c.hello()
    try:
        for j in range(80):
            body = bytes(rnd.getrandbits(8) for _ in range(rnd.choice((0, 8, 16, 40, 280,
                                                                        rnd.randrange(600)))))
            ln = pick(R.HDR.size + len(body), R.HDR.size + len(body), rnd.randrange(2000))
            mtype = pick(rnd.randrange(12), rnd.randrange(12), rnd.getrandbits(32))
            fds = []
            if rnd.random() < 0.2:
                fds = [pick(reg.fd, fregion.fd, 0, 1, 2)]
            c.send_raw(R.HDR.pack(mtype, ln, j, pick(0, 0, 1), pick(0, 0, 3)) + body, fds)
    except OSError:
        pass  # closed by the daemon meanwhile
    c.close()
time.sleep(0.3)
check(A.alive(), "A alive after 40 sessions of random control messages")
st, rep = good.hello()
check(st == R.ERR["INVAL"], "the good session still answers")

# ---- a hostile context: SQ tail far beyond the ring ------------------------------
h = R.Client(A.app_sock)
h.hello(b"hostile")
st, hctx = h.ctx_create(8)
hctx.set_tail_raw(hctx.sq_head() + 1000000)
check(h.eof(), "SQ tail = head + 1e6: the session is closed")
h.close()
st, rep = good.hello()
check(st == R.ERR["INVAL"], "the good session still answers (a second HELLO is refused)")
check(A.alive() and B.alive(), "both daemons alive")
s = status(A)
check(s["sessions_killed"] >= 4, "status: hostile sessions counted (%d)" % s["sessions_killed"])

# ---- limits -----------------------------------------------------------------------
ctxs = [good.ctx_create(8) for i in range(3)]
check(all(st == 0 for st, _ in ctxs), "good: 4 contexts with the one it had")
check(good.ctx_create(8)[0] == R.ERR["LIMIT"], "a 5th context: MRC_ERR_LIMIT (apps.max_contexts)")
regs = [R.Region(1 << 16) for i in range(8)]
sts = [good.mr_reg(r, R.ACCESS_LOCAL_WRITE)[0] for r in regs]
check(sts == [0] * 7 + [R.ERR["LIMIT"]],
      "good: 8 regions with the one it had, a 9th is MRC_ERR_LIMIT (%r)" % sts)
big = R.Region(16 << 20)
c2 = R.Client(A.app_sock)
c2.hello()
check(c2.mr_reg(big, R.ACCESS_LOCAL_WRITE, length=(16 << 20) - 4096)[0] == 0,
      "16 MiB - 4 KiB registered in a fresh session")
check(c2.mr_reg(big, R.ACCESS_LOCAL_WRITE, length=8192)[0] == R.ERR["LIMIT"],
      "8 KiB more: MRC_ERR_LIMIT (apps.max_region_bytes)")
check(c2.mr_reg(big, R.ACCESS_LOCAL_WRITE, length=4096)[0] == 0, "4 KiB more fits exactly")
c3 = R.Client(A.app_sock)
check(c3.hello()[0] == 0, "a 4th session attaches")
c4 = R.Client(A.app_sock)
check(c4.hello()[0] == R.ERR["LIMIT"] and c4.eof(),
      "a 5th session: MRC_ERR_LIMIT (apps.max_sessions), then closed")
for x in (c2, c3, c4):
    x.close()

# ---- who may attach (as root: a child that becomes nobody) ------------------------
if os.geteuid() == 0:
    # past the file modes (the test's own directory and socket): the daemon's
    # own check decides
    os.chmod(os.path.dirname(A.app_sock), 0o711)
    os.chmod(A.app_sock, 0o666)
    time.sleep(0.2)  # the daemon noticed c2-c4 close
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            n = R.Client(A.app_sock)
            st, _ = n.hello(b"nobody")
            os._exit(0 if st == R.ERR["PERM"] and n.eof() else 1)
        except BaseException as e:
            print("child:", e)
            os._exit(2)
    _, w = os.waitpid(pid, 0)
    check(os.WEXITSTATUS(w) == 0, "uid nobody, not in app_group: MRC_ERR_PERM, then closed")
    check(status(A)["sessions_refused"] == 1, "status: one refused session")
else:
    print("skipped: the MRC_ERR_PERM check needs root (to become another user)")

# ---- a connection that never says HELLO --------------------------------------------
check(idle.eof(timeout=max(1, 10 - (time.time() - t_idle))) and time.time() - t_idle >= 4.5,
      "a connection that sends nothing is closed after 5 s (%.1f s)" % (time.time() - t_idle))
idle.close()

# ---- the daemons still do their own work ------------------------------------------
r = A.ok("perf", {"peer": B.peer(), "seconds": 2, "bytes": 32 << 20}, timeout=60)
check(r["verified"] and r["verify_errors"] == 0 and r["bytes"] > 0,
      "metaroce-ctl perf between the daemons still verifies (%d bytes)" % r["bytes"])

# ---- SIGTERM: applications see EOF ----------------------------------------------
rc, secs = A.stop()
check(rc == 0, "A stops with exit 0 under SIGTERM (ASan: no leak)")
check(good.eof(), "the good session sees EOF when its daemon stops")
check(not os.path.exists(A.app_sock), "the app socket file is removed")

# ---- a daemon that died: its socket file is stale, the next one starts -----------
B.proc.kill()
B.proc.wait()
check(cb.eof(), "B killed: its session sees EOF")
cb.close()
check(os.path.exists(B.app_sock), "a killed daemon leaves its app socket file")
B2 = mrtest.Daemon(p.tmp.name, "b", B.addrs)
p.b = B2
c = R.Client(B2.app_sock)
check(c.hello()[0] == 0, "a new daemon on the same path removed the stale file; apps attach")
c.close()
p.close()
