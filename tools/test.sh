#!/usr/bin/env bash
# The whole test suite, as the README and CI (.ci/run) run it.
# Fails on any compiler warning in the project's own code (Swift 6 mode, strict concurrency).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/scripts/ensure-deps.sh

# Python with lmdb and cbor2, for the test that reads a store following docs/FORMAT.md only.
source tools/scripts/python-venv.sh
hoard_venv .build-py "lmdb, cbor2" "Python lmdb and cbor2 for the interoperability test" lmdb cbor2
export HOARD_PYTHON="$PWD/.build-py/bin/python"

# The house format (.swift-format: 120 columns, 4-space indentation); `swift format -i -r Sources
# Tests tools Package.swift` applies it.
swift format lint --strict -r Sources Tests tools Package.swift Examples/*/Sources Examples/*/Package.swift
# Docs, comments and tool output describe the product as it is: none names a session or an issue.
python3 tools/scripts/check-history.py .
# Every link between the Markdown pages (README, BENCHMARKS, docs/) leads to a file and a heading.
python3 tools/scripts/check-links.py .
# BENCHMARKS.md stays short enough to read: current figures only.
python3 tools/scripts/check-length.py .

# A throwaway PostgreSQL on loopback for HoardPostgres's tests (installed with apt when missing,
# stopped and removed when this script exits).
source tools/scripts/postgres.sh

# Every build below (the package's, the documentation's, the examples') is made with the same
# flags, so that each reuses what the one before compiled: no debug information, which nothing here
# reads. (A failing test still names its file and line; a crash's backtrace shows functions, not
# lines. The index store stays: test discovery on Linux reads it.)
export HOARD_BUILD_FLAGS="-debug-info-format none"
log=$(mktemp)
trap 'rm -f "$log"; hoard_pg_stop' EXIT
# With the traits of the optional products, so that HoardPostgres, HoardHummingbird, HoardVapor
# and their tests are built too.
traits=Postgres,Hummingbird,Vapor
swift build $HOARD_BUILD_FLAGS --build-tests --traits "$traits" 2>&1 | tee "$log"
if grep -E "^$PWD/(Sources|Tests|tools)/.*: warning:" "$log"; then
    echo "error: the build has warnings (above); Hoard builds without any" >&2
    exit 1
fi
# The DocC documentation: a warning (a broken link, an undocumented parameter) or a public symbol
# without a summary fails the run.
tools/docs.sh >/dev/null
# The documentation site as the README says to view it (served over HTTP from .build/docs), in
# headless Chromium: a landing page and an article of each catalog must render their titles.
if ! command -v chromium >/dev/null 2>&1; then
    source tools/scripts/apt-install.sh
    hoard_apt_install "rendering the documentation site" chromium
fi
python3 tools/scripts/check-docs-site.py .build/docs
swift test $HOARD_BUILD_FLAGS --skip-build --traits "$traits"

# The examples (packages of their own, built in this package's build folder so that they reuse
# what it compiled): each on loopback, requests, SIGTERM, a restart on its store, and `hoard verify`
# of the store.
Examples/UsersService/scripts/smoke.sh
Examples/VaporCache/scripts/smoke.sh
