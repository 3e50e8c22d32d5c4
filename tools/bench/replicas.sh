#!/usr/bin/env bash
# Replicas over PostgreSQL, one command: builds replica-bench in release mode, starts a throwaway
# PostgreSQL on loopback (tools/scripts/postgres.sh, which installs it with apt when missing) and
# runs the bench against it; options pass through.
#   tools/bench/replicas.sh [--replicas 2] [--rate 500] [--count 10000] [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
swift build -c release --product replica-bench >&2
source ../scripts/postgres.sh
trap hoard_pg_stop EXIT
.build/release/replica-bench "$@"
