#!/usr/bin/env bash
# The whole test suite, as the README and CI (.ci/run) run it.
# Fails on any compiler warning in the project's own code (Swift 6 mode, strict concurrency).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/scripts/ensure-deps.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift build --build-tests 2>&1 | tee "$log"
if grep -E "^$PWD/(Sources|Tests|tools)/.*: warning:" "$log"; then
    echo "error: the build has warnings (above); Hoard builds without any" >&2
    exit 1
fi
swift test --skip-build
