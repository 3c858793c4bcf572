"""The application ABI (libclient/abi.h) spoken raw, without libmetaroce.

Struct layouts mirror abi.h field by field; a mismatch shows up as a failed
size assertion below (the sizes are the ones abi.h asserts). Ring indices
are read and written with plain 32-bit accesses: on x86-64 (TSO) a store is
a release and a load an acquire, which is all the ring protocol needs.
"""
import ctypes
import fcntl
import mmap
import os
import select
import socket
import struct
import time

ABI_VERSION = 2  # 2: doorbell and wakeup are socket pairs (abi.h)
ABI_MAGIC = 0x4d52434d41424931
MSG_MAX = 1024
REPLY = 0x80000000
NEED_WAKEUP = 1
SQE_UNSIGNALED = 1  # mrc_sqe.flags: no completion on success
FEAT_UNSIGNALED = 1  # mrc_hello_rep.features

HELLO, CTX_CREATE, CTX_DESTROY, MR_REG, MR_DEREG, LISTEN, UNLISTEN, CONNECT, CLOSE, EVENT = range(1, 11)

ERR = {"INVAL": -1, "NOMEM": -2, "LIMIT": -3, "PERM": -4, "NOENT": -5, "BUSY": -6,
       "VERSION": -7, "DAEMON": -8, "TIMEOUT": -9, "UNREACHABLE": -10, "REJECTED": -11,
       "CLOSED": -12}
WC = {"SUCCESS": 0, "REM_ACCESS": 1, "REM_BOUNDS": 2, "RNR_RETRY_EXC": 3, "RETRY_EXC": 4,
      "RESET": 5, "FLUSHED": 6, "LOC_LEN": 7, "REM_INVALID": 8, "LOC_PROT": 9, "BAD_WR": 10}
OP_WRITE, OP_WRITE_IMM, OP_SEND, OP_SEND_IMM, OP_RECV = 1, 2, 3, 4, 5
WC_OP_RECV, WC_OP_RECV_WRITE_IMM = 0x40, 0x41
WITH_IMM = 1
ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE, ACCESS_REMOTE_READ = 1, 2, 4
EV_ESTABLISHED, EV_INCOMING, EV_FAILED, EV_CLOSED, EV_RESET = 1, 2, 3, 4, 5

HDR = struct.Struct("<IIQiI")
HELLO_REQ = struct.Struct("<II32s")
HELLO_REP = struct.Struct("<IIIIIIQIIII")
U32X2 = struct.Struct("<II")
CTX_REP = struct.Struct("<IIQ")
MR_REG_REQ = struct.Struct("<QQQII")
LISTEN_REQ = struct.Struct("<IIHHHH")
CONNECT_REQ = struct.Struct("<IIHHHHII256s")
EVENT_S = struct.Struct("<IIIiIHH64s64s")
SHM_HDR = struct.Struct("<QIIQIIIIQQQQ40s")
SQE = struct.Struct("<QBBHIQIIQII16s")
CQE = struct.Struct("<QIIIHBBB7s")
assert HDR.size == 24 and HELLO_REP.size == 48 and CONNECT_REQ.size == 280
assert EVENT_S.size == 152 and SHM_HDR.size == 112 and SQE.size == 64 and CQE.size == 32
assert MR_REG_REQ.size == 32 and LISTEN_REQ.size == 16

F_ADD_SEALS, F_GET_SEALS = 1033, 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW = 1, 2, 4


class Closed(Exception):
    pass


class Event:
    def __init__(self, b):
        (self.event, self.conn, self.listener_id, self.status, self.ctx_id, self.nstreams, _,
         peer, reason) = EVENT_S.unpack(b)
        self.peer = peer.rstrip(b"\0").decode()
        self.reason = reason.rstrip(b"\0").decode()

    def __repr__(self):
        return "Event(%d conn %08x status %d %r)" % (self.event, self.conn, self.status,
                                                      self.reason)


class Client:
    """One session: the control socket and its replies and events."""

    def __init__(self, path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.seq = 0
        self.events = []

    def close(self):
        self.s.close()

    def send_raw(self, data, fds=()):
        if fds:
            socket.send_fds(self.s, [data], list(fds))
        else:
            self.s.send(data)

    def send(self, mtype, payload=b"", fds=(), hdr_len=None, status=0, reserved=0):
        self.seq += 1
        n = HDR.size + len(payload) if hdr_len is None else hdr_len
        self.send_raw(HDR.pack(mtype, n, self.seq, status, reserved) + payload, fds)
        return self.seq

    def recv_msg(self):
        try:
            data, fds, flags, _ = socket.recv_fds(self.s, MSG_MAX + 1, 8)
        except ConnectionResetError:
            raise Closed()
        if not data:
            raise Closed()
        t, n, seq, status, res = HDR.unpack_from(data)
        assert n == len(data), "reply length %d, datagram %d" % (n, len(data))
        assert res == 0
        return t, seq, status, data[HDR.size:], fds

    def reply(self, seq):
        """The reply to seq: (status, payload, fds); events met are queued."""
        while True:
            t, s, status, payload, fds = self.recv_msg()
            if t == EVENT:
                assert s == 0
                self.events.append(Event(payload))
                continue
            assert s == seq, "reply seq %d, expected %d" % (s, seq)
            assert t & REPLY, "type %x" % t
            return status, payload, fds

    def call(self, mtype, payload=b"", fds=()):
        return self.reply(self.send(mtype, payload, fds))

    def event(self, timeout=10):
        end = time.time() + timeout
        while not self.events:
            self.s.settimeout(max(0.01, end - time.time()))
            try:
                t, s, status, payload, fds = self.recv_msg()
            except socket.timeout:
                raise AssertionError("no event within %ss" % timeout)
            assert t == EVENT, "unsolicited type %x" % t
            self.events.append(Event(payload))
        self.s.settimeout(10)
        return self.events.pop(0)

    def eof(self, timeout=5):
        """Whether the daemon closed the session (skipping queued messages)."""
        self.s.settimeout(timeout)
        try:
            while True:
                self.recv_msg()
        except Closed:
            return True
        except (socket.timeout, BrokenPipeError):
            return False

    # ---- requests ----
    def hello(self, name=b"rawabi", version=ABI_VERSION):
        st, p, _ = self.call(HELLO, HELLO_REQ.pack(version, 0, name))
        if st:
            return st, None
        return 0, HELLO_REP.unpack(p)

    def ctx_create(self, sq=8, cq=0):
        st, p, fds = self.call(CTX_CREATE, U32X2.pack(sq, cq))
        if st:
            assert not fds
            return st, None
        assert len(fds) == 3, fds
        ctx_id, _, size = CTX_REP.unpack(p)
        return 0, Ctx(ctx_id, size, fds)

    def mr_reg(self, region, access, offset=0, length=None, app_addr=None, fds=None):
        req = MR_REG_REQ.pack(region.addr if app_addr is None else app_addr, offset,
                              region.size if length is None else length, access, 0)
        st, p, _ = self.call(MR_REG, req, [region.fd] if fds is None else fds)
        return st, (U32X2.unpack(p) if not st else None)

    def listen(self, service, ctx_id, nstreams=0):
        st, p, _ = self.call(LISTEN, LISTEN_REQ.pack(service, ctx_id, nstreams, 0, 0, 0))
        return st, (U32X2.unpack(p)[0] if not st else None)

    def connect(self, host, port, service, ctx_id, nstreams=0, paths=0, mask=0):
        req = CONNECT_REQ.pack(ctx_id, service, port, nstreams, paths, 0, mask, 0,
                               host.encode())
        st, p, _ = self.call(CONNECT, req)
        return st, (U32X2.unpack(p)[0] if not st else None)


class Region:
    """A sealed (or not) memfd mapped here."""

    def __init__(self, size, seal=True):
        self.fd = os.memfd_create("rawabi", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, size)
        if seal:
            fcntl.fcntl(self.fd, F_ADD_SEALS, F_SEAL_SHRINK)
        self.size = size
        self.mm = mmap.mmap(self.fd, size)
        self._c = ctypes.c_char.from_buffer(self.mm)
        self.addr = ctypes.addressof(self._c)


class Ctx:
    def __init__(self, ctx_id, size, fds):
        self.id = ctx_id
        self.shm, self.doorbell, self.wakeup = fds
        self.mm = mmap.mmap(self.shm, size)
        (magic, version, hid, hsize, self.sq_entries, self.cq_entries, sqe_size, cqe_size,
         self.sq_off, self.cq_off, self.sqes_off, self.cqes_off, _) = SHM_HDR.unpack_from(self.mm)
        assert magic == ABI_MAGIC and version == ABI_VERSION and hid == ctx_id
        assert hsize == size and sqe_size == 64 and cqe_size == 32
        self.sq_tail = self.u32(self.sq_off + 64)
        self.cq_head = self.u32(self.cq_off)

    # Ring indices are read and written as one aligned 32-bit access, as
    # the library's atomics do: struct.pack_into/unpack_from go a byte at a
    # time, so the daemon could read a tail half written (0x1ff -> 0x200
    # passes through 0x100) and rightly end the session for an SQ tail
    # beyond its ring.
    def u32(self, off):
        assert off % 4 == 0
        return ctypes.c_uint32.from_buffer(self.mm, off).value

    def set32(self, off, v):
        assert off % 4 == 0
        ctypes.c_uint32.from_buffer(self.mm, off).value = v & 0xffffffff

    def sq_head(self):
        return self.u32(self.sq_off)

    def kick(self):
        """Rings the doorbell if the daemon's flag asks for it (abi.h);
        returns whether it rang."""
        if self.u32(self.sq_off + 128) & NEED_WAKEUP:
            os.write(self.doorbell, b"\1")  # any byte rings it
            return True
        return False

    def post(self, *sqes):
        """Each sqe a dict of mrc_sqe fields; published together. Returns
        whether the doorbell rang."""
        if self.sq_tail - self.sq_head() + len(sqes) > self.sq_entries:
            raise AssertionError("SQ full")
        for q in sqes:
            i = self.sq_tail & (self.sq_entries - 1)
            SQE.pack_into(self.mm, self.sqes_off + 64 * i, q.get("wr_id", 0), q["opcode"],
                          q.get("flags", 0), q.get("stream", 0), q.get("conn", 0),
                          q.get("addr", 0), q.get("lkey", 0), q.get("len", 0),
                          q.get("remote_addr", 0), q.get("rkey", 0), q.get("imm", 0),
                          q.get("reserved", b"\0" * 16))
            self.sq_tail += 1
        self.set32(self.sq_off + 64, self.sq_tail)
        return self.kick()

    def post_quiet(self, *sqes):
        """As post(): True when the doorbell did not ring (the SQ was
        awake)."""
        return not self.post(*sqes)

    def sq_sleeps(self):
        return bool(self.u32(self.sq_off + 128) & NEED_WAKEUP)

    def set_tail_raw(self, tail):
        self.set32(self.sq_off + 64, tail)
        os.write(self.doorbell, b"\1")

    def cq_ready(self):
        return (self.u32(self.cq_off + 64) - self.cq_head) & 0xffffffff

    def reap(self, n, timeout=10):
        """n completions, sleeping on the wakeup socket between them."""
        out, end = [], time.time() + timeout
        while len(out) < n:
            if not self.cq_ready():
                # NEED_WAKEUP, then re-check, then sleep (abi.h)
                self.set32(self.cq_off + 128, self.u32(self.cq_off + 128) | NEED_WAKEUP)
                if not self.cq_ready():
                    left = end - time.time()
                    if left <= 0:
                        raise AssertionError("%d of %d completions within %ss: %r" %
                                             (len(out), n, timeout, out))
                    r, _, _ = select.select([self.wakeup], [], [], min(left, 0.5))
                    if r:
                        os.read(self.wakeup, 64)
                self.set32(self.cq_off + 128, self.u32(self.cq_off + 128) & ~NEED_WAKEUP)
                continue
            i = self.cq_head & (self.cq_entries - 1)
            f = CQE.unpack_from(self.mm, self.cqes_off + 32 * i)
            out.append({"wr_id": f[0], "conn": f[1], "byte_len": f[2], "imm": f[3],
                        "stream": f[4], "status": f[5], "opcode": f[6], "flags": f[7]})
            self.cq_head += 1
            self.set32(self.cq_off, self.cq_head)
        return out
