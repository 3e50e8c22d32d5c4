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

# HOARD_DOCS=1 adds the DocC plugin to the package (Package.swift says why only then).
export HOARD_DOCS=1
modules=(Hoard VariableCoding LMDB HoardTesting HoardServiceLifecycle HoardPostgres HoardHummingbird HoardVapor)
archives=.build/docs-archives
out=.build/docs
rm -rf "$archives"
mkdir -p "$archives" "$out"
# One invocation for every module: the plugin's own tools and the package graph are set up once
# (each invocation took about 45 s of that with Vapor in the graph), the modules' symbols are
# extracted side by side. Each archive is then made a static site for its own base path.
targets=()
for module in "${modules[@]}"; do targets+=(--target "$module"); done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# HOARD_BUILD_FLAGS: tools/test.sh's build flags, so that the documentation's build reuses its build.
# shellcheck disable=SC2086
if ! swift package ${HOARD_BUILD_FLAGS:-} --traits Postgres,Hummingbird,Vapor --allow-writing-to-directory "$archives" \
    generate-documentation "${targets[@]}" --output-path "$archives" --experimental-skip-synthesized-symbols \
    --warnings-as-errors >"$log" 2>&1; then
    grep -Ev '^\[|^(Updating|Updated|Working copy|Fetching|Fetched|Creating|Computing|Computed) |CMakeLists|unhandled; explicitly' "$log" >&2
    exit 1
fi
for module in "${modules[@]}"; do
    rm -rf "${out:?}/$module"
    mkdir -p "$out/$module"
    docc process-archive transform-for-static-hosting "$archives/$module.doccarchive" \
        --output-path "$out/$module" --hosting-base-path "/$module" >/dev/null
done
python3 tools/scripts/check-docs.py .build "${modules[@]}"
