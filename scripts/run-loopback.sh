#!/usr/bin/env bash
# Two metarocd daemons on this host's loopback, a verified perf run between
# them, their paths, and two applications moving verified data through
# libmetaroce (metaroce-perf): the quickest way to see MetaRoCE work. No root.
#
#   scripts/run-loopback.sh            # 5-second run
#   SECONDS_RUN=10 scripts/run-loopback.sh
#
# Daemon A listens on 127.0.0.1:19791 and 127.0.0.2:19791 (two planes),
# daemon B on the same addresses at port 19792; their path source ports are
# disjoint ranges. Configurations, control sockets, state databases and logs
# live in a temporary directory that is removed on exit (also on Ctrl-C).
# Builds into build/ first when build/ has no daemon yet (BUILD=dir to use
# another build directory). Exits non-zero on any failure, including a perf
# run whose data the receiver did not verify.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
SECONDS_RUN=${SECONDS_RUN:-5}
daemon=$BUILD/daemon/metarocd
ctl=$BUILD/cli/metaroce-ctl
mperf=$BUILD/tools/perf/metaroce-perf

if [ ! -x "$daemon" ] || [ ! -x "$ctl" ] || [ ! -x "$mperf" ]; then
	echo "== building into $BUILD/"
	[ -d "$BUILD" ] || meson setup "$BUILD" -Dbuildtype=release >/dev/null
	meson compile -C "$BUILD" metarocd metaroce-ctl metaroce-perf >/dev/null
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/metaroce-loopback.XXXXXX")
pids=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ $rc -ne 0 ]; then
		for n in a b; do
			[ -f "$tmp/$n.log" ] && { echo "---- daemon $n log (tail) ----"; tail -n 20 "$tmp/$n.log"; }
		done
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# config NAME PORT SPORTS
config() {
	cat > "$tmp/$1.yaml" <<-YAML
	service:
	  port: $2
	  control_socket: $tmp/$1.sock
	  app_socket: $tmp/$1.app.sock
	  control_group: ""
	  state_db: $tmp/$1.db
	  log_level: info
	services:
	  perf: true              # the verified transfer below (off by default)
	planes:
	  - name: plane0
	    address: 127.0.0.1
	    source_ports: $3
	  - name: plane1
	    address: 127.0.0.2
	    source_ports: $3
	YAML
}
config a 19791 40000-44999
config b 19792 45000-49999

for n in a b; do
	"$daemon" -c "$tmp/$n.yaml" 2>"$tmp/$n.log" &
	pids+=($!)
done

# Wait until both answer on their control sockets.
for n in a b; do
	for i in $(seq 100); do
		"$ctl" -s "$tmp/$n.sock" status >/dev/null 2>&1 && break
		if [ "$i" = 100 ]; then
			echo "daemon $n did not become ready" >&2
			exit 1
		fi
		sleep 0.1
	done
done
echo "== daemons ready: A on 127.0.0.{1,2}:19791, B on 127.0.0.{1,2}:19792"

echo "== ping B from A"
"$ctl" -s "$tmp/a.sock" ping 127.0.0.1:19792 -c 3

echo "== perf A -> B for ${SECONDS_RUN}s (every message verified by B)"
"$ctl" -s "$tmp/a.sock" perf 127.0.0.1:19792 --seconds "$SECONDS_RUN" >"$tmp/perf.out" 2>&1 &
perf=$!
sleep "$(awk "BEGIN { print $SECONDS_RUN / 2 }")"
echo "== show paths on A during the run"
"$ctl" -s "$tmp/a.sock" show paths
rc=0
wait $perf || rc=$?
cat "$tmp/perf.out"
if [ $rc -ne 0 ]; then
	echo "perf failed (exit $rc)" >&2
	exit 1
fi

echo "== applications: metaroce-perf server on B, client on A (libmetaroce, WRITE_IMM, verified)"
"$mperf" server --socket "$tmp/b.app.sock" --once >"$tmp/mperf-server.out" 2>&1 &
server=$!
sleep 0.3
rc=0
"$mperf" client 127.0.0.1 --port 19792 --socket "$tmp/a.app.sock" --op write_imm \
	--size 65536 --streams 4 --depth 16 --seconds 3 --verify || rc=$?
if [ $rc -ne 0 ]; then
	kill -TERM $server 2>/dev/null || true
	wait $server 2>/dev/null || true
	cat "$tmp/mperf-server.out"
	echo "metaroce-perf failed (exit $rc)" >&2
	exit 1
fi
wait $server || { cat "$tmp/mperf-server.out"; echo "metaroce-perf server failed" >&2; exit 1; }

echo "== stopping (SIGTERM)"
for i in "${!pids[@]}"; do
	kill -TERM "${pids[$i]}"
done
for i in "${!pids[@]}"; do
	st=0
	wait "${pids[$i]}" || st=$?
	if [ $st -ne 0 ]; then
		echo "daemon exited with $st" >&2
		exit 1
	fi
done
pids=()
echo "== ok"
