"""The attack harness of the security suite, written from proto/SPEC.md and
libclient/abi.h alone: packet encoders and decoders (SPEC sections 4-11),
a sender of datagrams with a forged source address and port (raw socket,
loopback only), bounded floods, and measurements of a daemon (RSS, open
file descriptors).

Every flood here is bounded in count and in time, and every target is a
loopback address: nothing leaves the host.
"""
import ipaddress
import os
import random
import socket
import struct
import time

import mrtest

VERSION = 1
OP = {"WRITE": 0x01, "WRITE_IMM": 0x02, "SEND": 0x03, "SEND_IMM": 0x04,
      "ACK": 0x10, "NAK": 0x11, "PROBE": 0x12, "PROBE_ACK": 0x13,
      "CONNECT": 0x20, "ACCEPT": 0x21, "REJECT": 0x22, "CLOSE": 0x23, "RESET": 0x24,
      "RETRY": 0x25}
F_ACK_REQ = 0x0008
NAK_UNKNOWN_CONN = 5
CAP_IMM, CAP_MULTIPLANE, CAP_RETRY = 0x1, 0x4, 0x8
SVC_PERF, SVC_ECHO = 0x50455246, 0x4543484F

HDR = struct.Struct(">BBHHHIIQI")          # SPEC 4.1, 28 bytes
HS = struct.Struct(">BBHIQQQHHHBB")        # SPEC 9.2, 40 bytes after the header
HS_ADDR = struct.Struct(">BBH16s")         # SPEC 9.2, one plane address
PROBE = struct.Struct(">IIQ")              # SPEC 8.2
NAK = struct.Struct(">BBHIIHHIIQ")         # SPEC 7.1
REJECT = struct.Struct(">BBBBI")           # SPEC 10.1
RETRY = struct.Struct(">QII")              # SPEC 9.7
assert HDR.size == 28 and HS.size == 40 and HS_ADDR.size == 20
assert PROBE.size == 16 and NAK.size == 32 and REJECT.size == 8 and RETRY.size == 16


def rand32():
    return random.getrandbits(32) or 1


def rand64():
    return random.getrandbits(64) or 1


def hdr(op, dst=0, src=0, token=0, flags=0, path_id=0, path_gen=0, psn=0):
    return HDR.pack(VERSION, OP[op] if isinstance(op, str) else op, flags, path_id,
                    path_gen, dst, src, token, psn)


def hs_body(hs_token, instance, service_id, service_port, addrs, mtu=4096,
            caps=CAP_IMM | CAP_MULTIPLANE | CAP_RETRY, max_streams=16, max_paths=16,
            min_version=1, max_version=1):
    """CONNECT/ACCEPT body; addrs: [(plane, "a.b.c.d"), ...]."""
    b = HS.pack(min_version, max_version, mtu, service_id, hs_token, instance, caps,
                max_streams, max_paths, service_port, len(addrs), 0)
    for plane, a in addrs:
        ip = ipaddress.ip_address(a)
        raw = ip.packed + bytes(16 - len(ip.packed))
        b += HS_ADDR.pack(4 if ip.version == 4 else 6, plane, 0, raw)
    return b


def connect(src_conn, hs_token, instance, service_id, service_port, addrs, token=0, **kw):
    """A CONNECT (SPEC 9.2). token: 0, or the cookie of a RETRY (SPEC 9.7)."""
    return hdr("CONNECT", 0, src_conn, token) + hs_body(hs_token, instance, service_id,
                                                        service_port, addrs, **kw)


def probe(dst, src, token, path_id=0, path_gen=0, seq=1, ts=0, ack_req=True):
    return hdr("PROBE", dst, src, token, F_ACK_REQ if ack_req else 0, path_id,
               path_gen) + PROBE.pack(seq, 0, ts)


PROBE_ACK = struct.Struct(">HHIIQ")      # SPEC 8.3, 20 bytes after the header
assert PROBE_ACK.size == 20


def probe_ack(dst, src, token, probe):
    """The answer to a parsed PROBE (SPEC 8.3), on our path 0: keeps a
    connection's paths alive in the peer's eyes."""
    return hdr("PROBE_ACK", dst, src, token) + PROBE_ACK.pack(
        probe["path_id"], probe["path_gen"], probe["seq"], 0, probe["ts"])


DATA = struct.Struct(">HHIIIIQQII")       # SPEC 5.1, 44 bytes after the header
assert DATA.size == 44
F_FIRST, F_LAST = 0x1, 0x2


def data(op, dst, src, token, psn, stream, msn, offset, msg_len, payload, path_id=0,
         path_gen=0, recv_idx=0, remote_addr=0, rkey=0, imm=0):
    """A data packet (SPEC 5.1); flags FIRST/LAST from offset and lengths."""
    flags = (F_FIRST if offset == 0 else 0) | \
        (F_LAST if offset + len(payload) == msg_len else 0)
    return hdr(op, dst, src, token, flags, path_id, path_gen, psn) + DATA.pack(
        stream, len(payload), msn, offset, msg_len, recv_idx, 0, remote_addr, rkey,
        imm) + payload


def nak_unknown(dst, src, token_echo, nak_path_id=0, nak_path_gen=0, nak_psn=0):
    """NAK UNKNOWN_CONN (SPEC 7.4): header token 0, the rejected token echoed."""
    return hdr("NAK", dst, src, 0) + NAK.pack(NAK_UNKNOWN_CONN, 0, 0, 0, 0, nak_path_id,
                                              nak_path_gen, nak_psn, 0, token_echo)


def parse(pkt):
    """Decode the header and the handshake/REJECT body; None if too short."""
    if len(pkt) < HDR.size:
        return None
    v, op, flags, pid, pgen, dst, src, token, psn = HDR.unpack_from(pkt)
    r = {"version": v, "op": op, "flags": flags, "dst": dst, "src": src, "token": token,
         "len": len(pkt), "path_id": pid, "path_gen": pgen}
    if op in (OP["CONNECT"], OP["ACCEPT"]) and len(pkt) >= 68:
        (r["min_version"], r["max_version"], r["mtu"], r["service_id"], r["hs_token"],
         r["instance"], r["caps"], r["max_streams"], r["max_paths"], r["service_port"],
         r["num_addrs"], _) = HS.unpack_from(pkt, 28)
    elif op == OP["PROBE"] and len(pkt) == 44:
        r["seq"], _, r["ts"] = PROBE.unpack_from(pkt, 28)
    elif op == OP["NAK"] and len(pkt) >= 60:
        r["reason"] = pkt[28]
    elif op == OP["RETRY"] and len(pkt) >= 44:
        r["cookie"], r["service_id"], _ = RETRY.unpack_from(pkt, 28)
    elif op == OP["REJECT"] and len(pkt) >= 36:
        r["reason"], r["min_version"], r["max_version"], _, r["service_id"] = \
            REJECT.unpack_from(pkt, 28)
    return r


def handshake(sock, dst, ci, ti, inst, service_id, service_port, addrs, tries=10,
              cookie=0, **kw):
    """CONNECT from sock (a UDP socket of our own), following RETRY (SPEC
    9.7), until ACCEPT or REJECT for ci. Returns (answer dict, cookie)."""
    for _ in range(tries):
        sock.sendto(connect(ci, ti, inst, service_id, service_port, addrs, token=cookie,
                            **kw), dst)
        try:
            while True:
                r = parse(sock.recvfrom(2048)[0])
                if not r or r["dst"] != ci or r["token"] != ti:
                    continue
                if r["op"] == OP["RETRY"]:
                    cookie = r["cookie"]
                    break
                if r["op"] in (OP["ACCEPT"], OP["REJECT"]):
                    return r, cookie
        except socket.timeout:
            pass
    return None, cookie


class Spoofer:
    """Datagrams with any source address and port, to loopback only, through
    a raw socket (IPPROTO_RAW: this code writes the IPv4 header; the kernel
    fills in its checksum). UDP checksum 0 (none, legal in IPv4)."""

    def __init__(self):
        try:
            self.s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError:
            self.s = None

    def available(self):
        return self.s is not None

    def send(self, payload, src, dst):
        assert ipaddress.ip_address(dst[0]).is_loopback, "loopback targets only"
        assert ipaddress.ip_address(src[0]).is_loopback, "loopback sources only"
        udp = struct.pack(">HHHH", src[1], dst[1], 8 + len(payload), 0)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), 0, 0, 64, 17, 0,
                         socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
        self.s.sendto(ip + udp + payload, (dst[0], 0))

    def close(self):
        if self.s:
            self.s.close()


def bounded(count, seconds):
    """Yield 0..count-1, stopping at `seconds` whatever the count."""
    end = time.monotonic() + seconds
    for i in range(count):
        if time.monotonic() > end:
            return
        yield i


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_where(pid):
    """Where a process's resident memory is, in KiB: the heap (brk), other
    anonymous mappings (mmap: large allocations, thread arenas, stacks)
    and files. Printed with an RSS bound, it tells heap fragmentation from
    memory really held."""
    out = {"heap": 0, "anon": 0, "file": 0}
    kind = None
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                parts = line.split()
                if not parts[0].endswith(":"):
                    name = parts[5] if len(parts) > 5 else ""
                    kind = "heap" if name == "[heap]" else \
                        "anon" if not name.startswith("/") else "file"
                elif parts[0] == "Rss:" and kind:
                    out[kind] += int(parts[1])
    except OSError:
        pass
    return "heap %(heap)d, anonymous %(anon)d, files %(file)d" % out


def sanitized(pid):
    """True if the process runs with AddressSanitizer (its allocator adds
    redzones, rounds sizes up and keeps a quarantine: RSS bounds need room
    for that)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def udp_inodes():
    """Inodes of the UDP sockets of this network namespace."""
    ino = set()
    for f in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(f) as fh:
                next(fh)
                ino.update(line.split()[9] for line in fh)
        except OSError:
            pass
    return ino


def fd_kinds(pid):
    """A daemon's open descriptors by kind: udp (its plane and source-port
    sockets), socket (others: control, applications), file (the rest)."""
    udp = udp_inodes()
    k = {"udp": 0, "socket": 0, "file": 0}
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            t = os.readlink(os.path.join(d, fd))
        except OSError:
            continue
        if t.startswith("socket:["):
            k["udp" if t[8:-1] in udp else "socket"] += 1
        else:
            k["file"] += 1
    return k


class Health:
    """A daemon's RSS and open fds at the start; check() asserts it lives and
    stayed within the stated bounds.

    udp=False leaves UDP sockets out of the descriptor bound: the datapath
    opens a source-port socket for each new route a path takes (and closes
    it when idle), and on a busy host paths time out and take new routes,
    so an attack that has nothing to do with routes (hostile work requests)
    is judged on the descriptors it could make the daemon leak."""

    def __init__(self, daemon, rss_mib=64, fds=64, udp=True):
        self.d, self.rss_mib, self.fds, self.udp = daemon, rss_mib, fds, udp
        self.rss0, self.fd0 = rss_kib(daemon.proc.pid), self.nfds()
        self.rss_max, self.fd_max = self.rss0, self.fd0
        self.where0 = self.where_max = rss_where(daemon.proc.pid)
        self.kinds0 = fd_kinds(daemon.proc.pid)
        self.kinds_max = dict(self.kinds0)

    def nfds(self):
        if self.udp:
            return nfds(self.d.proc.pid)
        k = fd_kinds(self.d.proc.pid)
        return k["socket"] + k["file"]

    def sample(self):
        if self.d.alive():
            rss = rss_kib(self.d.proc.pid)
            if rss > self.rss_max:
                self.where_max = rss_where(self.d.proc.pid)
            self.rss_max = max(self.rss_max, rss)
            self.fd_max = max(self.fd_max, self.nfds())
            for kind, n in fd_kinds(self.d.proc.pid).items():
                self.kinds_max[kind] = max(self.kinds_max[kind], n)

    def check(self):
        self.sample()
        mrtest.check(self.d.alive() and self.d.request("status").get("ok"),
                     "%s alive and answering" % self.d.name)
        mrtest.check(self.rss_max - self.rss0 < self.rss_mib * 1024,
                     "%s RSS grew %d KiB (< %d MiB; at the start %s, at the most %s)"
                     % (self.d.name, self.rss_max - self.rss0, self.rss_mib, self.where0,
                        self.where_max))
        mrtest.check(self.fd_max - self.fd0 < self.fds,
                     "%s open fds%s grew %d (< %d; at most by kind: %s, at the start %s)"
                     % (self.d.name, "" if self.udp else " other than UDP sockets",
                        self.fd_max - self.fd0, self.fds, self.kinds_max, self.kinds0))


def conns(d, state=None):
    return [c for c in d.ok("show conns") if state is None or c["state"] == state]


PERF_REGION = 64 << 20  # daemon/perf.h MRD_PERF_REGION_BYTES


def perf_region_warm(d, seconds=6.0):
    """Wait until a perf transfer into daemon d has moved its whole receive
    region (mapped on demand: its pages join d's RSS as the first 64 MiB
    arrive), so that an RSS baseline taken next does not count them. On a
    loaded host 1 s of transfer moved less than that, and the rest of the
    region's pages came out of the attack's RSS bound. The received bytes
    of d's connection(s), or 0 if they did not reach the region's size."""
    def rx():
        n = sum(c["stats"]["rx_bytes"] for c in conns(d, "established"))
        return n if n >= PERF_REGION else 0
    return wait_for(rx, seconds)


def wait_for(pred, seconds, step=0.02):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


# ---- the memory attacks' common parts (test_memory_all, test_memory_address)


def victim_app(d, svc, size=64 << 20):
    """An application on daemon d that registered a region of size bytes for
    remote writes and listens on service svc, each step checked: (client,
    region, rkey)."""
    import rawabi as R
    app = R.Client(d.app_sock)
    mrtest.check(app.hello(b"victim")[0] == 0, "an application attached to %s" % d.name)
    st, ctx = app.ctx_create(8)
    region = R.Region(size)
    st, keys = app.mr_reg(region, R.ACCESS_LOCAL_WRITE | R.ACCESS_REMOTE_WRITE)
    mrtest.check(st == 0 and app.listen(svc, ctx.id)[0] == 0,
                 "it listens with a %d MiB region for remote writes" % (size >> 20))
    return app, region, keys[1]


def attacker_conns(d, src_ip, svc, n, mtu=256):
    """n connections to service svc at d's plane0 address, each from a UDP
    socket of its own bound to src_ip, confirmed with a PROBE (checked):
    dicts {"u": non-blocking socket, "ca": d's connection id, "ci": ours,
    "ta": d's token, "psn": next PSN}."""
    dst = (d.addrs[0], d.port)
    out = []
    for k in range(n):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((src_ip, 0))
        u.settimeout(2.0)
        ci, ti = rand32(), rand64()
        acc, _ = handshake(u, dst, ci, ti, rand64(), svc, u.getsockname()[1], [(0, src_ip)],
                           mtu=mtu, max_streams=64, max_paths=4)
        mrtest.check(acc is not None and acc["op"] == OP["ACCEPT"],
                     "attacker connection %d from %s accepted" % (k, src_ip))
        u.sendto(probe(acc["src"], ci, acc["hs_token"]), dst)
        u.setblocking(False)
        out.append({"u": u, "ca": acc["src"], "ci": ci, "ta": acc["hs_token"], "psn": 0})
    ids = {c["ca"] for c in out}
    mrtest.check(wait_for(lambda: len([c for c in conns(d, "established")
                                       if int(c["id"], 16) in ids]) == n, 5),
                 "... all %d confirmed" % n)
    return out


def drain(c, naks, answer_to=None):
    """Read what arrived on attacker connection c: count NAKs by reason in
    naks; with answer_to (the daemon's address), answer its PROBEs, so that
    it keeps the connection for as long as the attack needs."""
    try:
        while True:
            r = parse(c["u"].recv(2048))
            if r and r["op"] == OP["NAK"]:
                naks[r["reason"]] = naks.get(r["reason"], 0) + 1
            elif answer_to and r and r["op"] == OP["PROBE"] and "seq" in r:
                c["u"].sendto(probe_ack(c["ca"], c["ci"], c["ta"], r), answer_to)
    except BlockingIOError:
        pass


def flood_starts(conns, dst, region, rkey, count, seconds, naks, size=lambda i: 64 << 20,
                 answer_to=None, sample=None):
    """On each attacker connection in turn, up to count (and seconds) first
    packets of WRITEs into region, 256 bytes each, every one of a new
    message (64 streams, message sizes from size(i)) that is never finished:
    msn 0 of each stream never comes, so nothing completes and each start
    holds its tracking memory. Every 200 packets: a pause of 10 ms, sample(),
    drain(c, naks, answer_to). Then 0.5 s and a last drain of each."""
    payload = bytes(256)
    for c in conns:
        for i in bounded(count, seconds):
            stream, msn = i % 64, 1 + i // 64
            c["u"].sendto(data("WRITE", c["ca"], c["ci"], c["ta"], c["psn"], stream, msn, 0,
                               size(i), payload, remote_addr=region.addr, rkey=rkey), dst)
            c["psn"] += 1
            if i % 200 == 0:
                time.sleep(0.01)
                if sample:
                    sample()
                drain(c, naks, answer_to)
    time.sleep(0.5)
    for c in conns:
        drain(c, naks, answer_to)
