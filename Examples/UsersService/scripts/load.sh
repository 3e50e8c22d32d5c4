#!/usr/bin/env bash
# Holds the example service under load with wrk on loopback, in four phases, and prints one
# summary line per phase (figures in BENCHMARKS.md and docs/RELIABILITY.md):
#   1 steady    30 s at a hot/cold mix (90% of requests on 1,000 hot users, 10% on 20,000)
#   2 upstream  10 s with the upstream failing half its requests (hot users only: all stored)
#   3 sigterm   SIGTERM to the service 3 s into 10 s of load, then a restart
#   4 sigkill   SIGKILL to the service 3 s into 10 s of load, then a restart and `hoard verify`
# Release build; a store under a temporary directory. Takes about 2 minutes once built.
# Usage: scripts/load.sh [CONNECTIONS]   (default 32; wrk uses 2 threads)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need curl curl
need wrk wrk
connections="${1:-32}"

build_example release
hoard="$(hoard_tool release)"

work=$(mktemp -d)
cleanup() {
    kill "${service_pid:-}" "${upstream_pid:-}" "${wrk_pid:-}" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Short freshness windows, so that phase 2 meets stale records whose refresh fails.
service_args=(--ttl 5 --stale-while-revalidate 2 --stale-if-error 3600 --sync-interval 20 --shutdown-timeout 10
    --log-level warning)
start_upstream "$work" --users 20000 --latency-ms 20
start_service "$work" "${service_args[@]}"
lua="$example_dir/scripts/mix.lua"

counts() {  # sets $hits and $misses from the service's /metrics
    request GET /metrics
    hits=$(metric_sum "$body" hoard_gets_total 'collection="User"' 'result="hit"')
    misses=$(metric_sum "$body" hoard_gets_total 'collection="User"' 'result="miss"')
}

# Runs wrk for SECONDS with the environment given before it; leaves its output in $work/wrk.out.
run_wrk() {  # run_wrk SECONDS
    wrk -t2 -c"$connections" -d"$1s" --timeout 5s --latency -s "$lua" "http://127.0.0.1:$service_port" \
        >"$work/wrk.out" 2>&1
}

summary() {  # summary PHASE EXTRA
    local out="$work/wrk.out"
    local requests non2xx socket p50 p99 rps
    requests=$(awk '/requests in/ { print $1 }' "$out")
    rps=$(awk '/Requests\/sec/ { printf "%d", $2 }' "$out")
    non2xx=$(awk '/Non-2xx/ { print $NF }' "$out"); non2xx=${non2xx:-0}
    socket=$(awk -F'Socket errors: ' '/Socket errors/ { print $2 }' "$out"); socket=${socket:-none}
    p50=$(awk '$1 == "50%" { print $2 }' "$out")
    p99=$(awk '$1 == "99%" { print $2 }' "$out")
    printf '%-9s requests %-8s (%s/s)  non-2xx %-5s  p50 %-8s p99 %-8s socket errors: %s  %s\n' \
        "$1" "$requests" "$rps" "$non2xx" "$p50" "$p99" "$socket" "$2"
}

ratio() {  # ratio HITS0 MISSES0: the hit ratio since those counts
    counts
    awk -v h=$((hits - $1)) -v m=$((misses - $2)) 'BEGIN { if (h + m == 0) print "-"; else printf "%.1f%%\n", 100 * h / (h + m) }'
}

echo "load: upstream :$upstream_port (20 ms, 20,000 users), service :$service_port, $connections connections"

# 1. Steady load.
counts; h0=$hits; m0=$misses
run_wrk 30
summary steady "hit ratio $(ratio "$h0" "$m0")"

# 2. The upstream fails half its requests; only hot (stored) users are asked for.
curl -sf -X PUT -d 0.5 "http://127.0.0.1:$upstream_port/admin/error-rate" >/dev/null
counts; h0=$hits; m0=$misses
HOT_SHARE=1 run_wrk 10
curl -sf -X PUT -d 0 "http://127.0.0.1:$upstream_port/admin/error-rate" >/dev/null
request GET /metrics
fetch_errors=$(metric_sum "$body" hoard_fetch_errors_total 'collection="User"')
summary upstream "hit ratio $(ratio "$h0" "$m0"), upstream fetch errors so far $fetch_errors (stale served instead)"

# 3. SIGTERM under load, then a restart.
run_wrk 10 &
wrk_pid=$!
sleep 3  # let the load run before the signal (timing of the fault, not synchronization)
started=$(date +%s%N)
kill -TERM "$service_pid"
code=0
wait "$service_pid" || code=$?
stopped_ms=$(( ($(date +%s%N) - started) / 1000000 ))
wait "$wrk_pid" || true
summary sigterm "exit status $code after ${stopped_ms} ms (timeout 10 s)"
start_service "$work" "${service_args[@]}"
request GET /users/1
echo "          restarted: GET /users/1 → $status"

# 4. SIGKILL under load, then a restart and hoard verify.
run_wrk 10 &
wrk_pid=$!
sleep 3
kill -KILL "$service_pid"
wait "$service_pid" 2>/dev/null || true
wait "$wrk_pid" || true
start_service "$work" "${service_args[@]}"
request GET /users/1
restarted=$status
kill -TERM "$service_pid"; wait "$service_pid" || true
verify=$("$hoard" verify "$work/store" 2>&1) && verdict="ok" || verdict="FAILED"
summary sigkill "restarted: GET /users/1 → $restarted; hoard verify: $verdict ($verify)"
