#!/usr/bin/env bash
# Install everything needed to build and test MetaRoCE from Debian's packages.
# Idempotent: safe to run again; it only installs what is missing.
set -euo pipefail

pkgs=(
	build-essential pkgconf meson ninja-build
	libuv1-dev libsqlite3-dev libyaml-dev libmnl-dev libjansson-dev
	libcmocka-dev
	clang libclang-rt-dev            # libFuzzer harness and sanitizers
	iproute2 nftables                # network-namespace test beds
	iperf3                           # bench_daemon, bench_client: kernel TCP reference
	sockperf                         # bench_client: UDP ping-pong latency reference
	systemd                          # systemd-analyze verify of the unit
	python3
	tshark                           # wireshark suite: the Lua dissector against vectors and captures
	perftest ibverbs-utils libibverbs-dev  # verbs suite: unmodified verbs programs under metaroce-run
	stress-ng                        # load mode: suites run again beside a CPU hog
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages already installed"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
