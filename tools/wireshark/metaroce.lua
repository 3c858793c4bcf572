--[[
MetaRoCE wire format, version 1: a Wireshark dissector.

Decodes every packet of proto/SPEC.md v1 (WRITE, WRITE_IMM, SEND, SEND_IMM, READ_REQ, READ_RESP,
ACK, NAK, PROBE, PROBE_ACK, CONNECT, ACCEPT, REJECT, CLOSE, RESET, RETRY) into
filterable fields named metaroce.*, on UDP port 19791 (the default service
port; preference "UDP ports") and, on any other port, as a heuristic dissector
on UDP that claims only datagrams the project's decoder would accept.

Written for and tested with Wireshark 4.0 (Lua 5.2). Load it with
    tshark -X lua_script:metaroce.lua -r capture.pcap
    wireshark -X lua_script:metaroce.lua capture.pcap
or install it into a Wireshark plugin directory (meson install does; see
docs/wireshark.md). Field names follow proto/wire.h: metaroce.<member>, except
path_id -> metaroce.path, stream_id -> metaroce.stream (also in acked_path,
nak_path, probed_path), the three reason bytes -> metaroce.nak_reason,
metaroce.reject_reason, metaroce.close_reason, the address list ->
metaroce.addr.* and every reserved area -> metaroce.reserved.

Validation mirrors mrp_pkt_decode() of proto/wire.c rule for rule and in the
same order: the first failing rule is the packet's error, shown as the
generated field metaroce.error ("RANGE", the name the daemon counts drops
under) and as an expert info of group Malformed on the offending field. The
table below is the mirror; tests/wireshark/test_sync.py compares its code
column, function by function, with the `return MRP_ERR_*` statements of
proto/wire.c, and tests/wireshark/test_verdicts.py compares the verdicts of
this file with the C decoder's on thousands of mutated packets.

WIRE.C CHECKS (function | # | code | rule | expert info)
| mrp_hdr_decode   | 1 | INVAL     | NULL argument (no counterpart in a capture)        | -                  |
| mrp_hdr_decode   | 2 | TRUNCATED | datalen < 28                                       | metaroce.truncated |
| check_version_op | 1 | VERSION   | version != 1                                       | metaroce.version   |
| check_version_op | 2 | OPCODE    | opcode unknown                                     | metaroce.opcode    |
| mrp_pkt_decode   | 1 | INVAL     | NULL argument (no counterpart in a capture)        | -                  |
| mrp_pkt_decode   | 2 | TRUNCATED | datalen < the opcode's fixed length                | metaroce.truncated |
| check_hdr        | 1 | FLAGS     | a flag outside the opcode's allowed set            | metaroce.flags     |
| check_hdr        | 2 | RANGE     | dst_conn_id = 0 unless CONNECT, != 0 in CONNECT     | metaroce.range     |
| check_hdr        | 3 | RANGE     | src_conn_id = 0 unless REJECT or RETRY, != 0 in    | metaroce.range     |
|                  |   |           | REJECT and RETRY                                   |                    |
| check_hdr        | 4 | RANGE     | token: 0 / nonzero / any by opcode and reason      | metaroce.range     |
|                  |   |           | (any in CONNECT: 0 or a RETRY cookie, SPEC 9.7)    |                    |
| check_hdr        | 5 | RESERVED  | psn != 0 outside data packets                      | metaroce.reserved  |
| check_hdr        | 6 | RESERVED  | path_id/path_gen != 0 in CONNECT and later opcodes | metaroce.reserved  |
| check_data       | 1 | LENGTH    | datalen != 72 + payload_len                        | metaroce.length    |
| check_data       | 2 | RANGE     | payload_len > 9000 or msg_len > 2^31               | metaroce.range     |
| check_data       | 3 | LENGTH    | READ_REQ: payload_len or offset != 0               | metaroce.length    |
| check_data       | 4 | FLAGS     | READ_REQ: FIRST or LAST not set                    | metaroce.flags     |
| check_data       | 5 | LENGTH    | offset + payload_len > msg_len, or empty payload   | metaroce.length    |
|                  |   |           | of a non-empty message                             |                    |
| check_data       | 6 | FLAGS     | FIRST != (offset = 0) or LAST != (end = msg_len)   | metaroce.flags     |
| check_data       | 7 | RANGE     | WRITE*, READ_*: remote_addr + msg_len > 2^64       | metaroce.range     |
| check_data       | 8 | RESERVED  | SEND*: remote_addr or rkey != 0                    | metaroce.reserved  |
| check_data       | 9 | RESERVED  | imm != 0 in WRITE, SEND, READ_*                    | metaroce.reserved  |
| check_data       |10 | RESERVED  | recv_idx != 0 in WRITE, READ_*                     | metaroce.reserved  |
| check_hs         | 1 | RANGE     | min_version 0, > max_version; ACCEPT: min != max   | metaroce.range     |
| check_hs         | 2 | RANGE     | mtu, hs_token, max_streams, max_paths,             | metaroce.range     |
|                  |   |           | service_port, num_addrs out of range               |                    |
| check_hs         | 3 | RESERVED  | CONNECT: byte 67 != 0 (ACCEPT: admit, any value)   | metaroce.reserved  |
| check_hs         | 4 | TRUNCATED | datalen < 68 + 20 * num_addrs                      | metaroce.truncated |
| check_hs         | 5 | LENGTH    | datalen > 68 + 20 * num_addrs                      | metaroce.length    |
| check_hs         | 6 | RANGE     | address family not 4/6, or plane >= 16             | metaroce.range     |
| check_hs         | 7 | RESERVED  | address entry bytes 2-3 != 0                       | metaroce.reserved  |
| check_hs         | 8 | RESERVED  | IPv4 entry with address bytes 4-15 != 0            | metaroce.reserved  |
| check_pkt        | 1 | LENGTH    | PROBE_ACK with GRANT: datalen != 52                | metaroce.length    |
| check_pkt        | 2 | LENGTH    | datalen != fixed length (ACK..RETRY)               | metaroce.length    |
| check_pkt        | 3 | RANGE     | NAK reason not 1-7                                 | metaroce.range     |
| check_pkt        | 4 | RESERVED  | NAK byte 29 != 0                                   | metaroce.reserved  |
| check_pkt        | 5 | RANGE     | NAK token_echo != 0 exactly when UNKNOWN_CONN       | metaroce.range     |
| check_pkt        | 6 | RESERVED  | NAK retry_after_us != 0 unless RNR                 | metaroce.reserved  |
| check_pkt        | 7 | RESERVED  | PROBE bytes 32-35 != 0                             | metaroce.reserved  |
| check_pkt        | 8 | RANGE     | REJECT reason not 1-5, min_version 0 or > max      | metaroce.range     |
| check_pkt        | 9 | RESERVED  | REJECT byte 31 != 0                                | metaroce.reserved  |
| check_pkt        |10 | RANGE     | CLOSE/RESET reason > 5                             | metaroce.range     |
| check_pkt        |11 | RESERVED  | CLOSE/RESET bytes 30-31 != 0                       | metaroce.reserved  |
| check_pkt        |12 | RANGE     | RETRY cookie = 0                                   | metaroce.range     |
| check_pkt        |13 | RESERVED  | RETRY bytes 40-43 != 0                             | metaroce.reserved  |
END WIRE.C CHECKS

Beyond the decoder (never an error, never metaroce.error):
- A datagram that holds several whole packets, each but the last of the first
  one's length, is a UDP GSO or GRO batch as captured on a host before the
  kernel or NIC split it (every datagram on the wire is one packet). Each
  segment is dissected as its own packet, with a note (metaroce.gso) and
  metaroce.gso_segments. Preference "Split GSO/GRO batches" turns this off,
  and the datagram is then judged as the decoder would (LENGTH).
- A packet cut short by the capture's snapshot length is shown as far as it
  was captured, with a note (metaroce.snaplen); its validity is unknown.
- An ACK whose SACK bit 0 is clear gets a warning (SPEC 6.2: bit 0 is the
  highest PSN received, always set); the codec does not check it.
- A CONNECT of another version gets a note (SPEC 12.3: answered with REJECT).
--]]

local p = Proto("metaroce", "MetaRoCE")

-- ---- constants of proto/wire.h ----------------------------------------------

local VERSION = 1
local DEFAULT_PORT = 19791
local HDR_LEN, DATA_HDR_LEN = 28, 72
local HS_FIXED_LEN, HS_ADDR_LEN = 68, 20
local MTU_MIN, MTU_MAX = 256, 9000
local MSG_MAX = 0x80000000
local MAX_ADDRS = 16

local OP = {
	WRITE = 0x01, WRITE_IMM = 0x02, SEND = 0x03, SEND_IMM = 0x04,
	READ_REQ = 0x05, READ_RESP = 0x06,
	ACK = 0x10, NAK = 0x11, PROBE = 0x12, PROBE_ACK = 0x13,
	CONNECT = 0x20, ACCEPT = 0x21, REJECT = 0x22, CLOSE = 0x23, RESET = 0x24,
	RETRY = 0x25,
}

-- Names of every opcode wire.h defines.
local OPCODE_NAMES = {
	[0x01] = "WRITE", [0x02] = "WRITE_IMM", [0x03] = "SEND", [0x04] = "SEND_IMM",
	[0x05] = "READ_REQ", [0x06] = "READ_RESP",
	[0x10] = "ACK", [0x11] = "NAK", [0x12] = "PROBE", [0x13] = "PROBE_ACK",
	[0x20] = "CONNECT", [0x21] = "ACCEPT", [0x22] = "REJECT", [0x23] = "CLOSE",
	[0x24] = "RESET", [0x25] = "RETRY",
}

-- Fixed length of each valid opcode (wire.c fixed_len()): the whole packet
-- but for the payload (data) or the address list (CONNECT, ACCEPT).
local FIXED_LEN = {
	[0x01] = 72, [0x02] = 72, [0x03] = 72, [0x04] = 72, [0x05] = 72, [0x06] = 72,
	[0x10] = 92, [0x11] = 60, [0x12] = 44, [0x13] = 48,
	[0x20] = 68, [0x21] = 68, [0x22] = 36, [0x23] = 32, [0x24] = 32,
	[0x25] = 44,
}

local F_FIRST, F_LAST, F_RETX, F_ACK_REQ, F_REPLY, F_HELD = 0x0001, 0x0002, 0x0004, 0x0008, 0x0010, 0x0020
local F_GRANT = 0x0040
local FLAG_NAMES = { {F_FIRST, "FIRST"}, {F_LAST, "LAST"}, {F_RETX, "RETX"},
	{F_ACK_REQ, "ACK_REQ"}, {F_REPLY, "REPLY"}, {F_HELD, "HELD"}, {F_GRANT, "GRANT"} }
local F_UNASSIGNED = 0xff80
-- A PROBE_ACK with GRANT carries grant_mbps after the 48 bytes (SPEC 8.3).
local PROBE_ACK_GRANT_LEN = 52

local CAP_IMM, CAP_RATE_HINT, CAP_MULTIPLANE, CAP_RETRY, CAP_READ, CAP_HELD = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20
local CAP_ADMIT = 0x40
local CAP_KNOWN = 0x7f

local NAK_REASONS = {
	[1] = "INVALID_RKEY", [2] = "OUT_OF_BOUNDS", [3] = "ACCESS", [4] = "RNR",
	[5] = "UNKNOWN_CONN", [6] = "UNKNOWN_STREAM", [7] = "MALFORMED",
}
local NAK_RNR, NAK_UNKNOWN_CONN, NAK_MAX = 4, 5, 7

local REJECT_REASONS = {
	[1] = "VERSION", [2] = "NO_SERVICE", [3] = "RESOURCES", [4] = "REFUSED", [5] = "PARAM",
}
local REJ_VERSION, REJ_MAX = 1, 5

local CLOSE_REASONS = {
	[0] = "NORMAL", [1] = "APP_EXIT", [2] = "SHUTDOWN", [3] = "PEER_RESTART",
	[4] = "RETRY_EXCEEDED", [5] = "PROTOCOL",
}
local CLOSE_MAX = 5

local FAMILIES = { [4] = "IPv4", [6] = "IPv6" }

-- The decoder's error codes (proto/error.h) and what they say.
local ERR_TEXT = {
	TRUNCATED = "packet shorter than its header",
	VERSION = "unsupported protocol version",
	OPCODE = "unknown or reserved opcode",
	FLAGS = "flag not valid for this opcode",
	LENGTH = "length field does not match the packet",
	RANGE = "field out of its valid range",
	RESERVED = "reserved field is not zero",
}

local function is_data(op) return op >= OP.WRITE and op <= OP.READ_RESP end

-- ---- fields -------------------------------------------------------------------

local f = {}
local function field(key, pf) f[key] = pf end

field("version", ProtoField.uint8("metaroce.version", "Version", base.DEC))
field("opcode", ProtoField.uint8("metaroce.opcode", "Opcode", base.HEX, OPCODE_NAMES))
field("flags", ProtoField.uint16("metaroce.flags", "Flags", base.HEX))
field("flags.first", ProtoField.bool("metaroce.flags.first", "FIRST", 16, nil, F_FIRST,
	"first packet of the message (offset 0)"))
field("flags.last", ProtoField.bool("metaroce.flags.last", "LAST", 16, nil, F_LAST,
	"last packet of the message"))
field("flags.retx", ProtoField.bool("metaroce.flags.retx", "RETX", 16, nil, F_RETX,
	"retransmission"))
field("flags.ack_req", ProtoField.bool("metaroce.flags.ack_req", "ACK_REQ", 16, nil, F_ACK_REQ,
	"acknowledge without delay"))
field("flags.reply", ProtoField.bool("metaroce.flags.reply", "REPLY", 16, nil, F_REPLY,
	"this CLOSE answers a CLOSE"))
field("flags.held", ProtoField.bool("metaroce.flags.held", "HELD", 16, nil, F_HELD,
	"the receiver's rate hint holds back more data that is ready"))
field("flags.grant", ProtoField.bool("metaroce.flags.grant", "GRANT", 16, nil, F_GRANT,
	"first-round-trip admission: data sent on it, a request (PROBE), a grant (PROBE_ACK)"))
field("flags.unassigned", ProtoField.uint16("metaroce.flags.unassigned", "Unassigned", base.HEX,
	nil, F_UNASSIGNED))
field("path", ProtoField.uint16("metaroce.path", "Path ID", base.DEC, nil, nil,
	"the sender's path the packet travels on"))
field("path_gen", ProtoField.uint16("metaroce.path_gen", "Path generation", base.DEC))
field("dst_conn_id", ProtoField.uint32("metaroce.dst_conn_id", "Destination connection ID", base.HEX))
field("src_conn_id", ProtoField.uint32("metaroce.src_conn_id", "Source connection ID", base.HEX))
field("conn", ProtoField.uint32("metaroce.conn", "Connection ID", base.HEX, nil, nil,
	"either connection id of the packet (hidden; filter on both directions)"))
field("token", ProtoField.uint64("metaroce.token", "Token", base.HEX))
field("psn", ProtoField.uint32("metaroce.psn", "PSN", base.DEC))

-- data packets
field("stream", ProtoField.uint16("metaroce.stream", "Stream ID", base.DEC))
field("payload_len", ProtoField.uint16("metaroce.payload_len", "Payload length", base.DEC))
field("msn", ProtoField.uint32("metaroce.msn", "MSN", base.DEC))
field("offset", ProtoField.uint32("metaroce.offset", "Offset", base.DEC))
field("msg_len", ProtoField.uint32("metaroce.msg_len", "Message length", base.DEC))
field("recv_idx", ProtoField.uint32("metaroce.recv_idx", "Receive index", base.DEC))
field("ts_ns", ProtoField.uint64("metaroce.ts_ns", "Timestamp (ns)", base.DEC))
field("remote_addr", ProtoField.uint64("metaroce.remote_addr", "Remote address", base.HEX))
field("rkey", ProtoField.uint32("metaroce.rkey", "RKey", base.HEX))
field("imm", ProtoField.uint32("metaroce.imm", "Immediate data", base.HEX))
field("payload", ProtoField.bytes("metaroce.payload", "Payload"))

-- ACK
field("acked_path", ProtoField.uint16("metaroce.acked_path", "Acked path ID", base.DEC))
field("acked_path_gen", ProtoField.uint16("metaroce.acked_path_gen", "Acked path generation", base.DEC))
field("next_psn", ProtoField.uint32("metaroce.next_psn", "Next PSN", base.DEC,
	nil, nil, "highest PSN received on the acked path generation, plus one"))
field("sack", ProtoField.bytes("metaroce.sack", "SACK bitmap"))
field("sack.window_first", ProtoField.uint32("metaroce.sack.window_first", "Lowest PSN reported", base.DEC))
field("sack.window_last", ProtoField.uint32("metaroce.sack.window_last", "Highest PSN reported", base.DEC))
field("sack.received_count", ProtoField.uint16("metaroce.sack.received_count", "PSNs received", base.DEC))
field("sack.missing_count", ProtoField.uint16("metaroce.sack.missing_count", "PSNs missing", base.DEC))
field("sack.received", ProtoField.string("metaroce.sack.received", "Received"))
field("sack.missing", ProtoField.string("metaroce.sack.missing", "Missing"))
field("sack.received_first", ProtoField.uint32("metaroce.sack.received_first", "First PSN", base.DEC))
field("sack.received_last", ProtoField.uint32("metaroce.sack.received_last", "Last PSN", base.DEC))
field("sack.missing_first", ProtoField.uint32("metaroce.sack.missing_first", "First PSN", base.DEC))
field("sack.missing_last", ProtoField.uint32("metaroce.sack.missing_last", "Last PSN", base.DEC))
field("ce_count", ProtoField.uint32("metaroce.ce_count", "CE count", base.DEC))
field("rcv_count", ProtoField.uint32("metaroce.rcv_count", "Receive count", base.DEC))
field("ack_delay_ns", ProtoField.uint32("metaroce.ack_delay_ns", "ACK delay (ns)", base.DEC))
field("ts_echo_ns", ProtoField.uint64("metaroce.ts_echo_ns", "Timestamp echo (ns)", base.DEC))
field("rate_hint_mbps", ProtoField.uint32("metaroce.rate_hint_mbps", "Rate hint (Mbit/s)", base.DEC,
	nil, nil, "rate the receiver allots to this connection; 0 = no hint"))

-- NAK
field("nak_reason", ProtoField.uint8("metaroce.nak_reason", "NAK reason", base.DEC, NAK_REASONS))
field("nak_path", ProtoField.uint16("metaroce.nak_path", "NAK path ID", base.DEC))
field("nak_path_gen", ProtoField.uint16("metaroce.nak_path_gen", "NAK path generation", base.DEC))
field("nak_psn", ProtoField.uint32("metaroce.nak_psn", "NAK PSN", base.DEC))
field("retry_after_us", ProtoField.uint32("metaroce.retry_after_us", "Retry after (us)", base.DEC))
field("token_echo", ProtoField.uint64("metaroce.token_echo", "Token echo", base.HEX))

-- PROBE, PROBE_ACK
field("probe_seq", ProtoField.uint32("metaroce.probe_seq", "Probe sequence", base.DEC))
field("probed_path", ProtoField.uint16("metaroce.probed_path", "Probed path ID", base.DEC))
field("probed_path_gen", ProtoField.uint16("metaroce.probed_path_gen", "Probed path generation", base.DEC))
field("grant_mbps", ProtoField.uint32("metaroce.grant_mbps", "Grant (Mbit/s)", base.DEC, nil, nil,
	"the rate the receiver grants the connection (SPEC 6.6); 0 = start with the initial window"))

-- CONNECT, ACCEPT
field("min_version", ProtoField.uint8("metaroce.min_version", "Min version", base.DEC))
field("max_version", ProtoField.uint8("metaroce.max_version", "Max version", base.DEC))
field("mtu", ProtoField.uint16("metaroce.mtu", "MTU (payload bytes)", base.DEC))
field("service_id", ProtoField.uint32("metaroce.service_id", "Service ID", base.HEX))
field("hs_token", ProtoField.uint64("metaroce.hs_token", "Handshake token", base.HEX))
field("instance_id", ProtoField.uint64("metaroce.instance_id", "Instance ID", base.HEX))
field("caps", ProtoField.uint64("metaroce.caps", "Capabilities", base.HEX))
field("caps.imm", ProtoField.bool("metaroce.caps.imm", "IMM", 64, nil, CAP_IMM,
	"WRITE_IMM and SEND_IMM"))
field("caps.rate_hint", ProtoField.bool("metaroce.caps.rate_hint", "RATE_HINT", 64, nil, CAP_RATE_HINT,
	"ACK rate hints are honoured"))
field("caps.multiplane", ProtoField.bool("metaroce.caps.multiplane", "MULTIPLANE", 64, nil, CAP_MULTIPLANE,
	"paths across several planes"))
field("caps.retry", ProtoField.bool("metaroce.caps.retry", "RETRY", 64, nil, CAP_RETRY,
	"CONNECT: the initiator follows RETRY (SPEC 9.7)"))
field("caps.read", ProtoField.bool("metaroce.caps.read", "READ", 64, nil, CAP_READ,
	"READ_REQ and READ_RESP (SPEC 5.8)"))
field("caps.held", ProtoField.bool("metaroce.caps.held", "HELD", 64, nil, CAP_HELD,
	"data packets carry HELD (SPEC 6.5)"))
field("caps.admit", ProtoField.bool("metaroce.caps.admit", "ADMIT", 64, nil, CAP_ADMIT,
	"first-round-trip admission (SPEC 6.6)"))
field("caps.unassigned", ProtoField.uint64("metaroce.caps.unassigned", "Unassigned bits", base.HEX))
field("max_streams", ProtoField.uint16("metaroce.max_streams", "Max streams", base.DEC))
field("max_paths", ProtoField.uint16("metaroce.max_paths", "Max paths", base.DEC))
field("service_port", ProtoField.uint16("metaroce.service_port", "Service port", base.DEC))
field("num_addrs", ProtoField.uint8("metaroce.num_addrs", "Number of addresses", base.DEC))
field("admit", ProtoField.uint8("metaroce.admit", "Admit", base.DEC, nil, nil,
	"ACCEPT: the initiator's first-round-trip credit, 4 KiB x 2^((admit - 1) / 8) bytes; 0 none (SPEC 6.6)"))
field("addr", ProtoField.none("metaroce.addr", "Plane address"))
field("addr.family", ProtoField.uint8("metaroce.addr.family", "Family", base.DEC, FAMILIES))
field("addr.plane", ProtoField.uint8("metaroce.addr.plane", "Plane", base.DEC))
field("addr.raw", ProtoField.bytes("metaroce.addr.raw", "Address bytes"))
field("addr.ipv4", ProtoField.ipv4("metaroce.addr.ipv4", "IPv4 address"))
field("addr.ipv6", ProtoField.ipv6("metaroce.addr.ipv6", "IPv6 address"))

-- RETRY
field("cookie", ProtoField.uint64("metaroce.cookie", "Cookie", base.HEX, nil, nil,
	"what the initiator puts in its next CONNECT's token (SPEC 9.7)"))

-- REJECT, CLOSE, RESET
field("reject_reason", ProtoField.uint8("metaroce.reject_reason", "REJECT reason", base.DEC, REJECT_REASONS))
field("close_reason", ProtoField.uint16("metaroce.close_reason", "Reason", base.DEC, CLOSE_REASONS))

-- every packet
field("reserved", ProtoField.bytes("metaroce.reserved", "Reserved"))
field("undecoded", ProtoField.bytes("metaroce.undecoded", "Not decoded"))
field("error", ProtoField.string("metaroce.error", "Decoder error",
	"the error proto/wire.c's decoder returns for this packet (the drop counter's name)"))
field("gso_segments", ProtoField.uint16("metaroce.gso_segments", "Packets in this GSO/GRO batch", base.DEC))
field("gso_index", ProtoField.uint16("metaroce.gso_index", "Index in the GSO/GRO batch", base.DEC))

do
	local list = {}
	for _, v in pairs(f) do list[#list + 1] = v end
	p.fields = list
end

local ef = {
	TRUNCATED = ProtoExpert.new("metaroce.truncated", "MRP_ERR_TRUNCATED",
		expert.group.MALFORMED, expert.severity.ERROR),
	VERSION = ProtoExpert.new("metaroce.version.bad", "MRP_ERR_VERSION",
		expert.group.MALFORMED, expert.severity.ERROR),
	OPCODE = ProtoExpert.new("metaroce.opcode.bad", "MRP_ERR_OPCODE",
		expert.group.MALFORMED, expert.severity.ERROR),
	FLAGS = ProtoExpert.new("metaroce.flags.bad", "MRP_ERR_FLAGS",
		expert.group.MALFORMED, expert.severity.ERROR),
	LENGTH = ProtoExpert.new("metaroce.length", "MRP_ERR_LENGTH",
		expert.group.MALFORMED, expert.severity.ERROR),
	RANGE = ProtoExpert.new("metaroce.range", "MRP_ERR_RANGE",
		expert.group.MALFORMED, expert.severity.ERROR),
	RESERVED = ProtoExpert.new("metaroce.reserved.bad", "MRP_ERR_RESERVED",
		expert.group.MALFORMED, expert.severity.ERROR),
	gso = ProtoExpert.new("metaroce.gso", "GSO/GRO batch",
		expert.group.PROTOCOL, expert.severity.NOTE),
	snaplen = ProtoExpert.new("metaroce.snaplen", "Cut by the snapshot length",
		expert.group.UNDECODED, expert.severity.NOTE),
	sack_bit0 = ProtoExpert.new("metaroce.sack.bit0_clear", "SACK bit 0 clear",
		expert.group.PROTOCOL, expert.severity.WARN),
	other_version = ProtoExpert.new("metaroce.version.other", "Other version",
		expert.group.PROTOCOL, expert.severity.NOTE),
}
do
	local list = {}
	for _, v in pairs(ef) do list[#list + 1] = v end
	p.experts = list
end

p.prefs.ports = Pref.range("UDP ports", tostring(DEFAULT_PORT),
	"UDP ports MetaRoCE endpoints receive on (the service port, default 19791); " ..
	"packets on other ports are found by the heuristic dissector", 65535)
p.prefs.split_gso = Pref.bool("Split GSO/GRO batches", true,
	"Dissect a datagram that holds several whole packets (a UDP GSO or GRO batch " ..
	"captured before segmentation) as those packets; off: judge it as one datagram, " ..
	"as the decoder would (LENGTH)")

-- ---- reading ------------------------------------------------------------------

-- Raised (as an error value) when a read needs bytes the capture does not have.
local UNCAPTURED = {}

local function reader(tvb)
	local cap = tvb:len()
	local r = {}
	local function need(off, len)
		if off + len > cap then error(UNCAPTURED, 0) end
	end
	function r.u8(off) need(off, 1) return tvb(off, 1):uint() end
	function r.u16(off) need(off, 2) return tvb(off, 2):uint() end
	function r.u32(off) need(off, 4) return tvb(off, 4):uint() end
	function r.u64(off) need(off, 8) return tvb(off, 8):uint64() end
	function r.zero(off, len)
		need(off, len)
		for i = off, off + len - 1 do
			if tvb(i, 1):uint() ~= 0 then return false end
		end
		return true
	end
	function r.zero64(off) return r.u32(off) == 0 and r.u32(off + 4) == 0 end
	return r
end

-- ---- the decoder's rules (proto/wire.c), in its order --------------------------
--
-- Each returns nil when the packet is valid, else the error code, the key of
-- the field to flag (an item key of render()) and a sentence.

local TOKEN_ZERO, TOKEN_NONZERO, TOKEN_ANY = 0, 1, 2

local function allowed_flags(op)
	if is_data(op) then return bit32.bor(F_FIRST, F_LAST, F_RETX, F_ACK_REQ, F_HELD, F_GRANT) end
	if op == OP.PROBE then return bit32.bor(F_ACK_REQ, F_GRANT) end
	if op == OP.PROBE_ACK then return F_GRANT end
	if op == OP.CLOSE then return F_REPLY end
	return 0
end

-- check_hdr(): flags, then the common header's fields.
local function check_hdr(r, op, token_rule)
	local flags = r.u16(2)
	local per_path = op < OP.CONNECT
	if bit32.band(flags, bit32.bnot(allowed_flags(op))) ~= 0 then
		return "FLAGS", "flags", string.format("flags 0x%04x: a flag not valid on %s",
			flags, OPCODE_NAMES[op])
	end
	if (r.u32(8) == 0) ~= (op == OP.CONNECT) then
		return "RANGE", "dst_conn_id", op == OP.CONNECT and
			"dst_conn_id must be 0 in CONNECT" or "dst_conn_id must not be 0"
	end
	local no_src = op == OP.REJECT or op == OP.RETRY
	if (r.u32(12) == 0) ~= no_src then
		return "RANGE", "src_conn_id", no_src and
			"src_conn_id must be 0 in " .. OPCODE_NAMES[op] or "src_conn_id must not be 0"
	end
	local token_zero = r.zero64(16)
	if token_rule == TOKEN_ZERO and not token_zero then
		return "RANGE", "token", "token must be 0 in NAK UNKNOWN_CONN"
	end
	if token_rule == TOKEN_NONZERO and token_zero then
		return "RANGE", "token", "token must not be 0"
	end
	if not is_data(op) and r.u32(24) ~= 0 then
		return "RESERVED", "psn", "psn must be 0 outside data packets"
	end
	if not per_path and (r.u16(4) ~= 0 or r.u16(6) ~= 0) then
		return "RESERVED", r.u16(4) ~= 0 and "path" or "path_gen",
			"path_id and path_gen must be 0 in " .. OPCODE_NAMES[op]
	end
	return nil
end

-- check_data()
local function check_data(r, op, datalen)
	local is_read = op == OP.READ_REQ or op == OP.READ_RESP
	-- tagged: remote_addr and rkey name memory (WRITE*: the receiver's,
	-- READ_*: the responder's)
	local is_write = op == OP.WRITE or op == OP.WRITE_IMM or is_read
	local is_imm = op == OP.WRITE_IMM or op == OP.SEND_IMM
	local code, key, msg = check_hdr(r, op, TOKEN_NONZERO)
	if code then return code, key, msg end
	local flags = r.u16(2)
	local payload_len, offset, msg_len = r.u16(30), r.u32(36), r.u32(40)
	local e = offset + payload_len -- exact: Lua numbers are doubles
	if datalen ~= DATA_HDR_LEN + payload_len then
		return "LENGTH", "payload_len", string.format(
			"datagram of %d bytes, payload_len %d needs %d", datalen, payload_len,
			DATA_HDR_LEN + payload_len)
	end
	if payload_len > MTU_MAX then
		return "RANGE", "payload_len", string.format("payload_len %d > %d", payload_len, MTU_MAX)
	end
	if msg_len > MSG_MAX then
		return "RANGE", "msg_len", string.format("msg_len %d > 2^31", msg_len)
	end
	if op == OP.READ_REQ then
		if payload_len ~= 0 or offset ~= 0 then
			return "LENGTH", payload_len ~= 0 and "payload_len" or "offset",
				"a READ_REQ has no payload: payload_len and offset must be 0"
		end
		if bit32.band(flags, F_FIRST + F_LAST) ~= F_FIRST + F_LAST then
			return "FLAGS", "flags", "a READ_REQ is always FIRST and LAST"
		end
	elseif e > msg_len then
		return "LENGTH", "offset", string.format("offset %d + payload_len %d > msg_len %d",
			offset, payload_len, msg_len)
	elseif payload_len == 0 and msg_len ~= 0 then
		return "LENGTH", "payload_len", "empty payload in a message of " .. msg_len .. " bytes"
	elseif (bit32.band(flags, F_FIRST) == 0) ~= (offset ~= 0) then
		return "FLAGS", "flags", "FIRST must be set exactly when offset = 0"
	elseif (bit32.band(flags, F_LAST) == 0) ~= (e ~= msg_len) then
		return "FLAGS", "flags", "LAST must be set exactly when offset + payload_len = msg_len"
	end
	if is_write and msg_len ~= 0 and
	   r.u64(56) > UInt64.max() - UInt64(msg_len - 1) then
		return "RANGE", "remote_addr", "remote_addr + msg_len > 2^64"
	end
	if not is_write and not (r.zero64(56) and r.u32(64) == 0) then
		return "RESERVED", r.zero64(56) and "rkey" or "remote_addr",
			"remote_addr and rkey must be 0 in " .. OPCODE_NAMES[op]
	end
	if not is_imm and r.u32(68) ~= 0 then
		return "RESERVED", "imm", "imm must be 0 in " .. OPCODE_NAMES[op]
	end
	if (op == OP.WRITE or is_read) and r.u32(44) ~= 0 then
		return "RESERVED", "recv_idx", "recv_idx must be 0 in " .. OPCODE_NAMES[op]
	end
	return nil
end

-- check_hs(): CONNECT and ACCEPT after the common header.
local function check_hs(r, op, datalen)
	local minv, maxv = r.u8(28), r.u8(29)
	if minv == 0 or minv > maxv or (op == OP.ACCEPT and minv ~= maxv) then
		return "RANGE", "min_version", string.format("versions %d..%d%s", minv, maxv,
			op == OP.ACCEPT and " (ACCEPT: min = max)" or "")
	end
	local mtu, n = r.u16(30), r.u8(66)
	if mtu < MTU_MIN or mtu > MTU_MAX then
		return "RANGE", "mtu", string.format("mtu %d outside %d-%d", mtu, MTU_MIN, MTU_MAX)
	end
	if r.zero64(36) then return "RANGE", "hs_token", "hs_token must not be 0" end
	if r.u16(60) == 0 then return "RANGE", "max_streams", "max_streams must not be 0" end
	if r.u16(62) == 0 then return "RANGE", "max_paths", "max_paths must not be 0" end
	if r.u16(64) == 0 then return "RANGE", "service_port", "service_port must not be 0" end
	if n == 0 or n > MAX_ADDRS then
		return "RANGE", "num_addrs", string.format("num_addrs %d outside 1-%d", n, MAX_ADDRS)
	end
	if op == OP.CONNECT and r.u8(67) ~= 0 then
		return "RESERVED", "rsv67", "byte 67 must be 0 in a CONNECT"
	end
	local len = HS_FIXED_LEN + HS_ADDR_LEN * n
	if datalen < len then
		return "TRUNCATED", "num_addrs", string.format(
			"%d addresses need %d bytes, the datagram has %d", n, len, datalen)
	end
	if datalen > len then
		return "LENGTH", "num_addrs", string.format(
			"%d addresses need %d bytes, the datagram has %d", n, len, datalen)
	end
	for i = 0, n - 1 do
		local a = HS_FIXED_LEN + HS_ADDR_LEN * i
		local fam, plane = r.u8(a), r.u8(a + 1)
		if (fam ~= 4 and fam ~= 6) or plane >= MAX_ADDRS then
			return "RANGE", "addr" .. i, string.format(
				"address %d: family %d, plane %d (family 4 or 6, plane 0-15)", i, fam, plane)
		end
		if not r.zero(a + 2, 2) then
			return "RESERVED", "addr" .. i .. ".rsv", "address " .. i .. ": reserved bytes not 0"
		end
		if fam == 4 and not r.zero(a + 8, 12) then
			return "RESERVED", "addr" .. i .. ".raw",
				"address " .. i .. ": IPv4 address with nonzero bytes 4-15"
		end
	end
	return nil
end

-- check_pkt() for the packets that are not data packets.
local function check_control(r, op, datalen)
	local token_rule = TOKEN_NONZERO
	if op == OP.NAK and r.u8(28) == NAK_UNKNOWN_CONN then
		token_rule = TOKEN_ZERO
	elseif op == OP.REJECT and r.u8(28) == REJ_VERSION then
		token_rule = TOKEN_ANY
	elseif op == OP.CONNECT then
		token_rule = TOKEN_ANY -- 0, or the cookie of a RETRY (SPEC 9.7)
	end
	local code, key, msg = check_hdr(r, op, token_rule)
	if code then return code, key, msg end
	if op == OP.CONNECT or op == OP.ACCEPT then return check_hs(r, op, datalen) end
	if op == OP.PROBE_ACK and bit32.band(r.u16(2), F_GRANT) ~= 0 then
		if datalen ~= PROBE_ACK_GRANT_LEN then
			return "LENGTH", "packet", string.format(
				"PROBE_ACK with GRANT is %d bytes, the datagram has %d",
				PROBE_ACK_GRANT_LEN, datalen)
		end
	elseif datalen ~= FIXED_LEN[op] then
		return "LENGTH", "packet", string.format("%s is %d bytes, the datagram has %d",
			OPCODE_NAMES[op], FIXED_LEN[op], datalen)
	end
	if op == OP.NAK then
		local reason = r.u8(28)
		if reason < 1 or reason > NAK_MAX then
			return "RANGE", "nak_reason", "NAK reason " .. reason .. " outside 1-7"
		end
		if r.u8(29) ~= 0 then return "RESERVED", "rsv29", "byte 29 must be 0" end
		if (not r.zero64(52)) ~= (reason == NAK_UNKNOWN_CONN) then
			return "RANGE", "token_echo",
				"token_echo must be nonzero exactly with reason UNKNOWN_CONN"
		end
		if r.u32(48) ~= 0 and reason ~= NAK_RNR then
			return "RESERVED", "retry_after_us", "retry_after_us must be 0 unless RNR"
		end
	elseif op == OP.PROBE then
		if not r.zero(32, 4) then return "RESERVED", "rsv32", "bytes 32-35 must be 0" end
	elseif op == OP.REJECT then
		local reason, minv, maxv = r.u8(28), r.u8(29), r.u8(30)
		if reason < 1 or reason > REJ_MAX or minv == 0 or minv > maxv then
			return "RANGE", (reason < 1 or reason > REJ_MAX) and "reject_reason" or "min_version",
				string.format("reason %d (1-5), versions %d..%d", reason, minv, maxv)
		end
		if r.u8(31) ~= 0 then return "RESERVED", "rsv31", "byte 31 must be 0" end
	elseif op == OP.CLOSE or op == OP.RESET then
		if r.u16(28) > CLOSE_MAX then
			return "RANGE", "close_reason", "reason " .. r.u16(28) .. " outside 0-5"
		end
		if not r.zero(30, 2) then return "RESERVED", "rsv30", "bytes 30-31 must be 0" end
	elseif op == OP.RETRY then
		if r.zero64(28) then return "RANGE", "cookie", "cookie must not be 0" end
		if not r.zero(40, 4) then return "RESERVED", "rsv40", "bytes 40-43 must be 0" end
	end
	-- ACK, PROBE_ACK: every body value is legal
	return nil
end

-- mrp_pkt_decode(): the verdict on one packet of datalen bytes. Returns nil
-- (valid), or code, key, message; or "UNKNOWN" when the capture lacks bytes
-- the verdict needs.
local function verdict(tvb, datalen)
	local r = reader(tvb)
	local ok, code, key, msg = pcall(function()
		if datalen < HDR_LEN then
			return "TRUNCATED", "packet", string.format(
				"%d bytes: shorter than the %d-byte common header", datalen, HDR_LEN)
		end
		local version, op = r.u8(0), r.u8(1)
		if version ~= VERSION then
			return "VERSION", "version", "version " .. version .. " (this is version 1)"
		end
		if FIXED_LEN[op] == nil then
			return "OPCODE", "opcode", string.format("opcode 0x%02x %s", op,
				OPCODE_NAMES[op] and "is reserved" or "is unknown")
		end
		if datalen < FIXED_LEN[op] then
			return "TRUNCATED", "packet", string.format("%d bytes: %s needs at least %d",
				datalen, OPCODE_NAMES[op], FIXED_LEN[op])
		end
		if is_data(op) then return check_data(r, op, datalen) end
		return check_control(r, op, datalen)
	end)
	if ok then return code, key, msg end
	if code == UNCAPTURED then return "UNKNOWN" end
	error(code, 0)
end

-- The length the packet at the start of tvb says it has, or nil when its
-- header cannot say (bad version or opcode, too short, not captured).
local function own_length(tvb, datalen)
	local r = reader(tvb)
	local ok, len = pcall(function()
		if datalen < HDR_LEN or r.u8(0) ~= VERSION then return nil end
		local op = r.u8(1)
		local fl = FIXED_LEN[op]
		if fl == nil or datalen < fl then return nil end
		if is_data(op) then return DATA_HDR_LEN + r.u16(30) end
		if op == OP.CONNECT or op == OP.ACCEPT then return HS_FIXED_LEN + HS_ADDR_LEN * r.u8(66) end
		if op == OP.PROBE_ACK and bit32.band(r.u16(2), F_GRANT) ~= 0 then return PROBE_ACK_GRANT_LEN end
		return fl
	end)
	if ok then return len end
	return nil
end

-- A GSO/GRO batch: every segment but the last exactly seg bytes long, the
-- last at most seg, each a packet whose own length is its segment's. Returns
-- the list of segment offsets, or nil.
local function gso_split(tvb)
	local datalen = tvb:reported_len()
	if tvb:len() < datalen then return nil end
	local seg = own_length(tvb, datalen)
	if seg == nil or seg < HDR_LEN or seg >= datalen then return nil end
	local offs, off = {}, 0
	while off < datalen do
		local l = math.min(seg, datalen - off)
		if own_length(tvb:range(off, l):tvb(), l) ~= l then return nil end
		offs[#offs + 1] = off
		off = off + l
	end
	return offs, seg
end

-- ---- rendering ------------------------------------------------------------------

-- Field layouts: key, offset, length. The key names the field (f[key]) and
-- the tree item (for the expert info of a failing rule).
local HDR = {
	{"version", 0, 1}, {"opcode", 1, 1}, {"flags", 2, 2}, {"path", 4, 2},
	{"path_gen", 6, 2}, {"dst_conn_id", 8, 4}, {"src_conn_id", 12, 4},
	{"token", 16, 8}, {"psn", 24, 4},
}
local DATA = {
	{"stream", 28, 2}, {"payload_len", 30, 2}, {"msn", 32, 4}, {"offset", 36, 4},
	{"msg_len", 40, 4}, {"recv_idx", 44, 4}, {"ts_ns", 48, 8}, {"remote_addr", 56, 8},
	{"rkey", 64, 4}, {"imm", 68, 4},
}
local ACK = {
	{"acked_path", 28, 2}, {"acked_path_gen", 30, 2}, {"next_psn", 32, 4},
	{"sack", 36, 32}, {"ce_count", 68, 4}, {"rcv_count", 72, 4},
	{"ack_delay_ns", 76, 4}, {"ts_echo_ns", 80, 8}, {"rate_hint_mbps", 88, 4},
}
local NAK = {
	{"nak_reason", 28, 1}, {"rsv29", 29, 1}, {"stream", 30, 2}, {"msn", 32, 4},
	{"offset", 36, 4}, {"nak_path", 40, 2}, {"nak_path_gen", 42, 2},
	{"nak_psn", 44, 4}, {"retry_after_us", 48, 4}, {"token_echo", 52, 8},
}
local PROBE = { {"probe_seq", 28, 4}, {"rsv32", 32, 4}, {"ts_ns", 36, 8} }
local PROBE_ACK = {
	{"probed_path", 28, 2}, {"probed_path_gen", 30, 2}, {"probe_seq", 32, 4},
	{"ack_delay_ns", 36, 4}, {"ts_echo_ns", 40, 8},
}
local PROBE_ACK_GRANT = {
	{"probed_path", 28, 2}, {"probed_path_gen", 30, 2}, {"probe_seq", 32, 4},
	{"ack_delay_ns", 36, 4}, {"ts_echo_ns", 40, 8}, {"grant_mbps", 48, 4},
}
local HS = {
	{"min_version", 28, 1}, {"max_version", 29, 1}, {"mtu", 30, 2},
	{"service_id", 32, 4}, {"hs_token", 36, 8}, {"instance_id", 44, 8},
	{"caps", 52, 8}, {"max_streams", 60, 2}, {"max_paths", 62, 2},
	{"service_port", 64, 2}, {"num_addrs", 66, 1}, {"rsv67", 67, 1},
}
local ACCEPT_HS = {
	{"min_version", 28, 1}, {"max_version", 29, 1}, {"mtu", 30, 2},
	{"service_id", 32, 4}, {"hs_token", 36, 8}, {"instance_id", 44, 8},
	{"caps", 52, 8}, {"max_streams", 60, 2}, {"max_paths", 62, 2},
	{"service_port", 64, 2}, {"num_addrs", 66, 1}, {"admit", 67, 1},
}
local REJECT = {
	{"reject_reason", 28, 1}, {"min_version", 29, 1}, {"max_version", 30, 1},
	{"rsv31", 31, 1}, {"service_id", 32, 4},
}
local CLOSE = { {"close_reason", 28, 2}, {"rsv30", 30, 2} }
local RETRY = { {"cookie", 28, 8}, {"service_id", 36, 4}, {"rsv40", 40, 4} }

local BODY = {
	[0x01] = DATA, [0x02] = DATA, [0x03] = DATA, [0x04] = DATA, [0x05] = DATA, [0x06] = DATA,
	[0x10] = ACK, [0x11] = NAK, [0x12] = PROBE, [0x13] = PROBE_ACK,
	[0x20] = HS, [0x21] = HS, [0x22] = REJECT, [0x23] = CLOSE, [0x24] = CLOSE,
	[0x25] = RETRY,
}

local function field_of(key)
	if key:sub(1, 3) == "rsv" then return f.reserved end
	return f[key]
end

local function u64hex(v) return "0x" .. v:tohex() end

-- Flag names set in flags, "none" if none.
local function flag_text(flags)
	local t = {}
	for _, fl in ipairs(FLAG_NAMES) do
		if bit32.band(flags, fl[1]) ~= 0 then t[#t + 1] = fl[2] end
	end
	if bit32.band(flags, F_UNASSIGNED) ~= 0 then
		t[#t + 1] = string.format("0x%04x", bit32.band(flags, F_UNASSIGNED))
	end
	return #t > 0 and table.concat(t, ", ") or "none"
end

local function add_flags(tree, tvb, items)
	local flags = tvb(2, 2):uint()
	local it = tree:add(f.flags, tvb(2, 2))
	it:append_text(" (" .. flag_text(flags) .. ")")
	for _, k in ipairs({"flags.first", "flags.last", "flags.retx", "flags.ack_req",
			"flags.reply", "flags.held", "flags.grant", "flags.unassigned"}) do
		it:add(f[k], tvb(2, 2))
	end
	items.flags = it
end

local function add_caps(tree, tvb, items)
	local caps = tvb(52, 8):uint64()
	local it = tree:add(f.caps, tvb(52, 8))
	local names = {}
	for _, c in ipairs({{CAP_IMM, "IMM"}, {CAP_RATE_HINT, "RATE_HINT"}, {CAP_MULTIPLANE, "MULTIPLANE"},
			{CAP_RETRY, "RETRY"}, {CAP_READ, "READ"}, {CAP_HELD, "HELD"}, {CAP_ADMIT, "ADMIT"}}) do
		if caps:band(UInt64(c[1])) ~= UInt64(0) then names[#names + 1] = c[2] end
	end
	local unknown = caps:band(UInt64(CAP_KNOWN):bnot())
	if unknown ~= UInt64(0) then names[#names + 1] = "unassigned " .. u64hex(unknown) end
	it:append_text(" (" .. (#names > 0 and table.concat(names, ", ") or "none") .. ")")
	it:add(f["caps.imm"], tvb(52, 8))
	it:add(f["caps.rate_hint"], tvb(52, 8))
	it:add(f["caps.multiplane"], tvb(52, 8))
	it:add(f["caps.retry"], tvb(52, 8))
	it:add(f["caps.read"], tvb(52, 8))
	it:add(f["caps.held"], tvb(52, 8))
	it:add(f["caps.admit"], tvb(52, 8))
	it:add(f["caps.unassigned"], tvb(52, 8), unknown)
	items.caps = it
end

-- The SACK bitmap as ranges of received and missing PSNs, in PSN order.
-- Bit i (byte 36 + i/8, mask 1 << i%8) is PSN next_psn - 1 - i (mod 2^32).
-- When next_psn < 256 and no bit names a PSN "below 0", the window starts at
-- PSN 0 (every generation starts there) instead of wrapping around.
local function add_sack(tree, tvb, items)
	local it = tree:add(f.sack, tvb(36, 32))
	items.sack = it
	local next_psn = tvb(32, 4):uint()
	local bits = {}
	for i = 0, 255 do
		local b = tvb(36 + math.floor(i / 8), 1):uint()
		bits[i] = bit32.band(b, bit32.lshift(1, i % 8)) ~= 0
	end
	local width = 256
	if next_psn < 256 then
		local wraps = false
		for i = next_psn, 255 do if bits[i] then wraps = true end end
		if not wraps then width = next_psn end
	end
	local function psn(i) return (next_psn - 1 - i) % 4294967296 end
	local nrecv, nmiss = 0, 0
	for i = 0, width - 1 do
		if bits[i] then nrecv = nrecv + 1 else nmiss = nmiss + 1 end
	end
	if width > 0 then
		it:add(f["sack.window_first"], tvb(36, 32), psn(width - 1)):set_generated()
		it:add(f["sack.window_last"], tvb(36, 32), psn(0)):set_generated()
	end
	it:add(f["sack.received_count"], tvb(36, 32), nrecv):set_generated()
	it:add(f["sack.missing_count"], tvb(36, 32), nmiss):set_generated()
	local recv_ranges, miss_ranges = {}, {}
	local i = width - 1
	while i >= 0 do
		local j, set = i, bits[i]
		while j - 1 >= 0 and bits[j - 1] == set do j = j - 1 end
		local first, last = psn(i), psn(j)
		local text = first == last and tostring(first) or (first .. "-" .. last)
		local kind = set and "received" or "missing"
		local sub = it:add(f["sack." .. kind], tvb(36 + math.floor(j / 8),
			math.floor(i / 8) - math.floor(j / 8) + 1), text)
		sub:set_generated()
		-- first and last are there to filter on, not to read twice
		sub:add(f["sack." .. kind .. "_first"], first):set_hidden()
		sub:add(f["sack." .. kind .. "_last"], last):set_hidden()
		if set then recv_ranges[#recv_ranges + 1] = text else miss_ranges[#miss_ranges + 1] = text end
		i = j - 1
	end
	it:append_text(string.format(" (received %d, missing %d)", nrecv, nmiss))
	if width > 0 and not bits[0] then
		it:add_proto_expert_info(ef.sack_bit0,
			"SACK bit 0 (PSN next_psn - 1) is clear; SPEC 6.2: the highest PSN received is always set")
	end
	return recv_ranges, miss_ranges
end

local function add_addrs(tree, tvb, items, n)
	local cap = tvb:len()
	for i = 0, n - 1 do
		local a = HS_FIXED_LEN + HS_ADDR_LEN * i
		if a >= cap then break end
		local l = math.min(HS_ADDR_LEN, cap - a)
		local sub = tree:add(f.addr, tvb(a, l))
		items["addr" .. i] = sub
		local fam = tvb(a, 1):uint()
		local label = string.format("Plane address %d", i)
		if l >= 2 then
			sub:add(f["addr.family"], tvb(a, 1))
			sub:add(f["addr.plane"], tvb(a + 1, 1))
			label = label .. string.format(": plane %d", tvb(a + 1, 1):uint())
		end
		if l >= 4 then items["addr" .. i .. ".rsv"] = sub:add(f.reserved, tvb(a + 2, 2)) end
		if l == HS_ADDR_LEN then
			local raw = sub:add(f["addr.raw"], tvb(a + 4, 16))
			items["addr" .. i .. ".raw"] = raw
			if fam == 4 then
				raw:add(f["addr.ipv4"], tvb(a + 4, 4))
				label = label .. ", IPv4 " .. tostring(tvb(a + 4, 4):ipv4())
			elseif fam == 6 then
				raw:add(f["addr.ipv6"], tvb(a + 4, 16))
				label = label .. ", IPv6 " .. tostring(tvb(a + 4, 16):ipv6())
			end
		end
		sub:set_text(label)
	end
end

-- One line about the packet, for the Info column and the protocol item.
local function summary(tvb, datalen)
	local cap = tvb:len()
	if datalen < HDR_LEN then return "truncated" end
	if cap < HDR_LEN then return "header not captured" end
	local op = tvb(1, 1):uint()
	local name = OPCODE_NAMES[op] or string.format("opcode 0x%02x", op)
	if tvb(0, 1):uint() ~= VERSION then
		return string.format("v%d %s", tvb(0, 1):uint(), name)
	end
	local s = name
	local fl = FIXED_LEN[op]
	local function u(off, len) return tvb(off, len):uint() end
	if fl and cap >= fl then
		local path = string.format(" path %d/%d", u(4, 2), u(6, 2))
		if is_data(op) then
			s = s .. path .. string.format(" PSN=%d stream=%d MSN=%d off=%d len=%d/%d",
				u(24, 4), u(28, 2), u(32, 4), u(36, 4), u(30, 2), u(40, 4))
		elseif op == OP.ACK then
			s = s .. path .. string.format(" acks %d/%d next_psn=%d", u(28, 2), u(30, 2), u(32, 4))
		elseif op == OP.NAK then
			s = s .. " " .. (NAK_REASONS[u(28, 1)] or ("reason " .. u(28, 1))) ..
				string.format(" for %d/%d PSN=%d", u(40, 2), u(42, 2), u(44, 4))
		elseif op == OP.PROBE then
			s = s .. path .. " seq=" .. u(28, 4)
		elseif op == OP.PROBE_ACK then
			s = s .. path .. string.format(" for %d/%d seq=%d", u(28, 2), u(30, 2), u(32, 4))
		elseif op == OP.CONNECT or op == OP.ACCEPT then
			s = s .. string.format(" v%d-%d mtu=%d", u(28, 1), u(29, 1), u(30, 2))
		elseif op == OP.REJECT then
			s = s .. " " .. (REJECT_REASONS[u(28, 1)] or ("reason " .. u(28, 1)))
		elseif op == OP.CLOSE or op == OP.RESET then
			s = s .. " " .. (CLOSE_REASONS[u(28, 2)] or ("reason " .. u(28, 2)))
		elseif op == OP.RETRY then
			s = s .. " cookie=0x" .. tvb(28, 8):uint64():tohex()
		end
		if op == OP.CONNECT and (u(16, 4) ~= 0 or u(20, 4) ~= 0) then
			s = s .. " with cookie"
		end
		s = s .. string.format(" %08x->%08x", u(12, 4), u(8, 4))
		local flags = u(2, 2)
		if flags ~= 0 then s = s .. " [" .. flag_text(flags) .. "]" end
	end
	return s
end

-- Dissect one packet (the whole of tvb; segment gso_i of a batch if given).
-- Returns its error code or nil, and its summary.
local function dissect_packet(tvb, pinfo, tree, gso_i)
	local datalen, cap = tvb:reported_len(), tvb:len()
	local sum = summary(tvb, datalen)
	local top = tree:add(p, tvb())
	top:append_text(", " .. sum)
	local items = { packet = top }
	if gso_i then top:add(f.gso_index, gso_i):set_generated() end

	local code, key, msg = verdict(tvb, datalen)

	local version = cap >= 1 and tvb(0, 1):uint() or nil
	local op = cap >= 2 and tvb(1, 1):uint() or nil
	-- Bytes 0-15 mean the same in every version (SPEC 4.4); the rest of the
	-- header only in version 1.
	local hdr_end = version == VERSION and HDR_LEN or 16
	local rendered = 0
	if cap >= hdr_end then
		for _, fd in ipairs(HDR) do
			if fd[2] < hdr_end then
				if fd[1] == "flags" then
					add_flags(top, tvb, items)
				else
					items[fd[1]] = top:add(f[fd[1]], tvb(fd[2], fd[3]))
				end
			end
		end
		top:add(f.conn, tvb(8, 4)):set_hidden()
		top:add(f.conn, tvb(12, 4)):set_hidden()
		rendered = hdr_end
		if version == VERSION and op == OP.CONNECT and items.token and
		   tvb(16, 8):uint64() ~= UInt64(0) then
			items.token:append_text(" (the acceptor's RETRY cookie, SPEC 9.7)")
		end
	end

	local layout = version == VERSION and op and BODY[op]
	if layout == PROBE_ACK and cap >= 4 and bit32.band(tvb(2, 2):uint(), F_GRANT) ~= 0 then
		layout = PROBE_ACK_GRANT
	elseif layout == HS and op == OP.ACCEPT then
		layout = ACCEPT_HS
	end
	if layout and datalen >= HDR_LEN then
		for _, fd in ipairs(layout) do
			local k, off, len = fd[1], fd[2], fd[3]
			if off + len > cap then break end
			if k == "sack" then
				add_sack(top, tvb, items)
			elseif k == "caps" then
				add_caps(top, tvb, items)
			else
				items[k] = top:add(field_of(k), tvb(off, len))
			end
			rendered = off + len
		end
		if is_data(op) then
			if cap > DATA_HDR_LEN then
				items.payload = top:add(f.payload, tvb(DATA_HDR_LEN, cap - DATA_HDR_LEN))
				rendered = cap
			end
		elseif (op == OP.CONNECT or op == OP.ACCEPT) and cap >= HS_FIXED_LEN then
			local n = math.min(tvb(66, 1):uint(), MAX_ADDRS)
			add_addrs(top, tvb, items, n)
			rendered = math.min(cap, HS_FIXED_LEN + HS_ADDR_LEN * n)
		end
	end
	if cap > rendered then
		items.trailing = top:add(f.undecoded, tvb(rendered, cap - rendered))
	end

	if code == "UNKNOWN" then
		top:add_proto_expert_info(ef.snaplen, string.format(
			"only %d of %d bytes captured: validity unknown", cap, datalen))
	elseif code then
		local at = items[key] or (key == "packet" and (items.trailing or top)) or top
		at:add_proto_expert_info(ef[code], string.format("MRP_ERR_%s (%s): %s",
			code, ERR_TEXT[code], msg))
		top:add(f.error, code):set_generated()
		top:append_text(" [" .. code .. "]")
		if code == "VERSION" and op == OP.CONNECT and datalen >= 36 then
			top:add_proto_expert_info(ef.other_version,
				"CONNECT of another version: answered with REJECT VERSION (SPEC 12.3)")
		end
	end
	return code, sum
end

local function dissect(tvb, pinfo, tree)
	pinfo.cols.protocol = "MetaRoCE"
	local datalen = tvb:reported_len()
	local offs, seg
	if p.prefs.split_gso then offs, seg = gso_split(tvb) end
	if not offs then
		local code, sum = dissect_packet(tvb, pinfo, tree)
		pinfo.cols.info = sum .. ((code and code ~= "UNKNOWN") and (" [" .. code .. "]") or "")
		return datalen
	end
	local first, nbad = nil, 0
	for i, off in ipairs(offs) do
		local l = math.min(seg, datalen - off)
		local sub = tvb:range(off, l):tvb()
		local code, sum = dissect_packet(sub, pinfo, tree, i - 1)
		if code and code ~= "UNKNOWN" then nbad = nbad + 1 end
		first = first or sum
	end
	local gso = tree:add(p, tvb(), "MetaRoCE GSO/GRO batch")
	gso:set_text(string.format("MetaRoCE: %d packets of %d bytes in one datagram (GSO/GRO batch)",
		#offs, seg))
	gso:add(f.gso_segments, #offs):set_generated()
	gso:add_proto_expert_info(ef.gso, string.format(
		"%d packets in one captured datagram: a UDP GSO/GRO batch captured before segmentation " ..
		"(on the wire each is a datagram of its own)", #offs))
	pinfo.cols.info = string.format("[%d packets] %s ...%s", #offs, first,
		nbad > 0 and string.format(" [%d malformed]", nbad) or "")
	return datalen
end

function p.dissector(tvb, pinfo, tree)
	return dissect(tvb, pinfo, tree)
end

-- Heuristic on UDP: only a datagram that decodes without error (or a GSO/GRO
-- batch of such packets); the rest of its conversation then comes here too.
local function heuristic(tvb, pinfo, tree)
	local datalen = tvb:reported_len()
	if datalen < HDR_LEN or tvb:len() < 2 then return false end
	if tvb(0, 1):uint() ~= VERSION or FIXED_LEN[tvb(1, 1):uint()] == nil then return false end
	local offs, seg
	if p.prefs.split_gso then offs, seg = gso_split(tvb) end
	if offs then
		for _, off in ipairs(offs) do
			local l = math.min(seg, datalen - off)
			if verdict(tvb:range(off, l):tvb(), l) ~= nil then return false end
		end
	elseif verdict(tvb, datalen) ~= nil then
		return false
	end
	pinfo.conversation = p
	dissect(tvb, pinfo, tree)
	return true
end
p:register_heuristic("udp", heuristic)

local registered_ports = ""
local function register_ports()
-- Analyze > Decode As... offers MetaRoCE for any UDP port.
DissectorTable.get("udp.port"):add_for_decode_as(p)
	local udp = DissectorTable.get("udp.port")
	if registered_ports ~= "" then udp:remove(registered_ports, p) end
	registered_ports = tostring(p.prefs.ports)
	if registered_ports ~= "" then udp:add(registered_ports, p) end
end

function p.prefs_changed()
	if tostring(p.prefs.ports) ~= registered_ports then register_ports() end
end

register_ports()
-- Analyze > Decode As... offers MetaRoCE for any UDP port.
DissectorTable.get("udp.port"):add_for_decode_as(p)
