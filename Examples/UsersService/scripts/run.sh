#!/usr/bin/env bash
# Starts the upstream and the service on loopback with a store under a temporary directory,
# prints where they listen, and stops both on Ctrl-C (the service shuts down gracefully).
# Arguments go to the service (e.g. --ttl 5 --log-level debug); CONFIG=release builds optimized.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build_example "${CONFIG:-debug}"
work=$(mktemp -d)
stop() {
    kill -TERM "${service_pid:-}" 2>/dev/null && wait "${service_pid:-}" 2>/dev/null || true
    kill -TERM "${upstream_pid:-}" 2>/dev/null || true
    rm -rf "$work"
}
trap stop EXIT
trap 'exit 0' INT TERM
start_upstream "$work" --users 10000 --latency-ms 20
start_service "$work" "$@"
cat <<TEXT
upstream  http://127.0.0.1:$upstream_port   (PUT /admin/error-rate with 0…1 as the body)
service   http://127.0.0.1:$service_port    store $work/store, logs in $work
try       curl http://127.0.0.1:$service_port/users/42
          curl 'http://127.0.0.1:$service_port/users?ids=1,2,3'
          curl -X POST -H 'Content-Type: application/json' -d '{"userID": 42}' http://127.0.0.1:$service_port/sessions
          curl http://127.0.0.1:$service_port/metrics
Ctrl-C stops both.
TEXT
tail -f "$work/service.log" &
wait "$service_pid"
