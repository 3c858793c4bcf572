#!/usr/bin/env python3
"""Faults around libmetaroce applications, two daemons on loopback:

  1. kill -9 the sending application mid-transfer: the receiving
     application sees its connection reset (no hang), both daemons stay up,
     and the sender's daemon serves a new session at once;
  2. kill -9 the receiving application mid-transfer: the sender gets error
     completions and exits non-zero (no hang);
  3. kill -9 the sender's daemon mid-transfer: the application's
     mrc_wait_cq() returns MRC_ERR_DAEMON (no hang); after the daemon is
     restarted the same process attaches again, registers the same memory,
     reconnects and completes verified round trips; the peer application
     sees the old connection end and serves the new one.
"""
import os
import signal
import subprocess
import time

import mrtest
from mrtest import check, fail
from clienttest import YAML, PerfServer, perf_bin, perf_client, read_until


def start_client(pair, args):
    return subprocess.Popen([perf_bin(), "client", pair.b.addrs[0], "--port", str(pair.b.port),
                             "--socket", pair.a.app_sock, "--json"] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def main():
    reattach = os.environ.get("MRC_REATTACH")
    if not reattach:
        mrtest.skip("MRC_REATTACH is not set")
    pair = mrtest.Pair("client-faults", yaml_extra=YAML)
    srv = cli = rsrv = rcli = None
    try:
        # 1. The sender dies.
        srv = PerfServer(pair.b)
        cli = start_client(pair, ["--op", "send", "--size", "4096", "--seconds", "60",
                                  "--depth", "32", "--verify"])
        time.sleep(1.5)
        check(cli.poll() is None, "the sender is transferring")
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait()
        t = time.time()
        res = srv.result(timeout=30)
        check(not res["ok"] and "end" in res,
              "receiver saw the connection end (%s) after %.1fs" % (res.get("end"), time.time() - t))
        check(res["verify_errors"] == 0, "what arrived before the kill verified (%d messages)"
              % res["received"])
        check(pair.a.alive() and pair.b.alive(), "both daemons up after the application's death")
        rc, out, _ = perf_client(pair.a, pair.b, ["--op", "write_imm", "--size", "1000",
                                                  "--count", "2000", "--verify"])
        check(rc == 0 and out["ok"], "a new session on the same daemon works")
        srv.result()

        # 2. The receiver dies.
        cli = start_client(pair, ["--op", "write_imm", "--size", "65536", "--seconds", "60",
                                  "--depth", "16", "--verify"])
        time.sleep(1.5)
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
        try:
            rc = cli.wait(60)
        except subprocess.TimeoutExpired:
            cli.kill()
            fail("the sender hangs after the receiver was killed")
        out = cli.stdout.read()
        print("  |", out.strip(), cli.stderr.read().strip())
        check(rc == 1, "the sender got error completions and exited 1")
        check(pair.a.alive() and pair.b.alive(), "both daemons up after the receiver's death")

        # 3. The sender's daemon dies; the application re-attaches.
        env_b = dict(os.environ, METAROCE_APP_SOCKET=pair.b.app_sock)
        env_a = dict(os.environ, METAROCE_APP_SOCKET=pair.a.app_sock)
        rsrv = subprocess.Popen([reattach, "server"], env=env_b, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        read_until(rsrv, "listening", 20)
        rcli = subprocess.Popen([reattach, "client", pair.b.addrs[0], str(pair.b.port)],
                                env=env_a, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        read_until(rcli, "round trips 1000", 60)
        pair.a.proc.kill()
        pair.a.proc.wait()
        t = time.time()
        line = read_until(rcli, "daemon gone", 10)
        check("the daemon is not running or went away" in line,
              "mrc_wait_cq() gave MRC_ERR_DAEMON %.2fs after kill -9 of the daemon"
              % (time.time() - t))
        check(rcli.poll() is None, "the application is still running, waiting to re-attach")
        time.sleep(0.5)
        pair.a = mrtest.Daemon(pair.tmp.name, "a", pair.a.addrs, port=pair.a.port,
                               yaml_extra=YAML)
        read_until(rcli, "attached round 2", 30)
        read_until(rcli, "reattached ok", 120)
        try:
            rc = rcli.wait(10)
        except subprocess.TimeoutExpired:
            rcli.kill()
            fail("the re-attached application did not exit")
        check(rc == 0, "the re-attached application exits 0")
        # The peer application saw its first connection end (B noticed A's
        # restart) and served the second.
        read_until(rsrv, "connection ended 1", 10)
        read_until(rsrv, "connection 2", 10)
        check(True, "the peer application saw the dead daemon's connection end, then served the new one")
        rsrv.kill()
        rsrv.wait()
    except BaseException:
        pair.a.dump()
        pair.b.dump()
        # Leave nothing running behind a failure.
        for p in (cli, rcli, rsrv, srv and srv.proc):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        pair.close(expect_clean=False)
        raise
    pair.close()


if __name__ == "__main__":
    main()
