#!/usr/bin/env bash
# Proves check_layers.sh can fail: in a fake daemon of three layers, a low
# file that includes a higher header, a low object that calls a function
# defined in a higher one, a file other than peer.c that touches c->eng, a
# file the table does not place and an allowed
# exception that no longer occurs must each be rejected and named; a clean
# tree passes, and an allowed exception passes but is printed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

cat > "$tmp/ARCH.md" <<'MD'
# x

## Layers of the daemon

| layer | name | files | what |
|---|---|---|---|
| 1 | low | `lo` | bottom |
| 2 | mid | `mid` | middle |
| 3 | top | `top`, `all.h` | wiring |

## Next section
| 9 | not a layer | `lo` | ignored: after the section |
MD

mk() { # mk DIR: a clean tree
	mkdir -p "$1"
	printf '#pragma once\nint lo(void);\n' >"$1/lo.h"
	printf '#include "lo.h"\nint lo(void) { return 1; }\n' >"$1/lo.c"
	printf '#pragma once\n#include "lo.h"\nint mid(void);\n' >"$1/mid.h"
	printf '#include "mid.h"\nint mid(void) { return lo() + 1; }\n' >"$1/mid.c"
	printf '#pragma once\n#include "mid.h"\n' >"$1/all.h"
	printf '#include "all.h"\nint top(void) { return mid() + 1; }\n' >"$1/top.c"
}
lib() { # lib DIR: compile every .c into DIR/lib.a
	for c in "$1"/*.c; do
		$cc -c -O0 -o "$c.o" "$c" || { echo "cannot compile $c"; exit 1; }
	done
	ar rcs "$1/lib.a" "$1"/*.c.o
}
run() { bash "$here/check_layers.sh" "$1" "$tmp/ARCH.md" "$2" "$1/lib.a"; }
expect_fail() { # expect_fail NAME DIR ALLOW WORD...
	local name=$1 d=$2 a=$3; shift 3
	local out rc
	out=$(run "$d" "$a"); rc=$?
	if [ $rc -eq 0 ]; then
		echo "FAIL: $name was accepted:"; echo "$out"; fail=1; return
	fi
	for w in "$@"; do
		if ! grep -q -- "$w" <<<"$out"; then
			echo "FAIL: $name: the output does not say '$w':"; echo "$out"; fail=1
		fi
	done
}

: >"$tmp/none"
mk "$tmp/good"; lib "$tmp/good"
if ! out=$(run "$tmp/good" "$tmp/none"); then
	echo "FAIL: a clean tree was rejected:"; echo "$out"; fail=1
fi

# A low header includes a higher one.
mk "$tmp/inc"; printf '#include "mid.h"\n' >>"$tmp/inc/lo.c"; lib "$tmp/inc"
expect_fail "an upward include" "$tmp/inc" "$tmp/none" "VIOLATION: daemon/lo.c" "mid.h"
# The same, allowed: passes, and the exception is printed.
echo "lo.c -> mid.h  # the one exception" >"$tmp/allow1"
if ! out=$(run "$tmp/inc" "$tmp/allow1") || ! grep -q "exception: lo.c -> mid.h" <<<"$out"; then
	echo "FAIL: an allowed exception was rejected or not printed:"; echo "$out"; fail=1
fi
# Including the wiring header from below.
mk "$tmp/all"; printf '#include "all.h"\n' >>"$tmp/all/mid.c"; lib "$tmp/all"
expect_fail "an include of the wiring header" "$tmp/all" "$tmp/none" "daemon/mid.c" "all.h"

# A forwarder: lo.h declares a function that top.c defines, lo.c calls it
# without including any higher header.
mk "$tmp/sym"
printf 'int up(void);\n' >>"$tmp/sym/lo.h"
printf 'int lo2(void) { return up(); }\n' >>"$tmp/sym/lo.c"
printf 'int up(void) { return 3; }\n' >>"$tmp/sym/top.c"
lib "$tmp/sym"
expect_fail "an upward call" "$tmp/sym" "$tmp/none" "lo.c" "up()" "top.c"

# A file other than peer.c touches a connection's engine.
mk "$tmp/eng"; printf 'struct c { int *eng; };\nint poke(struct c *c) { return *c->eng; }\n' >>"$tmp/eng/mid.c"
lib "$tmp/eng"
expect_fail "an engine touched outside peer.c" "$tmp/eng" "$tmp/none" "only peer.c" "daemon/mid.c"

# A file with no layer.
mk "$tmp/new"; printf 'int stray(void) { return 0; }\n' >"$tmp/new/stray.c"; lib "$tmp/new"
expect_fail "a file the table does not place" "$tmp/new" "$tmp/none" "stray.c has no layer"

# An exception that no longer occurs.
expect_fail "a stale exception" "$tmp/good" "$tmp/allow1" "STALE" "lo.c -> mid.h"

[ $fail -eq 0 ] && echo "layers selftest: upward includes and calls, an engine touched outside peer.c, unplaced files and stale exceptions caught; clean tree accepted"
exit $fail
