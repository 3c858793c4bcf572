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
[ $rc -eq 0 ] || exit $rc
# The hardening: systemd's own rating of the unit file must stay "OK" or
# better (systemd 250+ can rate a unit file offline).
sec=$(systemd-analyze security --offline=true "$tmp/metarocd.service" 2>&1)
if [ $? -ne 0 ] && echo "$sec" | grep -qi 'unrecognized option\|unknown option'; then
    echo "note: this systemd-analyze cannot rate a unit offline"
    exit 0
fi
level=$(echo "$sec" | grep 'Overall exposure level')
echo "$level"
case "$level" in
*" OK"*|*" SAFE"*|*" PERFECT"*) echo "ok: exposure rated OK or better" ;;
*) echo "FAIL: exposure level not OK or better"; exit 1 ;;
esac
exit 0
