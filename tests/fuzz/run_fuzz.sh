#!/bin/sh
# Run a libFuzzer binary for a bounded time: run_fuzz.sh FUZZER SEED_DIR.
#
# libFuzzer adds the inputs it finds to its first corpus directory, so that is
# a scratch directory (removed afterwards) and the seed directory, in the
# source tree, comes second and is only read. FUZZ_SECONDS (default 60) bounds
# the run. Crash reproducers are written to the current directory (meson
# runs tests in the build directory). Exits 1 on any finding: libFuzzer's own
# code for one is 77, which meson would count as a skipped test.
set -u

fuzzer=${1:?usage: run_fuzz.sh FUZZER SEED_DIR}
seeds=${2:?usage: run_fuzz.sh FUZZER SEED_DIR}
work=$(mktemp -d "${TMPDIR:-/tmp}/mrp-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

mkdir "$work/corpus"
"$fuzzer" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 "$work/corpus" "$seeds" >"$work/log" 2>&1
rc=$?
cat "$work/log"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
echo "run_fuzz: $(basename "$fuzzer"): ${runs:-unknown} executions, exit status $rc"
[ "$rc" -eq 0 ] || exit 1
