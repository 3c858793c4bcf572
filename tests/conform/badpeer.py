#!/usr/bin/env python3
"""A deliberately non-conforming MetaRoCE responder for the conformance
suite's self-test: a UDP relay in front of a conforming target (our
daemon) that breaks exactly one rule of proto/SPEC.md, chosen by VARIANT.

    badpeer.py VARIANT LISTEN_ADDR:PORT TARGET_ADDR:PORT

The tester sends to LISTEN; the relay forwards to TARGET from a second
socket on the same address and rewrites each CONNECT's service_port and
plane address to that socket, so the target's answers and packets come
back through the relay, which forwards them to the CONNECT's source. IP
TOS (ECN) is carried across in both directions. Everything is forwarded
byte for byte except what the variant changes. Packet layouts come from
the security suite's harness (tests/security/mrattack.py).

It prints "ready PORT" when it listens and runs until killed.
"""
import socket
import struct
import sys

import mrattack as mra

OP = mra.OP
KNOWN_CAPS = 0xF
REJ_VERSION = 1
F_REPLY = 0x0010

# variant -> (SPEC rule it breaks, how)
VARIANTS = {
    "none": "transparent: forwards everything unchanged",
    "no-version-reject": "12.3: never answers a CONNECT of an unknown version",
    "echo-unknown-caps": "12.4: echoes capability bits it does not know in ACCEPT",
    "accept-forged-token": "13.2: accepts packets whose token is wrong",
    "probe-ts": "8.3: PROBE_ACK does not echo the PROBE's timestamp",
    "sack-bit-order": "6.2: SACK bitmap with the bits of each byte reversed",
    "ce-blind": "2.4: ACKs never count CE marks",
    "no-close-reply": "11.2: never replies to a CLOSE",
    "reset-answered": "11.3: answers a valid RESET with a RESET",
    "nak-wrong-psn": "7.1: NAKs name the wrong PSN",
    "reserved-ignored": "12.5/13.1: clears reserved PROBE bytes instead of dropping",
    "place-corrupt": "5.3: places WRITE_IMM segments after the first at a wrong offset",
    "path-range-ignored": "8.2: answers PROBEs on a path_id >= max_paths",
    "nak-echo-wrong": "7.4: NAK UNKNOWN_CONN echoes a wrong token",
    "src-conn-ignored": "13.2: accepts packets whose src_conn_id is wrong",
    "tombstone-silent": "11.5: a tombstone does not answer a repeated CLOSE",
    "reply-closes": "11.2: a CLOSE with REPLY that answers nothing ends the connection",
    "no-service-refused": "10.2: REJECT REFUSED where no listener exists (NO_SERVICE)",
    "version-range-ignored": "9.4: accepts a CONNECT whose version is outside its range",
    "gen-ignored": "6.2: ignores path generations (one receive state per path_id)",
    "opcode-lenient": "12.5/13.1: takes unknown opcodes for PROBE",
    "probe-gen-zero": "8.3: PROBE_ACK names generation 0 whatever was probed",
    "accept-service-wrong": "9.2: ACCEPT does not copy the CONNECT's service_id",
    "version-choose-reject": "12.2: REJECT VERSION for a range that includes its version",
    "noconn-answered": "7.4: answers PROBE, CLOSE and RESET of unknown connections",
    "version-lenient": "13.1: takes a PROBE of version 0 or 2 for version 1",
    "flags-lenient": "13.1: ignores flags a PROBE may not carry",
    "length-lenient": "13.1: ignores bytes past a PROBE's or CLOSE's length",
    "range-lenient": "13.1: takes a CLOSE reason out of range for NORMAL",
    "truncated-padded": "13.1: zero-fills a short PROBE instead of dropping it",
    "retry-service-wrong": "9.7: RETRY does not carry the CONNECT's service_id",
    "retry-required-resources": "9.7: REJECT RESOURCES, not PARAM, without caps RETRY",
    "zero-write-checked": "5.3: checks the rkey of a zero-length WRITE (forwarded as one byte)",
    "close-reason-normal": "11.2: the CLOSE reply carries NORMAL, not the CLOSE's reason",
    "resources-refused": "9.4: REJECT REFUSED where it is out of half-open connections",
    "no-delayed-ack": "6.3: in-order data without ACK_REQ is never acknowledged",
    "close-no-drain": "11.2: replies to a CLOSE at once, its own messages still in flight",
    "access-as-rkey": "5.3: NAKs a WRITE or READ without access rights INVALID_RKEY, not ACCESS",
    "not-ect": "2.4: sends data packets Not-ECT",
    "held-dropped": "6.5: drops data packets that carry HELD",
    "nak-unlimited": "14.3: answers every data packet of an unknown connection (no rate limit)",
    "nak-reserved": "12.5: sets the reserved byte of NAK UNKNOWN_CONN (except for PSN 33)",
    "wrap-placed": "5.1/14.2: places a WRITE whose range wraps past 2^64 (at the region's start)",
    "data-lenient": "5.1: takes a WRITE's offset modulo 2^32 and ignores its recv_idx",
    "no-pair-accepted": "9.5: takes every plane address of a MULTIPLANE CONNECT for plane 0",
    "planes-crossed": "9.5: pairs the second plane address of a CONNECT instead of the first",
    "send-bounds-rnr": "5.4: NAKs a SEND longer than its receive RNR, not OUT_OF_BOUNDS",
    "retry-reset-dropped": "5.4/8.1/11.3: never resets a connection whose peer stopped answering "
                           "(its RESETs dropped)",
    "retry-reason-protocol": "11.4: resets with reason PROTOCOL when its retry budget runs out",
    "challenge-ignored": "9.6: never ends a connection whose restart challenge goes unanswered "
                         "(the relay answers the challenge)",
    "challenge-kills": "9.6: ends a challenged connection although the peer answered (the "
                       "answers dropped)",
    # The relay in front of a target the tester then stops (--stop-cmd):
    "ends-silent": "11.3: ends connections on its own (its application gone, the endpoint "
                   "stopping) without a CLOSE or RESET",
    "shutdown-reason-app": "11.4: a stopping target's CLOSEs carry APP_EXIT, not SHUTDOWN",
    "app-exit-reason-shutdown": "11.4: the RESETs for an application that went away carry "
                                "SHUTDOWN, not APP_EXIT",
    "simultaneous-no-reply": "11.2: a CLOSE that crosses the target's own CLOSE is never answered",
    # The relay in front of a target that refuses the tester's service:
    "refused-no-service": "10.2: REJECT NO_SERVICE where the listener refuses (REFUSED)",
    # The relay in front of the target as initiator (the tester accepts):
    "retry-cookie-dropped": "9.7: the initiator does not put the RETRY cookie in its CONNECT",
    "no-confirm": "9.3: the initiator never confirms an ACCEPT",
    "connect-version-outside": "9.2: the initiator's CONNECT version lies outside its range",
    "reject-ignored": "10.3: the initiator ignores a valid REJECT and keeps connecting",
    "reject-forged-accepted": "10.3: the initiator accepts a REJECT whose token is not Ti",
    "retry-unlimited": "9.7: the initiator follows every RETRY of an attempt",
    "accept-unchecked": "9.3: the initiator takes an ACCEPT whose service_id is not its CONNECT's",
}


def rev8(b):
    return int("{:08b}".format(b)[::-1], 2)


class Relay:
    def __init__(self, variant, listen, target):
        self.v = variant
        self.target = target
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for s in (self.front, self.back):
            s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        self.front.bind(listen)
        self.back.bind((listen[0], 0))
        self.client = None       # the tester's service address (from CONNECT)
        self.caps = {}           # initiator conn id -> CONNECT caps
        self.tokens = {}         # acceptor conn id -> token the tester must use
        self.peer = {}           # acceptor conn id -> initiator conn id
        self.max_paths = {}      # acceptor conn id -> negotiated max_paths
        self.replies = {}        # acceptor conn id -> CLOSE replies sent
        self.ti = {}             # acceptor conn id -> token the tester is written with
        self.unreq = {}          # (acceptor conn id, path, gen) -> PSNs seen, last had no ACK_REQ
        self.hs_token = {}       # initiator conn id -> its CONNECT's hs_token
        self.cookie = {}         # initiator conn id -> last RETRY cookie sent to it
        self.hs_src = {}         # initiator conn id -> source of its CONNECT
        self.hs_svc = {}         # initiator conn id -> its CONNECT's service_id
        self.perf_base = None    # region base of the last PERF READY seen
        self.inst_of = {}        # initiator conn id -> its CONNECT's instance id
        self.latest_inst = None  # instance id of the newest CONNECT
        self.target_closed = set()  # acceptor conn ids that sent a CLOSE without REPLY
        self.sends = set()       # (acceptor conn id, stream, msn) of the tester's SENDs

    def old_instance(self, ci):
        """Whether initiator connection ci belongs to an instance of the
        tester that a newer CONNECT replaced (SPEC 9.6)."""
        return ci in self.inst_of and self.inst_of[ci] != self.latest_inst

    @staticmethod
    def recv(s):
        data, anc, _, src = s.recvmsg(65536, socket.CMSG_SPACE(4))
        tos = None
        for lvl, typ, d in anc:
            if lvl == socket.IPPROTO_IP and typ == socket.IP_TOS:
                tos = d[0]
        return data, src, tos

    @staticmethod
    def send(s, data, dst, tos):
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos or 0)
        s.sendto(data, dst)

    # tester -> target
    def upstream(self, data, src, tos):
        b = bytearray(data)
        op = b[1] if len(b) >= 2 else None
        if op == OP["CONNECT"] and len(b) >= 88:
            self.client = (socket.inet_ntoa(bytes(b[68 + 4:68 + 8])),
                           struct.unpack_from(">H", b, 64)[0])
            src_conn = struct.unpack_from(">I", b, 12)[0]
            self.hs_src[src_conn] = src
            self.hs_svc[src_conn] = struct.unpack_from(">I", b, 32)[0]
            if self.v == "version-choose-reject" and b[28] <= 1 < b[29]:
                b[0] = b[28] = b[29] = 9
            if self.v == "connect-version-outside":
                b[28], b[29] = 2, 3
            if self.v == "version-range-ignored" and b[0] < b[28]:
                b[28] = b[0]
            if self.v == "retry-cookie-dropped":
                struct.pack_into(">Q", b, 16, 0)
            self.hs_token[src_conn] = struct.unpack_from(">Q", b, 36)[0]
            self.inst_of[src_conn] = self.latest_inst = struct.unpack_from(">Q", b, 44)[0]
            multi = struct.unpack_from(">Q", b, 52)[0] & mra.CAP_MULTIPLANE
            naddrs = min(b[66], (len(b) - 68) // 20)
            if self.v == "no-pair-accepted" and multi:
                for k in range(naddrs):
                    b[68 + 20 * k + 1] = 0
            if self.v == "planes-crossed" and multi and naddrs >= 2:
                b[69], b[89] = b[89], b[69]
            if self.v == "retry-unlimited" and src_conn in self.cookie:
                struct.pack_into(">Q", b, 16, self.cookie[src_conn])
            self.caps[src_conn] = struct.unpack_from(">Q", b, 52)[0]
            # Answers and connection packets come back to the relay.
            struct.pack_into(">H", b, 64, self.back.getsockname()[1])
            b[68 + 4:68 + 8] = socket.inet_aton(self.back.getsockname()[0])
        elif op == OP["CONNECT"] and len(b) >= 28:
            self.client = src
        if self.v == "truncated-padded" and len(b) < 44 and len(b) >= 2 \
                and op == OP["PROBE"]:
            b += bytes(44 - len(b))
        if len(b) >= 28 and op is not None and op != OP["CONNECT"]:
            dst = struct.unpack_from(">I", b, 8)[0]
            tok = struct.unpack_from(">Q", b, 16)[0]
            if (self.v == "accept-forged-token" and dst in self.tokens and tok
                    and tok != self.tokens[dst]):
                struct.pack_into(">Q", b, 16, self.tokens[dst])
            if (self.v == "reset-answered" and op == OP["RESET"] and len(b) == 32
                    and self.tokens.get(dst) == tok and b[30:32] == bytes(2)):
                r = bytearray(b)
                r[8:12], r[12:16] = b[12:16], b[8:12]
                self.send(self.front, bytes(r), self.client or src, None)
            if self.v == "reserved-ignored" and op == OP["PROBE"] and len(b) == 44:
                b[32:36] = bytes(4)
            if (self.v == "path-range-ignored" and op == OP["PROBE"] and len(b) == 44
                    and struct.unpack_from(">H", b, 4)[0] >= self.max_paths.get(dst, 65536)):
                struct.pack_into(">HH", b, 4, 0, 0)
            if (self.v == "src-conn-ignored" and dst in self.peer
                    and struct.unpack_from(">I", b, 12)[0] != 0):
                struct.pack_into(">I", b, 12, self.peer[dst])
            if (self.v == "reply-closes" and op == OP["CLOSE"] and len(b) == 32
                    and struct.unpack_from(">H", b, 2)[0] & F_REPLY):
                b[1] = OP["RESET"]
                struct.pack_into(">H", b, 2, 0)
            if self.v == "noconn-answered" and dst not in self.tokens and \
                    op in (OP["PROBE"], OP["CLOSE"], OP["RESET"]):
                src_conn = struct.unpack_from(">I", b, 12)[0]
                self.send(self.front, mra.nak_unknown(src_conn, dst, tok),
                          self.client or src, None)
            if self.v == "version-lenient" and len(b) == 44 and op == OP["PROBE"] \
                    and b[0] in (0, 2):
                b[0] = 1
            if self.v == "flags-lenient" and len(b) == 44 and op == OP["PROBE"]:
                struct.pack_into(">H", b, 2, struct.unpack_from(">H", b, 2)[0] & 0x0008)
            if self.v == "length-lenient" and op == OP["PROBE"] and len(b) > 44:
                del b[44:]
            if self.v == "length-lenient" and op == OP["CLOSE"] and len(b) > 32:
                del b[32:]
            if self.v == "range-lenient" and op == OP["CLOSE"] and len(b) == 32 \
                    and struct.unpack_from(">H", b, 28)[0] > 5:
                struct.pack_into(">H", b, 28, 0)
            if self.v == "gen-ignored" and 1 <= op <= 4:
                struct.pack_into(">H", b, 6, 0)
            if self.v == "opcode-lenient" and len(b) == 44 and op in (0x07, 0x7F):
                b[1] = OP["PROBE"]
            if self.v == "nak-unlimited" and 1 <= op <= 4 and len(b) >= 72 \
                    and dst not in self.tokens:
                # the NAK UNKNOWN_CONN of SPEC 7.4, for every such packet
                src_conn = struct.unpack_from(">I", b, 12)[0]
                stream, _, msn, off = struct.unpack_from(">HHII", b, 28)
                pid, pgen = struct.unpack_from(">HH", b, 4)
                psn = struct.unpack_from(">I", b, 24)[0]
                nak = struct.pack(">BBHHHIIQI", 1, OP["NAK"], 0, 0, 0, src_conn, dst, 0, 0) + \
                    struct.pack(">BBHIIHHIIQ", 5, 0, stream, msn, off, pid, pgen, psn, 0, tok)
                self.send(self.front, nak, self.client or src, None)
            if self.v == "send-bounds-rnr" and op == OP["SEND"] and len(b) >= 72:
                self.sends.add((dst,) + struct.unpack_from(">HxxI", b, 28))
            if self.v == "no-confirm" and (op == OP["PROBE"] or 1 <= op <= 4):
                return
            if self.v == "challenge-kills" and self.old_instance(self.peer.get(dst)):
                return
            if self.v == "held-dropped" and 1 <= op <= 4 and \
                    struct.unpack_from(">H", b, 2)[0] & 0x0020:
                return
            if (self.v == "wrap-placed" and op == OP["WRITE"] and len(b) >= 72
                    and self.perf_base is not None
                    and struct.unpack_from(">Q", b, 56)[0]
                    + struct.unpack_from(">I", b, 40)[0] > 0xFFFFFFFFFFFFFFFF):
                struct.pack_into(">Q", b, 56, self.perf_base)
            if self.v == "data-lenient" and op == OP["WRITE"] and len(b) >= 72:
                off, mlen = struct.unpack_from(">II", b, 36)
                plen = struct.unpack_from(">H", b, 30)[0]
                if off + plen > mlen and (off + plen) & 0xFFFFFFFF <= mlen:
                    struct.pack_into(">I", b, 36, 0)
                    struct.pack_into(">H", b, 2, struct.unpack_from(">H", b, 2)[0] | 0x0003)
                struct.pack_into(">I", b, 44, 0)
            if self.v == "no-delayed-ack" and 1 <= op <= 4 and len(b) >= 72:
                key = (dst,) + struct.unpack_from(">HH", b, 4)
                seen, _ = self.unreq.get(key, (set(), False))
                psn = struct.unpack_from(">I", b, 24)[0]
                noreq = not struct.unpack_from(">H", b, 2)[0] & 0x0008 and psn not in seen
                seen.add(psn)
                self.unreq[key] = (seen, noreq)
            if (self.v == "close-no-drain" and op == OP["CLOSE"] and len(b) == 32
                    and not struct.unpack_from(">H", b, 2)[0] & F_REPLY
                    and struct.unpack_from(">H", b, 28)[0] <= 5 and b[30:32] == bytes(2)
                    and self.tokens.get(dst) == tok and dst in self.peer):
                r = bytearray(b)
                struct.pack_into(">H", r, 2, F_REPLY)
                struct.pack_into(">IIQ", r, 8, self.peer[dst], dst, self.ti[dst])
                self.send(self.front, bytes(r), self.client or src, None)
            if (self.v == "zero-write-checked" and op == OP["WRITE"] and len(b) == 72
                    and struct.unpack_from(">I", b, 40)[0] == 0):
                # the target sees one byte, so its rkey, bounds and access
                # checks run: what a receiver that checks msg_len 0 does
                struct.pack_into(">H", b, 30, 1)
                struct.pack_into(">I", b, 40, 1)
                b += b"\0"
            if (self.v == "place-corrupt" and op == OP["WRITE_IMM"] and len(b) > 72
                    and struct.unpack_from(">I", b, 36)[0] != 0):
                b[72] ^= 0xFF
        self.send(self.back, bytes(b), self.target, tos)

    # target -> tester
    def downstream(self, data, src, tos):
        b = bytearray(data)
        op = b[1] if len(b) >= 2 else None
        if len(b) >= 28:
            if op == OP["ACCEPT"] and len(b) >= 88:
                dst = struct.unpack_from(">I", b, 8)[0]
                ca = struct.unpack_from(">I", b, 12)[0]
                self.tokens[ca] = struct.unpack_from(">Q", b, 36)[0]
                self.peer[ca] = dst
                self.max_paths[ca] = struct.unpack_from(">H", b, 62)[0]
                self.ti[ca] = struct.unpack_from(">Q", b, 16)[0]
                # The initiator sends its packets back through the relay too.
                struct.pack_into(">H", b, 64, self.front.getsockname()[1])
                b[68 + 4:68 + 8] = socket.inet_aton(self.front.getsockname()[0])
                if self.v == "echo-unknown-caps":
                    extra = self.caps.get(dst, 0) & ~KNOWN_CAPS
                    caps = struct.unpack_from(">Q", b, 52)[0] | extra
                    struct.pack_into(">Q", b, 52, caps)
            if self.v == "no-version-reject" and op == OP["REJECT"] and len(b) == 36 \
                    and b[28] == REJ_VERSION:
                return
            if self.v == "probe-ts" and op == OP["PROBE_ACK"] and len(b) == 48:
                b[47] ^= 1
            if self.v == "sack-bit-order" and op == OP["ACK"] and len(b) == 92:
                for i in range(36, 68):
                    b[i] = rev8(b[i])
            if self.v == "ce-blind" and op == OP["ACK"] and len(b) == 92:
                struct.pack_into(">I", b, 68, 0)
            if self.v == "no-close-reply" and op == OP["CLOSE"] and len(b) == 32 \
                    and struct.unpack_from(">H", b, 2)[0] & F_REPLY:
                return
            if self.v == "close-reason-normal" and op == OP["CLOSE"] and len(b) == 32 \
                    and struct.unpack_from(">H", b, 2)[0] & F_REPLY:
                struct.pack_into(">H", b, 28, 0)
            if self.v == "accept-unchecked" and op == OP["ACCEPT"] and len(b) >= 88 \
                    and struct.unpack_from(">I", b, 8)[0] in self.hs_svc:
                struct.pack_into(">I", b, 32, self.hs_svc[struct.unpack_from(">I", b, 8)[0]])
            if self.v == "accept-service-wrong" and op == OP["ACCEPT"] and len(b) >= 88:
                b[35] ^= 1
            if self.v == "retry-service-wrong" and op == OP["RETRY"] and len(b) == 44:
                b[39] ^= 1
            if self.v == "retry-required-resources" and op == OP["REJECT"] and \
                    len(b) == 36 and b[28] == 5 and \
                    not self.caps.get(struct.unpack_from(">I", b, 8)[0], 0) & 0x8:
                b[28] = 3
            if self.v == "no-service-refused" and op == OP["REJECT"] and len(b) == 36 \
                    and b[28] == 2:
                b[28] = 4
            if self.v == "probe-gen-zero" and op == OP["PROBE_ACK"] and len(b) == 48:
                struct.pack_into(">H", b, 30, 0)
            if self.v == "nak-echo-wrong" and op == OP["NAK"] and len(b) == 60 \
                    and b[28] == 5:
                b[59] ^= 1
            if self.v == "tombstone-silent" and op == OP["CLOSE"] and len(b) == 32 \
                    and struct.unpack_from(">H", b, 2)[0] & F_REPLY:
                src_conn = struct.unpack_from(">I", b, 12)[0]
                self.replies[src_conn] = self.replies.get(src_conn, 0) + 1
                if self.replies[src_conn] > 1:
                    return
            if self.v == "not-ect" and op is not None and 1 <= op <= 4:
                tos = (tos or 0) & ~3
            if (self.v == "wrap-placed" and op == OP["SEND"] and len(b) >= 72 + 48
                    and struct.unpack_from(">Q", b, 72)[0] == 0x4D52504600000002):
                self.perf_base = struct.unpack_from(">Q", b, 72 + 16)[0]
            if self.v == "nak-reserved" and op == OP["NAK"] and len(b) == 60 \
                    and b[28] == 5 and struct.unpack_from(">I", b, 44)[0] != 33:
                b[29] = 1
            if self.v == "access-as-rkey" and op == OP["NAK"] and len(b) == 60 \
                    and b[28] == 3:
                b[28] = 1
            if self.v == "resources-refused" and op == OP["REJECT"] and len(b) == 36 \
                    and b[28] == 3:
                b[28] = 4
            if self.v == "refused-no-service" and op == OP["REJECT"] and len(b) == 36 \
                    and b[28] == 4:
                b[28] = 2
            if self.v == "no-delayed-ack" and op == OP["ACK"] and len(b) == 92:
                key = (struct.unpack_from(">I", b, 12)[0],) + struct.unpack_from(">HH", b, 28)
                if self.unreq.get(key, (None, False))[1]:
                    return
            if self.v == "reject-ignored" and op == OP["REJECT"]:
                return
            if self.v == "reject-forged-accepted" and op == OP["REJECT"] and len(b) == 36:
                dst = struct.unpack_from(">I", b, 8)[0]
                if dst in self.hs_token:
                    struct.pack_into(">Q", b, 16, self.hs_token[dst])
                    b[29] = b[30] = 1
            if self.v == "retry-unlimited" and op == OP["RETRY"] and len(b) == 44:
                self.cookie[struct.unpack_from(">I", b, 8)[0]] = \
                    struct.unpack_from(">Q", b, 28)[0]
            flags = struct.unpack_from(">H", b, 2)[0]
            src_conn = struct.unpack_from(">I", b, 12)[0]
            if self.v == "send-bounds-rnr" and op == OP["NAK"] and len(b) == 60 \
                    and b[28] == 2 and (src_conn,) + struct.unpack_from(">HI", b, 30) \
                    in self.sends:
                b[28] = 4
            if self.v == "retry-reset-dropped" and op == OP["RESET"]:
                return
            if self.v == "retry-reason-protocol" and op == OP["RESET"] and len(b) == 32:
                struct.pack_into(">H", b, 28, 5)
            if (self.v == "challenge-ignored" and op == OP["PROBE"] and len(b) == 44
                    and flags & mra.F_ACK_REQ and src_conn in self.tokens
                    and self.old_instance(struct.unpack_from(">I", b, 8)[0])):
                # answer the challenge in the tester's name
                pid, pgen = struct.unpack_from(">HH", b, 4)
                seq, _, ts = struct.unpack_from(">IIQ", b, 28)
                ack = struct.pack(">BBHHHIIQI", 1, OP["PROBE_ACK"], 0, pid, pgen, src_conn,
                                  struct.unpack_from(">I", b, 8)[0], self.tokens[src_conn], 0) \
                    + struct.pack(">HHIIQ", pid, pgen, seq, 0, ts)
                self.send(self.back, ack, self.target, None)
            if self.v == "ends-silent" and (op == OP["RESET"] or (
                    op == OP["CLOSE"] and not flags & F_REPLY)):
                return
            if self.v == "shutdown-reason-app" and len(b) == 32 and op == OP["CLOSE"] \
                    and not flags & F_REPLY:
                struct.pack_into(">H", b, 28, 1)
            if self.v == "app-exit-reason-shutdown" and len(b) == 32 and op == OP["RESET"]:
                struct.pack_into(">H", b, 28, 2)
            if self.v == "simultaneous-no-reply" and op == OP["CLOSE"]:
                if not flags & F_REPLY:
                    self.target_closed.add(src_conn)
                elif src_conn in self.target_closed:
                    return
            if self.v == "nak-wrong-psn" and op == OP["NAK"] and len(b) == 60 \
                    and b[28] != 5:
                struct.pack_into(">I", b, 44, (struct.unpack_from(">I", b, 44)[0] + 1)
                                 & 0xFFFFFFFF)
        # ACCEPT, REJECT and RETRY go to the CONNECT's source (SPEC 10.1),
        # everything else to the service port the CONNECT announced.
        to = self.client
        if op in (OP["ACCEPT"], OP["REJECT"], OP["RETRY"]) and len(b) >= 28:
            to = self.hs_src.get(struct.unpack_from(">I", b, 8)[0], to)
        if to:
            self.send(self.front, bytes(b), to, tos)

    def run(self, tick=None, every=None):
        """Relay until killed; tick(), if given, runs at least every
        `every` seconds (a test's relay with a clock of its own)."""
        import select
        print("ready", self.front.getsockname()[1], flush=True)
        while True:
            r, _, _ = select.select([self.front, self.back], [], [], every)
            if tick:
                tick()
            for s in r:
                data, src, tos = self.recv(s)
                if s is self.front:
                    self.upstream(data, src, tos)
                else:
                    self.downstream(data, src, tos)


def addr(s):
    h, p = s.rsplit(":", 1)
    return (h, int(p))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in VARIANTS:
        sys.stderr.write("usage: badpeer.py {%s} LISTEN:PORT TARGET:PORT\n"
                         % "|".join(VARIANTS))
        sys.exit(2)
    Relay(sys.argv[1], addr(sys.argv[2]), addr(sys.argv[3])).run()


if __name__ == "__main__":
    main()
