"""Helpers of the integration tests: daemons on loopback, control requests.

Each test starts its daemons on addresses of its own in 127.0.0.0/8 (chosen
from the test's name and pid), so tests run in parallel without port
collisions and without root. Paths to the binaries come from the
environment meson sets: METAROCD, METAROCE_CTL.
"""
import json
import os
import random
import atexit
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77


# Every daemon a test started: whatever ends the test (a failed check, an
# exception, meson's SIGTERM at the timeout), none is left running.
_live = []


def _reap():
    for d in _live:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


atexit.register(_reap)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


def skip(reason):
    print("SKIP:", reason)
    sys.exit(SKIP)


def fail(msg):
    # The daemons' logs tell why (a failure seen once under load must be
    # diagnosable from that one log).
    for d in _live:
        try:
            d.dump()
        except (OSError, ValueError):
            pass
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def binaries():
    d, c = os.environ.get("METAROCD"), os.environ.get("METAROCE_CTL")
    if not d or not os.access(d, os.X_OK):
        skip("METAROCD is not set to the metarocd binary")
    return d, c


class Daemon:
    def __init__(self, tmp, name, addrs, port=19791, extra_env=None, yaml_extra="",
                 sports="40000-59999", services_extra=""):
        self.name = name
        self.sock = os.path.join(tmp, name + ".sock")
        self.app_sock = os.path.join(tmp, name + ".app.sock")
        self.conf = os.path.join(tmp, name + ".yaml")
        self.logpath = os.path.join(tmp, name + ".log")
        self.addrs = addrs
        self.port = port
        planes = "".join(
            "  - name: p%d\n    address: \"%s\"\n    source_ports: %s\n" % (i, a, sports)
            for i, a in enumerate(addrs))
        with open(self.conf, "w") as f:
            # The tests run verified transfers with the PERF service, which
            # is off unless the configuration turns it on.
            f.write("service:\n  port: %d\n  control_socket: %s\n  control_group: \"\"\n"
                    "  app_socket: %s\n  app_group: \"\"\n"
                    "  state_db: %s\n  log_level: info\nservices:\n  perf: true\n%s"
                    "planes:\n%s%s"
                    % (port, self.sock, self.app_sock, os.path.join(tmp, name + ".db"),
                       services_extra, planes, yaml_extra))
        env = dict(os.environ)
        env.update(extra_env or {})
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen([binaries()[0], "-c", self.conf], stderr=self.log,
                                     stdout=self.log, env=env)
        _live.append(self)
        self.wait_ready()

    def wait_ready(self, timeout=20):
        t = time.time() + timeout
        while time.time() < t:
            if self.proc.poll() is not None:
                self.dump()
                fail("%s exited with %s at start" % (self.name, self.proc.returncode))
            try:
                if self.request("status")["ok"]:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        fail("%s not ready within %ds" % (self.name, timeout))

    def peer(self):
        a = self.addrs[0]
        return ("[%s]:%d" if ":" in a else "%s:%d") % (a, self.port)

    def request(self, cmd, args=None, timeout=120):
        return request(self.sock, cmd, args, timeout)

    def ok(self, cmd, args=None, timeout=120):
        r = self.request(cmd, args, timeout)
        if not r.get("ok"):
            fail("%s %s: %s" % (self.name, cmd, r))
        return r["result"]

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM; returns (exit code, seconds it took)."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            self.dump()
            fail("%s did not stop within %ds of SIGTERM" % (self.name, timeout))
        return rc, time.time() - t0

    def dump(self):
        if getattr(self, "_dumped", False):
            return
        self._dumped = True
        self.log.flush()
        with open(self.logpath) as f:
            sys.stdout.write("---- %s log ----\n%s\n" % (self.name, f.read()[-8000:]))


def request(path, cmd, args=None, timeout=120):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    r = {"v": 1, "id": 7, "cmd": cmd}
    if args is not None:
        r["args"] = args
    s.sendall((json.dumps(r) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(1 << 20)
        if not d:
            break
        buf += d
    s.close()
    return json.loads(buf)


def addr_base(seed):
    """Four fresh loopback addresses for two daemons of two planes each."""
    rnd = random.Random("%s-%d-%f" % (seed, os.getpid(), time.time()))
    b, c = rnd.randrange(1, 255), rnd.randrange(0, 250)
    return ["127.%d.%d.%d" % (b, c + i, rnd.randrange(1, 254)) for i in range(4)]


class Pair:
    """Two daemons, A and B, two planes each, on loopback."""

    def __init__(self, name, extra_env=None, yaml_extra=""):
        self.tmp = tempfile.TemporaryDirectory(prefix="mrd-" + name + "-")
        a = addr_base(name)
        self.a = Daemon(self.tmp.name, "a", a[0:2], extra_env=extra_env, yaml_extra=yaml_extra)
        self.b = Daemon(self.tmp.name, "b", a[2:4], extra_env=extra_env, yaml_extra=yaml_extra)

    def close(self, expect_clean=True):
        for d in (self.a, self.b):
            rc, secs = d.stop()
            if expect_clean and rc != 0:
                d.dump()
                fail("%s exited %d after SIGTERM" % (d.name, rc))
        self.tmp.cleanup()
