#!/usr/bin/env bash
# The Vapor comparison in BENCHMARKS.md: the cached route `GET /quotes/N` (N drawn from 1,000
# numbers; each miss waits HOARD_EXAMPLE_WORK_MS, 5 ms) under wrk, with Hoard's cache, Vapor's
# memory cache and no cache, in a release build on one machine. The caches are warmed first (every
# number once), so the runs measure hits. Prints requests/s and the p99 latency of each run and
# the median of RUNS runs (default 5) of each.
#
#   Examples/VaporCache/scripts/bench.sh [RUNS] [SECONDS] [CONNECTIONS]
set -euo pipefail
example_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_dir="$(cd "$example_dir/../.." && pwd)"
source "$example_dir/scripts/lib.sh"
runs="${1:-5}" seconds="${2:-10}" connections="${3:-64}"
need wrk wrk
need curl curl

build_example release
make_work
fail() { echo "bench: FAILED: $*" >&2; exit 1; }
cat >"$work/quotes.lua" <<'LUA'
math.randomseed(7)
request = function() return wrk.format("GET", "/quotes/" .. math.random(1, 1000)) end
LUA

{
echo "cache,run,requests_per_second,p99_ms"
for run in $(seq "$runs"); do
    for kind in none memory hoard; do
        rm -rf "$work/store"
        start_app "$work" "$kind"
        for number in $(seq 1000); do curl -s -o /dev/null "http://127.0.0.1:$app_port/quotes/$number"; done
        out=$(wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$work/quotes.lua" "http://127.0.0.1:$app_port")
        rps=$(awk '/^Requests\/sec/ { print $2 }' <<<"$out")
        p99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }; print v }' <<<"$out")
        errors=$(awk '/Non-2xx|Socket errors/ { print }' <<<"$out")
        [ -z "$errors" ] || fail "$kind: $errors"
        echo "$kind,$run,$rps,$p99"
        stop_app
    done
done
} | tee "$work/results.csv"
python3 - "$work/results.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for kind in ("none", "memory", "hoard"):
    mine = [r for r in rows if r["cache"] == kind]
    rps = statistics.median(float(r["requests_per_second"]) for r in mine)
    p99 = statistics.median(float(r["p99_ms"]) for r in mine)
    print(f"median {kind}: {rps:,.0f} requests/s, p99 {p99:.2f} ms ({len(mine)} runs)")
PY
