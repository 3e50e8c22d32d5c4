#!/usr/bin/env bash
# Instructions per operation of codec-bench workloads, counted by callgrind: repeatable where
# wall-clock time on a shared machine is not. Each workload runs with 1 and with 3 rounds; the
# difference divided by 2 × models is the cost of one operation, free of start-up work.
#   tools/bench/instructions.sh [MODELS] WORKLOAD...
set -euo pipefail
cd "$(dirname "$0")"
models=2000
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then models=$1; shift; fi
swift build -c release --product codec-bench >/dev/null
count() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" .build/release/codec-bench --models "$models" --rounds "$2" --only "$1" >/dev/null 2>&1
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
    rm -f "$out"
}
for workload in "$@"; do
    one=$(count "$workload" 1)
    three=$(count "$workload" 3)
    echo "$workload: $(( (three - one) / (2 * models) )) instructions per operation"
done
