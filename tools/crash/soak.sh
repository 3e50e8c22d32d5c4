#!/usr/bin/env bash
# A long crash-recovery run: KILLS kills (default 5000), half in the durable mode and half in the
# no-sync mode, each followed by the full check. Prints one summary line per mode:
#   durable: kills: N, commits verified: M, violations: 0 (seed S, …)
# Exit status 1 on any violation. Usage: tools/crash/soak.sh [KILLS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/scripts/ensure-deps.sh
swift build -c release --product CrashSoak
swift build -c release --product CrashWorkload
swift build -c release --product hoard
exec .build/release/CrashSoak --kills "${1:-5000}" ${2:+--seed "$2"}
