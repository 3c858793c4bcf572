#!/usr/bin/env python3
"""The threading model of libmetaroce against two daemons on loopback: one
session shared by four threads, each with its own context and connection
doing verified ping-pongs while registering memory through the shared
session; one of them sleeps in epoll on its context's fd (mrc_ctx_arm), and
another thread sits in mrc_get_event() all along (tests/client/threads.c)."""
import os
import subprocess
import sys

import mrtest
from mrtest import check, fail
from clienttest import YAML


def main():
    exe = sys.argv[1]
    # YAML: an RNR budget that covers the server's accept loop (it polls
    # for new connections every 20 ms, the first ping may come sooner). The
    # server's "ready" SEND leaves as soon as it accepts, before the client's
    # thread has seen ESTABLISHED and posted its receive: RC leaves that race
    # to the application, and a sanitized client on a busy host has taken
    # over the default 500 ms to post it (RNR_RETRY_EXC, CI). 255 waits of
    # 10 ms give it 2.5 s.
    pair = mrtest.Pair("client-threads", yaml_extra=YAML.replace(
        "transport:\n", "transport:\n  rnr_retry_max: 255\n") + "timers:\n  rnr_delay: 10ms\n")
    srv = subprocess.Popen([exe, "server"], env=dict(os.environ, METAROCE_APP_SOCKET=pair.b.app_sock),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if srv.stdout.readline().strip() != "listening":
            fail("threads server did not start")
        try:
            r = subprocess.run([exe, "client", pair.b.addrs[0], str(pair.b.port)],
                               env=dict(os.environ, METAROCE_APP_SOCKET=pair.a.app_sock),
                               capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            fail("the threads client hangs (a deadlock in the session?)")
        print(r.stdout, r.stderr)
        check(r.returncode == 0, "threads client exits 0")
        check("ok: 4 threads x 3000 verified round trips, 0 mismatches" in r.stdout,
              "every thread's round trips verified")
        check(srv.poll() is None, "the server is still serving")
    except BaseException:
        pair.a.dump()
        pair.b.dump()
        srv.kill()
        print("server:", srv.communicate()[0])
        pair.close(expect_clean=False)
        raise
    srv.kill()
    print("server:", srv.communicate()[0])
    pair.close()


if __name__ == "__main__":
    main()
