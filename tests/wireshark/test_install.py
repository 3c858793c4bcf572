"""meson install puts the dissector where Wireshark loads it, and it loads.

Arguments: the build directory, the directory meson configured for the
dissector and where that came from (tools/wireshark/meson.build).
- meson's install plan has tools/wireshark/metaroce.lua in that directory;
- `meson install --destdir TMP --tags wireshark` writes exactly that file;
- when the directory came from pkg-config or tshark (not from the option), it
  is one of the folders tshark loads Lua plugins from, or below one;
- the installed file, as a plugin (no -X), decodes a packet in tshark.
"""
import json
import os
import subprocess
import sys
import tempfile

import wslib
from wslib import check, fail


def folders():
    r = subprocess.run([wslib.tshark_or_skip(), "-G", "folders"], capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def main():
    build, configured, source = sys.argv[1], sys.argv[2], sys.argv[3]
    wslib.tshark_or_skip()
    r = subprocess.run(["meson", "introspect", "--installed", build], capture_output=True, text=True)
    if r.returncode != 0:
        fail("meson introspect --installed: %s" % r.stderr)
    plan = json.loads(r.stdout)
    lua = [dst for src, dst in plan.items() if src.endswith(os.path.join("tools", "wireshark", "metaroce.lua"))]
    check(len(lua) == 1, "meson installs tools/wireshark/metaroce.lua (%s)" % lua)
    dst = lua[0]
    want_dir = configured if os.path.isabs(configured) else None
    if want_dir:
        check(os.path.dirname(dst) == os.path.normpath(want_dir),
              "into the configured directory %s (from %s)" % (configured, source))
    else:
        check(os.path.dirname(dst).endswith(os.path.normpath(configured)),
              "into the configured directory $prefix/%s (from %s)" % (configured, source))

    if source in ("pkg-config wireshark", "tshark -G folders"):
        f = folders()
        roots = [f.get("Global Lua Plugins"), f.get("Global Plugins")]
        d = os.path.dirname(dst)
        check(any(r and (d == r or d.startswith(r + os.sep)) for r in roots),
              "a folder tshark loads Lua plugins from (%s)" % roots)

    with tempfile.TemporaryDirectory(prefix="mr-ws-install-") as tmp:
        dest = os.path.join(tmp, "dest")
        r = subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--quiet",
                            "--destdir", dest, "--tags", "wireshark"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("meson install --tags wireshark: %s%s" % (r.stdout, r.stderr))
        installed = []
        for root, dirs, files in os.walk(dest):
            installed += [os.path.join(root, n)[len(dest):] for n in files]
        check(installed == [dst], "meson install --tags wireshark installs only %s (%s)" % (dst, installed))
        with open(dest + dst, "rb") as a, open(wslib.lua_path(), "rb") as b:
            check(a.read() == b.read(), "the installed file is tools/wireshark/metaroce.lua")

        # Loaded as a plugin: from a personal plugin folder of a fresh HOME.
        home = os.path.join(tmp, "home")
        pdir = os.path.join(home, ".local", "lib", "wireshark", "plugins")
        os.makedirs(pdir)
        os.link(dest + dst, os.path.join(pdir, "metaroce.lua"))
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"))
        pcap = os.path.join(tmp, "w.pcap")
        with open(os.path.join(wslib.data_dir(), "wire", "write.bin"), "rb") as f:
            wslib.write_pcap(pcap, [wslib.frame(f.read())])
        r = subprocess.run([wslib.tshark_or_skip(), "-r", pcap, "-T", "fields", "-e", "metaroce.psn",
                            "-e", "metaroce.rkey"], capture_output=True, text=True, env=env)
        check(r.returncode == 0 and r.stdout.split() == ["11259375", "0xcafebabe"],
              "tshark without -X loads the installed plugin and decodes write.bin (%r)" % r.stdout)


main()
