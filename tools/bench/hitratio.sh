#!/usr/bin/env bash
# Hit ratios of a bounded Hoard collection beside libCacheSim's LRU, ARC, SIEVE, S3-FIFO,
# W-TinyLFU and Belady's optimum on the same traces, one command: builds
# hitratio-bench in release mode, installs libcachesim, numpy and matplotlib into
# tools/bench/.build-sim (a Python venv) when missing, and writes docs/benchmarks/hitratio.json,
# hitratio.md (the table in BENCHMARKS.md) and hitratio.png; then replays the real traces of
# HOARD_TRACES (default: the shared folder beside the clone, ../shared/traces) with traces.py,
# which writes traces.json and traces.md. Exits 1 when Hoard is more than one point below the
# best of the five on any synthetic trace, or misses the real traces' budget (traces.py).
# About six minutes here once built.
#   tools/bench/hitratio.sh
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
out=../../docs/benchmarks
mkdir -p "$out"
swift build -c release --product hitratio-bench >&2
source ../scripts/python-venv.sh
hoard_venv .build-sim "libcachesim, matplotlib" "libcachesim, numpy, matplotlib" libcachesim numpy matplotlib
.build-sim/bin/python hitratio.py .build/release/hitratio-bench "$out" && synthetic=0 || synthetic=$?
.build-sim/bin/python traces.py .build/release/hitratio-bench "${HOARD_TRACES:-../../../shared/traces}" "$out" \
    && real=0 || real=$?
exit $((synthetic > real ? synthetic : real))
