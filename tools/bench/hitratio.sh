#!/usr/bin/env bash
# Hit ratios of a bounded Hoard collection beside libCacheSim's LRU, ARC, SIEVE, S3-FIFO,
# W-TinyLFU and Belady's optimum on the same traces, one command: builds
# hitratio-bench in release mode, installs libcachesim, numpy and matplotlib into
# tools/bench/.build-sim (a Python venv) when missing, and writes docs/benchmarks/hitratio.json,
# hitratio.md (the table in BENCHMARKS.md) and hitratio.png. Exits 1 when Hoard is more than one
# point below the best of the five on any trace. About five minutes here once built.
#   tools/bench/hitratio.sh
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
out=../../docs/benchmarks
mkdir -p "$out"
swift build -c release --product hitratio-bench >&2
source ../scripts/python-venv.sh
hoard_venv .build-sim "libcachesim, matplotlib" "libcachesim, numpy, matplotlib" libcachesim numpy matplotlib
.build-sim/bin/python hitratio.py .build/release/hitratio-bench "$out"
