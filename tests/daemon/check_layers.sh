#!/usr/bin/env bash
# The daemon is built in layers (docs/ARCHITECTURE.md, "Layers of the daemon"):
# a file may include the headers of its own layer and of the layers below it,
# never of a layer above; upward calls go through callbacks, event subscribers
# or the command table that main.c wires.
#
# The layer of every file of daemon/ is read from the table in
# ARCHITECTURE.md, so the document and the check cannot disagree. A file the
# table does not place fails the check (a new file must be given a layer).
# Known exceptions are listed in ALLOW (one "file -> header" a line); each one
# is printed on every run so none is hidden, and an entry that no longer
# matches an include fails the check, so the list can only shrink.
#
# Three checks, two as in tests/proto/check_no_io.sh: the sources (the
# includes spelled out; and no file but peer.c touching a connection's
# engine, c->eng) and, given the compiled library, the symbols each object
# imports, which also catches a function declared in a lower header but
# defined in a higher file (a forwarder that reaches up unseen by includes).
# An exception of the second kind is written "file -> symbol()".
# usage: check_layers.sh DAEMON_DIR ARCHITECTURE_MD ALLOW_FILE [LIBMRD_A]
set -u
dir=${1:?daemon dir}
doc=${2:?ARCHITECTURE.md}
allow=${3:?allow list}
lib=${4:-}
fail=0

# The table: rows "| N | name | `file`, `file` ... | ... |" after the heading.
declare -A layer=() lname=()
while IFS='|' read -r _ num name files _; do
	num=${num//[[:space:]]/}
	[[ $num =~ ^[0-9]+$ ]] || continue
	for f in $(grep -oE '`[A-Za-z0-9_.]+`' <<<"$files" | tr -d '`'); do
		if [[ -n ${layer[$f]:-} ]]; then
			echo "layers: $f is placed twice in the table"
			fail=1
		fi
		layer[$f]=$num
	done
	lname[$num]=$(sed 's/^ *//; s/ *$//' <<<"$name")
done < <(sed -n '/^## Layers of the daemon/,/^## /p' "$doc")
if [ ${#layer[@]} -eq 0 ]; then
	echo "layers: no layer table found in $doc"
	exit 1
fi

# A file's layer: its own name (mrd.h) or its stem (config for config.c/.h).
layer_of() {
	local b
	b=$(basename "$1")
	if [[ -n ${layer[$b]:-} ]]; then echo "${layer[$b]}"; return; fi
	b=${b%.*}
	echo "${layer[$b]:-}"
}

declare -A allowed=() used=()
if [ -f "$allow" ]; then
	while IFS= read -r line; do
		line=${line%%#*}
		line=$(sed 's/^ *//; s/ *$//' <<<"$line")
		[ -n "$line" ] && allowed[$line]=1
	done <"$allow"
fi

nfiles=0 nincl=0
for f in "$dir"/*.c "$dir"/*.h; do
	[ -e "$f" ] || continue
	b=$(basename "$f")
	lf=$(layer_of "$b")
	if [ -z "$lf" ]; then
		echo "layers: daemon/$b has no layer in the table of $(basename "$doc")"
		fail=1
		continue
	fi
	nfiles=$((nfiles + 1))
	while IFS= read -r h; do
		# Only the daemon's own headers have a layer; proto/, libclient/
		# and system headers are below the whole daemon.
		[ -e "$dir/$h" ] || continue
		nincl=$((nincl + 1))
		lh=$(layer_of "$h")
		if [ -z "$lh" ]; then
			echo "layers: daemon/$h has no layer in the table"
			fail=1
			continue
		fi
		[ "$lh" -le "$lf" ] && continue
		key="$b -> $h"
		if [[ -n ${allowed[$key]:-} ]]; then
			used[$key]=1
			echo "exception: $key (layer $lf ${lname[$lf]} includes layer $lh ${lname[$lh]})"
		else
			echo "VIOLATION: daemon/$b (layer $lf ${lname[$lf]}) includes $h (layer $lh ${lname[$lh]})"
			fail=1
		fi
	done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$f")
done

# The engine of a connection (mrd_conn.eng) has one owner, peer.c: the
# other files go through peer.h's mrd_conn_* calls. Comment lines skipped.
eng=$(grep -nE '(->|\.)eng\b' "$dir"/*.c 2>/dev/null | grep -v "^$dir/peer\.c:" |
	grep -vE '^\S+:[0-9]+:\s*(\*|/\*|//)' || true)
if [ -n "$eng" ]; then
	echo "VIOLATION: only peer.c touches a connection's engine (->eng); use peer.h's calls:"
	sed "s|^$dir/|daemon/|" <<<"$eng"
	fail=1
fi

# 2. Symbols: which object defines what, and what each object imports.
nsyms=0
if [ -n "$lib" ]; then
	if ! command -v nm >/dev/null; then
		echo "nm not found: cannot check imported symbols" >&2
		exit 77
	fi
	# "object D|U symbol" for every defined and undefined global symbol (a
	# thin archive names its objects by path: the file name is kept)
	rows=$(nm -A --format=posix "$lib" 2>/dev/null |
		sed -nE 's/^[^[]*\[([^]]*\/)?([^]/]+)\.o\]: ([^ ]+) ([A-Z]).*/\2 \4 \3/p')
	declare -A def=()
	while read -r obj t sym; do
		[ "$t" = U ] && continue
		def[$sym]=$obj
	done <<<"$rows"
	while read -r obj t sym; do
		[ "$t" = U ] || continue
		d=${def[$sym]:-}
		[ -n "$d" ] || continue
		nsyms=$((nsyms + 1))
		lu=$(layer_of "$obj") ld=$(layer_of "$d")
		[ -n "$lu" ] && [ -n "$ld" ] || continue
		[ "$ld" -le "$lu" ] && continue
		key="$obj -> $sym()"
		if [[ -n ${allowed[$key]:-} ]]; then
			used[$key]=1
			echo "exception: $key (layer $lu ${lname[$lu]} calls $d, layer $ld ${lname[$ld]})"
		else
			echo "VIOLATION: daemon/$obj (layer $lu ${lname[$lu]}) uses $sym() of $d (layer $ld ${lname[$ld]})"
			fail=1
		fi
	done <<<"$rows"
fi

for key in "${!allowed[@]}"; do
	if [[ -z ${used[$key]:-} ]]; then
		echo "STALE: allowed exception \"$key\" no longer occurs: remove it from $(basename "$allow")"
		fail=1
	fi
done

if [ $fail -eq 0 ]; then
	echo "layers: $nfiles files, $nincl includes of daemon headers, $nsyms calls between objects, ${#allowed[@]} listed exceptions"
fi
exit $fail
