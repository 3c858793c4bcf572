"""The dissector's verdicts against the C decoder's, packet by packet.

Thousands of packets made from the valid vectors of tests/data/wire/ (every
byte flipped and overwritten, every field set to its edge values, lengths cut
and extended, every opcode, reason, family and plane, payload and address
counts with matching lengths, and seeded random mutations) go through
proto/wire.c's mrp_pkt_decode() (the wire_verdict helper) and through tshark
with tools/wireshark/metaroce.lua. For every packet the dissector must give
the decoder's result: no metaroce.error and no Malformed expert info when the
decoder accepts it, else metaroce.error equal to the decoder's error name and
exactly one Malformed expert info, whose message names it (MRP_ERR_RANGE ...). This is what keeps the dissector's rules
those of the decoder: a check missing from the dissector, or one too many,
shows up as a packet the two judge differently.

Run once with GSO/GRO batch splitting off (the dissector then judges each
datagram as one packet, as the decoder does) and once with the default (on):
there, datagrams the dissector splits are counted and every other one must
still agree.
"""
import os
import random
import struct
import subprocess
import tempfile

import wslib
from wslib import check, fail

CODES = ("TRUNCATED", "VERSION", "OPCODE", "FLAGS", "LENGTH", "RANGE", "RESERVED")


def be(n, size):
    return (n % (1 << (8 * size))).to_bytes(size, "big")


def setf(pkt, off, size, val):
    b = bytearray(pkt)
    if off + size <= len(b):
        b[off:off + size] = be(val, size)
    return bytes(b)


def edge_values(size):
    top = (1 << (8 * size)) - 1
    vals = {0, 1, 2, top, top - 1, 1 << (8 * size - 1), (1 << (8 * size - 1)) - 1}
    if size >= 2:
        vals |= {255, 256, 9000, 9001, 4096, 16, 17, 15, 5, 6, 7, 8}
    if size >= 4:
        vals |= {0x80000000, 0x80000001, 0x7FFFFFFF, 65535, 65536}
    return sorted(v for v in vals if v <= top)


def mutations(vectors, tables):
    """The packets to judge: list of bytes."""
    out = []
    rnd = random.Random(20261201)
    for name, v in vectors:
        # every byte: flip the low and high bit, zero, 0xff
        for i in range(len(v)):
            for x in (v[i] ^ 0x01, v[i] ^ 0x80, 0, 0xFF, v[i] ^ 0x10):
                b = bytearray(v)
                b[i] = x
                out.append(bytes(b))
        # lengths: every cut, some extensions
        out += [v[:n] for n in range(len(v))]
        out += [v + b"\x00", v + b"\x01", v + bytes(20), v + bytes(21), v + v]
        # every field to its edge values
        for off, size, field, value, meaning in tables[name]:
            if size in (1, 2, 4, 8):
                for val in edge_values(size):
                    out.append(setf(v, off, size, val))
        # every flag set alone, every opcode
        for bit in range(16):
            out.append(setf(v, 2, 2, struct.unpack("!H", v[2:4])[0] | (1 << bit)))
            out.append(setf(v, 2, 2, 1 << bit))
        for op in range(256):
            out.append(setf(v, 1, 1, op))
        # seeded random: 1 to 4 bytes changed
        for _ in range(60):
            b = bytearray(v)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            out.append(bytes(b))
    byname = dict(vectors)
    # data packets: payload lengths with matching datagrams, message edges
    for name in ("write.bin", "write_imm.bin", "send.bin", "send_imm.bin"):
        v = byname[name]
        hdr = v[:72]
        for plen in (0, 1, 255, 256, 4096, 9000, 9001):
            for msg_len in (0, plen, plen + 1, 0x80000000, 0x80000001):
                for off in (0, 1, 4096, 0x80000000 - plen):
                    for flags in (0x0, 0x1, 0x2, 0x3, 0xB):
                        p = setf(hdr, 30, 2, plen)
                        p = setf(p, 40, 4, msg_len)
                        p = setf(p, 36, 4, off)
                        p = setf(p, 2, 2, flags)
                        out.append(p + bytes(plen))
        # remote_addr around 2^64 - msg_len
        msg_len = struct.unpack("!I", v[40:44])[0]
        for ml in (msg_len, 1, 0x80000000):
            for delta in (-1, 0, 1):
                p = setf(v, 40, 4, ml)
                out.append(setf(p, 56, 8, (1 << 64) - ml + delta))
        # the placement fields zero and nonzero in each opcode
        for off, size in ((44, 4), (56, 8), (64, 4), (68, 4)):
            out.append(setf(v, off, size, 0))
            out.append(setf(v, off, size, 1))
    # handshakes: address counts with matching lengths, every family and plane
    for name in ("connect.bin", "accept.bin"):
        v = byname[name]
        fixed = v[:68]
        entry4 = bytes([4, 0, 0, 0, 10, 0, 0, 1]) + bytes(12)
        entry6 = bytes([6, 1, 0, 0]) + bytes(range(1, 17))
        for n in (0, 1, 2, 16, 17, 255):
            for k in range(min(n, 18) + 2):
                body = b"".join(entry4 if j % 2 == 0 else entry6 for j in range(k))
                out.append(setf(fixed, 66, 1, n) + body)
        for fam in (0, 3, 4, 5, 6, 7, 255):
            for plane in (0, 15, 16, 255):
                p = bytearray(v)
                p[68], p[69] = fam, plane
                out.append(bytes(p))
                if len(v) >= 108:
                    p[88], p[89] = fam, plane
                    out.append(bytes(p))
        for i in range(68, len(v)):
            p = bytearray(v)
            p[i] ^= 0x04
            out.append(bytes(p))
        for minv in (0, 1, 2, 3, 255):
            for maxv in (0, 1, 2, 3, 255):
                out.append(setf(setf(v, 28, 1, minv), 29, 1, maxv))
    # NAK: every reason with and without token, token_echo and retry_after
    v = byname["nak.bin"]
    for reason in range(0, 10):
        for tok in (0, 0x99AABBCCDDEEFF01):
            for echo in (0, 0xDEADBEEF):
                for retry in (0, 5000):
                    p = setf(v, 28, 1, reason)
                    p = setf(p, 16, 8, tok)
                    p = setf(p, 52, 8, echo)
                    out.append(setf(p, 48, 4, retry))
    # REJECT: every reason, token, versions, source id
    v = byname["reject.bin"]
    for reason in range(0, 8):
        for tok in (0, 0xA1A2A3A4A5A6A7A8):
            for minv, maxv in ((0, 1), (1, 1), (2, 1), (1, 3), (0, 0)):
                for src in (0, 5):
                    p = setf(v, 28, 1, reason)
                    p = setf(p, 16, 8, tok)
                    p = setf(setf(p, 29, 1, minv), 30, 1, maxv)
                    out.append(setf(p, 12, 4, src))
    # CLOSE and RESET: every reason, REPLY on both, reserved bytes
    for name in ("close.bin", "reset.bin"):
        v = byname[name]
        for reason in (0, 1, 5, 6, 255, 65535):
            for flags in (0, 0x10, 0x08):
                out.append(setf(setf(v, 28, 2, reason), 2, 2, flags))
    # the common header in every opcode: ids, token, psn, path zero and not
    for name, v in vectors:
        for off, size in ((4, 2), (6, 2), (8, 4), (12, 4), (16, 8), (24, 4)):
            out.append(setf(v, off, size, 0))
            out.append(setf(v, off, size, 7))
    return out


def c_verdicts(packets):
    helper = os.environ.get("WIRE_VERDICT")
    if not helper or not os.access(helper, os.X_OK):
        wslib.skip("WIRE_VERDICT is not set to the wire_verdict helper (run through meson)")
    r = subprocess.run([helper], input="".join(p.hex() + "\n" for p in packets),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("wire_verdict exited %d: %s" % (r.returncode, r.stderr))
    out = r.stdout.split()
    if len(out) != len(packets):
        fail("wire_verdict gave %d verdicts for %d packets" % (len(out), len(packets)))
    return out


def ws_verdicts(pcap, split_gso):
    """Per frame: (number of metaroce items, [metaroce.error], [malformed experts])."""
    out = wslib.tshark(["-r", pcap, "-o", "metaroce.split_gso:" + ("TRUE" if split_gso else "FALSE"),
                        "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|",
                        "-e", "frame.protocols", "-e", "metaroce.error", "-e", "_ws.expert.group",
                        "-e", "metaroce.gso_segments", "-e", "_ws.expert.message"], timeout=300)
    res = []
    for line in out.splitlines():
        cols = line.split("\t")
        cols += [""] * (5 - len(cols))
        nproto = cols[0].split(":").count("metaroce")
        errs = [e for e in cols[1].split("|") if e]
        groups = cols[2].split("|") if cols[2] else []
        msgs = cols[4].split("|") if cols[4] else []
        mal = [m.split(" ")[0] for g, m in zip(groups, msgs) if g == wslib.MALFORMED_GROUP]
        res.append((nproto, errs, mal, cols[3] != ""))
    return res


def main():
    wslib.tshark_or_skip()
    index, tables, errors = wslib.read_vectors()
    wdir = os.path.join(wslib.data_dir(), "wire")
    vectors = [(name, open(os.path.join(wdir, name), "rb").read())
               for name, op, length, result in index if result.startswith("valid")]
    packets = mutations(vectors, tables)
    # the invalid vectors too, as they are
    packets += [open(os.path.join(wdir, n), "rb").read() for n in errors]
    # Wireshark hands no empty UDP payload to a dissector: the one datagram
    # the decoder calls TRUNCATED that the dissector cannot see (docs/wireshark.md).
    empty = sum(1 for p in packets if not p)
    packets = [p for p in packets if p]
    print("%d empty datagrams left out" % empty)
    cv = c_verdicts(packets)
    counts = {}
    for v in cv:
        counts[v] = counts.get(v, 0) + 1
    print("decoder verdicts on %d packets: %s" % (len(packets), counts))
    for code in ("OK",) + CODES:
        check(counts.get(code, 0) > 0, "the packets include some the decoder judges %s" % code)

    with tempfile.TemporaryDirectory(prefix="mr-ws-") as tmp:
        pcap = os.path.join(tmp, "mutations.pcap")
        wslib.write_pcap(pcap, [wslib.frame(p) for p in packets])
        for split in (False, True):
            wv = ws_verdicts(pcap, split)
            if len(wv) != len(packets):
                fail("tshark gave %d frames for %d packets" % (len(wv), len(packets)))
            bad, nsplit = [], 0
            for i, (p, c, (nproto, errs, mal, gso)) in enumerate(zip(packets, cv, wv)):
                if gso:
                    nsplit += 1
                    if not split:
                        fail("frame %d split with splitting off" % (i + 1))
                    continue
                want_errs = [] if c == "OK" else [c]
                want_mal = [] if c == "OK" else ["MRP_ERR_" + c]
                if nproto != 1 or errs != want_errs or mal != want_mal:
                    bad.append("frame %d (%d bytes, %s...): decoder %s, dissector %s "
                               "(malformed expert infos %s, %d metaroce items)"
                               % (i + 1, len(p), p[:36].hex(), c, errs or "OK", mal, nproto))
            if bad:
                fail("%d of %d packets judged differently (split_gso %s):\n  %s"
                     % (len(bad), len(packets), split, "\n  ".join(bad[:40])))
            check(True, "split_gso %s: the dissector agrees with the decoder on all %d packets"
                  " (%d dissected as GSO/GRO batches)" % (split, len(packets) - nsplit, nsplit))


main()
