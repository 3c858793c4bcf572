#!/bin/sh
# systemd/metarocd.service passes `systemd-analyze verify` (with ExecStart
# pointed at the metarocd just built, which verify wants to exist).
# usage: test_systemd_unit.sh UNIT METAROCD
unit=$1 daemon=$2
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: systemd-analyze not installed"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*|ExecStart=$daemon|" "$unit" > "$tmp/metarocd.service"
out=$(systemd-analyze verify --man=no "$tmp/metarocd.service" 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ] && echo "$out" | grep -qiE 'bus|connect|sd_bus|Failed to (initialize|set up) manager'; then
    echo "SKIP: systemd-analyze cannot run here"
    exit 77
fi
# Warnings about the environment (not the unit) are not failures.
if echo "$out" | grep -v -e 'is not executable' -e '^$' | grep -q "metarocd.service"; then
    echo "FAIL: the unit has problems"
    exit 1
fi
[ $rc -eq 0 ] && echo "ok: systemd-analyze verify passed"
exit $rc
