#!/usr/bin/env bash
# Shared fills over PostgreSQL, one command: builds shared-fill-bench in release mode, starts a
# throwaway PostgreSQL on loopback (tools/scripts/postgres.sh, which installs it with apt when
# missing) and runs the bench against it; options pass through.
#   tools/bench/shared-fills.sh [--replicas 8] [--keys 100] [--rate 2000] [--invalidate-ms 2000] [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
swift build -c release --product shared-fill-bench >&2
source ../scripts/postgres.sh
trap hoard_pg_stop EXIT
.build/release/shared-fill-bench "$@"
