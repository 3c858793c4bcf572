"""The dissector keeps step with the wire format: proto/wire.h, proto/wire.c,
proto/SPEC.md and the vectors of tests/data/wire/.

Read mechanically from the sources:
- wire.h: opcodes, flags, capability bits, NAK/REJECT/CLOSE reasons, the
  members of every packet struct, the default port;
- SPEC.md Appendix A: the same tables, which must agree with wire.h;
- wire.c: the `return MRP_ERR_*` statements of each decoding function, in
  order, which must be the rows of the WIRE.C CHECKS table at the top of
  tools/wireshark/metaroce.lua;
- tshark -G fields/values/decodes/heuristic-decodes/defaultprefs with the
  dissector loaded: what the dissector registers;
- docs/wireshark.md: every field and expert info the dissector registers.

Every opcode needs an opcode name, a layout and a valid vector whose README
table lists every member of its struct; every member a dissector field; every
flag and capability a bit field with its mask; every reason its name. A
failure says exactly what to add, and where.
"""
import os
import re

import wslib
from wslib import check

LUA = "tools/wireshark/metaroce.lua"
problems = []


def problem(msg):
    problems.append(msg)
    print("MISSING:", msg)


def read(rel):
    with open(os.path.join(wslib.source_root(), rel)) as f:
        return f.read()


# ---- proto/wire.h ----------------------------------------------------------------

def parse_wire_h(text):
    defs = {}
    for kind in ("OP", "F", "CAP", "NAK", "REJ", "CLOSE"):
        defs[kind] = []
        for m in re.finditer(r"^#define MRP_%s_(\w+)\s+(0x[0-9a-fA-F]+|\d+)(?:ull|u)?\s*(/\*.*?\*/)?"
                             % kind, text, re.M):
            name, val, comment = m.group(1), int(m.group(2), 0), m.group(3) or ""
            if name in ("MAX", "KNOWN", "LEN"):
                continue
            defs[kind].append((name, val, "reserved" in comment))
    structs = {}
    for m in re.finditer(r"typedef struct (mrp_\w+) \{(.*?)\} \1;", text, re.S):
        members = []
        for line in m.group(2).splitlines():
            line = re.sub(r"/\*.*?\*/", "", line).strip()
            mm = re.match(r"^(?:const\s+)?(\w+)\s+\**(\w+)(\[[^\]]*\])?;$", line)
            if mm:
                members.append((mm.group(1), mm.group(2)))
        structs[m.group(1)] = members
    port = int(re.search(r"#define MRP_DEFAULT_PORT (\d+)", text).group(1))
    return defs, structs, port


# Which struct holds each opcode's body: the member of mrp_pkt's union named
# after the opcode, with these exceptions.
OP_UNION = {"WRITE": "data", "WRITE_IMM": "data", "SEND": "data", "SEND_IMM": "data",
            "READ_REQ": "data", "READ_RESP": "data",
            "CONNECT": "hs", "ACCEPT": "hs", "RESET": "close"}


def field_for(struct, member):
    """The dissector's field for a member of a wire.h struct (docs/wireshark.md)."""
    if member == "reason":
        return "metaroce.%s_reason" % struct[len("mrp_"):]
    if struct == "mrp_addr":
        return "metaroce.addr." + {"addr": "raw"}.get(member, member)
    if member == "addrs":
        return "metaroce.addr"
    return "metaroce." + re.sub(r"(path|stream)_id$", r"\1", member)


def readme_name(struct, member):
    """How tests/data/wire/README.md names the member in its tables."""
    if struct == "mrp_addr":
        return "addrs[0]." + member
    return member


# ---- proto/SPEC.md Appendix A ----------------------------------------------------

def spec_table(text, heading):
    m = re.search(r"^### %s\n(.*?)(?=^### |^## )" % re.escape(heading), text, re.S | re.M)
    if not m:
        problem("proto/SPEC.md has no section '### %s'" % heading)
        return []
    rows = []
    for line in m.group(1).splitlines():
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append(cells)
    return rows[1:]


def parse_spec(text):
    ops = [(r[1], int(r[0], 16), "reserved" in r[2]) for r in spec_table(text, "A.1 Opcodes")
           if re.match(r"^0x[0-9a-fA-F]+$", r[0])]
    flags = [(r[1], int(r[0], 16)) for r in spec_table(text, "A.3 Flags")
             if re.match(r"^0x[0-9a-fA-F]+$", r[0]) and r[1] != "unassigned"]
    naks = [(r[1], int(r[0])) for r in spec_table(text, "A.4 NAK reasons") if r[0].isdigit()]
    rejs = [(r[1], int(r[0])) for r in spec_table(text, "A.5 REJECT reasons") if r[0].isdigit()]
    closes = [(r[1], int(r[0])) for r in spec_table(text, "A.6 CLOSE and RESET reasons")
              if r[0].isdigit()]
    caps = []
    for r in spec_table(text, "A.7 Capability bits"):
        m = re.search(r"(0x[0-9a-fA-F]+)", r[0])
        if m:
            caps.append((r[1], int(m.group(1), 16)))
    return {"OP": ops, "F": flags, "NAK": naks, "REJ": rejs, "CLOSE": closes, "CAP": caps}


# ---- proto/wire.c and the dissector's table of its checks ------------------------

def wire_c_checks(text):
    """{function: [error codes its return statements give, in order]}."""
    out = {}
    for m in re.finditer(r"^(?:static\s+)?(?:inline\s+)?[\w \*]+?\b(\w+)\([^;{]*?\)\s*\n\{\n(.*?)^\}",
                         text, re.S | re.M):
        codes = re.findall(r"return\s+(?:\(\w+\))?\s*MRP_ERR_(\w+)", m.group(2))
        if codes:
            out[m.group(1)] = codes
    return out


ENCODE_ONLY = {"fixed_len", "mrp_pkt_len", "mrp_pkt_encode", "mrp_data_hdr_encode"}


def lua_checks(text):
    m = re.search(r"^WIRE\.C CHECKS.*?\n(.*?)^END WIRE\.C CHECKS", text, re.S | re.M)
    out = {}
    if not m:
        problem("%s has no WIRE.C CHECKS table" % LUA)
        return out
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0]:
            out.setdefault(cells[0], []).append(cells[2])
    return out


def main():
    wslib.tshark_or_skip()
    defs, structs, port = parse_wire_h(read("proto/wire.h"))
    spec = parse_spec(read("proto/SPEC.md"))
    lua = read(LUA)

    # SPEC.md and wire.h list the same values (the dissector follows wire.h)
    for kind, what in (("OP", "opcode"), ("F", "flag"), ("CAP", "capability"),
                       ("NAK", "NAK reason"), ("REJ", "REJECT reason"), ("CLOSE", "CLOSE reason")):
        h = {(n, v) for n, v, *_ in defs[kind]}
        s = {(n, v) for n, v, *_ in spec[kind]}
        for n, v in sorted(h - s):
            problem("proto/wire.h has the %s %s = %#x that proto/SPEC.md Appendix A does not list"
                    % (what, n, v))
        for n, v in sorted(s - h):
            problem("proto/SPEC.md Appendix A lists the %s %s = %#x that proto/wire.h does not define"
                    % (what, n, v))

    fields = {r[2]: r for r in wslib.tshark_g("fields") if r[0] == "F" and r[2].startswith("metaroce")}
    values = {}
    for r in wslib.tshark_g("values"):
        if r[0] == "V" and r[1].startswith("metaroce."):
            values.setdefault(r[1], {})[int(r[2], 0)] = r[3]
    print("the dissector registers %d fields" % len(fields))

    # opcodes: a name for each, a layout, a vector
    index, tables, errors = wslib.read_vectors()
    opnames = values.get("metaroce.opcode", {})
    for name, val, reserved in defs["OP"]:
        want = name + (" (reserved)" if reserved else "")
        if opnames.get(val) != want:
            problem("proto/wire.h defines MRP_OP_%s = 0x%02x; %s names it %r: add [0x%02x] = \"%s\" "
                    "to OPCODE_NAMES%s" % (name, val, LUA, opnames.get(val), val, want, "" if reserved else
                    ", its length to FIXED_LEN, its field layout to BODY and its decoder rules to "
                    "verdict() (mirroring proto/wire.c; add them to the WIRE.C CHECKS table)"))
        if not reserved:
            if not re.search(r"\[0x%02x\] = \d+" % val, lua.split("local FIXED_LEN", 1)[1].split("}", 1)[0]):
                problem("%s: FIXED_LEN has no entry for MRP_OP_%s (0x%02x)" % (LUA, name, val))
            if not re.search(r"\[0x%02x\] = \w+" % val, lua.split("local BODY", 1)[1].split("}", 1)[0]):
                problem("%s: BODY has no field layout for MRP_OP_%s (0x%02x)" % (LUA, name, val))
            vec = [e[0] for e in index if e[1] == val and e[3].startswith("valid")]
            if not vec:
                problem("no valid vector of MRP_OP_%s (0x%02x) in tests/data/wire/: add %s.bin and its "
                        "field table to tests/data/wire/README.md (index row and a '### `%s.bin`' section)"
                        % (name, val, name.lower(), name.lower()))
    for val, n in sorted(opnames.items()):
        if val not in {v for _, v, _ in defs["OP"]}:
            problem("%s names opcode 0x%02x (%s), which proto/wire.h does not define: remove it"
                    % (LUA, val, n))

    # flags and capabilities: a bit field each, with its mask
    known_f = 0
    for name, val, _ in defs["F"]:
        known_f |= val
        fld = fields.get("metaroce.flags." + name.lower())
        if not fld or fld[3] != "FT_BOOLEAN" or int(fld[6], 16) != val:
            problem("proto/wire.h defines the flag MRP_F_%s = 0x%04x: add ProtoField.bool("
                    "\"metaroce.flags.%s\", \"%s\", 16, nil, 0x%04x) to %s and to add_flags()"
                    % (name, val, name.lower(), name, val, LUA))
    un = fields.get("metaroce.flags.unassigned")
    if not un or int(un[6], 16) != (0xFFFF & ~known_f):
        problem("metaroce.flags.unassigned must have the mask 0x%04x (every bit wire.h assigns no flag)"
                % (0xFFFF & ~known_f))
    known_c = 0
    for name, val, _ in defs["CAP"]:
        known_c |= val
        fld = fields.get("metaroce.caps." + name.lower())
        if not fld or fld[3] != "FT_BOOLEAN" or int(fld[6], 16) != val:
            problem("proto/wire.h defines the capability MRP_CAP_%s = 0x%x: add ProtoField.bool("
                    "\"metaroce.caps.%s\", \"%s\", 64, nil, 0x%x) to %s and to add_caps()"
                    % (name, val, name.lower(), name, val, LUA))
    m = re.search(r"^local CAP_KNOWN = (0x[0-9a-fA-F]+)", lua, re.M)
    if not m or int(m.group(1), 16) != known_c:
        problem("%s: CAP_KNOWN must be 0x%x, the capabilities proto/wire.h defines" % (LUA, known_c))

    # reasons
    for kind, fname in (("NAK", "metaroce.nak_reason"), ("REJ", "metaroce.reject_reason"),
                        ("CLOSE", "metaroce.close_reason")):
        vs = values.get(fname, {})
        for name, val, _ in defs[kind]:
            if vs.get(val) != name:
                problem("proto/wire.h defines MRP_%s_%s = %d; %s shows %r for it: add [%d] = \"%s\" to "
                        "its value table (and widen the range rule in verdict() if it checks one)"
                        % (kind, name, val, fname, vs.get(val), val, name))
        for val in vs:
            if val not in {v for _, v, _ in defs[kind]}:
                problem("%s names %s value %d, which proto/wire.h does not define" % (LUA, fname, val))

    # struct members: a field each; every member of an opcode's struct in its vector's table
    pkt_struct = {}
    for line in re.search(r"typedef struct mrp_pkt \{(.*?)\} mrp_pkt;", read("proto/wire.h"), re.S) \
            .group(1).splitlines():
        mm = re.match(r"^\s*(mrp_\w+) (\w+);", line)
        if mm:
            pkt_struct[mm.group(2)] = mm.group(1)
    for sname, members in structs.items():
        if sname == "mrp_pkt":
            continue
        for typ, member in members:
            fname = field_for(sname, member)
            if fname not in fields:
                problem("proto/wire.h: %s.%s has no dissector field: add %s to %s (a ProtoField, the "
                        "member in the layout of its packet, and its rule in verdict() if the decoder "
                        "checks it)" % (sname, member, fname, LUA))
    nchecked = 0
    for name, val, reserved in defs["OP"]:
        if reserved:
            continue
        umember = OP_UNION.get(name, name.lower())
        sname = pkt_struct.get(umember)
        if not sname:
            problem("test_sync.py: which struct of mrp_pkt holds the body of MRP_OP_%s? add it to OP_UNION"
                    % name)
            continue
        want = [("mrp_hdr", m) for _, m in structs["mrp_hdr"]] + [(sname, m) for _, m in structs[sname]]
        if sname == "mrp_hs":
            want = [w for w in want if w[1] != "addrs"] + [("mrp_addr", m) for _, m in structs["mrp_addr"]]
        if name == "READ_REQ":
            # no payload by definition (SPEC 5.8.1): the decoder rejects one
            want = [w for w in want if w[1] != "payload"]
        for vec in [e[0] for e in index if e[1] == val and e[3].startswith("valid")]:
            rows = {r[2] for r in tables.get(vec, [])}
            for s, member in want:
                if readme_name(s, member) not in rows:
                    problem("tests/data/wire/README.md: the table of %s has no row for %s.%s (%s)"
                            % (vec, s, member, readme_name(s, member)))
            nchecked += 1
    print("%d vector tables checked against the structs of their opcodes" % nchecked)

    # the decoder's checks, function by function
    cfuncs = wire_c_checks(read("proto/wire.c"))
    lfuncs = lua_checks(lua)
    for fn, codes in sorted(cfuncs.items()):
        if fn in ENCODE_ONLY:
            continue
        if lfuncs.get(fn) != codes:
            problem("proto/wire.c: %s() returns %s in this order, but the WIRE.C CHECKS table of %s "
                    "mirrors %s: mirror the new or changed check in verdict() (same order, same code) "
                    "and update the table's rows for %s()"
                    % (fn, codes, LUA, lfuncs.get(fn), fn))
    for fn in lfuncs:
        if fn not in cfuncs:
            problem("%s: the WIRE.C CHECKS table names %s(), which proto/wire.c no longer has" % (LUA, fn))

    # an expert info for every error the decoder returns (but INVAL: a NULL argument)
    codes = sorted({c for fn, cs in cfuncs.items() if fn not in ENCODE_ONLY for c in cs} - {"INVAL"})
    for c in codes:
        if not any(r[1] == "MRP_ERR_" + c for r in fields.values()):
            problem("proto/wire.c's decoder returns MRP_ERR_%s: add ProtoExpert.new(\"metaroce.<name>\", "
                    "\"MRP_ERR_%s\", expert.group.MALFORMED, expert.severity.ERROR) to ef in %s"
                    % (c, c, LUA))

    # every field documented
    doc = read("docs/wireshark.md")
    for name in sorted(fields):
        if not re.search(r"`%s`" % re.escape(name), doc):
            problem("docs/wireshark.md does not document the field `%s`" % name)

    # registration: the service port, the heuristic, the default port preference
    decodes = wslib.tshark_g("decodes")
    if not any(r[:3] == ["udp.port", str(port), "metaroce"] for r in decodes):
        problem("the dissector is not registered on UDP port %d (MRP_DEFAULT_PORT)" % port)
    heur = wslib.tshark_g("heuristic-decodes")
    if not any(r[0] == "udp" and r[1] == "metaroce" and r[2] == "T" for r in heur):
        problem("the dissector is not an enabled heuristic dissector on UDP")
    prefs = "\n".join("\t".join(r) for r in wslib.tshark_g("defaultprefs"))
    if not re.search(r"^#metaroce\.ports: %d$" % port, prefs, re.M):
        problem("the preference metaroce.ports must default to %d (MRP_DEFAULT_PORT)" % port)

    if problems:
        wslib.fail("%d thing(s) of the wire format the dissector or its vectors lack (listed above)"
                   % len(problems))
    check(True, "%d opcodes, %d flags, %d capabilities, %d reasons, %d struct members, %d decoder "
          "functions: all in the dissector" % (
              len(defs["OP"]), len(defs["F"]), len(defs["CAP"]),
              len(defs["NAK"]) + len(defs["REJ"]) + len(defs["CLOSE"]),
              sum(len(m) for s, m in structs.items() if s != "mrp_pkt"),
              len([f for f in cfuncs if f not in ENCODE_ONLY])))


main()
