"""Unmodified verbs programs (ibverbs-utils, perftest) under metaroce-run, two
daemons on loopback. Each program's output is parsed and checked; data is
verified where the program verifies it (ibv_rc_pingpong --chk). Unsupported
modes must fail at once with a clear message.

Usage: test_verbs.py GROUP   (see GROUPS)
"""
import os
import re
import shutil
import subprocess
import sys
import time

import mrtest
from mrtest import check, fail, skip

RUN = os.environ.get("METAROCE_RUN")
PORT_BASE = 18600 + os.getpid() % 2000


def need(prog):
    if not shutil.which(prog):
        skip("%s is not installed (scripts/install-deps.sh: perftest, ibverbs-utils)" % prog)


def run_pair(daemons, argv, port, timeout=120, server_extra=(), client_extra=(), one=False):
    """Server on B, client on A (to B's first plane address for the TCP
    exchange), or both on A with one; returns ((rc, out) of the server,
    (rc, out) of the client)."""
    a, b = daemons.a, (daemons.a if one else daemons.b)
    srv = subprocess.Popen([RUN, "-s", b.app_sock] + argv + ["-p", str(port)] + list(server_extra),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    cli_out, cli_rc = "", None
    t_end = time.time() + timeout
    for _ in range(20):
        c = subprocess.run([RUN, "-s", a.app_sock] + argv + ["-p", str(port)] + list(client_extra) +
                           [b.addrs[0]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=max(5, t_end - time.time()))
        cli_out, cli_rc = c.stdout, c.returncode
        # the server's TCP port not open yet: try again
        if cli_rc != 0 and re.search(r"Couldn't connect|Unable to open file descriptor|connect to",
                                     cli_out) and srv.poll() is None:
            time.sleep(0.3)
            continue
        break
    try:
        srv_out, _ = srv.communicate(timeout=max(5, t_end - time.time()))
    except subprocess.TimeoutExpired:
        srv.kill()
        srv_out, _ = srv.communicate()
        print(srv_out)
        print(cli_out)
        fail("%s: the server did not exit (a hang)" % " ".join(argv))
    return (srv.returncode, srv_out), (cli_rc, cli_out)


def show(tag, out):
    sys.stdout.write("---- %s ----\n%s\n" % (tag, out[-3000:]))


def both_ok(name, s, c):
    if s[0] != 0 or c[0] != 0:
        show(name + " server", s[1])
        show(name + " client", c[1])
    check(s[0] == 0 and c[0] == 0, "%s: server and client exit 0 (%s, %s)" % (name, s[0], c[0]))


def perftest_rows(out):
    """The result rows of a perftest table: lists of numbers, first is #bytes."""
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and all(re.match(r"^[0-9.]+$", x) for x in f[:3]) and f[0].isdigit():
            rows.append([float(x) for x in f])
    return rows


def sizes_all(maxsize=1 << 23):
    s, n = [], 2
    while n <= maxsize:
        s.append(n)
        n *= 2
    return s


# ---- groups -------------------------------------------------------------------

def t_devices(p):
    need("ibv_devices")
    need("ibv_devinfo")
    r = subprocess.run([RUN, "-s", p.a.app_sock, "ibv_devices"], capture_output=True, text=True,
                       timeout=30)
    show("ibv_devices", r.stdout + r.stderr)
    check(r.returncode == 0, "ibv_devices exits 0")
    m = re.search(r"^\s*metaroce0\s+([0-9a-f]{16})\s*$", r.stdout, re.M)
    check(m is not None, "ibv_devices lists metaroce0 with a node GUID")
    a0 = [int(x) for x in p.a.addrs[0].split(".")]
    check(m.group(1).endswith("".join("%02x" % x for x in a0)),
          "the node GUID carries plane 0's address")

    r = subprocess.run([RUN, "-s", p.a.app_sock, "ibv_devinfo", "-v"], capture_output=True,
                       text=True, timeout=30)
    show("ibv_devinfo -v", r.stdout + r.stderr)
    o = r.stdout
    check(r.returncode == 0, "ibv_devinfo -v exits 0")
    check(re.search(r"hca_id:\s+metaroce0", o) is not None, "hca_id metaroce0")
    check(re.search(r"phys_port_cnt:\s+1$", o, re.M) is not None, "one port")
    check(re.search(r"state:\s+PORT_ACTIVE", o) is not None, "port active")
    check(re.search(r"link_layer:\s+Ethernet", o) is not None, "Ethernet link layer")
    check(re.search(r"active_mtu:\s+4096", o) is not None, "active MTU 4096 (the planes' MTU)")
    check(re.search(r"gid_tbl_len:\s+2$", o, re.M) is not None, "two GIDs: one per plane")
    for i, addr in enumerate(p.a.addrs):
        check(re.search(r"GID\[\s*%d\]:\s+::ffff:%s, RoCE v2" % (i, re.escape(addr)), o)
              is not None, "GID[%d] = plane %d's address %s as RoCE v2" % (i, i, addr))
    check("not supported" not in r.stderr, "ibv_devinfo calls nothing unsupported")

    # without a daemon: no device, no hang
    r = subprocess.run([RUN, "-s", os.path.join(p.tmp.name, "nothing.sock"), "ibv_devices"],
                       capture_output=True, text=True, timeout=30)
    check("metaroce0" not in r.stdout and "no metarocd at" in r.stderr,
          "no daemon: no device and a message that says why")


def t_pingpong(p):
    need("ibv_rc_pingpong")
    port = PORT_BASE
    for extra, label in (([], "-g 0"), (["-s", "65536"], "-g 0 -s 65536"), (["-e"], "-g 0 -e")):
        port += 1
        n = 200 if "-s" not in extra else 50
        s, c = run_pair(p, ["ibv_rc_pingpong", "-g", "0", "-c", "-n", str(n)] + extra, port)
        both_ok("ibv_rc_pingpong " + label, s, c)
        for tag, (rc, out) in (("server", s), ("client", c)):
            m = re.search(r"(\d+) bytes in [0-9.]+ seconds", out)
            size = 65536 if "-s" in extra else 4096
            # both directions count
            check(m is not None and int(m.group(1)) == 2 * n * size,
                  "ibv_rc_pingpong %s %s: %d bytes moved, every buffer checked (-c)"
                  % (label, tag, 2 * n * size))
            check(re.search(r"%d iters in" % n, out) is not None,
                  "ibv_rc_pingpong %s %s: %d iterations" % (label, tag, n))
            check("Failed status" not in out and "parse WC failed" not in out,
                  "ibv_rc_pingpong %s %s: no bad completion" % (label, tag))
    # two programs on one daemon: a QP connects to its own daemon
    s, c = run_pair(p, ["ibv_rc_pingpong", "-g", "0", "-c", "-n", "100"], port + 1, one=True)
    both_ok("ibv_rc_pingpong -g 0, both on one daemon", s, c)
    check(all(re.search(r"100 iters in", o) for o in (s[1], c[1])),
          "ibv_rc_pingpong on one daemon: 100 iterations on both sides")


def perftest(p, port, argv, sizes, label, bw):
    for attempt in range(3):
        s, c = run_pair(p, argv, port + 1000 * attempt, timeout=240)
        # perftest times with the CPU's cycle counter and calibrates it
        # against gettimeofday(); on a loaded host the fit fails and it
        # prints no report. Its own failure, not ours: run it again.
        if "Can't produce a report" in s[1] + c[1] and "Correlation coefficient" in s[1] + c[1]:
            print("note: %s: perftest's clock calibration failed (loaded host), again" % label)
            continue
        break
    both_ok(label, s, c)
    rows = perftest_rows(c[1])
    got = [int(r[0]) for r in rows]
    if got != sizes:
        show(label + " client", c[1])
    check(got == sizes, "%s: a result row for each size %s" % (label, sizes[:3] + ["..."]
                                                                if len(sizes) > 3 else sizes))
    for r in rows:
        if bw:
            # #bytes #iterations BW_peak[MB/s] BW_average[MB/s] MsgRate[Mpps]
            # (the bandwidth has 2 decimals: tiny messages on a loaded
            # host print 0.00; the message rate has 6)
            check(len(r) >= 5 and r[4] > 0 and r[3] >= 0 and r[1] > 0,
                  "%s: size %d: %d iterations, message rate %.6f Mpps > 0, %.2f MB/s"
                  % (label, r[0], r[1], r[4], r[3]))
        else:
            # #bytes #iterations t_min t_max t_typical t_avg ...
            check(0 < r[2] <= r[4] <= r[3],
                  "%s: size %d: latency min %.1f <= typical %.1f <= max %.1f us"
                  % (label, r[0], r[2], r[4], r[3]))


def t_perftest(p):
    for prog in ("ib_send_lat", "ib_send_bw", "ib_write_bw", "ib_write_lat", "ib_read_bw",
                 "ib_read_lat"):
        need(prog)
    port = PORT_BASE + 20
    alls = sizes_all()
    cases = [
        (["ib_send_lat", "-x", "0", "-n", "200"], [2], "ib_send_lat", False),
        (["ib_send_lat", "-x", "0", "-a", "-n", "10"], alls, "ib_send_lat -a", False),
        # completion channels: every event means a completion to poll
        # (perftest polls once per event and reads the ibv_wc unchecked)
        (["ib_send_lat", "-x", "0", "-e", "-n", "500"], [2], "ib_send_lat -e", False),
        (["ib_send_bw", "-x", "0", "-a", "-n", "10"], alls, "ib_send_bw -a", True),
        (["ib_send_bw", "-x", "0", "-q", "4", "-n", "100"], [65536], "ib_send_bw -q 4", True),
        (["ib_send_bw", "-x", "0", "-b", "-n", "100"], [65536], "ib_send_bw -b", True),
        (["ib_send_bw", "-x", "0", "-e", "-n", "100"], [65536], "ib_send_bw -e", True),
        (["ib_write_bw", "-x", "0", "-a", "-n", "10"], alls, "ib_write_bw -a", True),
        (["ib_write_bw", "-x", "0", "-q", "4", "-n", "100"], [65536], "ib_write_bw -q 4", True),
        (["ib_write_bw", "-x", "0", "-b", "-n", "100"], [65536], "ib_write_bw -b", True),
        # one WRITE in 16 signaled (perftest's default signals every one),
        # with METAROCE_VERBS_UNSIGNALED=1
        (["ib_write_bw", "-x", "0", "-Q", "16", "-n", "1000"], [65536], "ib_write_bw -Q 16",
         True),
        (["ib_write_lat", "-x", "0", "-a", "-n", "10"], alls, "ib_write_lat -a", False),
        (["ib_read_bw", "-x", "0", "-a", "-n", "10"], alls, "ib_read_bw -a", True),
        (["ib_read_lat", "-x", "0", "-n", "200"], [2], "ib_read_lat", False),
        (["ib_read_lat", "-x", "0", "-e", "-n", "200"], [2], "ib_read_lat -e", False),
    ]
    only = os.environ.get("VERBS_ONLY")
    for argv, sizes, label, bw in cases:
        if only and only != label:
            continue
        port += 1
        q0 = p.a.ok("status")["apps"]["cqes_unsignaled"]
        if label == "ib_write_bw -Q 16":  # with the daemon's unsignaled requests
            os.environ["METAROCE_VERBS_UNSIGNALED"] = "1"
        try:
            perftest(p, port, argv, sizes, label, bw)
        finally:
            os.environ.pop("METAROCE_VERBS_UNSIGNALED", None)
        if label == "ib_write_bw -Q 16":
            # 1000 WRITEs, 62 of them signaled: the rest cost the daemon no
            # completion (MRC_SQE_UNSIGNALED)
            n = p.a.ok("status")["apps"]["cqes_unsignaled"] - q0
            check(n >= 900, "ib_write_bw -Q 16: %d WRITEs without a completion written" % n)


def fails_cleanly(p, port, argv, want, label, server=True):
    t0 = time.time()
    if server:
        s, c = run_pair(p, argv, port, timeout=60)
        outs = s[1] + c[1]
        ok = s[0] != 0 and c[0] != 0
    else:
        r = subprocess.run([RUN, "-s", p.a.app_sock] + argv, capture_output=True, text=True,
                           timeout=60)
        outs, ok = r.stdout + r.stderr, r.returncode != 0
    if not ok or not re.search(want, outs):
        show(label, outs)
    check(ok, "%s: fails (%.1f s)" % (label, time.time() - t0))
    check(re.search(want, outs) is not None, "%s: says why (%s)" % (label, want))


def t_unsupported(p):
    port = PORT_BASE + 60
    cases = [
        (["ib_send_bw", "-x", "0", "-c", "UD", "-n", "10"],
         r"QP type UD is not supported", "ib_send_bw -c UD"),
        (["ib_send_bw", "-R", "-n", "10"], r"rdma_cm \(librdmacm\) is not supported",
         "ib_send_bw -R (rdma_cm)"),
        (["ib_atomic_bw", "-x", "0", "-n", "10"], r"atomics.*not supported", "ib_atomic_bw"),
        (["ibv_srq_pingpong", "-g", "0", "-n", "5"], r"shared receive queues \(SRQ\) are not supported",
         "ibv_srq_pingpong (SRQ)"),
        (["ibv_rc_pingpong", "-n", "5"], r"needs the peer's GID", "ibv_rc_pingpong without -g"),
        (["ibv_xsrq_pingpong", "-g", "0", "-n", "5"], r"XRC domains are not supported",
         "ibv_xsrq_pingpong (XRC)"),
        (["ibv_uc_pingpong", "-g", "0", "-n", "5"], r"QP type UC is not supported",
         "ibv_uc_pingpong (UC)"),
    ]
    for argv, want, label in cases:
        need(argv[0])
        port += 1
        fails_cleanly(p, port, argv, want, label)


def t_memory(p):
    quiet0 = p.a.ok("status")["apps"]["cqes_unsignaled"]
    # with the daemon's unsignaled requests (off by default in the library)
    r = subprocess.run([RUN, os.environ["VERBS_REGMR"], p.a.app_sock, p.b.app_sock],
                       capture_output=True, text=True, timeout=100,
                       env=dict(os.environ, METAROCE_VERBS_UNSIGNALED="1"))
    show("regmr", r.stdout + r.stderr)
    check(r.returncode == 0, "regmr: every memory kind registered and written, RC error "
          "semantics (exit %d)" % r.returncode)
    for who in ("requester", "responder"):
        check("%s: PASS" % who in r.stdout, "regmr %s passed" % who)
    check(len(re.findall(r"bytes written, \d+ untouched, all correct", r.stdout)) == 4,
          "four kinds of memory verified byte by byte")
    check(len(re.findall(r"requester: READ \d+ bytes of the peer's .* memory, all correct",
                         r.stdout)) == 4, "RDMA READ of four kinds of memory verified byte by byte")
    check("a READ after a WRITE of the same 64 KiB returns the written bytes" in r.stdout,
          "a READ after a WRITE returns the written bytes")
    check("128 WRITEs of 4 KiB, one in 16 signaled, through a send queue of 32: 8 completions, "
          "every byte in place" in r.stdout,
          "unsignaled WRITEs: only the signaled ones complete, their send-queue slots are "
          "freed, every byte arrives")
    check("an unsignaled WRITE past the region -> REM_ACCESS_ERR, then WR_FLUSH_ERR" in r.stdout,
          "an unsignaled WRITE that fails completes with its error and flushes the rest")
    quiet = p.a.ok("status")["apps"]["cqes_unsignaled"] - quiet0
    # regmr's unsignaled WRITEs that succeed: 4 + 1 on the first QP, 120 on the second
    check(quiet >= 120, "daemon A wrote no completion for %d successful unsignaled requests "
          "(MRC_SQE_UNSIGNALED)" % quiet)


def t_reset(p):
    # with the library's default (a completion per send, unsignaled ones
    # dropped by the library) and with the daemon's unsignaled requests
    for unsig in ("0", "1"):
        r = subprocess.run([RUN, os.environ["VERBS_QPRESET"], p.a.app_sock, p.b.app_sock],
                           capture_output=True, text=True, timeout=100,
                           env=dict(os.environ, METAROCE_VERBS_UNSIGNALED=unsig))
        show("qpreset, METAROCE_VERBS_UNSIGNALED=%s" % unsig, r.stdout + r.stderr)
        check(r.returncode == 0, "qpreset (METAROCE_VERBS_UNSIGNALED=%s): exit %d"
              % (unsig, r.returncode))
        for who in ("requester", "responder"):
            check("%s: PASS" % who in r.stdout, "qpreset %s passed" % who)
        check(re.search(r"requester: \d+ rounds with a success from before the reset in the "
                        r"ring: the unsignaled WRITE after it still completed REM_ACCESS_ERR",
                        r.stdout),
              "a completion from before a QP reset retires nothing posted after it "
              "(METAROCE_VERBS_UNSIGNALED=%s)" % unsig)


def dynsyms(lib):
    out = subprocess.run(["readelf", "--dyn-syms", "-W", lib], capture_output=True, text=True,
                         check=True).stdout
    d = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND" and "@@" in f[7]:
            d.add(f[7])
    return d


def t_symbols(p):
    """Every function the system's libraries export (name@@VERSION) is
    exported by ours under the same version: programs and the libraries
    they link load against ours."""
    vdir = os.path.dirname(os.path.realpath(RUN))
    for name in ("libibverbs.so.1", "libmlx5.so.1", "libefa.so.1"):
        r = subprocess.run(["cc", "-print-file-name=" + name], capture_output=True, text=True)
        sysl = r.stdout.strip()
        if not sysl.startswith("/"):
            print("note: no system %s" % name)
            continue
        ours = os.path.join(vdir, name)
        want, got = dynsyms(sysl), dynsyms(ours)
        missing = sorted(want - got)
        check(not missing, "%s: all %d versioned functions of the system's library exported "
              "(missing: %s)" % (name, len(want), " ".join(missing[:8])))
    # every program of the suite resolves against ours
    for prog in ("ibv_devinfo", "ib_write_bw", "ib_send_lat"):
        path = shutil.which(prog)
        if not path:
            continue
        env = dict(os.environ, LD_LIBRARY_PATH=vdir, LD_BIND_NOW="1")
        r = subprocess.run(["ldd", "-r", path], capture_output=True, text=True, env=env)
        bad = [l for l in (r.stdout + r.stderr).splitlines()
               if "undefined symbol" in l or "not found" in l]
        check(r.returncode == 0 and not bad and os.path.join(vdir, "libibverbs.so.1") in
              r.stdout, "%s: every symbol resolves against our libibverbs (%s)"
              % (prog, "; ".join(bad[:3])))


def t_faults(p):
    """A daemon killed under a running program: the program ends with an
    error and a message, never hangs; busy-polling and event-driven alike."""
    need("ibv_rc_pingpong")
    port = PORT_BASE + 80
    for extra, label in (([], "busy polling"), (["-e"], "completion channel")):
        port += 1
        # fresh daemons for each: one of them is killed
        q = mrtest.Pair("verbs-fault")
        argv = ["ibv_rc_pingpong", "-g", "0", "-n", "100000000", "-s", "4096"] + extra
        srv = subprocess.Popen([RUN, "-s", q.b.app_sock] + argv + ["-p", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)
        cli = None
        for _ in range(20):
            cli = subprocess.Popen([RUN, "-s", q.a.app_sock] + argv + ["-p", str(port),
                                                                       q.b.addrs[0]],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(2)
            if cli.poll() is None:
                break
        check(cli.poll() is None and srv.poll() is None,
              "%s: ibv_rc_pingpong runs (2 s in)" % label)
        q.b.proc.kill()
        q.b.proc.wait()
        t0 = time.time()
        try:
            out, _ = srv.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
            out, _ = srv.communicate()
            show("server", out)
            fail("%s: the program whose daemon was killed did not end within 60 s (a hang)"
                 % label)
        if srv.returncode == 0 or "the daemon went away" not in out:
            show("server", out)
        check(srv.returncode != 0, "%s: the program whose daemon was killed ends with an "
              "error (%.1f s after the kill)" % (label, time.time() - t0))
        check("the daemon went away" in out, "%s: it says its daemon went away" % label)
        # The peer's program, like one on RC hardware, notices only through
        # work that needs the peer (a send retried until it fails); one
        # waiting for a receive waits: it is ended here.
        cli.kill()
        cli.communicate()
        q.a.stop()
        q.tmp.cleanup()

    # A peer whose daemon uses another service port: the GID names only the
    # peer's host, so the side that connects finds no daemon there. It fails
    # at RTR, saying which address and port it tried and what to look at.
    port += 1
    other = mrtest.Daemon(p.tmp.name, "other", mrtest.addr_base("verbs-port")[0:2],
                          port=p.a.port + 7)
    argv = ["ibv_rc_pingpong", "-g", "0", "-n", "5", "-p", str(port)]
    srv = subprocess.Popen([RUN, "-s", other.app_sock] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    t0 = time.time()
    c = subprocess.run([RUN, "-s", p.a.app_sock] + argv + [other.addrs[0]],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    dt = time.time() - t0
    srv.kill()
    out = c.stdout + srv.communicate()[0]
    want = [r"at %s port %d: the peer daemon did not answer \(is metarocd running there, on "
            r"the same service port" % (re.escape(h), pt)
            for h, pt in ((other.addrs[0], p.a.port), (p.a.addrs[0], other.port))]
    if not any(re.search(w, out) for w in want):
        show("client and server", out)
    check(c.returncode != 0 and any(re.search(w, out) for w in want),
          "a peer daemon on another service port: RTR fails in %.1f s (exit %d) and says "
          "which address and port it tried" % (dt, c.returncode))
    other.stop()


GROUPS = {"symbols": t_symbols, "faults": t_faults, "memory": t_memory, "reset": t_reset, "devices": t_devices, "pingpong": t_pingpong, "perftest": t_perftest,
          "unsupported": t_unsupported}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in GROUPS:
        fail("usage: test_verbs.py %s" % "|".join(GROUPS))
    mrtest.binaries()
    if not RUN or not os.access(RUN, os.X_OK):
        skip("METAROCE_RUN is not set to metaroce-run (the verbs library was not built)")
    p = mrtest.Pair("verbs-" + sys.argv[1])
    try:
        GROUPS[sys.argv[1]](p)
    except subprocess.TimeoutExpired as e:
        fail("%s did not finish in time (a hang)" % e.cmd)
    finally:
        for d in (p.a, p.b):
            if not d.alive():
                d.dump()
    check(p.a.alive() and p.b.alive(), "both daemons are still running")
    p.close()
    print("PASS")


if __name__ == "__main__":
    main()
