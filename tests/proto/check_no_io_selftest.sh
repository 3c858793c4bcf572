#!/usr/bin/env bash
# Proves check_no_io.sh can fail: a fake engine that reads the clock and calls
# malloc must be rejected by both the source and the symbol check, and a clean
# one (including a call through an injected allocator) must pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bad" "$tmp/good"

cat > "$tmp/bad/bad.c" <<'C'
#include <stdlib.h>
#include <time.h>
long mrp_bad(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (long)malloc(1) + ts.tv_nsec; }
C
cat > "$tmp/good/good.c" <<'C'
#include <string.h>
struct a { void (*free)(void *, void *); void *ud; };
void mrp_good(struct a *a, char *p) { memset(p, 0, 4); a->free(p, a->ud); }
C

for d in bad good; do
	$cc -c -O1 -o "$tmp/$d/$d.o" "$tmp/$d/$d.c" || { echo "cannot compile $d.c"; exit 1; }
	ar rcs "$tmp/$d/lib.a" "$tmp/$d/$d.o"
done

out=$(bash "$here/check_no_io.sh" "$tmp/bad" "$tmp/bad/lib.a"); rc=$?
if [ $rc -eq 0 ]; then
	echo "FAIL: check_no_io.sh accepted a library that calls clock_gettime and malloc"
	exit 1
fi
for sym in clock_gettime malloc; do
	if ! grep -q "$sym" <<<"$out"; then
		echo "FAIL: check_no_io.sh did not name $sym:"; echo "$out"; exit 1
	fi
done
if ! bash "$here/check_no_io.sh" "$tmp/good" "$tmp/good/lib.a" >/dev/null; then
	echo "FAIL: check_no_io.sh rejected a clean library"
	bash "$here/check_no_io.sh" "$tmp/good" "$tmp/good/lib.a"
	exit 1
fi
echo "no-io selftest: violations caught, clean library accepted"
