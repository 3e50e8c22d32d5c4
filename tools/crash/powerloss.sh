#!/usr/bin/env bash
# The power-loss simulator at length: IMAGES images (default 20000) per seed, split between the
# durable and cache modes and between the sequential and the group-commit (16 writers) workloads.
# Each distinct image a power cut could leave is checked in a child process; one summary line per
# mode and workload:
#   durable, sequential: images: N (…), violations: 0, last commit lost in M (…%), …
# Exit status 1 on any violation. Usage: tools/crash/powerloss.sh [IMAGES] [SEED] [OPTIONS…]
# (options as CrashImages takes them, e.g. --durability nosync, --tear-size 8, --operations 120).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/scripts/ensure-deps.sh
swift build -c release --product CrashWorkload
swift build -c release --product CrashImages
exec .build/release/CrashImages --images "${1:-20000}" ${2:+--seed "$2"} "${@:3}"
