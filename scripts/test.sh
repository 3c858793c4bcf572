#!/usr/bin/env bash
# The full test suite, from a fresh clone on a fresh machine:
#   1. install the build and test dependencies (Debian packages),
#   2. pass "asan": build with warnings as errors under AddressSanitizer +
#      UBSan (stack-use-after-return detection on) and run every meson suite,
#   3. pass "release": a non-sanitized optimized build (buildtype=release,
#      NDEBUG), every meson suite again,
#   4. pass "load": the suites that run real daemons (integration, netns,
#      client) once more on the release build with a CPU hog beside them
#      (stress-ng --cpu 2, started here and always stopped on exit),
#   5. pass "fuzz": build the libFuzzer harnesses with clang and fuzz each
#      decoder for FUZZ_SECONDS (default 60) seconds.
# Prints how long each suite of each pass took, then one closing line over
# all passes: "tests: N passed, N failed, N skipped". Exits non-zero when
# anything fails. Options through the environment:
#   SKIP_DEPS=1        do not call scripts/install-deps.sh
#   SKIP_FUZZ=1        skip the fuzz pass
#   FUZZ_SECONDS=N     fuzzing time per harness
#   PASSES="a b"       run only these passes (asan release load fuzz)
#   SUITES="a b"       run only these meson suites in the asan and release passes
#   LOAD_SUITES="a b"  the suites of the load pass (default: integration netns client)
#   LOAD_CPUS=N        stress-ng workers of the load pass (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_DEPS:-0}" != 1 ]; then
	bash scripts/install-deps.sh
fi

# ASan's options for the cmocka suites; the suites that start daemons set
# theirs in meson (tests/*/meson.build), stack-use-after-return included.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}

passes=${PASSES:-asan release load fuzz}
if [ "${SKIP_FUZZ:-0}" = 1 ]; then
	passes=${passes//fuzz/}
fi
want() { [[ " $passes " == *" $1 "* ]]; }

t_start=$(date +%s)
logs=()
times=()   # "pass suite seconds result" lines for the summary
rc=0

# Every suite the build defines, in the order meson lists them.
suites_of() {
	python3 - "$1" <<'PY'
import json, subprocess, sys
tests = json.loads(subprocess.run(["meson", "introspect", "--tests", sys.argv[1]],
                                  capture_output=True, text=True, check=True).stdout)
seen = []
for t in tests:
    for s in t["suite"]:
        s = s.split(":")[-1]
        if s not in seen:
            seen.append(s)
print(" ".join(seen))
PY
}

# run_suites PASS BUILD SUITE...: one meson test run per suite, timed; each
# writes its own log (meson-logs/PASS-SUITE.json) for the tally.
run_suites() {
	local pass=$1 build=$2 s t0 dt res
	shift 2
	for s in "$@"; do
		echo "==== $pass: suite $s ($(date -u +%T))"
		t0=$(date +%s)
		res=ok
		meson test -C "$build" --print-errorlogs --num-processes 2 --suite "$s" \
			--logbase "$pass-$s" || { res=FAILED; rc=1; }
		dt=$(($(date +%s) - t0))
		echo "==== $pass: suite $s took ${dt} s ($res)"
		times+=("$pass $s $dt $res")
		logs+=("$build/meson-logs/$pass-$s.json")
	done
}

# The suites to run on BUILD: SUITES if given, else all it defines.
pick_suites() {
	if [ -n "${SUITES:-}" ]; then
		echo "$SUITES"
	else
		suites_of "$1"
	fi
}

timed_pass() {
	local pass=$1 t0
	shift
	t0=$(date +%s)
	"$@"
	times+=("$pass (whole-pass) $(($(date +%s) - t0)) -")
}

pass_asan() {
	local build=build-ci
	if [ ! -d "$build" ]; then
		meson setup "$build" -Dwerror=true -Db_sanitize=address,undefined \
			-Dc_args=-fno-sanitize-recover=all
	fi
	meson compile -C "$build"
	# shellcheck disable=SC2046
	run_suites asan "$build" $(pick_suites "$build")
}

pass_release() {
	local build=build-release
	if [ ! -d "$build" ]; then
		meson setup "$build" -Dwerror=true --buildtype=release
	fi
	meson compile -C "$build"
	# shellcheck disable=SC2046
	run_suites release "$build" $(pick_suites "$build")
}

# The hog runs in a process group of its own (setsid), stopped as a group:
# stress-ng's parent, killed alone, can leave its workers running.
hog_pid=
stop_hog() {
	if [ -n "$hog_pid" ]; then
		kill -TERM -- "-$hog_pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 -- "-$hog_pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL -- "-$hog_pid" 2>/dev/null || true
		wait "$hog_pid" 2>/dev/null || true
		hog_pid=
	fi
}
trap stop_hog EXIT
trap 'stop_hog; exit 130' INT TERM

pass_load() {
	local build=build-release
	if [ ! -d "$build" ]; then
		meson setup "$build" -Dwerror=true --buildtype=release
	fi
	meson compile -C "$build"
	if ! command -v stress-ng >/dev/null; then
		echo "test.sh: stress-ng not installed, the load pass cannot run" >&2
		rc=1
		return
	fi
	# A CPU hog on every core of a 2-core machine: the daemons and the
	# tests compete with it (and with whatever else the host runs).
	setsid stress-ng --cpu "${LOAD_CPUS:-2}" --timeout 0 --quiet &
	hog_pid=$!
	echo "==== load: stress-ng --cpu ${LOAD_CPUS:-2} running (pid $hog_pid)"
	# shellcheck disable=SC2086
	run_suites load "$build" ${LOAD_SUITES:-integration netns client}
	stop_hog
}

pass_fuzz() {
	if ! command -v clang >/dev/null; then
		echo "test.sh: clang not installed, fuzzing skipped" >&2
		rc=1
		return
	fi
	local fbuild=build-fuzz t0 dt res=ok
	if [ ! -d "$fbuild" ]; then
		CC=clang meson setup "$fbuild" -Dfuzz=enabled -Dtests=enabled \
			-Db_sanitize=address,undefined -Db_lundef=false
	fi
	meson compile -C "$fbuild"
	t0=$(date +%s)
	FUZZ_SECONDS=${FUZZ_SECONDS:-60} meson test -C "$fbuild" --suite fuzz \
		--print-errorlogs --num-processes 1 --logbase fuzz-fuzz || { res=FAILED; rc=1; }
	dt=$(($(date +%s) - t0))
	times+=("fuzz fuzz $dt $res")
	logs+=("$fbuild/meson-logs/fuzz-fuzz.json")
}

for p in asan release load fuzz; do
	if want "$p"; then
		echo "==== pass $p ($(date -u +%T))"
		timed_pass "$p" "pass_$p"
	fi
done

echo
echo "time per suite and pass (seconds; builds are counted in the pass totals):"
printf '  %-8s %-24s %6s  %s\n' pass suite seconds result
for line in "${times[@]}"; do
	# shellcheck disable=SC2086
	printf '  %-8s %-24s %6s  %s\n' $line
done
echo "  all passes: $(($(date +%s) - t_start)) s"

# Tally the meson test logs of every pass into the closing line CI reads.
python3 - "${logs[@]}" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0}
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            for line in f:
                r = json.loads(line).get("result", "ERROR")
                counts[r] = counts.get(r, 0) + 1
    except FileNotFoundError:
        # A pass whose build failed wrote no log: that is a failure.
        counts["ERROR"] += 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
# The failures once more, at the end where a truncated log still shows them:
# each failed test and the first lines of its output that say what failed.
MARKS = ("FAIL", "[  ERROR", "[   LINE", "Traceback", "AssertionError", "ERROR:",
         "==ERROR", "runtime error")
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f]
    except FileNotFoundError:
        print(f"failed: {path}: no log (the pass's build failed?)")
        continue
    for r in rows:
        if r.get("result") in ("OK", "EXPECTEDFAIL", "SKIP"):
            continue
        out = (r.get("stdout") or "") + (r.get("stderr") or "")
        why = [l.strip()[:200] for l in out.splitlines() if l.lstrip().startswith(MARKS)][:4]
        print(f"failed: {path.rsplit('/', 1)[-1][:-5]} {r.get('name')} ({r.get('result')}, "
              f"{r.get('duration', 0):.0f} s)")
        for l in why or ["(no failing line found; the log above has its output)"]:
            print(f"    {l}")
print(f"tests: {passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
if [ $rc -ne 0 ]; then
	echo "test.sh: FAILED (see the logs above)" >&2
	exit $rc
fi
echo "test.sh: all suites passed"
