"""A drill with --link: the daemon sets the plane's interface down through
rtnetlink and up again. In a private network namespace (two veth pairs, one
per plane) with two daemons; root only (exits 77 otherwise). Checks the
netlink detection, the link being up again afterwards, zero lost or
duplicated completions, and that a daemon killed during a link drill sets
the link up again at its next start."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import mrtest

daemon, ctl = mrtest.binaries()
if os.geteuid() != 0:
    mrtest.skip("needs root (network namespaces, links set down)")
if not shutil.which("ip"):
    mrtest.skip("iproute2 (ip) is not installed")
ns = "mrdlink%d" % os.getpid()
if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
    mrtest.skip("cannot create a network namespace")
tmp = tempfile.TemporaryDirectory(prefix="mrd-link-")
procs = []


def sh(*cmd):
    r = subprocess.run(["ip", "netns", "exec", ns] + list(cmd), capture_output=True, text=True)
    if r.returncode != 0:
        cleanup()
        mrtest.fail("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def link_up(dev):
    return ",UP" in sh("ip", "-o", "link", "show", dev) or "<UP" in sh("ip", "-o", "link",
                                                                       "show", dev)


try:
    sh("ip", "link", "set", "lo", "up")
    for i in (0, 1):
        sh("ip", "link", "add", "a%d" % i, "type", "veth", "peer", "name", "b%d" % i)
        sh("ip", "addr", "add", "10.99.%d.1/24" % i, "dev", "a%d" % i)
        sh("ip", "addr", "add", "10.99.%d.2/24" % i, "dev", "b%d" % i)
        sh("ip", "link", "set", "a%d" % i, "up")
        sh("ip", "link", "set", "b%d" % i, "up")

    def start(name):
        conf = os.path.join(tmp.name, name + ".yaml")
        sock = os.path.join(tmp.name, name + ".sock")
        host = 1 if name == "a" else 2
        dev = "a" if name == "a" else "b"
        with open(conf, "w") as f:
            f.write("service:\n  control_socket: %s\n  control_group: \"\"\n"
                    "  app_socket: %s.app\n"
                    "  state_db: %s\nservices:\n  perf: true\nplanes:\n"
                    % (sock, sock, os.path.join(tmp.name, name + ".db")))
            for i in (0, 1):
                f.write("  - name: p%d\n    interface: %s%d\n    address: \"10.99.%d.%d\"\n"
                        "    mtu: 1400\n" % (i, dev, i, i, host))
        log = open(os.path.join(tmp.name, name + ".log"), "a")
        p = subprocess.Popen(["ip", "netns", "exec", ns, daemon, "-c", conf], stdout=log,
                             stderr=log)
        procs.append(p)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if mrtest.request(sock, "status")["ok"]:
                    return p, sock
            except OSError:
                pass
            time.sleep(0.05)
        cleanup()
        mrtest.fail("daemon %s did not start" % name)

    pa, sa = start("a")
    pb, sb = start("b")

    r = subprocess.run([ctl, "-s", sa, "-j", "drill", "plane", "p0", "--peer",
                        "10.99.1.2:19791", "--duration", "2s", "--link"],
                       capture_output=True, text=True, timeout=90)
    mrtest.check(r.returncode == 0, "drill --link of p0: exit 0 (%s)" % r.stderr.strip()[-300:])
    rep = json.loads(r.stdout)
    mrtest.check(rep["action"] == "link" and rep["interface"] == "a0" and rep["pass"] and
                 rep["restored"], "report: link drill of a0, passed, restored")
    mrtest.check(rep["detection_ms"] is not None and rep["detection_ms"] < 100,
                 "detection through netlink: %s ms" % rep["detection_ms"])
    perf = rep["perf"]
    mrtest.check(perf["verified"] and perf["lost_completions"] == 0 and
                 perf["duplicated_completions"] == 0 and perf["verify_errors"] == 0,
                 "%d completions, none lost or duplicated" % perf["completions"])
    mrtest.check(link_up("a0"), "a0 is up again")
    ev = mrtest.request(sa, "history events", {"since_s": 600})["result"]["rows"]
    kinds = [(e["kind"], e["plane"]) for e in ev]
    mrtest.check(("plane.down", "p0") in kinds and ("plane.up", "p0") in kinds,
                 "plane.down and plane.up of p0 logged")

    # kill -9 during a link drill: the next start sets the link up.
    d = subprocess.Popen([ctl, "-s", sa, "drill", "plane", "p1", "--duration", "60s",
                          "--link"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while time.time() < deadline and link_up("a1"):
        time.sleep(0.02)
    mrtest.check(not link_up("a1"), "a1 is down during the drill")
    pa.send_signal(signal.SIGKILL)
    pa.wait()
    d.communicate(timeout=20)
    mrtest.check(not link_up("a1"), "still down after the daemon was killed")
    pa, sa = start("a")
    deadline = time.time() + 5
    while time.time() < deadline and not link_up("a1"):
        time.sleep(0.02)
    mrtest.check(link_up("a1"), "the restarted daemon set a1 up again")
    h = mrtest.request(sa, "history drills", {"since_s": 600})["result"]["rows"]
    mrtest.check(h[-1]["report"]["state"] == "interrupted" and
                 "a1 up again: ok" in h[-1]["report"]["restored_at_start"],
                 "the interrupted drill is closed: %s" % h[-1]["report"]["restored_at_start"])
    for p in (pa, pb):
        p.send_signal(signal.SIGTERM)
        mrtest.check(p.wait(10) == 0, "daemon stops cleanly")
finally:
    cleanup()
    tmp.cleanup()
