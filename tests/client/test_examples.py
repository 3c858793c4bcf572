#!/usr/bin/env python3
"""The examples (examples/send_recv.c, examples/write.c) against two daemons
on loopback: each server prints what arrived, each client what came back."""
import os
import subprocess
import sys

import mrtest
from mrtest import check, fail


def run_pair(exe, a, b):
    env_a = dict(os.environ, METAROCE_APP_SOCKET=a.app_sock)
    env_b = dict(os.environ, METAROCE_APP_SOCKET=b.app_sock)
    srv = subprocess.Popen([exe, "server"], env=env_b, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    if line.strip() != "listening":
        srv.kill()
        fail("%s server did not start: %r %s" % (exe, line, srv.stderr.read()))
    cli = subprocess.run([exe, "client", b.addrs[0], str(b.port)], env=env_a,
                         capture_output=True, text=True, timeout=60)
    try:
        out, err = srv.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
        out, err = srv.communicate()
        fail("%s server did not finish: %s %s" % (exe, out, err))
    return cli, srv.returncode, out, err


def main():
    exe_sr, exe_w = sys.argv[1], sys.argv[2]
    pair = mrtest.Pair("examples")
    try:
        cli, rc, out, err = run_pair(exe_sr, pair.a, pair.b)
        print(cli.stdout, cli.stderr, out, err)
        check(cli.returncode == 0, "send_recv client exits 0")
        check(rc == 0, "send_recv server exits 0")
        check("received 22 bytes: hello from libmetaroce" in out,
              "send_recv server got the client's message")
        check("answer: got your 22 bytes" in cli.stdout, "send_recv client got the answer")

        cli, rc, out, err = run_pair(exe_w, pair.a, pair.b)
        print(cli.stdout, cli.stderr, out, err)
        check(cli.returncode == 0, "write client exits 0")
        check(rc == 0, "write server exits 0")
        check("written: hello, written into your memory (imm 31)" in out,
              "write: the bytes are in the server's memory, imm carries the length")
    except BaseException:
        pair.a.dump()
        pair.b.dump()
        pair.close(expect_clean=False)
        raise
    pair.close()


if __name__ == "__main__":
    main()
