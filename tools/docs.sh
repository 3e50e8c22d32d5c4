#!/usr/bin/env bash
# Builds the DocC documentation of Hoard, VariableCoding, LMDB, HoardTesting, HoardServiceLifecycle,
# HoardPostgres, HoardHummingbird and HoardVapor (with their traits, as tools/test.sh builds) into
# .build/docs/<module> (static sites, each built for the base path of its name: serve the whole
# folder with `python3 -m http.server -d .build/docs` and open
# http://localhost:8000/Hoard/documentation/hoard/; served from .build/docs/Hoard itself, the pages
# stay blank, since their scripts load from /Hoard/).
# Fails on any DocC warning (a broken link, an undocumented parameter) and on a public symbol
# without a summary or a throwing one without `- Throws:` (tools/scripts/check-docs.py).
# tools/test.sh runs it, so CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/scripts/ensure-deps.sh

modules=(Hoard VariableCoding LMDB HoardTesting HoardServiceLifecycle HoardPostgres HoardHummingbird HoardVapor)
archives=.build/docs-archives
symbols=.build/docs-symbols
out=.build/docs
rm -rf "$archives"
mkdir -p "$archives" "$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The modules as tools/test.sh builds them (with the traits of the optional products; with its
# flags, HOARD_BUILD_FLAGS, so that this reuses its build rather than compiling again), then
# their symbols, extracted with the flags of that build. No DocC plugin: it would plan the
# package again and build each module anew before extracting the same symbol graphs.
# (tools/test.sh, which has just made that build, sets HOARD_DOCS_BUILT=1 to skip the check.)
# shellcheck disable=SC2086
if [ -z "${HOARD_DOCS_BUILT:-}" ] && ! swift build ${HOARD_BUILD_FLAGS:-} --traits Postgres,Hummingbird,Vapor >"$log" 2>&1; then
    grep -E "error:" "$log" >&2 || tail -n 20 "$log" >&2
    exit 1
fi
python3 tools/scripts/symbol-graphs.py .build "$symbols" "${modules[@]}"
for module in "${modules[@]}"; do
    catalog=()
    [ -d "Sources/$module/Documentation.docc" ] && catalog=("Sources/$module/Documentation.docc")
    if ! docc convert "${catalog[@]}" --additional-symbol-graph-dir "$symbols/$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "$module" --warnings-as-errors \
        --output-path "$archives/$module.doccarchive" >"$log" 2>&1; then
        cat "$log" >&2
        exit 1
    fi
    rm -rf "${out:?}/$module"
    mkdir -p "$out/$module"
    docc process-archive transform-for-static-hosting "$archives/$module.doccarchive" \
        --output-path "$out/$module" --hosting-base-path "/$module" >/dev/null
done
python3 tools/scripts/check-docs.py "$symbols" "${modules[@]}"
