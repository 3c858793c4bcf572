"""metaroce-ctl metrics and telemetry.textfile: every line follows the
Prometheus text exposition format (version 0.0.4), checked by a strict
parser written here; the documented names are present and agree with
`status`; the textfile is replaced atomically each interval."""
import json
import os
import re
import subprocess
import time

import mrtest

_, ctl = mrtest.binaries()
if not ctl or not os.access(ctl, os.X_OK):
    mrtest.skip("METAROCE_CTL is not set")

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
LVALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
VALUE = r"(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)"
SAMPLE = re.compile(r"^(%s)(\{(?:%s=%s(?:,%s=%s)*)?\})? (%s)(?: -?\d+)?$"
                    % (NAME, LABEL, LVALUE, LABEL, LVALUE, VALUE))
HELP = re.compile(r"^# HELP (%s) (.*)$" % NAME)
TYPE = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % NAME)
LABELS = re.compile(r'(%s)=(%s)' % (LABEL, LVALUE))


def parse(text):
    """Returns {family: {"type", "help", "samples": [(labels dict, value)]}};
    fails on any line that is not in the grammar, a sample before its
    family's TYPE, a family declared twice, a duplicate series, or a counter
    not named *_total."""
    mrtest.check(text.endswith("\n"), "the exposition ends with a newline")
    fams, cur = {}, None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        m = HELP.match(line)
        if m:
            if m.group(1) in fams:
                mrtest.fail("line %d: family %s declared twice" % (n, m.group(1)))
            cur = m.group(1)
            fams[cur] = {"help": m.group(2), "type": None, "samples": [], "seen": set()}
            continue
        m = TYPE.match(line)
        if m:
            if m.group(1) != cur or fams[cur]["type"]:
                mrtest.fail("line %d: TYPE of %s not right after its HELP" % (n, m.group(1)))
            fams[cur]["type"] = m.group(2)
            continue
        m = SAMPLE.match(line)
        if not m:
            mrtest.fail("line %d is not in the exposition grammar: %r" % (n, line))
        if m.group(1) != cur or not fams[cur]["type"]:
            mrtest.fail("line %d: sample of %s outside its family" % (n, m.group(1)))
        labels = tuple(sorted(LABELS.findall(m.group(2) or "")))
        if labels in fams[cur]["seen"]:
            mrtest.fail("line %d: duplicate series %s%s" % (n, cur, labels))
        fams[cur]["seen"].add(labels)
        fams[cur]["samples"].append(({k: json.loads(v) for k, v in labels},
                                     float(m.group(3))))
    for name, f in fams.items():
        if f["type"] == "counter" and not name.endswith("_total"):
            mrtest.fail("counter %s does not end in _total" % name)
    return fams


def value(fams, name, **labels):
    for l, v in fams[name]["samples"]:
        if all(l.get(k) == x for k, x in labels.items()):
            return v
    mrtest.fail("no %s%s" % (name, labels))


# The grammar checker itself refuses what it must.
for bad in ("metric 1 2 3\n", "m{a=\"x} 1\n", "m{a=x} 1\n", "m 1e\n", "9m 1\n"):
    m = SAMPLE.match(bad.rstrip("\n"))
    if m:
        mrtest.fail("the checker accepted %r" % bad)
print("ok: the checker refuses malformed samples")

p = mrtest.Pair("metrics")
textfile = os.path.join(p.tmp.name, "metarocd.prom")
p.a.stop()
p.a = mrtest.Daemon(p.tmp.name, "a", p.a.addrs,
                    yaml_extra="telemetry:\n  interval: 200ms\n  max_paths: 3\n"
                               "  textfile: %s\n" % textfile)

r = mrtest.request(p.a.sock, "perf", {"peer": p.b.peer(), "seconds": 1})
mrtest.check(r["ok"] and r["result"]["verified"], "perf")
out = subprocess.run([ctl, "-s", p.a.sock, "metrics"], capture_output=True, text=True,
                     timeout=30)
mrtest.check(out.returncode == 0, "metaroce-ctl metrics: exit 0")
fams = parse(out.stdout)
mrtest.check(len(fams) >= 30, "%d metric families, every line in the grammar" % len(fams))
st = mrtest.request(p.a.sock, "status")["result"]
for name in ("metaroce_info", "metaroce_uptime_seconds", "metaroce_plane_up",
             "metaroce_plane_drained", "metaroce_plane_tx_bytes_total", "metaroce_drops_total",
             "metaroce_connections", "metaroce_path_srtt_seconds", "metaroce_store_up",
             "metaroce_telemetry_path_samples_total", "metaroce_drills_total"):
    mrtest.check(name in fams, "family %s" % name)
mrtest.check(value(fams, "metaroce_info", instance=st["instance_id"]) == 1,
             "metaroce_info carries the instance id")
mrtest.check(value(fams, "metaroce_plane_up", plane="p0") == 1 and
             value(fams, "metaroce_plane_drained", plane="p1") == 0, "plane gauges")
mrtest.check(value(fams, "metaroce_plane_tx_bytes_total", plane="p0") +
             value(fams, "metaroce_plane_tx_bytes_total", plane="p1") >=
             r["result"]["bytes"], "plane byte counters cover the transfer")
mrtest.check(value(fams, "metaroce_connections_opened_total") ==
             st["counters"]["conns_opened"], "connection counter agrees with status")
mrtest.check(value(fams, "metaroce_telemetry_path_samples_total") > 0,
             "the sampler took path samples during the transfer")
# telemetry.max_paths: 3 of the connection's 8 paths are sampled, the rest
# counted.
mrtest.check(value(fams, "metaroce_telemetry_paths_skipped_total") > 0,
             "paths over telemetry.max_paths are counted as skipped")
h = mrtest.request(p.a.sock, "history paths", {"since_s": 600})["result"]["rows"]
mrtest.check(0 < len({(x["conn"], x["path"]) for x in h}) <= 3,
             "history holds samples of at most 3 paths")

# The textfile: the same grammar, replaced (a new inode) on the interval.
deadline = time.time() + 10
while time.time() < deadline and not os.path.exists(textfile):
    time.sleep(0.05)
mrtest.check(os.path.exists(textfile), "textfile written")
ino = os.stat(textfile).st_ino
with open(textfile) as f:
    tf = parse(f.read())
mrtest.check("metaroce_plane_tx_bytes_total" in tf and len(tf) == len(fams),
             "the textfile has the same families")
deadline = time.time() + 10
while time.time() < deadline and os.stat(textfile).st_ino == ino:
    time.sleep(0.05)
mrtest.check(os.stat(textfile).st_ino != ino, "the textfile is replaced by rename")
p.close()
