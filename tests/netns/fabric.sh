#!/usr/bin/env bash
# A multiplane test fabric in network namespaces (docs/netns.md).
#
#   fabric.sh up [--hosts N] [--planes K] [--rate R] [--burst B] [--latency L]
#                          create it (replaces an old one of the same names):
#                          N hosts (2-8, default 2), K planes (1-4, default 2);
#                          with --rate, a tc tbf (rate R burst B latency L,
#                          defaults 32kb and 10ms) on both ends of every plane
#                          link. --tbf R is the old spelling of --rate R.
#   fabric.sh down         remove it (no error when it is not there)
#   fabric.sh check        exit 0 if this host can build it, 77 (with the
#                          reason on stderr) if it cannot
#   fabric.sh rate HOST PLANE R|off    change (or remove) the tbf of HOST's
#                          end of PLANE (the direction HOST sends in)
#   fabric.sh loss HOST PLANE PCT      drop PCT % (0.01-100; 0 removes the
#                          rule) of the packets that arrive at HOST on PLANE
#   fabric.sh ecn HOST PLANE PCT       set CE on PCT % of the ECT packets that
#                          arrive at HOST on PLANE (100: all; 0 removes)
#   fabric.sh clear [HOST]             remove every loss and ecn rule
#   fabric.sh show                     namespaces, addresses, qdiscs, rules
#                          and their counters
#
# HOST is a letter: a is the first host, b the second, ... PLANE is 0..K-1.
#
# Two hosts are joined directly, one veth pair per plane:
#
#   namespace mr-a                         namespace mr-b
#   veth-a0 10.200.0.1/24 ---- plane0 ---- veth-b0 10.200.0.2/24
#   veth-a1 10.201.0.1/24 ---- plane1 ---- veth-b1 10.201.0.2/24
#   ...     10.(200+i).0.1    plane i       ...    10.(200+i).0.2
#
# More hosts are joined through a switch namespace (mr-sw) with one bridge
# per plane (br0, br1, ...): host h (a, b, c, ...) has veth-<h><i> with
# 10.(200+i).0.<index+1>, its peer sw-<h><i> is a port of bridge br<i>.
#
# The veths have MTU 9000 so that the default 4 KiB payload fits, and
# gso_max_segs 1: a UDP GSO datagram of the daemon leaves a host as the
# separate packets it stands for, so that the loss and ecn rules (nftables,
# table inet mrfabric, hook prerouting, in the receiving host) see each
# packet, as a switch would, not one burst.
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns add`); loss and
# ecn need nft, rate needs tc. Namespace names: MR_NS_PREFIX (default mr-)
# followed by the host's letter or sw; MR_NS_A / MR_NS_B override the first
# two (the tests use names of their own so that a hand-made fabric and a
# test do not collide). A file in /run/metaroce-fabric records N and K for
# the other subcommands.
set -euo pipefail

PREFIX=${MR_NS_PREFIX:-mr-}
LETTERS=abcdefgh
NFT_TABLE=mrfabric

die() { echo "fabric.sh: $*" >&2; exit 1; }
skip() { echo "fabric.sh: cannot build the fabric here: $*" >&2; exit 77; }

# Namespace of host letter $1.
ns_of() {
	case "$1" in
	a) echo "${MR_NS_A:-${PREFIX}a}" ;;
	b) echo "${MR_NS_B:-${PREFIX}b}" ;;
	sw) echo "${PREFIX}sw" ;;
	*) echo "${PREFIX}$1" ;;
	esac
}
meta_file() { echo "/run/metaroce-fabric/$(ns_of a)"; }

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

# check, plus what rate limits and impairments need: tc with tbf, nft with
# numgen and ecn mangling, in a namespace.
check_full() {
	check
	command -v tc >/dev/null || skip "no tc command (iproute2)"
	command -v nft >/dev/null || skip "no nft command (nftables)"
	local probe="mr-probe-$$"
	ip netns add "$probe"
	local why=""
	if ! ip -n "$probe" link add mr-pa type veth peer name mr-pb 2>/dev/null; then
		why="cannot create veth pairs"
	elif ! ip netns exec "$probe" tc qdisc add dev mr-pa root tbf rate 100mbit \
		burst 32kb latency 10ms 2>/dev/null; then
		why="tc tbf is not available (sch_tbf)"
	elif ! ip netns exec "$probe" nft -f - 2>/dev/null <<-EOF
		table inet mrprobe {
			chain pre {
				type filter hook prerouting priority -300;
				iifname "mr-pa" numgen random mod 10000 < 100 drop
				iifname "mr-pa" ip ecn { ect0, ect1 } ip ecn set ce
			}
		}
		EOF
	then
		why="nftables (numgen, ip ecn set) is not available"
	fi
	ip netns del "$probe"
	[ -z "$why" ] || skip "$why"
}

# Removes the fabric the size file describes (hosts a and b without it).
down() {
	local HOSTS=2 f i
	f=$(meta_file)
	# shellcheck disable=SC1090
	[ ! -r "$f" ] || . "$f"
	for i in $(seq 0 $((HOSTS - 1))); do
		ip netns del "$(ns_of "${LETTERS:i:1}")" 2>/dev/null || true
	done
	[ "$HOSTS" -le 2 ] || ip netns del "$(ns_of sw)" 2>/dev/null || true
	rm -f "$f"
}

# Fabric size of the one that is up: sets HOSTS, PLANES, BURST, LATENCY.
load_meta() {
	HOSTS=2 PLANES=2 BURST=32kb LATENCY=10ms
	local f
	f=$(meta_file)
	[ -r "$f" ] || die "no fabric is up (no $f; namespace $(ns_of a))"
	# shellcheck disable=SC1090
	. "$f"
}

# Host letter $1 -> its index; dies on a letter that is not a host.
host_index() {
	local i
	for i in $(seq 0 $((HOSTS - 1))); do
		[ "${LETTERS:i:1}" = "$1" ] && { echo "$i"; return; }
	done
	die "no host '$1' (hosts: ${LETTERS:0:HOSTS})"
}

plane_check() {
	if ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -ge "$PLANES" ]; then
		die "no plane '$1' (planes 0-$((PLANES - 1)))"
	fi
}

tbf_set() { # ns dev rate burst latency
	ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$4" latency "$5"
}

up() {
	local hosts=2 planes=2 rate="" burst=32kb latency=10ms
	while [ $# -gt 0 ]; do
		case "$1" in
		--hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
		--planes) planes=${2:?--planes needs a number}; shift 2 ;;
		--rate|--tbf) rate=${2:?$1 needs a rate}; shift 2 ;;
		--burst) burst=${2:?--burst needs a size}; shift 2 ;;
		--latency) latency=${2:?--latency needs a time}; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	if ! [[ "$hosts" =~ ^[0-9]+$ ]] || [ "$hosts" -lt 2 ] || [ "$hosts" -gt 8 ]; then
		die "--hosts must be 2-8"
	fi
	if ! [[ "$planes" =~ ^[0-9]+$ ]] || [ "$planes" -lt 1 ] || [ "$planes" -gt 4 ]; then
		die "--planes must be 1-4"
	fi
	[ -z "$rate" ] || command -v tc >/dev/null || die "--rate needs tc"
	down
	# Written first: a half-built fabric is removed by `down` all the same.
	mkdir -p "$(dirname "$(meta_file)")"
	printf 'HOSTS=%d\nPLANES=%d\nBURST=%s\nLATENCY=%s\n' "$hosts" "$planes" "$burst" \
		"$latency" >"$(meta_file)"
	local h i ns sw="" links=()
	for h in $(seq 0 $((hosts - 1))); do
		ns=$(ns_of "${LETTERS:h:1}")
		ip netns add "$ns"
		ip -n "$ns" link set lo up
	done
	if [ "$hosts" -gt 2 ]; then
		sw=$(ns_of sw)
		ip netns add "$sw"
		ip -n "$sw" link set lo up
		for i in $(seq 0 $((planes - 1))); do
			ip -n "$sw" link add "br$i" type bridge
			ip -n "$sw" link set "br$i" mtu 9000 up
		done
	fi
	for i in $(seq 0 $((planes - 1))); do
		if [ -z "$sw" ]; then
			ip -n "$(ns_of a)" link add "veth-a$i" type veth peer name "veth-b$i" \
				netns "$(ns_of b)"
			links+=("$(ns_of a) veth-a$i" "$(ns_of b) veth-b$i")
		else
			for h in $(seq 0 $((hosts - 1))); do
				local l=${LETTERS:h:1}
				ip -n "$sw" link add "sw-$l$i" type veth peer name "veth-$l$i" \
					netns "$(ns_of "$l")"
				ip -n "$sw" link set "sw-$l$i" master "br$i"
				links+=("$sw sw-$l$i" "$(ns_of "$l") veth-$l$i")
			done
		fi
		for h in $(seq 0 $((hosts - 1))); do
			ip -n "$(ns_of "${LETTERS:h:1}")" addr add \
				"10.$((200 + i)).0.$((h + 1))/24" dev "veth-${LETTERS:h:1}$i"
		done
	done
	local nsdev
	for nsdev in "${links[@]}"; do
		read -r ns dev <<<"$nsdev"
		# Jumbo frames: a 4 KiB payload (the default planes[].mtu) plus
		# headers fits without fragmentation (the daemon sends with DF).
		# gso_max_segs 1: GSO datagrams are cut into packets before they
		# cross the link (see the header).
		ip -n "$ns" link set "$dev" mtu 9000 gso_max_segs 1 up
		[ -z "$rate" ] || tbf_set "$ns" "$dev" "$rate" "$burst" "$latency"
	done
	# Wait for carrier on every end (veth: at once, but be sure).
	for nsdev in "${links[@]}"; do
		read -r ns dev <<<"$nsdev"
		for _ in $(seq 50); do
			ip -n "$ns" link show "$dev" | grep -q LOWER_UP && break
			sleep 0.02
		done
	done
}

rate() {
	load_meta
	[ $# -eq 3 ] || die "usage: fabric.sh rate HOST PLANE RATE|off"
	host_index "$1" >/dev/null
	plane_check "$2"
	local ns dev
	ns=$(ns_of "$1")
	dev="veth-$1$2"
	if [ "$3" = off ]; then
		ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
	else
		tbf_set "$ns" "$dev" "$3" "$BURST" "$LATENCY"
	fi
}

# The prerouting chain of HOST's namespace, created on first use. Rules carry
# the comment "KIND DEV" so that one kind on one link can be replaced alone.
nft_chain() {
	ip netns exec "$1" nft -f - <<-EOF
		table inet $NFT_TABLE {
			chain pre {
				type filter hook prerouting priority -300; policy accept;
			}
		}
		EOF
}

nft_del_rules() { # ns pattern: delete rules whose comment matches
	local h
	for h in $(ip netns exec "$1" nft -a list chain inet "$NFT_TABLE" pre 2>/dev/null |
		sed -n "s/.*comment \"$2\".*# handle \([0-9]*\)\$/\1/p"); do
		ip netns exec "$1" nft delete rule inet "$NFT_TABLE" pre handle "$h"
	done
}

# PCT (0-100, up to two decimals) -> parts in 10,000.
pct_to_bp() {
	[[ "$1" =~ ^[0-9]+(\.[0-9]{1,2})?$ ]] || die "'$1' is not a percentage (0-100, 2 decimals)"
	local bp
	bp=$(awk -v p="$1" 'BEGIN { printf "%d", p * 100 + 0.5 }')
	[ "$bp" -le 10000 ] || die "'$1' is more than 100 %"
	echo "$bp"
}

impair() { # kind host plane pct
	load_meta
	[ $# -eq 4 ] || die "usage: fabric.sh $1 HOST PLANE PCT"
	local kind=$1 ns dev bp rule
	host_index "$2" >/dev/null
	plane_check "$3"
	bp=$(pct_to_bp "$4")
	ns=$(ns_of "$2")
	dev="veth-$2$3"
	nft_chain "$ns"
	nft_del_rules "$ns" "$kind $dev"
	[ "$bp" -gt 0 ] || return 0
	# nft joins its arguments into one rule: build it as one string.
	local sel=""
	[ "$bp" -ge 10000 ] || sel="numgen random mod 10000 < $bp"
	case "$kind" in
	loss) rule="iifname \"$dev\" $sel counter drop" ;;
	# Only ECT packets: a not-ECT packet must not be marked (RFC 3168).
	ecn) rule="iifname \"$dev\" ip ecn { ect0, ect1 } $sel ip ecn set ce counter" ;;
	esac
	ip netns exec "$ns" nft "add rule inet $NFT_TABLE pre $rule comment \"$kind $dev\""
}

clear_rules() {
	load_meta
	local h
	for h in $(seq 0 $((HOSTS - 1))); do
		[ $# -eq 0 ] || [ "$1" = "${LETTERS:h:1}" ] || continue
		ip netns exec "$(ns_of "${LETTERS:h:1}")" nft delete table inet "$NFT_TABLE" \
			2>/dev/null || true
	done
}

show() {
	load_meta
	local h l ns
	echo "fabric: $HOSTS hosts, $PLANES planes"
	for h in $(seq 0 $((HOSTS - 1))); do
		l=${LETTERS:h:1}
		ns=$(ns_of "$l")
		echo "== host $l (namespace $ns)"
		ip -n "$ns" -br addr show | grep -v '^lo '
		ip netns exec "$ns" tc -s qdisc show | grep -A2 tbf | grep -v "^ *backlog\|^--" || true
		ip netns exec "$ns" nstat -az UdpRcvbufErrors UdpInErrors 2>/dev/null | grep Udp || true
		ip netns exec "$ns" nft list table inet "$NFT_TABLE" 2>/dev/null | grep iifname || true
	done
}

case "${1:-}" in
up) shift; check; up "$@" ;;
down) down ;;
check) check ;;
check-full) check_full ;;
rate) shift; rate "$@" ;;
loss|ecn) impair "$@" ;;
clear) shift; clear_rules "$@" ;;
show) show ;;
*) echo "usage: fabric.sh up [--hosts N] [--planes K] [--rate R] [--burst B] [--latency L]" \
	"| down | check | check-full | rate HOST PLANE R|off | loss HOST PLANE PCT" \
	"| ecn HOST PLANE PCT | clear [HOST] | show" >&2; exit 2 ;;
esac
