#!/usr/bin/env python3
"""libmetaroce end to end: metaroce-perf between two applications on two
daemons on loopback, with --verify (every byte of every message checked by
the receiver, every completion exactly once and in order per stream):

  - every opcode (WRITE, WRITE_IMM, SEND, SEND_IMM, and RECV, which the
    SEND* and WRITE_IMM consume) at sizes from 0 and 1 byte to 16 MiB;
  - RDMA READ from 0 bytes to 1 MiB + 3, every byte checked by the client;
  - one 1 GiB WRITE;
  - 1,024 streams with interleaved posting (SEND and WRITE_IMM);
  - an 8-byte ping-pong, each echo verified, and a 4 KiB one unsignaled;
  - connections that fail: a service nobody listens on (MRC_ERR_REJECTED),
    a port no daemon answers on (MRC_ERR_UNREACHABLE).
"""
import sys
import types

import mrtest
from mrtest import check
from clienttest import YAML, PerfServer, perf_client


def verified_run(pair, srv, args, want_msgs, timeout=120, what=None):
    rc, out, err = perf_client(pair.a, pair.b, args + ["--verify"], timeout=timeout)
    res = srv.result(timeout=timeout)
    what = what or " ".join(args)
    check(rc == 0 and out and out["ok"], "%s: client ok (exit 0)" % what)
    check(out["messages"] == want_msgs, "%s: %d completions at the sender" % (what, want_msgs))
    check(out["verify_errors"] == 0 and out["lost"] == 0 and out["duplicated"] == 0,
          "%s: no verify error, nothing lost or duplicated" % what)
    check(res["ok"] and res["verify_errors"] == 0, "%s: the receiver verified it all" % what)
    return out, res


def main():
    big = "--big" in sys.argv
    pair = mrtest.Pair("client-e2e", yaml_extra=YAML)
    srv = PerfServer(pair.b)
    try:
        # Every opcode at sizes around the packet payload and beyond.
        sizes = [(0, 50), (1, 300), (8, 300), (4095, 200), (4096, 200), (4097, 200),
                 (65536, 100), ((1 << 20) + 3, 20), (16 << 20, 3)]
        for op in ("write", "write_imm", "send", "send_imm"):
            for size, count in sizes:
                if size == 0 and op.startswith("write"):
                    continue  # a zero-byte WRITE has no target to check
                depth = 4 if size >= (1 << 20) else 16
                out, res = verified_run(pair, srv, ["--op", op, "--size", str(size),
                                                    "--count", str(count), "--streams", "2",
                                                    "--depth", str(depth)], count)
                if op == "write":
                    # No receive-side completion: every slot's final content.
                    check(res["verified"] >= min(depth, count),
                          "write %d: every target slot holds its last message" % size)
                else:
                    check(res["received"] == count and res["verified"] == count,
                          "%s %d: the receiver got and checked %d messages" % (op, size, count))

        # RDMA READ: the server's slots hold known patterns, the client
        # checks every byte of every READ; sizes across the packet payload,
        # several streams, many READs in flight (beyond the 16 a connection
        # may have out: the rest wait in order).
        for size, count, depth in [(0, 50, 16), (1, 300, 16), (4095, 200, 16), (4097, 200, 16),
                                   (65536, 100, 16), ((1 << 20) + 3, 20, 4)]:
            out, res = verified_run(pair, srv, ["--op", "read", "--size", str(size),
                                                "--count", str(count), "--streams", "2",
                                                "--depth", str(depth)], count)
            check(out["client_verified"] == count,
                  "read %d: the client checked all %d READs byte for byte" % (size, count))

        # 1,024 streams, posted round robin (interleaved), depth 4 each.
        for op in ("send", "write_imm"):
            n = 1024 * 12
            out, res = verified_run(pair, srv, ["--op", op, "--size", "200", "--streams", "1024",
                                                "--depth", "4", "--count", str(n)], n,
                                    what="%s on 1024 streams" % op)
            check(res["received"] == n and res["verified"] == n,
                  "%s on 1024 streams: %d messages received in order per stream" % (op, n))

        # Connections that fail: nobody listens on the service (the peer
        # daemon refuses), and no daemon at the address (no answer).
        rc, out, err = perf_client(pair.a, pair.b, ["--service", "999", "--count", "1"])
        check(rc == 2 and "refused the connection" in err,
              "a service nobody listens on: MRC_ERR_REJECTED")
        nobody = types.SimpleNamespace(addrs=[pair.b.addrs[0]], port=pair.b.port + 7)
        rc, out, err = perf_client(pair.a, nobody, ["--count", "1"], timeout=120)
        check(rc == 2 and "did not answer" in err, "no daemon at the address: MRC_ERR_UNREACHABLE")

        # Ping-pong: each echo compared with its ping.
        out, res = verified_run(pair, srv, ["--pingpong", "--count", "500"], 500,
                                what="ping-pong")
        check(out["lat_us_p50"] > 0, "ping-pong: latency measured")
        # ... and with the pings and echoes unsignaled (no send
        # completions; 4 KiB, sent from the application's memory), the
        # next ping written into the buffer as soon as its pong is in.
        out, res = verified_run(pair, srv, ["--pingpong", "--unsignaled", "--size", "4096",
                                            "--count", "500"], 500,
                                what="unsignaled ping-pong")
        check(out["unsignaled"] is True and out["bad_status"] == 0,
              "unsignaled ping-pong: no send completion waited for, none bad")

        # One 1 GiB message (the register, the write, the check: seconds).
        if big:
            out, res = verified_run(pair, srv, ["--op", "write", "--size", str(1 << 30),
                                                "--count", "1", "--depth", "1"], 1,
                                    timeout=600, what="1 GiB write")
            check(res["verified"] == 1 and out["bytes"] == 1 << 30,
                  "1 GiB write: placed and verified byte for byte")
    except BaseException:
        pair.a.dump()
        pair.b.dump()
        srv.proc.kill()  # leave nothing running behind a failure
        srv.proc.wait()
        pair.close(expect_clean=False)
        raise
    check(srv.stop() == 0, "metaroce-perf server exits 0 on SIGTERM")
    check(pair.a.alive() and pair.b.alive(), "both daemons still up")
    pair.close()


if __name__ == "__main__":
    main()
