"""sd_notify: READY=1 at start, WATCHDOG=1 at half of WATCHDOG_USEC,
RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM; both a path and
an abstract ('@') NOTIFY_SOCKET."""
import os
import signal
import socket
import tempfile
import time

import mrtest


def run(abstract):
    tmp = tempfile.TemporaryDirectory(prefix="mrd-notify-")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = "mrd-notify-%d-%f" % (os.getpid(), time.time())
        s.bind("\0" + name)
        env = "@" + name
    else:
        env = os.path.join(tmp.name, "notify")
        s.bind(env)
    s.settimeout(10)
    addrs = mrtest.addr_base("notify%d" % abstract)
    d = mrtest.Daemon(tmp.name, "n", addrs[0:1],
                      extra_env={"NOTIFY_SOCKET": env, "WATCHDOG_USEC": "200000"})
    msgs = []

    def wait_for(what, timeout=10):
        t = time.time() + timeout
        while time.time() < t:
            try:
                m = s.recv(4096).decode()
            except socket.timeout:
                break
            msgs.append(m)
            if what in m:
                return True
        return False

    mrtest.check(wait_for("READY=1"), "READY=1 (%s socket)" % ("abstract" if abstract else "path"))
    mrtest.check(wait_for("WATCHDOG=1", 2), "WATCHDOG=1")
    d.proc.send_signal(signal.SIGHUP)
    mrtest.check(wait_for("RELOADING=1"), "RELOADING=1 on SIGHUP")
    mrtest.check(any("MONOTONIC_USEC=" in m for m in msgs), "with MONOTONIC_USEC")
    mrtest.check(wait_for("READY=1"), "READY=1 after reload")
    d.proc.send_signal(signal.SIGTERM)
    mrtest.check(wait_for("STOPPING=1"), "STOPPING=1 on SIGTERM")
    mrtest.check(d.proc.wait(10) == 0, "exit 0")
    tmp.cleanup()


run(False)
run(True)
