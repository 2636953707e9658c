#!/usr/bin/env bash
# A long capture of a busy service (docs/capture.md, "Overhead"): Debian's
# nginx (2 workers, a 612-byte page) in a cgroup of its own, loaded by wrk
# (2 threads, 32 connections, outside the cgroup) for SECONDS + 10 s, and
# captured by `throttlelab capture` for SECONDS. Prints wrk's requests/s,
# the capture's `[capture]` numbers, and its CPU time and peak memory.
# With CAPTURE=0, nginx and wrk alone for the same time (throughput only).
#
#   sudo bash scripts/capture_nginx.sh [SECONDS [OUT.toml]]    (default 600 nginx.toml)
#
# Then `throttlelab run OUT.toml --json`: the replay's usage_usec against
# [capture] usage_usec. Needs root, cgroup v1 or v2, nginx and wrk (Debian's
# packages, installed if missing). Run it in a mount namespace of its own
# (unshare -m --propagation private), from a directory outside /work/wt
# (tl-measure stops processes there).
set -uo pipefail
SECONDS_RUN="${1:-600}"
OUT="$(realpath -m "${2:-nginx.toml}")"
THROTTLELAB="${THROTTLELAB:-throttlelab}"
for tool in nginx:nginx-light wrk:wrk; do
    command -v "${tool%%:*}" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${tool#*:}" >/dev/null
done
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing

source "$(dirname "$0")/measure_cgroup.sh"
cgroup_make "capture-nginx-$$"
WORK="$(mktemp -d)"
PORT=18080
cleanup() {
    [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null
    sleep 1
    cgroup_remove
    rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/html"
head -c 612 /dev/zero | tr '\0' 'x' > "$WORK/html/index.html"
cat > "$WORK/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK; uwsgi_temp_path $WORK; scgi_temp_path $WORK;
    server { listen 127.0.0.1:$PORT; root $WORK/html; }
}
EOF
cgroup_exec nginx -c "$WORK/nginx.conf" &
sleep 1
wrk -t2 -c32 -d"$((SECONDS_RUN + 10))s" "http://127.0.0.1:$PORT/" > "$WORK/wrk" 2>&1 &
WRK=$!
sleep 3
if [ "${CAPTURE:-1}" = 0 ]; then
    wait "$WRK"
    grep -E "Requests/sec|requests in" "$WORK/wrk"
    exit 0
fi
/usr/bin/time -f "capture cpu_s %U %S maxrss_kb %M" "$THROTTLELAB" capture --cgroup "${CG_DIRS[0]}" --duration "$SECONDS_RUN" -o "$OUT" 2>&1 | tail -5
wait "$WRK"
grep -E "Requests/sec|requests in" "$WORK/wrk"
sed -n '/^\[capture\]/,/^\[\[task/p' "$OUT" | grep ' = ' | tr '\n' ' '
echo
