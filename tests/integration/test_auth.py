"""Authorization is the daemon's: a caller that is not root (nor the
daemon's uid) but is in the control group may read (status, show,
history, metrics) and is refused every command that changes state, with
the error code "permission". Needs root to run a daemon as root and a
client as nobody; exits 77 otherwise."""
import grp
import json
import os
import pwd
import shutil
import subprocess

import mrtest

_, ctl = mrtest.binaries()
if os.geteuid() != 0:
    mrtest.skip("needs root (a daemon as root, a client as nobody)")
setpriv = shutil.which("setpriv")
if not setpriv:
    mrtest.skip("setpriv (util-linux) is not installed")
try:
    nobody = pwd.getpwnam("nobody")
    group = grp.getgrgid(nobody.pw_gid).gr_name
except KeyError:
    mrtest.skip("no user nobody")


p = mrtest.Pair("auth")
# The control group is nobody's primary group; the directory of the socket
# must be reachable by nobody.
os.chmod(p.tmp.name, 0o755)
# Daemon() writes control_group "": give A the group and restart it.
p.a.stop()
with open(p.a.conf) as f:
    conf = f.read().replace('control_group: ""', 'control_group: "%s"' % group)
with open(p.a.conf, "w") as f:
    f.write(conf)
p.a.proc = subprocess.Popen([mrtest.binaries()[0], "-c", p.a.conf], stdout=p.a.log,
                            stderr=p.a.log)
p.a.wait_ready()

st = os.stat(p.a.sock)
mrtest.check(st.st_gid == nobody.pw_gid and (st.st_mode & 0o777) == 0o660,
             "socket mode 0660, group %s" % group)

AS_NOBODY = [setpriv, "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
             "--clear-groups"]
# A raw client as nobody, to see the error code itself.
CLIENT = r'''
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
for line in sys.stdin:
    s.sendall(line.encode())
    buf = b""
    while not buf.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        buf += d
    sys.stdout.write(buf.decode())
'''
reqs = [
    ("status", None), ("show planes", None), ("history events", {"since_s": 60}),
    ("metrics", None), ("plane drain", {"plane": "p0"}), ("plane undrain", {"plane": "p0"}),
    ("path steer", {"conn": "1", "path": 0, "port": 40000}),
    ("path disable", {"conn": "1", "path": 0}), ("path enable", {"conn": "1", "path": 0}),
    ("path reset", {"conn": "1", "path": 0}), ("drill plane", {"plane": "p0"}),
    ("drill cancel", None), ("perf", {"peer": p.b.peer()}), ("ping", {"peer": p.b.peer()}),
]
stdin = "".join(json.dumps({"v": 1, "id": i, "cmd": c, **({"args": a} if a else {})}) + "\n"
                for i, (c, a) in enumerate(reqs))
r = subprocess.run(AS_NOBODY + ["python3", "-c", CLIENT, p.a.sock], input=stdin,
                   capture_output=True, text=True, timeout=60)
mrtest.check(r.returncode == 0, "raw client as nobody ran (%s)" % r.stderr.strip()[-200:])
replies = {json.loads(l)["id"]: json.loads(l) for l in r.stdout.splitlines()}
for i, (c, _) in enumerate(reqs):
    rep = replies.get(i)
    if c in ("status", "show planes", "history events", "metrics"):
        mrtest.check(rep and rep["ok"], "nobody (group %s) may read: %s" % (group, c))
    else:
        mrtest.check(rep and not rep["ok"] and rep["error"]["code"] == "permission",
                     "nobody is refused: %s (%s)" % (c, rep and rep.get("error", {}).get("code")))

# Through the CLI: status works, drain fails with the daemon's message.
r = subprocess.run(AS_NOBODY + [ctl, "-s", p.a.sock, "status"], capture_output=True,
                   text=True, timeout=30)
mrtest.check(r.returncode == 0 and "instance_id" in r.stdout, "metaroce-ctl status as nobody")
r = subprocess.run(AS_NOBODY + [ctl, "-s", p.a.sock, "plane", "drain", "p0"],
                   capture_output=True, text=True, timeout=30)
mrtest.check(r.returncode == 1 and "changes state: root" in r.stderr,
             "metaroce-ctl plane drain as nobody: refused by the daemon")
planes = mrtest.request(p.a.sock, "show planes")["result"]
mrtest.check(all(x["admin_state"] == "in-service" for x in planes), "nothing was drained")
# Root may.
r = subprocess.run([ctl, "-s", p.a.sock, "plane", "drain", "p0"], capture_output=True,
                   text=True, timeout=30)
mrtest.check(r.returncode == 0, "root may drain")
p.close()
