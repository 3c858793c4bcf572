"""Helpers of the network-namespace tests: the fabric (fabric.sh), a daemon
in each namespace, link control, the daemons' logs and stores.

A Fabric builds namespaces of its own (N hosts, K planes, optionally rate
limited; names from the pid, so a fabric made by hand with `fabric.sh up`
is left alone) and removes them on exit, also when the test fails or
meson's timeout sends SIGTERM. It exits 77 (skipped) with the reason when
this host cannot build it: not root, no `ip netns`, namespaces refused (a
restricted container), and with full=True no tc tbf or nftables.
"""
import ctypes
import fcntl
import json
import os
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time

import mrtest

HERE = os.path.dirname(os.path.abspath(__file__))
FABRIC = os.path.join(HERE, "fabric.sh")

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH22x"


def rate_bps(s):
    """A tc rate such as "250mbit" in bit/s."""
    for unit, mult in (("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)):
        if s.lower().endswith(unit):
            return float(s[:-len(unit)]) * mult
    mrtest.fail("%s is not a rate (N kbit, mbit or gbit)" % s)


def by_plane(paths, field):
    """{plane_name: sum of field} over a show-paths array."""
    out = {}
    for p in paths:
        out[p["plane_name"]] = out.get(p["plane_name"], 0) + p[field]
    return out


def wait_for(cond, timeout, step=0.01):
    """cond() until it is true or timeout seconds passed; its last value."""
    t = time.time() + timeout
    while time.time() < t:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


class Fabric:
    """hosts namespaces a, b, ... joined by `planes` planes; tbf (a rate such
    as "250mbit") bounds every link end; full=True also requires what
    impairments need (tc tbf, nftables) or skips."""

    def __init__(self, tbf=None, extra_env=None, hosts=2, planes=2, full=False):
        self.names = "abcdefgh"[:hosts]
        self.nplanes = planes
        prefix = "mrt%d-" % os.getpid()
        self.ns = {h: prefix + h for h in self.names}
        self.env = dict(os.environ, MR_NS_PREFIX=prefix)
        self.env.pop("MR_NS_A", None)
        self.env.pop("MR_NS_B", None)
        self.daemon_env = dict(os.environ, **(extra_env or {}))
        self.procs = {}
        self.socks = {}
        self.tmp = None
        self._nssock = {}
        self._perfs = []
        if os.geteuid() != 0:
            mrtest.skip("needs root (network namespaces and veth pairs)")
        r = subprocess.run([FABRIC, "check-full" if full else "check"], env=self.env,
                           capture_output=True, text=True)
        if r.returncode == 77:
            mrtest.skip(r.stderr.strip() or "fabric.sh check: cannot build the fabric")
        if r.returncode != 0:
            mrtest.fail("fabric.sh check: %s" % r.stderr.strip())
        self.metarocd, self.ctl = mrtest.binaries()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        r = subprocess.run([FABRIC, "up", "--hosts", str(hosts), "--planes", str(planes)] +
                           (["--rate", tbf] if tbf else []), env=self.env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.cleanup()
            mrtest.fail("fabric.sh up: %s" % r.stderr.strip())
        self.tmp = tempfile.TemporaryDirectory(prefix="mrd-netns-")

    # ---- life cycle ---------------------------------------------------------

    def _on_signal(self, signum, frame):
        # meson's timeout sends SIGTERM: leave no namespace, daemon or file.
        self.close()
        os._exit(1)

    def cleanup(self):
        for s in self._nssock.values():
            s.close()
        self._nssock = {}
        for p in [q for q, _, _ in self._perfs] + list(self.procs.values()):
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run([FABRIC, "down"], env=self.env, check=False)

    def close(self):
        self.cleanup()
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None

    def dump_logs(self):
        for name in sorted(self.procs):
            path = self.path(name + ".log")
            if os.path.exists(path):
                with open(path) as f:
                    sys.stdout.write("---- %s log ----\n%s\n" % (name, f.read()[-6000:]))

    def check(self, cond, msg):
        if not cond:
            self.dump_logs()
            self.close()
            mrtest.fail(msg)
        print("ok:", msg)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    # ---- daemons ------------------------------------------------------------

    def addr(self, name, plane=0):
        """Host `name`'s address on plane `plane`."""
        return "10.%d.0.%d" % (200 + plane, self.names.index(name) + 1)

    def start(self, name, extra_env=None, yaml_extra="", plane_extra=""):
        """metarocd in namespace `name` ("a" = host 1, "b" = host 2, ...):
        plane0 found by its address, the others by interface and address.
        plane_extra is added to every plane's map (e.g. "    link_speed:
        250M\n"), yaml_extra to the file. A daemon started again keeps its
        database and appends to its log."""
        conf = self.path(name + ".yaml")
        self.socks[name] = self.path(name + ".sock")
        planes = "".join(
            "  - name: plane%d\n%s    address: \"%s\"\n%s"
            % (i, "" if i == 0 else "    interface: veth-%s%d\n" % (name, i),
               self.addr(name, i), plane_extra)
            for i in range(self.nplanes))
        with open(conf, "w") as f:
            f.write("service:\n  port: 19791\n  control_socket: %s\n  control_group: \"\"\n"
                    "  app_socket: %s.app\n"
                    "  state_db: %s\n  log_level: info\nservices:\n  perf: true\n"
                    "planes:\n%s%s"
                    % (self.socks[name], self.socks[name], self.path(name + ".db"), planes,
                       yaml_extra))
        log = open(self.path(name + ".log"), "a")
        # `ip netns exec` execs the daemon: the pid is the daemon's.
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[name], self.metarocd, "-c", conf],
                             stdout=log, stderr=log,
                             env=dict(self.daemon_env, **(extra_env or {})))
        self.procs[name] = p
        t = time.time() + 20
        while True:
            if p.poll() is not None:
                self.check(False, "%s exited with %s at start" % (name, p.returncode))
            try:
                if mrtest.request(self.socks[name], "status", None, 5).get("ok"):
                    return
            except OSError:
                pass
            if time.time() > t:
                self.check(False, "%s ready within 20 s" % name)
            time.sleep(0.05)

    def stop(self, name):
        p = self.procs[name]
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(15)
        except subprocess.TimeoutExpired:
            rc = None
        self.check(rc == 0, "%s stopped cleanly (exit %s)" % (name, rc))

    def req(self, name, cmd, args=None, timeout=30):
        r = mrtest.request(self.socks[name], cmd, args, timeout)
        if not r.get("ok"):
            self.check(False, "%s %s: %s" % (name, cmd, r))
        return r["result"]

    def planes(self, name):
        return {p["name"]: p for p in self.req(name, "show planes")}

    def plane_tx(self, name, plane):
        """tx packets of every path on `plane` of daemon `name` (all conns)."""
        return sum(p["tx_pkts"] for p in self.req(name, "show paths")
                   if p.get("plane_name") == plane)

    def log_time(self, name, pattern, after):
        """CLOCK_MONOTONIC time (the log's clock) of the first line of the
        daemon's log at or after `after` that matches pattern; None."""
        with open(self.path(name + ".log")) as f:
            for line in f:
                m = re.match(r"\[\s*(\d+\.\d+)\] metarocd \S+\s+(.*)", line)
                if m and float(m.group(1)) >= after - 0.001 and re.search(pattern, m.group(2)):
                    return float(m.group(1))
        return None

    def events(self, name, kind, plane=None):
        """(ts, plane, detail) of the store's events of that kind."""
        db = sqlite3.connect(self.path(name + ".db"), timeout=5)
        try:
            rows = db.execute("SELECT ts, plane, detail FROM events WHERE kind = ? "
                              "ORDER BY ts", (kind,)).fetchall()
        finally:
            db.close()
        return [r for r in rows if plane is None or r[1] == plane]

    # ---- links --------------------------------------------------------------

    def _sock(self, name):
        """An AF_INET socket in the namespace (setns for this thread, and
        back), for SIOCSIFFLAGS without starting a process; None if setns
        is unavailable."""
        if name in self._nssock:
            return self._nssock[name]
        s = self._ns_socket(name, socket.AF_INET, socket.SOCK_DGRAM, 0)
        self._nssock[name] = s
        return s

    def _ns_socket(self, name, family, kind, proto):
        """A socket created in namespace `name`; None if setns is
        unavailable."""
        libc = ctypes.CDLL(None, use_errno=True)
        me = os.open("/proc/self/ns/net", os.O_RDONLY)
        tgt = os.open("/run/netns/" + self.ns[name], os.O_RDONLY)
        s = None
        try:
            if libc.setns(tgt, CLONE_NEWNET) == 0:
                try:
                    s = socket.socket(family, kind, proto)
                finally:
                    if libc.setns(me, CLONE_NEWNET) != 0:
                        os._exit(3)  # cannot get home: do not run on elsewhere
        finally:
            os.close(me)
            os.close(tgt)
        return s

    def watch_link_down(self, name, ifname):
        """Start listening to namespace `name`'s link notifications (rtnetlink,
        as the daemon does); returns a function that gives the
        CLOCK_MONOTONIC time at which the first notification of `ifname`
        without IFF_UP arrived, or None. An independent observer of a link
        that something else (a drill) sets down."""
        s = self._ns_socket(name, socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
        if s is None:
            self.check(False, "a netlink socket in namespace %s" % name)
        s.bind((0, 1))  # RTMGRP_LINK
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        seen = []

        def run():
            while not seen:
                try:
                    data = s.recv(1 << 16)
                except OSError:
                    return
                t = time.monotonic()
                off = 0
                while off + 16 <= len(data) and not seen:
                    ln, typ = struct.unpack_from("=IH", data, off)
                    if ln < 16:
                        break
                    if typ == 16 and ln >= 32:  # RTM_NEWLINK
                        flags = struct.unpack_from("=I", data, off + 24)[0]
                        a = off + 32
                        while a + 4 <= off + ln:
                            alen, atyp = struct.unpack_from("=HH", data, a)
                            if alen < 4:
                                break
                            if atyp == 3 and data[a + 4:a + alen].rstrip(b"\0") == \
                                    ifname.encode() and not flags & IFF_UP:  # IFLA_IFNAME
                                seen.append(t)
                            a += (alen + 3) & ~3
                    off += (ln + 3) & ~3
            s.close()

        threading.Thread(target=run, daemon=True).start()
        return lambda: seen[0] if seen else None

    def link_set(self, name, ifname, up):
        """`ip link set dev IFNAME up|down` in namespace `name`. Returns the
        CLOCK_MONOTONIC time just before the kernel was asked."""
        s = self._sock(name)
        if s is not None:
            ifr = struct.pack(_IFREQ, ifname.encode(), 0)
            flags = struct.unpack(_IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
            flags = (flags | IFF_UP) if up else (flags & ~IFF_UP & 0xffff)
            t0 = time.monotonic()
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(_IFREQ, ifname.encode(), flags))
            return t0
        t0 = time.monotonic()
        self.ip(name, "link", "set", "dev", ifname, "up" if up else "down")
        return t0

    # ---- operator view (metaroce-ctl) ----------------------------------------

    def ctl_json(self, name, *args, timeout=60):
        """metaroce-ctl -j ARGS against daemon `name`: the parsed output."""
        r = subprocess.run([self.ctl, "-s", self.socks[name], "-j"] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=timeout)
        self.check(r.returncode == 0, "metaroce-ctl -j %s (%s)" % (
            " ".join(str(a) for a in args), r.stderr.strip() or "exit 0"))
        return json.loads(r.stdout)

    def perf_start(self, name, peer, seconds, *extra):
        """`metaroce-ctl -j perf` from daemon `name` to host `peer`'s plane0
        address, in the background; perf_wait() gives the result."""
        out = open(self.path("perf-%d.json" % len(self._perfs)), "w+")
        p = subprocess.Popen([self.ctl, "-s", self.socks[name], "-j", "perf",
                              self.addr(peer), "--seconds", str(seconds)] +
                             [str(a) for a in extra], stdout=out, stderr=subprocess.STDOUT)
        self._perfs.append((p, out, seconds))
        return p

    def perf_wait(self, p):
        """(exit code, result or None, output) of a perf_start() run."""
        out, seconds = next((o, s) for q, o, s in self._perfs if q is p)
        try:
            rc = p.wait(seconds + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        out.seek(0)
        text = out.read()
        try:
            res = json.loads(text)
        except ValueError:
            res = None
        return rc, res, text

    def perf(self, name, peer, seconds, *extra):
        """A verified perf run that must succeed: its result."""
        rc, res, text = self.perf_wait(self.perf_start(name, peer, seconds, *extra))
        self.check(rc == 0 and res is not None, "perf %s -> %s, %s s%s: exit %s%s" % (
            name, peer, seconds, "".join(" " + str(a) for a in extra), rc,
            "" if res is not None else " " + text.strip()[:300]))
        self.check_verified(res)
        return res

    def check_verified(self, res):
        self.check(res["verify_errors"] == 0 and res["verified"] and res["bytes"] > 0 and
                   res["verified_bytes"] == res["bytes"],
                   "perf: %d bytes in %.2f s (%.3f Gbit/s), every byte verified, %d "
                   "verification errors" % (res["bytes"], res["seconds"], res["goodput_gbps"],
                                            res["verify_errors"]))

    def cpu_seconds(self, name):
        """user + system CPU seconds the daemon `name` has used."""
        with open("/proc/%d/stat" % self.procs[name].pid) as f:
            x = f.read().rsplit(")", 1)[1].split()
        return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")

    def load_snapshot(self, names):
        """The CPU use and run-queue wait of these daemons now, for
        load_text() to report on a measurement taken from here on."""
        return ({n: (self.cpu_seconds(n), self.wait_seconds(n)) for n in names},
                time.monotonic())

    def plane_rate(self, default, busiest, share=1 / 3, seconds=2, sender="a", peer="b"):
        """The tbf rate per plane ("N mbit") for a test whose busiest run
        uses `busiest` planes of it, sized to what the daemons under test
        can carry on this host now: MR_PLANE_RATE when set, else the lesser
        of `default` and `share` of the goodput C of an unshaped verified
        perf from sender to peer on this fabric (built without tbf), divided
        by `busiest`; whole Mbit/s, at least 10. C is what this build (a
        sanitizer build's daemons cost several times a release build's CPU
        per byte) gets through on this host as loaded as it is; the share
        (a third unless the test says otherwise) leaves the daemons room for
        the host's load to vary during the test, so that what is measured
        is the fabric and the transport.
        Sets nothing: set_rate() applies it."""
        if os.environ.get("MR_PLANE_RATE"):
            rate = os.environ["MR_PLANE_RATE"]
            print("plane rate %s (MR_PLANE_RATE)" % rate)
            return rate
        snap = self.load_snapshot([sender, peer])
        cal = self.perf(sender, peer, seconds)
        cap = cal["goodput_gbps"] * 1e9
        mbit = max(10, int(min(rate_bps(default), share * cap / busiest) / 1e6))
        print("calibration: unshaped, %d plane(s), %.3f Gbit/s (daemons: %s); plane rate "
              "%d mbit (at most %s; %.2f of that for %d plane(s))"
              % (self.nplanes, cap / 1e9, self.load_text(snap), mbit, default, share, busiest))
        return "%dmbit" % mbit

    def set_rate(self, rate):
        """tc tbf at `rate` on both ends of every plane (two-host fabrics:
        each host's end bounds what it sends)."""
        for h in self.names:
            for i in range(self.nplanes):
                self.fabric("rate", h, i, rate)

    def load_text(self, snap):
        """The CPU use and run-queue wait of the daemons of snap since it was
        taken, as text (for the record: the tests print it next to their
        measurements)."""
        s, t0 = snap
        wall = max(1e-3, time.monotonic() - t0)
        return ", ".join("%s %.0f %% of a core, waited %.0f %%" % (
            n, 100 * (self.cpu_seconds(n) - c0) / wall, 100 * (self.wait_seconds(n) - w0) / wall)
            for n, (c0, w0) in sorted(s.items()))

    def wait_seconds(self, name):
        """Seconds the daemon `name`'s event loop has spent runnable but waiting
        for a CPU (/proc/PID/schedstat, second field): what a busy host costs
        it, which its CPU use does not show."""
        with open("/proc/%d/schedstat" % self.procs[name].pid) as f:
            return int(f.read().split()[1]) / 1e9

    # ---- impairments (fabric.sh) ------------------------------------------

    def fabric(self, *args):
        """fabric.sh with these arguments on this fabric; fails the test if it
        fails."""
        r = subprocess.run([FABRIC] + [str(a) for a in args], env=self.env,
                           capture_output=True, text=True)
        self.check(r.returncode == 0, "fabric.sh %s%s" % (
            " ".join(str(a) for a in args), "" if r.returncode == 0 else ": " + r.stderr))
        return r.stdout

    def host_drops(self, name, plane):
        """Packets the kernel of host `name` dropped on their way in on
        `plane` that no rule asked for: the tbf of the sending end (the
        peer's end of a direct link) and the UDP sockets bound to this
        host's plane address (receive buffer full). Two-host fabrics."""
        peer = next(h for h in self.names if h != name)
        tc = subprocess.run(["ip", "netns", "exec", self.ns[peer], "tc", "-s", "qdisc", "show",
                             "dev", "veth-%s%d" % (peer, plane)],
                            capture_output=True, text=True).stdout
        tbf = sum(int(x) for x in re.findall(r"dropped (\d+)", tc))
        udp = subprocess.run(["ip", "netns", "exec", self.ns[name], "cat", "/proc/net/udp"],
                             capture_output=True, text=True).stdout
        ip = socket.inet_aton(self.addr(name, plane))
        want = "%08X" % struct.unpack("<I", ip)[0]
        sock = 0
        for line in udp.splitlines()[1:]:
            f = line.split()
            if len(f) >= 13 and f[1].split(":")[0] == want:
                sock += int(f[12])
        return tbf + sock

    def nft_counter(self, name, kind, plane):
        """packets counted by the `kind` rule (loss, ecn) of host `name` on
        `plane`; 0 without one."""
        r = subprocess.run(["ip", "netns", "exec", self.ns[name], "nft", "list", "chain",
                            "inet", "mrfabric", "pre"], capture_output=True, text=True)
        m = re.search(r'counter packets (\d+) bytes \d+.*comment "%s veth-%s%d"'
                      % (kind, name, plane), r.stdout)
        return int(m.group(1)) if m else 0

    def ip(self, name, *args):
        subprocess.run(["ip", "-n", self.ns[name]] + list(args), check=True)

    def ip_batch(self, name, lines):
        """Many ip commands in one process (a burst of netlink events)."""
        subprocess.run(["ip", "-n", self.ns[name], "-force", "-batch", "-"],
                       input="\n".join(lines) + "\n", text=True, check=True)
