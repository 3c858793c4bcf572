"""Malformed control requests get error replies; the daemon keeps serving."""
import json
import socket

import mrtest

p = mrtest.Pair("ctl")
a = p.a
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(a.sock)
f = s.makefile("rb")


def ask(raw):
    s.sendall(raw)
    line = f.readline()
    if not line:
        mrtest.fail("connection closed after %r" % raw[:40])
    return json.loads(line)


r = ask(b"this is not json\n")
mrtest.check(not r["ok"] and r["error"]["code"] == "parse", "not JSON -> parse error")
r = ask(b'{"v":1,"cmd":' + b'"x' * 40000 + b'"}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "too_large", "oversized -> too_large")
r = ask(b'{"v":1,"id":3,"cmd":"frobnicate"}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "unknown_command" and r["id"] == 3,
             "unknown command, id echoed")
r = ask(b'{"v":2,"cmd":"status"}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "version", "wrong version")
r = ask(b'[1,2,3]\n')
mrtest.check(not r["ok"], "array refused")
r = ask(b'{"v":1,"cmd":"show paths","args":[]}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "bad_request", "args not an object")
r = ask(b'{"v":1,"cmd":"perf","args":{"peer":"not an address"}}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "failed", "bad peer refused")
r = ask(b'{"v":1,"cmd":"perf","args":{"peer":"127.0.0.1","seconds":"x"}}\n')
mrtest.check(not r["ok"] and r["error"]["code"] == "bad_request", "bad perf args")
r = ask(b'{"v":1,"cmd":"status"}\n')
mrtest.check(r["ok"], "same connection still served")
# Binary garbage and an unterminated request on a connection that then closes.
s2 = socket.socket(socket.AF_UNIX)
s2.connect(a.sock)
s2.sendall(bytes(range(256)) * 300)
s2.close()
mrtest.check(a.ok("status")["counters"]["ctl_errors"] >= 9, "errors counted")
mrtest.check(a.alive(), "daemon alive")
s.close()
p.close()
