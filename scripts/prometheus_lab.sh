#!/usr/bin/env bash
# A Prometheus scraping a cAdvisor, both on loopback, for `throttlelab advise --prometheus`.
#
#   scripts/prometheus_lab.sh start   # builds tools/cadvisor once, starts both, prints the URL
#   scripts/prometheus_lab.sh stop    # stops both (by the pids it wrote), removes the TSDB
#
# cAdvisor (tools/cadvisor: the library module around manager.New) reports every raw
# cgroup as a container by `id`; Prometheus (Debian's package, /usr/bin/prometheus, not
# its systemd unit) scrapes it every SCRAPE (default 2s) into a temporary TSDB.
# Environment: LAB_DIR (default /tmp/throttlelab-prometheus), PROM_PORT (9090),
# CADVISOR_PORT (8080), SCRAPE (2s). Needs root (cAdvisor reads every cgroup).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dir="${LAB_DIR:-/tmp/throttlelab-prometheus}"
prom_port="${PROM_PORT:-9090}"
cadvisor_port="${CADVISOR_PORT:-8080}"
scrape="${SCRAPE:-2s}"

die() { echo "prometheus_lab: error: $*" >&2; exit 2; }

wait_http() {  # URL SECONDS: until it answers 200
    for _ in $(seq 1 "$(( $2 * 5 ))"); do
        curl -sf -o /dev/null "$1" && return 0
        sleep 0.2
    done
    return 1
}

start() {
    command -v prometheus >/dev/null || die "no prometheus binary: apt-get install prometheus (bash .ci/run installs it)"
    command -v go >/dev/null || [ -x "$dir/cadvisor" ] || die "no go to build tools/cadvisor (https://go.dev/dl, or bash .ci/run)"
    [ -e "$dir/prometheus.pid" ] && die "already started in $dir (scripts/prometheus_lab.sh stop first)"
    mkdir -p "$dir/tsdb"
    if [ ! -x "$dir/cadvisor" ] || [ "$here/tools/cadvisor/main.go" -nt "$dir/cadvisor" ]; then
        (cd "$here/tools/cadvisor" && go build -o "$dir/cadvisor" .) || die "go build of tools/cadvisor failed"
    fi
    cat > "$dir/prometheus.yml" <<YML
global:
  scrape_interval: $scrape
  evaluation_interval: $scrape
scrape_configs:
  - job_name: cadvisor
    static_configs:
      - targets: ["127.0.0.1:$cadvisor_port"]
YML
    "$dir/cadvisor" -listen "127.0.0.1:$cadvisor_port" -housekeeping 1s > "$dir/cadvisor.log" 2>&1 &
    echo $! > "$dir/cadvisor.pid"
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
        --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=1d \
        > "$dir/prometheus.log" 2>&1 &
    echo $! > "$dir/prometheus.pid"
    wait_http "http://127.0.0.1:$cadvisor_port/metrics" 30 || { stop; die "cadvisor did not answer (see $dir/cadvisor.log)"; }
    wait_http "http://127.0.0.1:$prom_port/-/ready" 30 || { stop; die "prometheus did not start (see $dir/prometheus.log)"; }
    echo "http://127.0.0.1:$prom_port"
}

stop() {
    for name in prometheus cadvisor; do
        if [ -e "$dir/$name.pid" ]; then
            pid="$(cat "$dir/$name.pid")"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            rm -f "$dir/$name.pid"
        fi
    done
    rm -rf "$dir/tsdb"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: scripts/prometheus_lab.sh start|stop" >&2; exit 2 ;;
esac
