"""The conformance suite (tools/conform) against our own daemon, and against
the deliberately non-conforming relay (badpeer.py) to prove that its cases
can fail.

    test_conform.py daemon        every case against metarocd: all pass,
                                  except the known findings (each must still
                                  fail: when one is fixed, this test says so)
    test_conform.py variants [W]  every variant, each through the relay in
                                  front of a daemon, W daemons side by side:
                                  exactly the cases of the broken rule fail
"""
import io
import json
import shutil
import os
import socket
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

import mrtest

CONFORM = os.environ.get("METAROCE_CONFORM")
BADPEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "badpeer.py")

# Cases our daemon fails today: findings against proto/SPEC.md. Each must
# keep failing until it is fixed; then its line goes. (The four this suite
# found first -- write.zero-length, order.malformed-first,
# order.rkey-before-rnr, close.reason -- are fixed in proto/conn.c.)
KNOWN_FINDINGS = {
}
# Cases our daemon cannot be asked to fail: no service exposes such a region.
EXPECTED_SKIPS = {"nak.access"}

# variant of badpeer.py -> the cases that check the rule it breaks (and, in
# CAUSED_SKIPS, the cases that cannot run once that rule is broken)
CAUSED_SKIPS = {"no-close-reply": {"close.reason", "close.tombstone"},
                "retry-cookie-dropped": {"acceptor.confirm"},
                "connect-version-outside": {"acceptor.retry", "acceptor.confirm"}}
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
                      "order.rkey-before-rnr", "read.not-negotiated", "read.access"},
    "reserved-ignored": {"malformed.reserved"},
    "place-corrupt": {"place.write-ooo"},
    "path-range-ignored": {"probe.path-range"},
    "nak-echo-wrong": {"noconn.nak"},
    "src-conn-ignored": {"token.src-conn"},
    "tombstone-silent": {"close.tombstone"},
    "reply-closes": {"close.unsolicited-reply"},
    "no-service-refused": {"reject.no-service"},
    "version-range-ignored": {"version.range"},
    "gen-ignored": {"path.generation", "path.report"},
    "opcode-lenient": {"malformed.opcode"},
    "probe-gen-zero": {"probe.generation"},
    "accept-service-wrong": {"handshake.accept"},
    "version-choose-reject": {"version.choose"},
    "noconn-answered": {"noconn.silent"},
    "version-lenient": {"malformed.version"},
    "flags-lenient": {"malformed.flags"},
    "length-lenient": {"malformed.length"},
    "range-lenient": {"malformed.range"},
    "truncated-padded": {"malformed.truncated"},
    "retry-service-wrong": {"handshake.retry"},
    "retry-required-resources": {"handshake.retry-required"},
    "zero-write-checked": {"write.zero-length"},
    "close-reason-normal": {"close.reason"},
}
# The relay in front of the daemon as initiator; only the acceptor cases run.
ACCEPTOR_VARIANTS = {
    "none": set(),
    "retry-cookie-dropped": {"acceptor.retry"},
    "no-confirm": {"acceptor.confirm"},
    "connect-version-outside": {"acceptor.connect"},
}


class ConformError(Exception):
    pass


def run_conform(args, out=sys.stdout, timeout=150):
    # A generous answer timeout: a loaded machine can stall the daemon for
    # hundreds of milliseconds; only the waits for an answer that must come
    # get longer (a case that checks for silence has its own short window).
    cmd = [CONFORM, "--json", "-", "--wait", "1000"] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    out.write(r.stderr)  # the text report
    if r.returncode not in (0, 1):
        raise ConformError("%s exited %d" % (" ".join(cmd), r.returncode))
    j = json.loads(r.stdout)
    res = {c["name"]: c["result"] for c in j["cases"]}
    if (r.returncode == 1) != any(v == "fail" for v in res.values()):
        raise ConformError("exit status %d disagrees with the results" % r.returncode)
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
            raise ConformError("badpeer.py %s did not start" % variant)
        self.port = int(line[1])

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def fails(res):
    return {k for k, v in res.items() if v == "fail"}


def test_docs_and_link():
    """docs/conformance.md lists every case and every variant of the relay;
    the tool links the codec and nothing else of the engine."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "conformance.md")) as f:
        doc = f.read()
    names = [l.split()[0] for l in subprocess.run([CONFORM, "--list"], stdout=subprocess.PIPE,
                                                   text=True, check=True).stdout.splitlines()]
    missing = [n for n in names if "| `%s` |" % n not in doc]
    mrtest.check(not missing, "docs/conformance.md lists all %d cases (missing: %s)"
                 % (len(names), ", ".join(missing)))
    import badpeer
    missing = [v for v in badpeer.VARIANTS if "| `%s`" % v not in doc]
    mrtest.check(not missing, "docs/conformance.md lists all %d relay variants (missing: %s)"
                 % (len(badpeer.VARIANTS), ", ".join(missing)))
    both = set(INITIATOR_VARIANTS) | set(ACCEPTOR_VARIANTS)
    mrtest.check(both == set(badpeer.VARIANTS), "every relay variant has an expectation")
    if shutil.which("nm"):
        syms = subprocess.run(["nm", CONFORM], stdout=subprocess.PIPE, text=True).stdout
        engine = [l.split()[-1] for l in syms.splitlines()
                  if " T mrp_" in l and not l.split()[-1].startswith(
                      ("mrp_pkt_", "mrp_hdr_", "mrp_data_hdr_", "mrp_op_", "mrp_str", "mrp_err"))]
        mrtest.check(not engine, "metaroce-conform links only the codec of proto/ (%s)"
                     % ", ".join(engine))


def test_daemon(d, a):
    ctl = os.environ["METAROCE_CTL"]
    junit = os.path.join(os.path.dirname(d.sock), "conform.xml")
    res = run_conform(["--bind", a[1], "--status-cmd", "%s -s %s -j status" % (ctl, d.sock),
                       "--trigger", "%s -s %s ping %%a" % (ctl, d.sock), "--junit", junit,
                       d.peer()])
    mrtest.check(len(res) >= 45, "%d cases ran" % len(res))
    suite = ET.parse(junit).getroot()
    jfail = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    mrtest.check(len(list(suite.iter("testcase"))) == len(res) and jfail == fails(res)
                 and int(suite.get("failures")) == len(jfail),
                 "the JUnit report agrees with the JSON one")
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


def run_variant(d, a, side, variant, expect, out):
    """One variant through a fresh relay; returns [(ok, message)]."""
    ctl = os.environ["METAROCE_CTL"]
    checks = []
    if side == "initiator":
        relay = Relay(variant, a[2], "%s:%d" % (a[0], d.port))
        try:
            res = run_conform(["--bind", a[1], "--status-cmd", "%s -s %s -j status"
                               % (ctl, d.sock), "--case", "[!a]*",
                               "%s:%d" % (a[2], relay.port)], out, 90)
        finally:
            relay.close()
        # The relay changes nothing else, so the daemon's own findings fail
        # in every variant too, unless the broken rule stops them.
        caused = CAUSED_SKIPS.get(variant, set())
        expect = expect | (set(KNOWN_FINDINGS) - caused)
        want_skips = EXPECTED_SKIPS | caused
    else:
        tport = free_port(a[1])
        relay = Relay(variant, a[2], "%s:%d" % (a[1], tport))
        try:
            res = run_conform(["--bind", "%s:%d" % (a[1], tport), "--case", "acceptor.*",
                               "--trigger", "%s -s %s ping %s:%d" % (ctl, d.sock, a[2],
                                                                    relay.port),
                               d.peer()], out, 90)
        finally:
            relay.close()
        want_skips = CAUSED_SKIPS.get(variant, set())
    got = fails(res)
    skips = {k for k, v in res.items() if v == "skip"}
    checks.append((got == expect, "%s variant %s: failing cases %s == expected %s"
                   % (side, variant, sorted(got), sorted(expect))))
    checks.append((skips == want_skips, "%s variant %s: skipped %s == expected %s"
                   % (side, variant, sorted(skips), sorted(want_skips))))
    return checks


def test_variants(tmp, workers):
    """Every variant, spread over `workers` daemons that run side by side
    (the cases mostly wait: this keeps the suite's wall time short). Each
    daemon serves one variant at a time, so its drop counters see only
    that variant's packets."""
    jobs = [("initiator", v, e) for v, e in INITIATOR_VARIANTS.items()] + \
           [("acceptor", v, e) for v, e in ACCEPTOR_VARIANTS.items()]
    envs = []
    for w in range(workers):
        a = mrtest.addr_base("conform-variants-%d" % w)
        envs.append((mrtest.Daemon(tmp, "w%d" % w, [a[0]], port=19791), a))
    results = [[] for _ in range(workers)]
    outs = [io.StringIO() for _ in range(workers)]
    lock = threading.Lock()

    def work(w):
        d, a = envs[w]
        for i, (side, variant, expect) in enumerate(jobs):
            if i % workers != w:
                continue
            outs[w].write("==== %s variant %s (daemon w%d)\n" % (side, variant, w))
            try:
                r = run_variant(d, a, side, variant, expect, outs[w])
            except (ConformError, subprocess.TimeoutExpired, ValueError) as e:
                r = [(False, "%s variant %s: %s" % (side, variant, e))]
            results[w] += r
            with lock:  # progress, in case the whole test times out
                for ok, m in r:
                    print("ok:" if ok else "FAIL:", m, flush=True)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in range(workers):
        sys.stdout.write(outs[w].getvalue())
    bad = [m for r in results for ok, m in r if not ok]
    mrtest.check(not bad, "every variant fails exactly its rule's cases (%d checks, %d bad)"
                 % (sum(len(r) for r in results), len(bad)))
    mrtest.check(sum(len(r) for r in results) == 2 * len(jobs), "all %d variants ran"
                 % len(jobs))
    for d, _ in envs:
        mrtest.check(d.alive() and d.request("status").get("ok"), "%s lives" % d.name)
        rc, _ = d.stop()
        mrtest.check(rc == 0, "%s exits 0 on SIGTERM" % d.name)


def main():
    if not CONFORM or not os.access(CONFORM, os.X_OK):
        mrtest.skip("METAROCE_CONFORM is not set to the metaroce-conform binary")
    mrtest.binaries()
    mode = sys.argv[1] if len(sys.argv) > 1 else "daemon"
    tmp = tempfile.TemporaryDirectory(prefix="mrd-conform-")
    if mode == "daemon":
        test_docs_and_link()
        a = mrtest.addr_base("conform-daemon")
        d = mrtest.Daemon(tmp.name, "t", [a[0]], port=19791)
        test_daemon(d, a)
        rc, _ = d.stop()
        mrtest.check(rc == 0, "the daemon exits 0 on SIGTERM")
    else:
        test_variants(tmp.name, int(sys.argv[2]) if len(sys.argv) > 2 else 4)
    tmp.cleanup()


if __name__ == "__main__":
    main()
