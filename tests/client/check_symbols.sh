#!/bin/sh
# libmetaroce exports the mrc_ API and nothing else: every defined dynamic
# symbol is mrc_* (plus the version nodes METAROCE_1, METAROCE_1.1 and
# METAROCE_1.2 themselves), each carries the version METAROCE_1 (added
# later: mrc_post_read in METAROCE_1.1, mrc_session_features in 1.2), and the
# internals (mrc_request, mrc_shm_check, ...) stay hidden. Every function of metaroce.h is exported and in metaroce(3).
set -eu
lib="$1"
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
[ -n "$syms" ] || { echo "FAIL: no symbols in $lib"; exit 1; }
bad=0
n=0
for s in $syms; do
	case "$s" in
	METAROCE_1 | METAROCE_1.1 | METAROCE_1.2) ;;
	mrc_post_read@@METAROCE_1.1) n=$((n + 1)) ;;
	mrc_post_read@@*) echo "FAIL: $s: mrc_post_read belongs to METAROCE_1.1"; bad=1 ;;
	mrc_session_features@@METAROCE_1.2) n=$((n + 1)) ;;
	mrc_session_features@@*) echo "FAIL: $s: mrc_session_features belongs to METAROCE_1.2"; bad=1 ;;
	mrc_*@@METAROCE_1) n=$((n + 1)) ;;
	*) echo "FAIL: exported symbol $s"; bad=1 ;;
	esac
done
for hidden in mrc_request mrc_shm_check mrc_session_drain mrc_now_ms mrc_block_unref; do
	if echo "$syms" | grep -q "^$hidden@"; then
		echo "FAIL: internal $hidden is exported"; bad=1
	fi
done
# Every function the header declares is exported.
hdr="$2"
for f in $(grep -o 'mrc_[a-z_0-9]*(' "$hdr" | tr -d '(' | sort -u); do
	echo "$syms" | grep -q "^$f@@METAROCE_1\(\.[12]\)\?\$" || { echo "FAIL: $f declared but not exported"; bad=1; }
done
# ... and documented in metaroce(3).
man="$3"
for f in $(grep -o 'mrc_[a-z_0-9]*(' "$hdr" | tr -d '(' | sort -u); do
	grep -q "$f" "$man" || { echo "FAIL: $f is not in $man"; bad=1; }
done
[ $bad -eq 0 ] || exit 1
echo "ok: $n mrc_* symbols, in METAROCE_1, METAROCE_1.1 and METAROCE_1.2, nothing else exported"
