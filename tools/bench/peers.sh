#!/usr/bin/env bash
# The peers comparison, one command: builds peers-bench in release mode, runs it
# (Hoard, GRDB, JSON in LMDB, a file per key; options pass through, e.g. --records 20000
# --rounds 1 for a quick look), keeps the results in docs/benchmarks/peers.json and the table in
# docs/benchmarks/peers.md, and draws the plots into docs/benchmarks/ with matplotlib (installed
# into tools/bench/.build-plot, a Python venv, when missing).
#   tools/bench/peers.sh [--records N] [--rounds R]
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
out=../../docs/benchmarks
mkdir -p "$out"
swift build -c release --product peers-bench >&2
source ../scripts/python-venv.sh
hoard_venv .build-plot matplotlib "matplotlib, for the plots" matplotlib
.build/release/peers-bench --out "$out/peers.json" "$@" | tee "$out/peers.md"
.build-plot/bin/python plot-peers.py "$out/peers.json" "$out"
