"""The expedited class on real links (proto/SPEC.md 6.7, transport.expedite_dscp).

Two daemons joined by two planes (tc tbf at MR_PLANE_RATE, default
250mbit), both configured with expedite_dscp 46, expedite_max 64KiB and
expedite_budget 128KiB.
nftables counters in each namespace count the UDP packets that arrive
from the other host, with DSCP 46 and without. Asserted:

- a verified perf of 4 KiB messages from A to B: at least 90 % of what A
  sends to B (its data, and its probes) and of what B sends back (its ACKs)
  carries DSCP 46;
- a verified perf of 1 MiB messages: at most 2 % does either way (a bulk
  transfer and its ACKs stay in the default class);
- a verified perf of 16 KiB messages, short but kept queued 16 deep (256 KiB,
  past the budget): at most 2 % of A's packets to B carries it (a queue of
  short messages is bulk; B's ACKs follow the messages' length, which is all
  B sees, and are not asserted);
- every byte of both runs verified.

The rest of the short run's packets (about 1 %) include the handshakes,
which are the daemon's, not the engine's, and go in the default class.

Needs root, network namespaces, tc and nftables: exits 77 (skipped),
saying why, otherwise.
"""
import os
import re
import subprocess

from netnslib import Fabric

RATE = os.environ.get("MR_PLANE_RATE", "250mbit")
PERF_SECONDS = 2
DSCP = 46
TABLE = "mrexp"
PERF_WINDOW = 16  # daemon/perf.c's WINDOW: perf messages outstanding
CONF = ("transport:\n  expedite_dscp: %d\n  expedite_max: 64KiB\n  expedite_budget: 128KiB\n"
        % DSCP)


def nft(f, host, *args):
    r = subprocess.run(["ip", "netns", "exec", f.ns[host], "nft"] + list(args),
                       capture_output=True, text=True)
    f.check(r.returncode == 0, "nft in %s: %s%s" % (host, " ".join(args), "" if r.returncode == 0
                                                    else ": " + r.stderr.strip()))
    return r.stdout


def count_from(f, host, peer):
    """Counters in host's namespace of the UDP packets from peer's plane
    addresses: with DSCP 46, and the others."""
    nft(f, host, "add", "table", "inet", TABLE)
    nft(f, host, "add", "chain", "inet", TABLE, "pre",
        "{ type filter hook prerouting priority -300; policy accept; }")
    src = "{ %s }" % ", ".join(f.addr(peer, p) for p in range(f.nplanes))
    for cmp in ("==", "!="):
        nft(f, host, "add", "rule", "inet", TABLE, "pre", "ip", "saddr", src, "meta", "l4proto",
            "udp", "ip", "dscp", cmp, str(DSCP), "counter")


def counts(f, host):
    """(packets with DSCP 46, packets without) so far."""
    out = nft(f, host, "list", "chain", "inet", TABLE, "pre")
    got = {}
    for m in re.finditer(r"dscp (!= )?(\S+) counter packets (\d+)", out):
        got[bool(m.group(1))] = int(m.group(3))
    f.check(len(got) == 2, "both counters in %s's table" % host)
    return got[False], got[True]


def run(f, size):
    """A verified perf of `size`-byte messages from A to B; the fractions
    of A's and of B's packets to each other that carried DSCP 46."""
    before = {h: counts(f, h) for h in ("a", "b")}
    res = f.perf("a", "b", PERF_SECONDS, "--msg-size", size)
    frac = {}
    for h, who in (("b", "A to B"), ("a", "B to A")):
        mark, other = (x - y for x, y in zip(counts(f, h), before[h]))
        frac[h] = mark / max(1, mark + other)
        print("%s-byte messages: %s %d packets with DSCP %d, %d without (%.1f %%)"
              % (size, who, mark, DSCP, other, 100 * frac[h]))
        f.check(mark + other > 100, "%s: more than 100 packets counted" % who)
    return res, frac


f = Fabric(tbf=RATE, planes=2, full=True)
try:
    f.start("a", yaml_extra=CONF)
    f.start("b", yaml_extra=CONF)
    count_from(f, "b", "a")
    count_from(f, "a", "b")
    res, frac = run(f, 4096)
    f.check(frac["b"] >= 0.9, "4 KiB messages: %.1f %% of A's packets to B in the class"
            % (100 * frac["b"]))
    f.check(frac["a"] >= 0.9, "4 KiB messages: %.1f %% of B's packets to A (its ACKs) in the "
            "class" % (100 * frac["a"]))
    res, frac = run(f, 1 << 20)
    f.check(frac["b"] <= 0.02, "1 MiB messages: %.2f %% of A's packets to B in the class"
            % (100 * frac["b"]))
    f.check(frac["a"] <= 0.02, "1 MiB messages: %.2f %% of B's packets to A in the class"
            % (100 * frac["a"]))
    # 4 KiB x 16 fits the budget (above), 16 KiB x 16 does not
    assert 4096 * PERF_WINDOW <= 128 << 10 < 16384 * PERF_WINDOW
    res, frac = run(f, 16384)
    f.check(frac["b"] <= 0.02, "16 KiB messages queued past the budget: %.2f %% of A's packets "
            "to B in the class" % (100 * frac["b"]))
    f.stop("a")
    f.stop("b")
finally:
    f.close()
