"""The dissector against every byte-exact vector of tests/data/wire/.

Every .bin file goes into one pcap (Ethernet/IPv4/UDP to port 19791) and
through tshark -T pdml with tools/wireshark/metaroce.lua. For each valid file,
every row of its table in tests/data/wire/README.md (offset, size, field,
value, meaning) must be a dissector field of that name at that offset and
size, whose bytes are the value and whose decoded value is the number (or
names the meaning) the README gives; the packet must carry no Malformed
expert info and no metaroce.error, and every byte of it must belong to a
field the README lists. Each invalid file must carry exactly one Malformed
expert info, the one of the error the README names, and metaroce.error must
be that error's name.
"""
import os
import re
import tempfile

import wslib
from wslib import check, fail

# The decoder's error -> the dissector's expert info (the table at the top of
# tools/wireshark/metaroce.lua).
EXPERT = {
    "TRUNCATED": "metaroce.truncated",
    "VERSION": "metaroce.version.bad",
    "OPCODE": "metaroce.opcode.bad",
    "FLAGS": "metaroce.flags.bad",
    "LENGTH": "metaroce.length",
    "RANGE": "metaroce.range",
    "RESERVED": "metaroce.reserved.bad",
}

REASON_FIELD = {0x11: "metaroce.nak_reason", 0x22: "metaroce.reject_reason",
                0x23: "metaroce.close_reason", 0x24: "metaroce.close_reason"}


def field_name(readme_field, opcode):
    """The dissector's field for a README row's field (wire.h's member name)."""
    if readme_field == "rsv":
        return "metaroce.reserved"
    if readme_field == "reason":
        return REASON_FIELD[opcode]
    m = re.match(r"^addrs\[\d+\]\.(\w+)$", readme_field)
    if m:
        return "metaroce.addr." + {"addr": "raw"}.get(m.group(1), m.group(1))
    return "metaroce." + re.sub(r"(path|stream)_id$", r"\1", readme_field)


def expected_hex(value, size):
    if value in ("(none)", ""):
        return ""
    if value.startswith("0x"):
        h = value[2:]
    else:
        h = value.replace(" ", "")
    if not re.match(r"^[0-9a-fA-F]*$", h) or len(h) != 2 * size:
        fail("README value %r is not %d bytes of hex" % (value, size))
    return h.lower()


def check_meaning(fname, row, fld, children):
    """The README's meaning column against what the dissector shows."""
    off, size, name, value, meaning = row
    shown = fld.get("showname", "")
    if not meaning or meaning in ("reserved", "zero-length message"):
        return
    if re.match(r"^\d+$", meaning):
        if int(fld.get("show"), 0) != int(meaning):
            fail("%s: %s shows %s, the README says %s" % (fname, name, fld.get("show"), meaning))
        return
    m = re.match(r"^IPv([46]) (\S+)$", meaning)
    if m:
        want = "metaroce.addr.ipv" + m.group(1)
        kid = [c for c in children if c.get("name") == want]
        if len(kid) != 1 or kid[0].get("show") != m.group(2):
            fail("%s: %s: expected %s %s, got %s" % (fname, name, want, m.group(2),
                                                     [(c.get("name"), c.get("show")) for c in children]))
        return
    if meaning.startswith("'") and meaning.endswith("'"):
        if bytes.fromhex(fld.get("value")).decode("latin-1") != meaning[1:-1]:
            fail("%s: %s is not %s" % (fname, name, meaning))
        return
    # names: an opcode, flags ("FIRST + RETX", "none"), a reason, a family
    for word in meaning.split(" + "):
        if not re.search(r"\b%s\b" % re.escape(word), shown):
            fail("%s: %s shows %r, which does not name %r" % (fname, name, shown, word))


def check_valid(fname, pkt, rows, opcode, payload_len):
    ps = wslib.protos(pkt)
    if len(ps) != 1:
        fail("%s: %d metaroce protocol items, expected 1" % (fname, len(ps)))
    top = ps[0]
    kids = [c for c in top if c.tag == "field"]
    by_key = {}
    for c in wslib.walk(top):
        if c.get("pos") is not None and c.get("size") is not None:
            by_key.setdefault((c.get("name"), int(c.get("pos")), int(c.get("size"))), []).append(c)
    covered = set()
    for row in rows:
        off, size, name, value, meaning = row
        fname_ = field_name(name, opcode)
        want = expected_hex(value, size)
        if size == 0:
            if any(c.get("name") == fname_ and int(c.get("size", "0")) > 0 for c in kids):
                fail("%s: %s is empty, yet the dissector shows bytes for it" % (fname, name))
            continue
        cands = by_key.get((fname_, wslib.PAYLOAD_OFF + off, size), [])
        if len(cands) != 1:
            fail("%s: README row %d+%d %s: expected one field %s at offset %d, size %d; found %d" % (
                fname, off, size, name, fname_, off, size, len(cands)))
        fld = cands[0]
        if fld.get("value", "").lower() != want:
            fail("%s: %s: bytes %s, README %s" % (fname, name, fld.get("value"), want))
        if value.startswith("0x") and fname_ != "metaroce.reserved":
            shown = fld.get("show")
            if int(shown, 0) != int(value, 16):
                fail("%s: %s decodes to %s, README value %s" % (fname, name, shown, value))
        check_meaning(fname, row, fld, list(wslib.walk(fld)))
        covered.add((fname_, off, size))
    # every field the dissector shows at the top of the packet is a README row
    for c in kids:
        if c.get("name") in ("_ws.expert",) or c.get("hide") == "yes":
            continue
        if c.get("showname", "").startswith("[") or c.get("pos") is None:
            continue  # generated
        key = (c.get("name"), int(c.get("pos")) - wslib.PAYLOAD_OFF, int(c.get("size")))
        if c.get("name") == "metaroce.addr":
            continue  # its parts are rows of their own
        if key not in covered:
            fail("%s: the dissector shows %s at offset %d, size %d, which the README has no row for"
                 % (fname, key[0], key[1], key[2]))
    bad = [e for e in wslib.experts(pkt) if e[1] == wslib.MALFORMED_GROUP]
    if bad:
        fail("%s: valid packet flagged malformed: %s" % (fname, bad))
    if any(c.get("name") == "metaroce.error" for c in wslib.walk(top)):
        fail("%s: valid packet has metaroce.error" % fname)
    # the packet is decoded as a whole: no byte left undecoded
    if any(c.get("name") == "metaroce.undecoded" for c in wslib.walk(top)):
        fail("%s: part of the packet is not decoded" % fname)
    print("ok: %s: %d fields as documented" % (fname, len(rows)))


def check_invalid(fname, pkt, code):
    ps = wslib.protos(pkt)
    if len(ps) != 1:
        fail("%s: %d metaroce protocol items, expected 1 (the service port must be dissected)"
             % (fname, len(ps)))
    bad = [e for e in wslib.experts(pkt) if e[1] == wslib.MALFORMED_GROUP]
    if [e[0] for e in bad] != [EXPERT[code]]:
        fail("%s: expected one malformed expert info %s (MRP_ERR_%s), got %s"
             % (fname, EXPERT[code], code, bad))
    if not bad[0][3].startswith("MRP_ERR_" + code):
        fail("%s: expert message %r does not name MRP_ERR_%s" % (fname, bad[0][3], code))
    errs = [c.get("show") for c in wslib.walk(ps[0]) if c.get("name") == "metaroce.error"]
    if errs != [code]:
        fail("%s: metaroce.error is %s, expected %s" % (fname, errs, code))
    print("ok: %s: flagged malformed, %s" % (fname, code))


def main():
    wslib.tshark_or_skip()
    index, tables, errors = wslib.read_vectors()
    wdir = os.path.join(wslib.data_dir(), "wire")
    files = sorted(f for f in os.listdir(wdir) if f.endswith(".bin"))
    listed = [e[0] for e in index]
    check(sorted(listed) == files, "the README's index lists every .bin file (%d)" % len(files))
    for name, op, length, result in index:
        data = open(os.path.join(wdir, name), "rb").read()
        if len(data) != length:
            fail("%s: %d bytes, the README says %d" % (name, len(data), length))
        if result.startswith("valid"):
            if name not in tables or not tables[name]:
                fail("%s: valid, but the README has no field table for it" % name)
        elif name not in errors:
            fail("%s: invalid, but the README's invalid table names no error for it" % name)

    frames = [wslib.frame(open(os.path.join(wdir, e[0]), "rb").read()) for e in index]
    with tempfile.TemporaryDirectory(prefix="mr-ws-") as tmp:
        pcap = os.path.join(tmp, "vectors.pcap")
        wslib.write_pcap(pcap, frames)
        pkts = wslib.pdml(pcap)
    check(len(pkts) == len(index), "tshark decoded %d packets" % len(index))
    nvalid = ninvalid = 0
    for (name, op, length, result), pkt in zip(index, pkts):
        data = open(os.path.join(wdir, name), "rb").read()
        if result.startswith("valid"):
            check_valid(name, pkt, tables[name], op, len(data) - 72)
            nvalid += 1
        else:
            check_invalid(name, pkt, errors[name])
            ninvalid += 1
    check(nvalid == len(tables) and ninvalid == len(errors),
          "%d valid and %d invalid vectors checked" % (nvalid, ninvalid))


main()
