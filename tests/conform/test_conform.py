"""The conformance suite (tools/conform) against our own daemon, and against
the deliberately non-conforming relay (badpeer.py) to prove that its cases
can fail.

    test_conform.py daemon        every case against metarocd: all pass,
                                  except the known findings (each must still
                                  fail: when one is fixed, this test says so)
    test_conform.py variants N/M  the variants of slice N of M, each through
                                  the relay in front of a fresh daemon:
                                  exactly the cases of the broken rule fail
"""
import json
import os
import socket
import subprocess
import sys
import tempfile

import mrtest

CONFORM = os.environ.get("METAROCE_CONFORM")
BADPEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "badpeer.py")

# Cases our daemon fails today: findings against proto/SPEC.md, reported to
# the owners of proto/conn.c. Each must keep failing until it is fixed; then
# its line goes.
KNOWN_FINDINGS = {
    "write.zero-length": "SPEC 5.3: the engine resolves the rkey of a zero-length WRITE "
                         "and NAKs it INVALID_RKEY (rx_place, fast path too)",
    "order.malformed-first": "SPEC 5.5: the engine checks the stream (UNKNOWN_STREAM) "
                             "before payload_len > MTU (MALFORMED, check 1)",
    "order.rkey-before-rnr": "SPEC 5.5: for WRITE_IMM the engine looks up the receive "
                             "(RNR, check 7) before the rkey (check 6)",
    "close.reason": "SPEC 11.2: the engine's CLOSE reply always carries NORMAL, not the "
                    "CLOSE's reason",
}
# Cases our daemon cannot be asked to fail: no service exposes such a region.
EXPECTED_SKIPS = {"nak.access"}

# variant of badpeer.py -> the cases that check the rule it breaks (and, in
# CAUSED_SKIPS, the cases that cannot run once that rule is broken)
CAUSED_SKIPS = {"no-close-reply": {"close.reason", "close.tombstone"},
                "retry-cookie-dropped": {"acceptor.confirm"}}
INITIATOR_VARIANTS = {
    "none": set(),
    "no-version-reject": {"version.reject"},
    "echo-unknown-caps": {"caps.unknown"},
    "accept-forged-token": {"token.forged", "order.token-first"},
    "probe-ts": {"probe.answer"},
    "sack-bit-order": {"sack.gap", "sack.duplicate", "sack.retransmit"},
    "ce-blind": {"ecn.echo"},
    "no-close-reply": {"close.graceful"},
    "reset-answered": {"reset.abort"},
    "nak-wrong-psn": {"nak.invalid-rkey", "nak.out-of-bounds", "nak.rnr",
                      "nak.unknown-stream", "nak.malformed", "nak.malformed-path",
                      "order.malformed-first", "order.stream-before-rkey",
                      "order.rkey-before-rnr"},
    "reserved-ignored": {"malformed.reserved"},
    "place-corrupt": {"place.write-ooo"},
    "path-range-ignored": {"probe.path-range"},
    "nak-echo-wrong": {"noconn.nak"},
    "src-conn-ignored": {"token.src-conn"},
    "tombstone-silent": {"close.tombstone"},
    "reply-closes": {"close.unsolicited-reply"},
}
# The relay in front of the daemon as initiator; only the acceptor cases run.
ACCEPTOR_VARIANTS = {
    "none": set(),
    "retry-cookie-dropped": {"acceptor.retry"},
    "no-confirm": {"acceptor.confirm"},
}


def run_conform(args):
    cmd = [CONFORM, "--json", "-"] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=240)
    if r.returncode not in (0, 1):
        print(r.stderr)
        mrtest.fail("%s exited %d" % (" ".join(cmd), r.returncode))
    sys.stdout.write(r.stderr)  # the text report
    j = json.loads(r.stdout)
    res = {c["name"]: c["result"] for c in j["cases"]}
    mrtest.check((r.returncode == 1) == any(v == "fail" for v in res.values()),
                 "exit status %d agrees with the results" % r.returncode)
    return res


def free_port(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Relay:
    def __init__(self, variant, listen_host, target):
        self.p = subprocess.Popen([sys.executable, BADPEER, variant, listen_host + ":0",
                                   target], stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            self.close()
            mrtest.fail("badpeer.py %s did not start" % variant)
        self.port = int(line[1])

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def fails(res):
    return {k for k, v in res.items() if v == "fail"}


def test_daemon(d, a):
    ctl = os.environ["METAROCE_CTL"]
    res = run_conform(["--bind", a[1], "--status-cmd", "%s -s %s -j status" % (ctl, d.sock),
                       "--trigger", "%s -s %s ping %%a" % (ctl, d.sock), d.peer()])
    mrtest.check(len(res) >= 45, "%d cases ran" % len(res))
    for name, why in sorted(KNOWN_FINDINGS.items()):
        mrtest.check(res.get(name) == "fail",
                     "known finding still fails: %s (%s); if fixed, remove it from "
                     "KNOWN_FINDINGS" % (name, why))
    unexpected = fails(res) - set(KNOWN_FINDINGS)
    mrtest.check(not unexpected, "no other case fails against the daemon (%s)"
                 % ", ".join(sorted(unexpected)))
    skips = {k for k, v in res.items() if v == "skip"}
    mrtest.check(skips == EXPECTED_SKIPS, "skipped exactly %s (got %s)"
                 % (sorted(EXPECTED_SKIPS), sorted(skips)))
    mrtest.check(d.alive() and d.request("status").get("ok"), "the daemon lives")


def test_variants(d, a, part, parts):
    ctl = os.environ["METAROCE_CTL"]
    status = "%s -s %s -j status" % (ctl, d.sock)
    jobs = [("initiator", v, e) for v, e in INITIATOR_VARIANTS.items()] + \
           [("acceptor", v, e) for v, e in ACCEPTOR_VARIANTS.items()]
    mine = [j for i, j in enumerate(jobs) if i % parts == part]
    for side, variant, expect in mine:
        if side == "initiator":
            relay = Relay(variant, a[2], "%s:%d" % (a[0], d.port))
            res = run_conform(["--bind", a[1], "--status-cmd", status,
                               "--case", "[!a]*", "%s:%d" % (a[2], relay.port)])
            # The relay changes nothing else, so the daemon's own findings
            # fail in every variant too, unless the broken rule stops them.
            caused = CAUSED_SKIPS.get(variant, set())
            expect = expect | (set(KNOWN_FINDINGS) - caused)
            skips = {k for k, v in res.items() if v == "skip"}
            mrtest.check(skips == EXPECTED_SKIPS | caused, "initiator variant %s: skipped "
                         "%s" % (variant, sorted(skips)))
        else:
            tport = free_port(a[1])
            relay = Relay(variant, a[2], "%s:%d" % (a[1], tport))
            res = run_conform(["--bind", "%s:%d" % (a[1], tport), "--case", "acceptor.*",
                               "--trigger", "%s -s %s ping %s:%d" % (ctl, d.sock, a[2],
                                                                    relay.port),
                               d.peer()])
            skips = {k for k, v in res.items() if v == "skip"}
            mrtest.check(skips == CAUSED_SKIPS.get(variant, set()),
                         "acceptor variant %s: skipped %s" % (variant, sorted(skips)))
        relay.close()
        got = fails(res)
        mrtest.check(got == expect, "%s variant %s: failing cases %s == expected %s"
                     % (side, variant, sorted(got), sorted(expect)))
        ran = {k for k, v in res.items() if v != "skip"}
        mrtest.check(expect <= ran, "%s variant %s: every expected case ran" % (side, variant))
    mrtest.check(d.alive() and d.request("status").get("ok"), "the daemon lives")


def main():
    if not CONFORM or not os.access(CONFORM, os.X_OK):
        mrtest.skip("METAROCE_CONFORM is not set to the metaroce-conform binary")
    mrtest.binaries()
    mode = sys.argv[1] if len(sys.argv) > 1 else "daemon"
    tmp = tempfile.TemporaryDirectory(prefix="mrd-conform-")
    a = mrtest.addr_base("conform-" + mode + "".join(sys.argv[2:]))
    d = mrtest.Daemon(tmp.name, "t", [a[0]], port=19791)
    if mode == "daemon":
        test_daemon(d, a)
    else:
        part, parts = (int(x) for x in sys.argv[2].split("/"))
        test_variants(d, a, part, parts)
    rc, _ = d.stop()
    mrtest.check(rc == 0, "the daemon exits 0 on SIGTERM")
    tmp.cleanup()


if __name__ == "__main__":
    main()
