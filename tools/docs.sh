#!/usr/bin/env bash
# Builds the DocC documentation of Hoard, VariableCoding, LMDB, HoardTesting, HoardServiceLifecycle and
# HoardPostgres (with the Postgres trait, as tools/test.sh builds) into .build/docs/<module>
# (static sites, each built for the base path of its name: serve the whole folder with
# `python3 -m http.server -d .build/docs` and open http://localhost:8000/Hoard/documentation/hoard/;
# served from .build/docs/Hoard itself, the pages stay blank, since their scripts load from /Hoard/).
# Fails on any DocC warning (a broken link, an undocumented parameter) and on a public symbol
# without a summary or a throwing one without `- Throws:` (tools/scripts/check-docs.py).
# tools/test.sh runs it, so CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/scripts/ensure-deps.sh

# HOARD_DOCS=1 adds the DocC plugin to the package (Package.swift says why only then).
export HOARD_DOCS=1
modules=(Hoard VariableCoding LMDB HoardTesting HoardServiceLifecycle HoardPostgres)
out=.build/docs
mkdir -p "$out"
for module in "${modules[@]}"; do
    echo "docs: $module" >&2
    swift package --traits Postgres --allow-writing-to-directory "$out" generate-documentation \
        --target "$module" --output-path "$out/$module" \
        --experimental-skip-synthesized-symbols --warnings-as-errors \
        --transform-for-static-hosting --hosting-base-path "$module" \
        2>&1 | grep -v '^\[' >&2
done
python3 tools/scripts/check-docs.py .build "${modules[@]}"
