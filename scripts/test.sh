#!/usr/bin/env bash
# The full test suite, from a fresh clone on a fresh machine:
#   1. install the build and test dependencies (Debian packages),
#   2. build with warnings as errors under AddressSanitizer + UBSan,
#   3. run every meson test suite,
#   4. build the libFuzzer harnesses with clang and fuzz each decoder for
#      FUZZ_SECONDS (default 60) seconds.
# Exits non-zero when anything fails. Options through the environment:
#   SKIP_DEPS=1      do not call scripts/install-deps.sh
#   SKIP_FUZZ=1      skip step 4
#   FUZZ_SECONDS=N   fuzzing time per harness
#   SUITES="a b"     run only these meson suites in step 3
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_DEPS:-0}" != 1 ]; then
	bash scripts/install-deps.sh
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}

build=build-ci
if [ ! -d "$build" ]; then
	meson setup "$build" -Dwerror=true -Db_sanitize=address,undefined \
		-Dc_args=-fno-sanitize-recover=all
fi
meson compile -C "$build"

suite_args=()
for s in ${SUITES:-}; do
	suite_args+=(--suite "$s")
done
# Tally one or more meson test logs into the plain closing line CI reads.
tally() {
	python3 - "$@" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0, "EXPECTEDFAIL": 0, "UNEXPECTEDPASS": 0}
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            for line in f:
                r = json.loads(line).get("result", "ERROR")
                counts[r] = counts.get(r, 0) + 1
    except FileNotFoundError:
        pass
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"tests: {passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
}

rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 "${suite_args[@]}" || rc=$?
logs=("$build/meson-logs/testlog.json")

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
	if command -v clang >/dev/null; then
		fbuild=build-fuzz
		if [ ! -d "$fbuild" ]; then
			CC=clang meson setup "$fbuild" -Dfuzz=enabled -Dtests=enabled \
				-Db_sanitize=address,undefined -Db_lundef=false
		fi
		meson compile -C "$fbuild"
		FUZZ_SECONDS=${FUZZ_SECONDS:-60} meson test -C "$fbuild" --suite fuzz \
			--print-errorlogs --num-processes 1 || rc=$?
		logs+=("$fbuild/meson-logs/testlog.json")
	else
		echo "test.sh: clang not installed, fuzzing skipped" >&2
		rc=1
	fi
fi
tally "${logs[@]}"
if [ $rc -ne 0 ]; then
	echo "test.sh: FAILED (see the logs above)" >&2
	exit $rc
fi
echo "test.sh: all suites passed"
