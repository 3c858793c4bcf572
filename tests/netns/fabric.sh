#!/usr/bin/env bash
# A two-host, two-plane test fabric in network namespaces (docs/netns.md).
#
#   fabric.sh up [--tbf RATE]   create it (RATE e.g. 1gbit: a tbf bottleneck
#                               on every veth end); replaces an old one
#   fabric.sh down              remove it (no error when it is not there)
#   fabric.sh check             exit 0 if this host can build it, 77 (with
#                               the reason on stderr) if it cannot
#
#   namespace mr-a                         namespace mr-b
#   veth-a0 10.200.0.1/24 ---- plane0 ---- veth-b0 10.200.0.2/24
#   veth-a1 10.201.0.1/24 ---- plane1 ---- veth-b1 10.201.0.2/24
#
# The veths have MTU 9000 so that the default 4 KiB payload fits.
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns add`). The
# namespace names can be changed with MR_NS_A / MR_NS_B (the test uses its
# own names so that a hand-made fabric and the test do not collide).
set -euo pipefail

NS_A=${MR_NS_A:-mr-a}
NS_B=${MR_NS_B:-mr-b}
PLANES=2

die() { echo "fabric.sh: $*" >&2; exit 1; }
skip() { echo "fabric.sh: cannot build the fabric here: $*" >&2; exit 77; }

check() {
	[ "$(id -u)" -eq 0 ] || skip "not root"
	command -v ip >/dev/null || skip "no ip command (iproute2)"
	ip netns list >/dev/null 2>&1 || skip "ip netns is not available"
	local probe="mr-probe-$$"
	if ! ip netns add "$probe" 2>/dev/null; then
		skip "cannot create a network namespace (a restricted container?)"
	fi
	if ! ip -n "$probe" link add mr-pa type veth peer name mr-pb 2>/dev/null; then
		ip netns del "$probe" 2>/dev/null || true
		skip "cannot create veth pairs"
	fi
	ip netns del "$probe"
}

down() {
	ip netns del "$NS_A" 2>/dev/null || true
	ip netns del "$NS_B" 2>/dev/null || true
}

up() {
	local tbf=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--tbf) tbf=${2:?--tbf needs a rate}; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	down
	ip netns add "$NS_A"
	ip netns add "$NS_B"
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	for i in $(seq 0 $((PLANES - 1))); do
		ip -n "$NS_A" link add "veth-a$i" type veth peer name "veth-b$i" netns "$NS_B"
		ip -n "$NS_A" addr add "10.$((200 + i)).0.1/24" dev "veth-a$i"
		ip -n "$NS_B" addr add "10.$((200 + i)).0.2/24" dev "veth-b$i"
		# Jumbo frames: a 4 KiB payload (the default planes[].mtu) plus
		# headers fits without fragmentation (the daemon sends with DF).
		ip -n "$NS_A" link set "veth-a$i" mtu 9000 up
		ip -n "$NS_B" link set "veth-b$i" mtu 9000 up
		if [ -n "$tbf" ]; then
			ip netns exec "$NS_A" tc qdisc replace dev "veth-a$i" root tbf \
				rate "$tbf" burst 32kb latency 10ms
			ip netns exec "$NS_B" tc qdisc replace dev "veth-b$i" root tbf \
				rate "$tbf" burst 32kb latency 10ms
		fi
	done
	# Wait for carrier on both ends (veth: at once, but be sure).
	for i in $(seq 0 $((PLANES - 1))); do
		for _ in $(seq 50); do
			ip -n "$NS_A" link show "veth-a$i" | grep -q LOWER_UP &&
				ip -n "$NS_B" link show "veth-b$i" | grep -q LOWER_UP && break
			sleep 0.02
		done
	done
}

case "${1:-}" in
up) shift; check; up "$@" ;;
down) down ;;
check) check ;;
*) echo "usage: fabric.sh up [--tbf RATE] | down | check" >&2; exit 2 ;;
esac
