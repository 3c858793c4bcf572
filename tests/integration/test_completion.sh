#!/bin/bash
# The bash completion of metaroce-ctl: it parses and completes objects,
# subcommands and options. $1: the script, $2: metaroce-ctl. (Plane names
# and connection ids come from a running daemon; none runs here.)
set -u
script=$1
ctl=$2
bash -n "$script" || { echo "FAIL: syntax"; exit 1; }
complete_words() { # the words of the command line, the last one being completed
	bash -c '
		source "$1"; shift
		metaroce-ctl() { "$CTL" "$@"; }
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_metaroce_ctl
		echo "${COMPREPLY[*]}"' _ "$script" "$@"
}
export CTL=$ctl
fail=0
check() { # expected-substring words...
	local want=$1; shift
	local got
	got=$(complete_words "$@")
	if [[ " $got " == *" $want "* ]]; then echo "ok: '$*' -> $want"
	else echo "FAIL: '$*' gave '$got', wanted $want"; fail=1; fi
}
check plane metaroce-ctl pl
check drain metaroce-ctl plane d
check steer metaroce-ctl path st
check events metaroce-ctl history ev
check --watch metaroce-ctl show paths --w
check --force metaroce-ctl plane drain p0 --f
check --link metaroce-ctl drill plane p0 --li
check 7d metaroce-ctl history events --since 7
exit $fail
