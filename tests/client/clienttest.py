"""Helpers of the client suite's end-to-end tests: two daemons on loopback
(mrtest.Pair) configured for applications, and metaroce-perf runs."""
import json
import os
import select
import subprocess
import time

import mrtest
from mrtest import fail

# Enough streams for 1,024 data streams plus metaroce-perf's control
# stream. The retry budgets are the defaults: a request fails only after its
# retry count AND 500 ms (proto/conn.h retry_timeout_ns), which outlasts a
# descheduled sanitizer-built daemon or application.
YAML = "transport:\n  max_streams: 2048\n"


def perf_bin():
    p = os.environ.get("MRC_PERF")
    if not p or not os.access(p, os.X_OK):
        mrtest.skip("MRC_PERF is not set to metaroce-perf")
    return p


_pending = {}


def read_until(proc, text, timeout):
    """Lines of proc's stdout until one contains text; fails on timeout.
    Reads the pipe's fd directly: a buffered readline() would pull later
    lines into Python's buffer, where select() cannot see them."""
    end = time.time() + timeout
    seen = []
    fd = proc.stdout.fileno()
    buf = _pending.get(fd, b"")
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            line = line.decode(errors="replace")
            seen.append(line)
            print("  |", line)
            if text in line:
                _pending[fd] = buf
                return line
        left = end - time.time()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            break
        data = os.read(fd, 65536)
        if not data:
            break
        buf += data
    _pending[fd] = buf
    fail("no %r within %ds (saw %s)" % (text, timeout, seen[-5:]))


class PerfServer:
    def __init__(self, daemon, extra=()):
        self.proc = subprocess.Popen([perf_bin(), "server", "--socket", daemon.app_sock,
                                      "--json"] + list(extra), stdout=subprocess.PIPE)
        read_until(self.proc, "listening", 20)

    def result(self, timeout=30):
        """The server's JSON line for the last client."""
        line = read_until(self.proc, "{", timeout)
        try:
            return json.loads(line)
        except ValueError:
            fail("metaroce-perf server: not JSON: %r" % line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                fail("metaroce-perf server did not stop on SIGTERM")
        return self.proc.returncode


def perf_client(src, dst, args, timeout=120):
    """Run metaroce-perf client from daemon src to dst; (returncode, json, stderr)."""
    t = time.time()
    r = subprocess.run([perf_bin(), "client", dst.addrs[0], "--port", str(dst.port),
                        "--socket", src.app_sock, "--json"] + args,
                       capture_output=True, text=True, timeout=timeout)
    out = None
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            out = json.loads(line)
    print("  perf %s -> rc %d in %.1fs: %s %s" % (" ".join(args), r.returncode, time.time() - t,
                                                 r.stdout.strip(), r.stderr.strip()))
    return r.returncode, out, r.stderr
