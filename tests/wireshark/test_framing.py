"""How the dissector finds and frames packets in a capture.

- GSO/GRO batches: a datagram holding several packets (as captured on a host
  before segmentation) is dissected as those packets, each judged on its own;
  with the preference off it is one datagram with the decoder's LENGTH.
- The heuristic on UDP claims every valid packet on any port, no invalid one
  and no foreign payload; once it has claimed a conversation, the rest of that
  conversation (invalid packets included) is dissected and flagged.
- A packet cut by the capture's snapshot length is shown without a verdict.
- The preference metaroce.ports moves the service port.
"""
import os
import random
import re
import struct
import tempfile

import wslib
from wslib import check, fail


def vec(name):
    with open(os.path.join(wslib.data_dir(), "wire", name), "rb") as f:
        return f.read()


def run(frames, opts=(), snaplen=262144):
    """Per frame: list of (metaroce proto element) and the frame's experts."""
    with tempfile.TemporaryDirectory(prefix="mr-ws-") as tmp:
        pcap = os.path.join(tmp, "f.pcap")
        wslib.write_pcap(pcap, frames, snaplen)
        pkts = wslib.pdml(pcap, opts)
    if len(pkts) != len(frames):
        fail("tshark decoded %d frames of %d" % (len(pkts), len(frames)))
    return pkts


def fields(proto, name):
    return [c.get("show") for c in wslib.walk(proto) if c.get("name") == name]


def errors(pkt):
    return [e for p in wslib.protos(pkt) for e in fields(p, "metaroce.error")]


def malformed(pkt):
    return [e for e in wslib.experts(pkt) if e[1] == wslib.MALFORMED_GROUP]


def main():
    wslib.tshark_or_skip()
    write, close, ack = vec("write.bin"), vec("close.bin"), vec("ack.bin")
    bad_write = bytearray(write)
    bad_write[68:72] = b"\x00\x00\x00\x01"  # imm in a WRITE: RESERVED
    batch = write + write + write + close
    batch_bad = write + bytes(bad_write) + write

    # ---- GSO/GRO batches
    pkts = run([wslib.frame(batch), wslib.frame(batch_bad), wslib.frame(ack + ack)])
    ps = wslib.protos(pkts[0])
    check(len(ps) == 5, "a batch of 4 packets: 4 packet items and the batch item (%d)" % len(ps))
    check(fields(ps[0], "metaroce.gso_segments") == [] and
          sum(fields(p, "metaroce.gso_segments") == ["4"] for p in ps) == 1,
          "metaroce.gso_segments = 4")
    check(not errors(pkts[0]) and not malformed(pkts[0]), "no segment of a valid batch is malformed")
    check([[int(x, 0) for x in fields(p, "metaroce.opcode")] for p in ps[:4]] == [[1], [1], [1], [0x23]],
          "segments in order: WRITE, WRITE, WRITE, CLOSE")
    check([int(p.get("pos")) - wslib.PAYLOAD_OFF for p in ps[:4]] == [0, 80, 160, 240],
          "each segment where it lies in the datagram")
    check(fields(ps[2], "metaroce.psn") == ["11259375"], "the third segment decoded in full")
    check([fields(p, "metaroce.gso_index") for p in ps[:4]] == [["0"], ["1"], ["2"], ["3"]],
          "metaroce.gso_index numbers the segments")
    notes = [e for e in wslib.experts(pkts[0]) if e[0] == "metaroce.gso"]
    check(len(notes) == 1 and notes[0][2] == str(0x00400000), "one note (not an error) on the batch")
    check(errors(pkts[1]) == ["RESERVED"] and len(malformed(pkts[1])) == 1 and
          fields(wslib.protos(pkts[1])[1], "metaroce.error") == ["RESERVED"],
          "a bad segment in a batch is flagged alone, as the decoder would flag it")
    check(len(wslib.protos(pkts[2])) == 3 and not errors(pkts[2]), "two ACKs in one datagram")
    off = run([wslib.frame(batch), wslib.frame(ack + ack)], ["-o", "metaroce.split_gso:FALSE"])
    check(all(len(wslib.protos(p)) == 1 and errors(p) == ["LENGTH"] for p in off),
          "with splitting off, a batch is one datagram: LENGTH, as the decoder says")
    tail = run([wslib.frame(write + write + write[:50])])
    check(len(wslib.protos(tail[0])) == 1 and errors(tail[0]) == ["LENGTH"],
          "packets followed by a piece of one are no batch (GSO sends whole packets): LENGTH")
    odd = run([wslib.frame(close + b"\x00" * 5), wslib.frame(write + close + write)])
    check(all(len(wslib.protos(p)) == 1 and errors(p) == ["LENGTH"] for p in odd),
          "no batch when the rest is not packets of the first one's size")

    # ---- heuristic
    index, tables, errs = wslib.read_vectors()
    valid = [vec(e[0]) for e in index if e[3].startswith("valid")]
    invalid = [vec(n) for n in errs if len(vec(n)) > 0]
    frames = []
    sport = 41000
    for v in valid:  # each on a conversation of its own, nowhere near 19791
        frames.append(wslib.frame(v, sport=sport, dport=sport + 5000))
        sport += 1
    for v in invalid:
        frames.append(wslib.frame(v, sport=sport, dport=sport + 5000))
        sport += 1
    rnd = random.Random(7)
    foreign = []
    for i in range(300):
        n = rnd.choice([8, 28, 32, 36, 44, 48, 60, 72, 80, 92, 108, 200, 1200])
        b = bytearray(rnd.randrange(256) for _ in range(n))
        if i % 2 == 0 and n >= 2:  # looks like version 1 with a real opcode
            b[0], b[1] = 1, rnd.choice([0x01, 0x03, 0x10, 0x11, 0x12, 0x20, 0x23, 0x24])
        foreign.append(bytes(b))
        frames.append(wslib.frame(bytes(b), sport=sport, dport=sport + 5000))
        sport += 1
    # a conversation the heuristic claimed: its later invalid packet is flagged
    frames.append(wslib.frame(write, sport=30001, dport=30002))
    frames.append(wslib.frame(vec("bad_flags.bin"), sport=30001, dport=30002))
    pkts = run(frames)
    nv, ni, nf = len(valid), len(invalid), len(foreign)
    check(all(len(wslib.protos(p)) == 1 and not errors(p) for p in pkts[:nv]),
          "the heuristic claims all %d valid vectors on other ports" % nv)
    check(all(len(wslib.protos(p)) == 0 for p in pkts[nv:nv + ni]),
          "the heuristic claims none of the %d invalid vectors" % ni)
    claimed = [i for i, p in enumerate(pkts[nv + ni:nv + ni + nf]) if wslib.protos(p)]
    check(not claimed, "the heuristic claims none of %d foreign payloads (claimed: %s)"
          % (nf, [foreign[i][:8].hex() for i in claimed]))
    check(len(wslib.protos(pkts[-2])) == 1 and len(wslib.protos(pkts[-1])) == 1 and
          errors(pkts[-1]) == ["FLAGS"], "after a claimed packet, the conversation's bad packet is flagged")
    pkts = run(frames[:nv], ["--disable-heuristic", "metaroce_udp"])
    check(all(not wslib.protos(p) for p in pkts), "--disable-heuristic metaroce_udp turns the heuristic off")

    # ---- snapshot length
    names = [e[0] for e in index if e[3].startswith("valid") and len(vec(e[0])) > 40]
    cut = [(wslib.frame(vec(n)), wslib.PAYLOAD_OFF + 40) for n in names]
    cut.append((wslib.frame(vec("bad_version.bin")), wslib.PAYLOAD_OFF + 40))
    pkts = run(cut, snaplen=wslib.PAYLOAD_OFF + 40)
    check(all(len(wslib.protos(p)) == 1 and not errors(p) and not malformed(p) for p in pkts[:-1]),
          "%d valid packets cut at 40 bytes by the snapshot length: none flagged" % len(names))
    noted = [n for n, p in zip(names, pkts) if any(e[0] == "metaroce.snaplen" for e in wslib.experts(p))]
    # the decoder's verdict on an ACK, a PROBE or a PROBE_ACK (with GRANT too) needs only the
    # first 40 bytes and the datagram's length; the others' needs more
    check(sorted(noted) == sorted(set(names) - {"ack.bin", "probe.bin", "probe_ack.bin",
                                                "probe_ack_grant.bin"}),
          "a note (validity unknown) where the verdict needs bytes not captured: %s" % noted)
    check(errors(pkts[-1]) == ["VERSION"], "a cut packet whose first bytes are already bad is flagged")

    # ---- the port preference
    frames = [wslib.frame(vec("bad_mtu.bin"), sport=41000, dport=5000),
              wslib.frame(vec("bad_mtu.bin"), sport=41001, dport=19791)]
    pkts = run(frames, ["-o", "metaroce.ports:5000"])
    check(errors(pkts[0]) == ["RANGE"], "metaroce.ports:5000 dissects port 5000")
    check(len(wslib.protos(pkts[1])) == 0, "... and no longer 19791 (an invalid packet there is not claimed)")
    pkts = run(frames)
    check(len(wslib.protos(pkts[0])) == 0 and errors(pkts[1]) == ["RANGE"],
          "by default: 19791 is the service port, 5000 is not")


def sack_and_filters():
    # SPEC Appendix B: PSNs 0, 1, 2 and 5 received, 3 and 4 not
    with open(os.path.join(wslib.source_root(), "proto", "SPEC.md")) as f:
        appb = f.read().split("## Appendix B", 1)[1]
    dumps = re.findall(r"```\n(.*?)```", appb, re.S)
    spec_ack = bytes.fromhex("".join(l[6:] for l in dumps[1].splitlines()))
    check(len(spec_ack) == 92 and spec_ack[1] == 0x10, "SPEC Appendix B's ACK, 92 bytes")
    wrap = bytearray(spec_ack)
    wrap[32:36] = (2).to_bytes(4, "big")
    wrap[36:68] = bytes(32)
    wrap[36] = 0x01          # PSN 1
    wrap[67] = 0x80          # bit 255: PSN 2 - 1 - 255 = 2^32 - 254
    pkts = run([wslib.frame(spec_ack), wslib.frame(bytes(wrap))])
    p = wslib.protos(pkts[0])[0]
    check(not errors(pkts[0]), "SPEC Appendix B's ACK is valid")
    check(fields(p, "metaroce.sack.received") == ["0-2", "5"] and fields(p, "metaroce.sack.missing") == ["3-4"],
          "its SACK map: received 0-2 and 5, missing 3-4")
    check(fields(p, "metaroce.sack.window_first") == ["0"] and fields(p, "metaroce.sack.window_last") == ["5"] and
          fields(p, "metaroce.sack.received_count") == ["4"] and fields(p, "metaroce.sack.missing_count") == ["2"],
          "window 0..5 (a generation starts at PSN 0), 4 received, 2 missing")
    check(fields(p, "metaroce.sack.missing_first") == ["3"] and fields(p, "metaroce.sack.missing_last") == ["4"],
          "the missing range's first and last PSN are fields to filter on")
    p = wslib.protos(pkts[1])[0]
    check(fields(p, "metaroce.sack.window_first") == [str((1 << 32) - 254)] and
          fields(p, "metaroce.sack.received")[0] == str((1 << 32) - 254) and
          fields(p, "metaroce.sack.received")[-1] == "1",
          "a bit below PSN 0 means the PSNs wrapped: the window is 2^32-254 .. 1")

    # display filters on the vectors: the expected matches computed from the bytes
    index, tables, errs = wslib.read_vectors()
    vecs = [(e[0], vec(e[0])) for e in index]

    def has_header(v):
        return (len(v) >= 28 and v[0] == 1) or (len(v) >= 16 and v[0] != 1)

    def u(v, off, n):
        return int.from_bytes(v[off:off + n], "big")

    expect = {
        "metaroce.path == 258": [n for n, v in vecs if has_header(v) and u(v, 4, 2) == 258],
        "metaroce.conn == 0x0a0b0c0d": [n for n, v in vecs if has_header(v) and 0x0a0b0c0d in (u(v, 8, 4), u(v, 12, 4))],
        "metaroce.flags.retx == 1": [n for n, v in vecs if has_header(v) and u(v, 2, 2) & 4],
        'metaroce.error == "RANGE"': [n for n, e in errs.items() if e == "RANGE"],
        "metaroce.error": sorted(errs),
        "metaroce.nak_reason == 4": [n for n, v in vecs if v[:2] == b"\x01\x11" and len(v) >= 60 and v[28] == 4],
    }
    with tempfile.TemporaryDirectory(prefix="mr-ws-") as tmp:
        pcap = os.path.join(tmp, "v.pcap")
        wslib.write_pcap(pcap, [wslib.frame(v) for n, v in vecs])
        for flt, want in expect.items():
            out = wslib.tshark(["-r", pcap, "-Y", flt, "-T", "fields", "-e", "frame.number"])
            got = sorted(vecs[int(x) - 1][0] for x in out.split())
            check(got == sorted(want) and got, "filter %s: %s" % (flt, got))


main()
sack_and_filters()
