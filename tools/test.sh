#!/usr/bin/env bash
# The whole test suite, as the README and CI (.ci/run) run it.
# Fails on any compiler warning in the project's own code (Swift 6 mode, strict concurrency).
set -euo pipefail
cd "$(dirname "$0")/.."

# `--quick`: a contributor's loop. The build, then the unit suites (those that need no PostgreSQL
# and drive no crash, power-loss or child-process loops); no docs, no examples.
quick=false
case "${1:-}" in
--quick) quick=true ;;
"") ;;
*)
    echo "usage: tools/test.sh [--quick]" >&2
    exit 2
    ;;
esac

# A line per stage at the end: where the run's minutes went.
stages=()
stage_started=$SECONDS
stage() {  # stage NAME: the time since the previous stage ended is NAME's
    stages+=("$(printf '%-22s %4d s' "$1" $((SECONDS - stage_started)))")
    stage_started=$SECONDS
}
report_stages() {
    ((${#stages[@]})) || return 0
    echo "--- tools/test.sh stages"
    printf '%s\n' "${stages[@]}"
    echo "$(printf '%-22s %4d s' total "$SECONDS")"
}

source tools/scripts/ensure-deps.sh

# Python with lmdb and cbor2, for the test that reads a store following docs/FORMAT.md only.
source tools/scripts/python-venv.sh
hoard_venv .build-py "lmdb, cbor2" "Python lmdb and cbor2 for the interoperability test" lmdb cbor2
export HOARD_PYTHON="$PWD/.build-py/bin/python"
stage "tools"

# The house format (.swift-format: 120 columns, 4-space indentation); `swift format -i -r Sources
# Tests tools Package.swift` applies it.
swift format lint --strict -r Sources Tests tools Package.swift Examples/*/Sources Examples/*/Package.swift
# Docs, comments and tool output describe the product as it is: none names a session or an issue.
python3 tools/scripts/check-history.py .
# Every link between the Markdown pages (README, BENCHMARKS, docs/) leads to a file and a heading.
python3 tools/scripts/check-links.py .
# The pages a reader reads whole stay short: README, BENCHMARKS.md, docs/ARCHITECTURE.md.
python3 tools/scripts/check-length.py .
# Every snippet that adds Hoard to a package names the one URL in tools/package-url.
python3 tools/scripts/check-package-url.py .
# Every figure the README quotes is one of BENCHMARKS.md's; comments quote no measurements; every
# file a comment or a doc names exists (each check first finds a violation it plants in a copy).
python3 tools/scripts/check-figures.py --self-test .
python3 tools/scripts/check-comments.py --self-test .
# One writer: no file but Sources/Hoard/Records/RecordWriter.swift writes a collection's records
# (and the check finds the writes it plants in copies of the sources).
python3 tools/scripts/check-writes.py --self-test .
stage "format and docs checks"

# Every build below (the package's, the documentation's, the examples') is made with the same
# flags, so that each reuses what the one before compiled: no debug information, which nothing here
# reads. (A failing test still names its file and line; a crash's backtrace shows functions, not
# lines. The index store stays: test discovery on Linux reads it.)
export HOARD_BUILD_FLAGS="-debug-info-format none"
log=$(mktemp)
trap 'rm -f "$log"; report_stages; [ -n "${HOARD_PG_DATA:-}" ] && hoard_pg_stop' EXIT
# With the traits of the optional products, so that HoardPostgres, HoardHummingbird, HoardVapor
# and their tests are built too.
traits=Postgres,Hummingbird,Vapor
swift build $HOARD_BUILD_FLAGS --build-tests --traits "$traits" 2>&1 | tee "$log"
if grep -E "^$PWD/(Sources|Tests|tools)/.*: warning:" "$log"; then
    echo "error: the build has warnings (above); Hoard builds without any" >&2
    exit 1
fi
stage "build"

# The test binary, run directly rather than through `swift test`, which would hold the build
# folder's lock while the documentation and the examples build in that folder beside the tests.
tests=("$(swift build $HOARD_BUILD_FLAGS --traits "$traits" --show-bin-path)/HoardPackageTests.xctest"
    --testing-library swift-testing)

if $quick; then
    # The suites that need PostgreSQL, and those that loop over child processes (crashes, power
    # cuts, faults, processes racing): the full run has them.
    "${tests[@]}" --skip \
        'HoardPostgresTests|PowerLossTests|CrashTests|FaultTests|ObservationAcrossProcessesTests|RegistryRaceTests|ConcurrencyTests|CLIWatchTests'
    stage "unit suites"
    exit 0
fi

# A throwaway PostgreSQL on loopback for HoardPostgres's tests (installed with apt when missing,
# stopped and removed when this script exits).
source tools/scripts/postgres.sh
if ! command -v chromium >/dev/null 2>&1; then
    source tools/scripts/apt-install.sh
    hoard_apt_install "rendering the documentation site" chromium
fi
stage "postgresql, chromium"

# Two lanes at once, each with its log, shown when both are done: the tests; and the
# documentation, then the examples (those two build in the build folder, one after the other).
# The tests spend much of their time in child processes, flushes and PostgreSQL, which leaves a
# core to the builds.
lanes=$(mktemp -d)
"${tests[@]}" >"$lanes/tests.log" 2>&1 &
tests_pid=$!
(
    set -e
    started=$SECONDS
    lap() { printf '%-22s %4d s\n' "$1" $((SECONDS - started)) >>"$lanes/stages"; started=$SECONDS; }
    # The DocC documentation: a warning (a broken link, an undocumented parameter) or a public
    # symbol without a summary fails the run.
    # (Its build check is skipped: the build above is the one it would check.)
    HOARD_DOCS_BUILT=1 tools/docs.sh >/dev/null
    # The documentation site as the README says to view it (served over HTTP from .build/docs),
    # in headless Chromium: a landing page and an article of each catalog must render their titles.
    python3 tools/scripts/check-docs-site.py .build/docs
    lap "  documentation"
    # The examples (packages of their own, built in this package's build folder so that they
    # reuse what it compiled): each on loopback, requests, SIGTERM, a restart on its store, and
    # `hoard verify` of the store.
    Examples/UsersService/scripts/smoke.sh
    lap "  UsersService example"
    Examples/VaporCache/scripts/smoke.sh
    lap "  VaporCache example"
) >"$lanes/docs-and-examples.log" 2>&1 &
others_pid=$!
failed=()
wait "$tests_pid" || failed+=("the tests")
stage "tests"
wait "$others_pid" || failed+=("the documentation or an example")
stage "docs and examples"
[ -f "$lanes/stages" ] && while IFS= read -r line; do stages+=("$line"); done <"$lanes/stages"
cat "$lanes/docs-and-examples.log" "$lanes/tests.log"
# The tests' failures once more, last, where a log read from its end (a CI page) shows them.
# (A failure's line starts with ✘; the lines of detail under it, with ↳; each after a colour code
# when the terminal has colours.)
failures=$(awk '
    /^(\033\[[0-9;]*m)?✘/ { shown = 1; print; next }
    shown && /^(\033\[[0-9;]*m)?↳/ { print; next }
    { shown = 0 }' "$lanes/tests.log" | head -60 || true)
rm -rf "$lanes"
if ((${#failed[@]})); then
    [ -n "$failures" ] && printf -- '--- the tests%s failures\n%s\n' "'" "$failures"
    echo "error: failed: ${failed[*]} (logs above)" >&2
    exit 1
fi
