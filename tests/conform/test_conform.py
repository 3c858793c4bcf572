"""The conformance suite (tools/conform) against our own daemon, and against
the deliberately non-conforming relay (badpeer.py) to prove that its cases
can fail.

    test_conform.py daemon        every case against metarocd: all pass,
                                  except the known findings (each must still
                                  fail: when one is fixed, this test says so)
    test_conform.py ipv6          every case against metarocd on ::1 (77
                                  when the host has no IPv6 loopback)
    test_conform.py variants [W]  every variant, each through the relay in
                                  front of a daemon, W daemons side by side:
                                  exactly the cases of the broken rule fail
"""
import io
import json
import shutil
import os
import signal
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
# order.rkey-before-rnr, close.reason -- are fixed in proto/conn.c, and so
# are the five of the CLOSE and RESET reasons: reset.retry-exceeded,
# reset.rnr-exceeded, reset.dead-peer, close.shutdown, close.app-exit.)
# name -> (what the daemon does, a piece of the case's detail that shows it
# still fails that way).
KNOWN_FINDINGS = {}
# reject.refused runs against a second daemon that refuses the tool
# (REFUSED_CASES), since this one must serve it. (nak.access runs against the
# region of roregion.c, an application of the daemon.)
EXPECTED_SKIPS = {"reject.refused"}
# These make an application of the daemon exit (--app-exit) or stop the
# daemon (--stop-cmd): they run against the daemon of the `daemon` test and,
# through the relay, against a daemon of their own.
STOP_CASES = {"close.app-exit", "close.shutdown", "close.simultaneous"}
# These wait seconds for the target to give up; through the relay they run
# only in the variants of their rules and in `none`.
SLOW_CASES = {"reset.retry-exceeded", "reset.rnr-exceeded", "reset.dead-peer",
              "restart.challenge", "restart.unanswered"}
# The SPEC's retry budget (8.1) on our daemon ends by about 2 s, the restart
# challenge (9.6) by 2.5 s; the slack is for a loaded machine.
WAITS = ["--end-wait", "5000", "--challenge-wait", "3500"]
RO_SERVICE = "524f4d52"  # "ROMR": roregion.c's service
REFUSED_CASES = ["reject.refused", "reject.no-service"]
# The daemon that refuses the tool: ECHO answers only a peer nobody is.
REFUSING = "  echo_peers: \"192.0.2.1\"\n"
ECHO = "4543484f"

# variant of badpeer.py -> the cases that check the rule it breaks (and, in
# CAUSED_SKIPS, the cases that cannot run once that rule is broken)
CAUSED_SKIPS = {"no-close-reply": {"close.reason", "close.tombstone"},
                "ends-silent": {"close.simultaneous"},
                "retry-cookie-dropped": {"acceptor.confirm", "acceptor.retry-limit"},
                "connect-version-outside": {"acceptor.retry", "acceptor.confirm"}}
INITIATOR_VARIANTS = {
    "none": set(),
    "no-version-reject": {"version.reject"},
    "echo-unknown-caps": {"caps.unknown"},
    "accept-forged-token": {"token.forged", "order.token-first"},
    "probe-ts": {"probe.answer"},
    "sack-bit-order": {"sack.gap", "sack.duplicate", "sack.retransmit"},
    "ce-blind": {"ecn.echo"},
    "no-close-reply": {"close.graceful", "close.drain"},
    "reset-answered": {"reset.abort"},
    "nak-wrong-psn": {"nak.access", "nak.invalid-rkey", "nak.out-of-bounds", "nak.rnr",
                      "nak.unknown-stream", "nak.malformed", "nak.malformed-path",
                      "order.malformed-first", "order.stream-before-rkey",
                      "order.rkey-before-rnr", "read.not-negotiated", "read.access",
                      "nak.send-bounds"},
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
    "resources-refused": {"reject.resources"},
    "no-delayed-ack": {"sack.timer"},
    "close-no-drain": {"close.drain"},
    "access-as-rkey": {"nak.access", "read.access"},
    "not-ect": {"ecn.ect0"},
    "held-dropped": {"flags.held"},
    "nak-unlimited": {"noconn.rate-limit"},
    "nak-reserved": {"wire.well-formed"},
    "wrap-placed": {"malformed.wrap"},
    "data-lenient": {"malformed.data"},
    "no-pair-accepted": {"plane.no-pair"},
    "planes-crossed": {"plane.paths"},
    "send-bounds-rnr": {"nak.send-bounds"},
    "retry-reset-dropped": {"reset.retry-exceeded", "reset.rnr-exceeded", "reset.dead-peer"},
    "retry-reason-protocol": {"reset.retry-exceeded", "reset.rnr-exceeded", "reset.dead-peer"},
    "challenge-ignored": {"restart.unanswered"},
    "challenge-kills": {"restart.challenge"},
}
# The relay in front of a daemon of its own, which the tool stops; only
# STOP_CASES run.
SHUTDOWN_VARIANTS = {
    "none": set(),
    "ends-silent": {"close.shutdown", "close.app-exit"},
    "shutdown-reason-app": {"close.shutdown"},
    "app-exit-reason-shutdown": {"close.app-exit"},
    "simultaneous-no-reply": {"close.simultaneous"},
}
# variant -> {case: a piece of its fail detail}: the case fails for the
# variant's reason (this is what tells a variant's failure from a known
# finding of the same case).
VARIANT_DETAILS = {
    "retry-reset-dropped": {"reset.retry-exceeded": "no RESET",
                            "reset.rnr-exceeded": "no RESET",
                            "reset.dead-peer": "no RESET"},
    "retry-reason-protocol": {"reset.retry-exceeded": "got RESET reason PROTOCOL (5)",
                              "reset.rnr-exceeded": "got RESET reason PROTOCOL (5)",
                              "reset.dead-peer": "got RESET reason PROTOCOL (5)"},
    "ends-silent": {"close.shutdown": "neither CLOSE nor RESET",
                    "close.app-exit": "neither CLOSE nor RESET"},
    "shutdown-reason-app": {"close.shutdown": "reason APP_EXIT (1)"},
    "app-exit-reason-shutdown": {"close.app-exit": "reason SHUTDOWN (2)"},
    "simultaneous-no-reply": {"close.simultaneous": "got no CLOSE REPLY"},
    "challenge-ignored": {"restart.unanswered": "still answers a PROBE"},
    "challenge-kills": {"restart.challenge": "answers no PROBE"},
}
# The relay in front of the daemon that refuses the tool; only REFUSED_CASES run.
REFUSED_VARIANTS = {
    "none": set(),
    "refused-no-service": {"reject.refused"},
}
# The relay in front of the daemon as initiator; only the acceptor cases run.
ACCEPTOR_VARIANTS = {
    "none": set(),
    "retry-cookie-dropped": {"acceptor.retry"},
    "no-confirm": {"acceptor.confirm"},
    "connect-version-outside": {"acceptor.connect"},
    "reject-ignored": {"acceptor.reject"},
    "reject-forged-accepted": {"acceptor.reject-forged"},
    "retry-unlimited": {"acceptor.retry-limit"},
    "accept-unchecked": {"acceptor.bad-accept"},
}


class ConformError(Exception):
    pass


def run_conform(args, out=sys.stdout, timeout=150, details=None):
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
    if details is not None:
        details.update({c["name"]: c["detail"] for c in j["cases"]})
    if (r.returncode == 1) != any(v == "fail" for v in res.values()):
        raise ConformError("exit status %d disagrees with the results" % r.returncode)
    return res


def free_port(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


class RoRegion:
    """roregion.c attached to daemon d: a region without remote write."""

    def __init__(self, d):
        env = dict(os.environ)
        env["METAROCE_APP_SOCKET"] = d.app_sock
        self.p = subprocess.Popen([os.environ["CONFORM_ROREGION"], RO_SERVICE],
                                  stdout=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            self.close()
            raise ConformError("roregion did not start (%s)" % line)
        self.arg = line[1]

    def close(self):
        """Stops it; returns its exit status (None: it was running, as it
        should be: it exits on its own only when its region was written)."""
        rc = self.p.poll()
        if rc is None:
            self.p.kill()
        self.p.wait()
        return rc


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
    both = set(INITIATOR_VARIANTS) | set(ACCEPTOR_VARIANTS) | set(REFUSED_VARIANTS) | \
        set(SHUTDOWN_VARIANTS)
    mrtest.check(both == set(badpeer.VARIANTS), "every relay variant has an expectation")
    if shutil.which("nm"):
        syms = subprocess.run(["nm", CONFORM], stdout=subprocess.PIPE, text=True).stdout
        engine = [l.split()[-1] for l in syms.splitlines()
                  if " T mrp_" in l and not l.split()[-1].startswith(
                      ("mrp_pkt_", "mrp_hdr_", "mrp_data_hdr_", "mrp_op_", "mrp_str", "mrp_err",
                       "mrp_admit_"))]  # (wire.c: the ACCEPT admit field's scale)
        mrtest.check(not engine, "metaroce-conform links only the codec of proto/ (%s)"
                     % ", ".join(engine))


def test_daemon(d, a):
    ctl = os.environ["METAROCE_CTL"]
    junit = os.path.join(os.path.dirname(d.sock), "conform.xml")
    ro = RoRegion(d)
    det = {}
    try:
        res = run_conform(["--bind", a[1], "--status-cmd", "%s -s %s -j status"
                           % (ctl, d.sock), "--trigger", "%s -s %s ping %%a" % (ctl, d.sock),
                           "--ro-region", ro.arg, "--plane-addr", a[3], "--junit", junit,
                           "--stop-cmd", "kill -TERM %d" % d.proc.pid,
                           "--app-exit", "%s:kill -TERM %d" % (RO_SERVICE, ro.p.pid)] + WAITS +
                          [d.peer()], details=det)
    finally:
        rc = ro.close()
    # close.app-exit ended it with SIGTERM; had its region been written, it
    # would have exited 3 before.
    mrtest.check(rc == -signal.SIGTERM, "roregion ran until close.app-exit ended it "
                 "(SIGTERM), its region unwritten (exit %s)" % rc)
    # SPEC 10.3: the daemon's ping fails on the tool's REJECT (exit 1).
    mrtest.check("exited with status 1" in det.get("acceptor.reject", ""),
                 "the REJECTed ping failed: %s" % det.get("acceptor.reject"))
    mrtest.check(len(res) >= 64, "%d cases ran" % len(res))
    suite = ET.parse(junit).getroot()
    jfail = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    mrtest.check(len(list(suite.iter("testcase"))) == len(res) and jfail == fails(res)
                 and int(suite.get("failures")) == len(jfail),
                 "the JUnit report agrees with the JSON one")
    for name, (why, sig) in sorted(KNOWN_FINDINGS.items()):
        mrtest.check(res.get(name) == "fail",
                     "known finding still fails: %s (%s); if fixed, remove it from "
                     "KNOWN_FINDINGS" % (name, why))
        mrtest.check(sig in det.get(name, ""), "%s fails as the finding says (%r in %r)"
                     % (name, sig, det.get(name)))
    unexpected = fails(res) - set(KNOWN_FINDINGS)
    mrtest.check(not unexpected, "no other case fails against the daemon (%s)"
                 % ", ".join(sorted(unexpected)))
    skips = {k for k, v in res.items() if v == "skip"}
    mrtest.check(skips == EXPECTED_SKIPS, "skipped exactly %s (got %s)"
                 % (sorted(EXPECTED_SKIPS), sorted(skips)))
    # close.shutdown ran its --stop-cmd: the daemon stopped gracefully.
    try:
        rc = d.proc.wait(15)
    except subprocess.TimeoutExpired:
        rc = "still running"
    mrtest.check(rc == 0, "the daemon, stopped by close.shutdown's SIGTERM, exited 0 (%s)" % rc)


def test_refused(tmp):
    """reject.refused against a daemon whose ECHO refuses the tool."""
    a = mrtest.addr_base("conform-refused")
    d = mrtest.Daemon(tmp, "r", [a[0]], port=19791, services_extra=REFUSING)
    args = ["--bind", a[1], "--refused-service", ECHO]
    for c in REFUSED_CASES:
        args += ["--case", c]
    res = run_conform(args + [d.peer()])
    mrtest.check(res == {c: "pass" for c in REFUSED_CASES},
                 "against a daemon that refuses the tool: %s pass (got %s)"
                 % (", ".join(REFUSED_CASES), res))
    rc, _ = d.stop()
    mrtest.check(rc == 0, "the refusing daemon exits 0 on SIGTERM")


def v6_port():
    """A free UDP port on ::1 outside the daemon's source ports (40000-59999),
    or None when the host has no IPv6 loopback."""
    import random
    rnd = random.Random(os.getpid())
    for _ in range(50):
        p = rnd.randrange(20000, 39999)
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            s.bind(("::1", p))
            return p
        except OSError as e:
            if e.errno != 98:  # EADDRINUSE: try another; anything else: no IPv6
                return None
        finally:
            s.close()
    return None


def test_ipv6(tmp):
    """Every case against a daemon on ::1, the tool on ::1: the tool takes an
    IPv6 TARGET and speaks IPv6 (plane addresses of family 6, IPv6 traffic
    class for ECN)."""
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
    except OSError as e:
        mrtest.skip("no IPv6 sockets on this host (%s)" % e)
    port = v6_port()
    if port is None:
        mrtest.skip("no IPv6 loopback address ::1 to bind on this host")
    ctl = os.environ["METAROCE_CTL"]
    d = mrtest.Daemon(tmp, "v6", ["::1"], port=port)
    mrtest.check(d.peer() == "[::1]:%d" % port, "the daemon serves [::1]:%d" % port)
    ro = RoRegion(d)
    try:
        res = run_conform(["--bind", "[::1]", "--status-cmd", "%s -s %s -j status"
                           % (ctl, d.sock), "--trigger", "%s -s %s ping %%a" % (ctl, d.sock),
                           "--ro-region", ro.arg] + WAITS + [d.peer()])
    finally:
        ro.close()
    mrtest.check(len(res) >= 50, "%d cases ran over IPv6" % len(res))
    known = set(KNOWN_FINDINGS) - STOP_CASES
    mrtest.check(fails(res) == known, "over IPv6 only the known findings fail (%s; want %s)"
                 % (", ".join(sorted(fails(res))), ", ".join(sorted(known))))
    # The host has one IPv6 loopback address: no second one for plane.paths;
    # this daemon goes on (no --stop-cmd).
    skips = {k for k, v in res.items() if v == "skip"}
    want = EXPECTED_SKIPS | {"plane.paths"} | STOP_CASES
    mrtest.check(skips == want, "over IPv6 skipped exactly %s (got %s)"
                 % (sorted(want), sorted(skips)))
    mrtest.check(d.alive() and d.request("status").get("ok"), "the IPv6 daemon lives")
    rc, _ = d.stop()
    mrtest.check(rc == 0, "the IPv6 daemon exits 0 on SIGTERM")


def run_variant(d, a, side, variant, expect, out, dr=None, ro=None, tmp=None):
    """One variant through a fresh relay; returns [(ok, message)]."""
    ctl = os.environ["METAROCE_CTL"]
    checks = []
    det = {}
    caused = CAUSED_SKIPS.get(variant, set())
    if side == "initiator":
        relay = Relay(variant, a[2], "%s:%d" % (a[0], d.port))
        slow = variant == "none" or bool(expect & SLOW_CASES)
        excl = [] if slow else sum((["--exclude", c] for c in sorted(SLOW_CASES)), [])
        try:
            res = run_conform(["--bind", a[1], "--status-cmd", "%s -s %s -j status"
                               % (ctl, d.sock), "--case", "[!a]*", "--ro-region", ro.arg,
                               "--plane-addr", a[3]] + excl + WAITS +
                              ["%s:%d" % (a[2], relay.port)], out, 90, det)
        finally:
            relay.close()
        # The relay changes nothing else, so the daemon's own findings fail
        # in every variant too, unless the broken rule stops them.
        expect = expect | ((set(KNOWN_FINDINGS) & set(res)) - caused - STOP_CASES)
        want_skips = EXPECTED_SKIPS | caused | STOP_CASES
    elif side == "shutdown":
        # a daemon of its own: the tool stops it
        ds = mrtest.Daemon(tmp, "s-" + variant,
                           [mrtest.addr_base("conform-stop-" + variant)[0]], port=19791)
        dro = RoRegion(ds)
        relay = Relay(variant, a[2], "%s:%d" % (ds.addrs[0], ds.port))
        args = ["--bind", a[1], "--stop-cmd", "kill -TERM %d" % ds.proc.pid,
                "--app-exit", "%s:kill -TERM %d" % (RO_SERVICE, dro.p.pid)] + WAITS
        for c in sorted(STOP_CASES):
            args += ["--case", c]
        try:
            res = run_conform(args + ["%s:%d" % (a[2], relay.port)], out, 60, det)
        finally:
            relay.close()
            try:
                rc = ds.proc.wait(15)
            except subprocess.TimeoutExpired:
                rc = "still running"
                ds.stop()
            rorc = dro.close()
        checks.append((rorc == -signal.SIGTERM, "shutdown variant %s: close.app-exit ended "
                       "roregion (exit %s)" % (variant, rorc)))
        checks.append((rc == 0, "shutdown variant %s: the stopped daemon exited 0 (%s)"
                       % (variant, rc)))
        expect = expect | ((set(KNOWN_FINDINGS) & STOP_CASES) - caused)
        want_skips = caused
    elif side == "refused":
        relay = Relay(variant, a[2], "%s:%d" % (dr.addrs[0], dr.port))
        args = ["--bind", a[1], "--refused-service", ECHO]
        for c in REFUSED_CASES:
            args += ["--case", c]
        try:
            res = run_conform(args + ["%s:%d" % (a[2], relay.port)], out, 60)
        finally:
            relay.close()
        want_skips = set()
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
    # Each case the variant targets fails for the variant's reason; the
    # known findings fail as they do without it.
    want_det = {c: KNOWN_FINDINGS[c][1] for c in expect if c in KNOWN_FINDINGS}
    want_det.update(VARIANT_DETAILS.get(variant, {}))
    for c, sig in sorted(want_det.items()):
        if c in expect:
            checks.append((sig in det.get(c, ""), "%s variant %s: %s fails with %r (%r)"
                           % (side, variant, c, sig, det.get(c))))
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
           [("acceptor", v, e) for v, e in ACCEPTOR_VARIANTS.items()] + \
           [("refused", v, e) for v, e in REFUSED_VARIANTS.items()] + \
           [("shutdown", v, e) for v, e in SHUTDOWN_VARIANTS.items()]
    envs = []
    for w in range(workers):
        a = mrtest.addr_base("conform-variants-%d" % w)
        envs.append((mrtest.Daemon(tmp, "w%d" % w, [a[0]], port=19791), a))
    ros = [RoRegion(d) for d, _ in envs]
    # one daemon that refuses the tool: the refused variants run through a
    # relay in front of it
    dr = mrtest.Daemon(tmp, "wr", [mrtest.addr_base("conform-variants-refused")[0]],
                       port=19791, services_extra=REFUSING)
    results = [[] for _ in range(workers)]
    ran = [0] * workers
    outs = [io.StringIO() for _ in range(workers)]
    lock = threading.Lock()

    def work(w):
        d, a = envs[w]
        for i, (side, variant, expect) in enumerate(jobs):
            if i % workers != w:
                continue
            outs[w].write("==== %s variant %s (daemon w%d)\n" % (side, variant, w))
            try:
                r = run_variant(d, a, side, variant, expect, outs[w], dr, ros[w], tmp)
            except (ConformError, subprocess.TimeoutExpired, ValueError) as e:
                r = [(False, "%s variant %s: %s" % (side, variant, e))]
            results[w] += r
            ran[w] += 1
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
    mrtest.check(sum(ran) == len(jobs), "all %d variants ran"
                 % len(jobs))
    for i, ro in enumerate(ros):
        rc = ro.close()
        mrtest.check(rc is None, "roregion of w%d ran throughout, its region unwritten "
                     "(exit %s)" % (i, rc))
    for d, _ in envs + [(dr, None)]:
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
        test_refused(tmp.name)
    elif mode == "ipv6":
        test_ipv6(tmp.name)
    else:
        test_variants(tmp.name, int(sys.argv[2]) if len(sys.argv) > 2 else 4)
    tmp.cleanup()


if __name__ == "__main__":
    main()
