#!/bin/sh
# Runs `coordinator loadtest` as uid 10001. When started as root (the compose service does),
# it first makes the report directory (--out) writable for 10001, since Docker creates a
# missing bind-mount source owned by root, then drops to 10001:10001.
set -eu
if [ "$(id -u)" != 0 ]; then
    exec coordinator loadtest "$@"
fi
out=""
previous=""
for arg in "$@"; do
    case "$arg" in
        --out=*) out="${arg#--out=}" ;;
        *) [ "$previous" = "--out" ] && out="$arg" ;;
    esac
    previous="$arg"
done
as_coordinator="setpriv --reuid 10001 --regid 10001 --clear-groups"
if [ -n "$out" ]; then
    mkdir -p "$out"
    $as_coordinator test -w "$out" || chown 10001:10001 "$out"
fi
HOME=/data USER=coordinator exec $as_coordinator coordinator loadtest "$@"
