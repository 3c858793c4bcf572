"""A live capture of two daemons, decoded by the dissector.

Two metarocd on loopback (two planes each; A on port 19791, the table's
port, B on 19795, which only the heuristic finds), captured with dumpcap on
lo during a ping and a short verified perf run. Then, in the capture:
- every UDP datagram between the daemons is MetaRoCE (the port or the
  heuristic claims it), with no Malformed expert info, no metaroce.error
  and no Lua error;
- the handshake, data, ACKs, PROBEs and PROBE_ACKs are all there; the
  handshake with its address validation (SPEC 9.7): a RETRY answers a CONNECT
  (its dst_conn_id and token are the CONNECT's src_conn_id and hs_token), and
  a CONNECT then carries that RETRY's cookie as its token;
- on every path (connection ids, path id, generation: a direction) the PSNs
  of the data packets increase, in serial order, packet after packet.
Capturing needs root (exit 77 without it, or without tshark or dumpcap).
Packets the capture drops (a busy CPU) leave gaps, never reorder.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import mrtest
import wslib
from wslib import check, fail

DATA_OPS = {0x01, 0x02, 0x03, 0x04}


def serial_lt(a, b):
    d = (b - a) % (1 << 32)
    return 0 < d < (1 << 31)


def main():
    wslib.tshark_or_skip()
    dumpcap = shutil.which("dumpcap")
    if not dumpcap:
        wslib.skip("dumpcap is not installed (it comes with tshark's wireshark-common)")
    if os.geteuid() != 0:
        wslib.skip("capturing on lo needs root")
    mrtest.binaries()

    tmp = tempfile.TemporaryDirectory(prefix="mr-ws-live-")
    addrs = mrtest.addr_base("wslive")
    a = mrtest.Daemon(tmp.name, "a", addrs[0:2], port=19791)
    b = mrtest.Daemon(tmp.name, "b", addrs[2:4], port=19795)
    pcap = os.path.join(tmp.name, "live.pcapng")
    flt = "udp and (%s)" % " or ".join("host " + h for h in addrs)
    cap = subprocess.Popen([dumpcap, "-i", "lo", "-f", flt, "-B", "64", "-w", pcap],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # dumpcap names its file once the interface is open and the filter
        # set ("Capturing on" comes before that: traffic right after it
        # went uncaptured on a loaded host, 0 packets)
        line, t = "", time.time() + 20
        while not line.startswith("File:"):
            if cap.poll() is not None or time.time() > t:
                fail("dumpcap did not start: %s %s" % (line, cap.stderr.read() if cap.poll() is not None else ""))
            line = cap.stderr.readline()
        time.sleep(0.3)
        r = a.ok("ping", {"peer": b.peer(), "count": 3})
        print("ping: rtt %s us" % r.get("rtt_us"))
        r = a.ok("perf", {"peer": b.peer(), "seconds": 2, "bytes": 16 << 20}, timeout=120)
        print("perf: %d bytes, verified %s, %d verify errors, %.3f Gbit/s" % (
            r["bytes"], r["verified"], r["verify_errors"], r["goodput_gbps"]))
        check(r["verified"] and r["verify_errors"] == 0 and r["bytes"] > 0,
              "the perf run moved verified data")
        time.sleep(0.5)
    finally:
        if cap.poll() is None:
            cap.send_signal(signal.SIGTERM)
        try:
            rest = cap.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            cap.kill()
            rest = cap.communicate()[1]
        for d in (a, b):
            rc, _ = d.stop()
            if rc != 0:
                d.dump()
                fail("%s exited %d after SIGTERM" % (d.name, rc))
    print("dumpcap:", " ".join(rest.split())[-300:])

    out = wslib.tshark(["-r", pcap, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|",
                        "-e", "frame.number", "-e", "frame.protocols", "-e", "udp.dstport",
                        "-e", "metaroce.opcode", "-e", "metaroce.dst_conn_id", "-e", "metaroce.src_conn_id",
                        "-e", "metaroce.path", "-e", "metaroce.path_gen", "-e", "metaroce.psn",
                        "-e", "metaroce.error", "-e", "_ws.expert.group", "-e", "_ws.expert.message",
                        "-e", "metaroce.gso_segments", "-e", "_ws.malformed", "-e", "_ws.lua.error"],
                       timeout=300)
    frames = [l.split("\t") for l in out.splitlines()]
    check(len(frames) > 0, "dumpcap captured %d datagrams" % len(frames))
    not_ours, bad, ops, batches = [], [], {}, 0
    heur_frames = 0
    paths = {}
    npkts = 0
    for f in frames:
        f += [""] * (15 - len(f))
        num, protos, dport = f[0], f[1], f[2]
        if "metaroce" not in protos.split(":"):
            not_ours.append(num)
            continue
        if dport == "19795":
            heur_frames += 1
        if f[12]:
            batches += 1
        groups = f[10].split("|") if f[10] else []
        msgs = f[11].split("|") if f[11] else []
        mal = [m for g, m in zip(groups, msgs) if g == wslib.MALFORMED_GROUP]
        if f[9] or mal or f[13] or f[14]:
            bad.append("frame %s: error %s, %s %s %s" % (num, f[9], mal, f[13], f[14]))
        cols = [c.split("|") for c in f[3:9]]
        if len({len(c) for c in cols}) != 1:
            bad.append("frame %s: header fields of its packets do not line up: %s" % (num, cols))
            continue
        for op, dst, src, path, gen, psn in zip(*cols):
            op = int(op, 0)
            npkts += 1
            ops[op] = ops.get(op, 0) + 1
            if op in DATA_OPS:
                paths.setdefault((dst, src, int(path), int(gen)), []).append((int(psn), num))
    check(not not_ours, "every captured datagram is MetaRoCE (not: frames %s)" % not_ours[:20])
    if bad:
        fail("%d malformed frames:\n  %s" % (len(bad), "\n  ".join(bad[:30])))
    check(True, "no malformed packet, no decoder error, no Lua error in %d datagrams (%d packets, "
          "%d GSO/GRO batches)" % (len(frames), npkts, batches))
    check(heur_frames > 0, "%d datagrams to port 19795 found by the heuristic" % heur_frames)
    names = {0x20: "CONNECT", 0x21: "ACCEPT", 0x10: "ACK", 0x12: "PROBE", 0x13: "PROBE_ACK"}
    for op, n in names.items():
        check(ops.get(op, 0) > 0, "%d %s packets" % (ops.get(op, 0), n))
    ndata = sum(ops.get(o, 0) for o in DATA_OPS)
    check(ndata >= 100, "%d data packets on %d paths" % (ndata, len(paths)))
    check(len(paths) >= 2, "data on at least two paths")
    for key, seq in sorted(paths.items()):
        for (p0, n0), (p1, n1) in zip(seq, seq[1:]):
            if not serial_lt(p0, p1):
                fail("path %s->%s %d/%d: PSN %d (frame %s) then %d (frame %s): not increasing"
                     % (key[1], key[0], key[2], key[3], p0, n0, p1, n1))
        gaps = sum(1 for (p0, _), (p1, _) in zip(seq, seq[1:]) if (p1 - p0) % (1 << 32) != 1)
        print("  path %s->%s %d/%d: %d packets, PSN %d..%d, %d gaps"
              % (key[1], key[0], key[2], key[3], len(seq), seq[0][0], seq[-1][0], gaps))
    check(True, "the PSNs of each of %d paths increase" % len(paths))

    # SPEC 9.7: the daemons validate every CONNECT, so their first contact
    # has a RETRY, and a CONNECT that carries its cookie
    def hs(opcode, *fields):
        out = wslib.tshark(["-r", pcap, "-Y", "metaroce.opcode == %#x" % opcode, "-T", "fields",
                            "-E", "occurrence=a", "-E", "aggregator=|"] +
                           [a for fld in fields for a in ("-e", fld)])
        rows = []
        for line in out.splitlines():
            cols = line.split("\t")
            if all(c and "|" not in c for c in cols):  # one packet per datagram
                rows.append(tuple(int(c, 0) for c in cols))
        return rows
    retries = hs(0x25, "metaroce.dst_conn_id", "metaroce.token", "metaroce.cookie")
    connects = hs(0x20, "metaroce.src_conn_id", "metaroce.hs_token", "metaroce.token")
    check(len(retries) > 0 and ops.get(0x25, 0) == len(retries),
          "%d RETRY packets, each in a datagram of its own" % len(retries))
    answered = [r for r in retries if any(c[:2] == r[:2] for c in connects)]
    check(answered == retries, "every RETRY answers a captured CONNECT (its src_conn_id, hs_token)")
    cookies = {r[2] for r in retries}
    with_cookie = [c for c in connects if c[2] != 0]
    check(any(c[2] in cookies for c in with_cookie),
          "%d CONNECTs without a cookie, %d with one, of which %d carry a captured RETRY's"
          % (len(connects) - len(with_cookie), len(with_cookie),
             sum(1 for c in with_cookie if c[2] in cookies)))
    tmp.cleanup()


main()
