"""metaroce-ctl: every command, text and -j, exit codes."""
import json
import os
import subprocess

import mrtest

_, ctl = mrtest.binaries()
if not ctl or not os.access(ctl, os.X_OK):
    mrtest.skip("METAROCE_CTL is not set")
p = mrtest.Pair("cli")


def run(*args, sock=None):
    r = subprocess.run([ctl, "-s", sock or p.a.sock] + list(args), capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


rc, out, err = run("status")
mrtest.check(rc == 0 and "instance_id" in out, "status")
rc, out, _ = run("-j", "status")
mrtest.check(rc == 0 and json.loads(out)["planes"] == 2, "status -j")
rc, out, _ = run("show", "planes")
mrtest.check(rc == 0 and out.splitlines()[0].split()[:3] == ["#", "NAME", "ADDRESS"] and
             len(out.splitlines()) == 3, "show planes table")
rc, out, _ = run("ping", p.b.peer(), "-c", "2")
mrtest.check(rc == 0 and "rtt min/avg/max" in out, "ping")
rc, out, _ = run("-j", "perf", p.b.peer(), "--seconds", "1")
mrtest.check(rc == 0 and json.loads(out)["verified"], "perf -j")
rc, out, _ = run("perf", p.b.peer(), "--seconds", "1")
mrtest.check(rc == 0 and "goodput" in out and "OK" in out, "perf text")
for cmd in (["show", "peers"], ["show", "conns"], ["show", "paths"], ["-j", "show", "paths"]):
    rc, out, _ = run(*cmd)
    mrtest.check(rc == 0, " ".join(cmd))
rc, _, err = run("show", "paths", "--conn", "deadbeef")
mrtest.check(rc == 1 and "no connection" in err, "unknown conn: exit 1, message on stderr")
rc, _, err = run("frob")
mrtest.check(rc == 2 and "unknown command" in err, "unknown command: exit 2")
rc, _, err = run("perf")
mrtest.check(rc == 2, "perf without peer: exit 2")
rc, _, err = run("status", sock="/nonexistent/x.sock")
mrtest.check(rc == 3 and "cannot reach" in err, "no daemon: exit 3")
p.close()
