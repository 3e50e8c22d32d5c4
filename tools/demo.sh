#!/usr/bin/env bash
# The README's main job: build the `hoard` tool and run its demo on the default store
# (~/.cache/hoard/demo.hoard, or $XDG_CACHE_HOME/hoard/demo.hoard). Extra arguments go to `hoard demo`,
# e.g. `tools/demo.sh --path /tmp/store` (`hoard demo --help` lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/scripts/ensure-deps.sh
swift build -c release --product hoard >&2
exec .build/release/hoard demo "$@"
