"""Helpers of the wireshark suite: pcap files, tshark runs, the vectors' README.

The suite checks tools/wireshark/metaroce.lua, the Wireshark dissector of the
MetaRoCE wire format, against the byte-exact vectors of tests/data/wire/, the
C decoder of proto/wire.c and live captures. Paths come from the environment
meson sets: MRP_TEST_DATA (tests/data), METAROCE_LUA (the dissector),
WIRE_VERDICT (the helper program that runs the C decoder).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

SKIP = 77
SERVICE_PORT = 19791


def skip(reason):
    print("SKIP:", reason)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def tshark_or_skip():
    t = shutil.which("tshark")
    if not t:
        skip("tshark is not installed (scripts/install-deps.sh installs it)")
    return t


def lua_path():
    p = os.environ.get("METAROCE_LUA")
    if not p:
        p = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "wireshark", "metaroce.lua")
    return os.path.abspath(p)


def data_dir():
    d = os.environ.get("MRP_TEST_DATA")
    if not d:
        d = os.path.join(os.path.dirname(__file__), "..", "data")
    return os.path.abspath(d)


def source_root():
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


# ---- pcap ----------------------------------------------------------------------

ETH_LEN, IP_LEN, UDP_LEN = 14, 20, 8
PAYLOAD_OFF = ETH_LEN + IP_LEN + UDP_LEN  # where the UDP payload starts in a frame


def _ip_checksum(hdr):
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(payload, src="192.0.2.1", dst="192.0.2.2", sport=40000, dport=SERVICE_PORT):
    """An Ethernet/IPv4/UDP frame carrying payload (UDP checksum 0: none)."""
    udp = struct.pack("!HHHH", sport, dport, UDP_LEN + len(payload), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, IP_LEN + UDP_LEN + len(payload), 0, 0x4000,
                     64, 17, 0, bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    ip = ip[:10] + struct.pack("!H", _ip_checksum(ip)) + ip[12:]
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + udp + payload


def write_pcap(path, frames, snaplen=262144):
    """frames: list of bytes (whole frames) or (bytes, captured_length)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        for i, fr in enumerate(frames):
            data, caplen = (fr, len(fr)) if isinstance(fr, (bytes, bytearray)) else fr
            caplen = min(caplen, len(data))
            f.write(struct.pack("<IIII", 1700000000 + i, 0, caplen, len(data)))
            f.write(data[:caplen])


# ---- tshark --------------------------------------------------------------------

def tshark(args, check_rc=True, timeout=120):
    """Runs tshark with the dissector loaded; returns stdout. Lua errors fail."""
    cmd = [tshark_or_skip(), "-X", "lua_script:" + lua_path(), "-n"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    err = "\n".join(l for l in r.stderr.splitlines() if "Running as user" not in l
                    and "This could be dangerous" not in l)
    if "Lua" in err or "lua" in err:
        fail("tshark reported a Lua problem: %s" % err.strip()[:2000])
    if check_rc and r.returncode != 0:
        fail("tshark %s exited %d: %s" % (" ".join(args), r.returncode, err.strip()[:2000]))
    return r.stdout


def tshark_g(what):
    """tshark -G fields|values with the dissector: list of tab-split rows."""
    cmd = [tshark_or_skip(), "-G", what, "-X", "lua_script:" + lua_path()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or "Lua" in r.stderr:
        fail("tshark -G %s: %s" % (what, r.stderr.strip()[:2000]))
    return [l.split("\t") for l in r.stdout.splitlines()]


def pdml(pcap, opts=()):
    """Decodes pcap to PDML; returns the list of <packet> elements."""
    out = tshark(["-r", pcap, "-T", "pdml"] + list(opts))
    return ET.fromstring(out).findall("packet")


def walk(elem):
    """Every <field> under elem, depth first, in document order."""
    for c in elem:
        if c.tag in ("field", "proto"):
            yield c
            yield from walk(c)


def protos(packet, name="metaroce"):
    return [p for p in packet.findall("proto") if p.get("name") == name]


def experts(packet):
    """(expert abbrev, group, severity, message) of every expert info in packet."""
    out = []
    for e in walk(packet):
        if e.get("name") == "_ws.expert":
            kids = {k.get("name"): k for k in e}
            abbrev = next((k.get("name") for k in e if not k.get("name", "").startswith("_ws.")), None)
            out.append((abbrev, kids.get("_ws.expert.group").get("show") if kids.get("_ws.expert.group") is not None else None,
                        kids.get("_ws.expert.severity").get("show") if kids.get("_ws.expert.severity") is not None else None,
                        kids.get("_ws.expert.message").get("show") if kids.get("_ws.expert.message") is not None else ""))
    return out


MALFORMED_GROUP = str(0x07000000)


# ---- the vectors' README -------------------------------------------------------

def read_vectors():
    """Parses tests/data/wire/README.md: the index, each valid file's field table
    and the expected error of each invalid file. Returns (index, tables, errors):
    index: [(file, opcode byte, length, result text)], tables: {file: [(offset,
    size, field, value, meaning)]}, errors: {file: "RANGE"}."""
    path = os.path.join(data_dir(), "wire", "README.md")
    with open(path) as f:
        text = f.read()
    index, tables, errors = [], {}, {}
    section = None
    cur = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            cur = None
            continue
        m = re.match(r"^### `([\w.]+)`", line)
        if m:
            cur = m.group(1)
            tables[cur] = []
            continue
        if not line.startswith("|") or re.match(r"^\|[-| ]+\|$", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if section == "Index" and cells[0].startswith("`"):
            index.append((cells[0].strip("`"), int(cells[1].split()[-1].strip("()"), 16),
                          int(cells[2]), cells[3]))
        elif section == "Valid packets" and cur and re.match(r"^\d+$", cells[0]):
            tables[cur].append((int(cells[0]), int(cells[1]), cells[2], cells[3], cells[4]))
        elif section == "Invalid packets" and cells[0].startswith("`"):
            m = re.match(r"`MRP_ERR_(\w+)`", cells[3])
            if m:
                errors[cells[0].strip("`")] = m.group(1)
    return index, tables, errors
