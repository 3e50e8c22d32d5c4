#!/usr/bin/env bash
# How Hoard's and GRDB's operations slow as the data grows: peers-bench at 200,000 and at
# 2,000,000 records, one round each, side by side (Hoard and GRDB's fastest form only), then each
# workload's time per operation at the larger size over its time at the smaller. About 6 minutes.
#   tools/bench/growth.sh [SMALL LARGE]
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
small=${1:-200000}
large=${2:-2000000}
swift build -c release --product peers-bench >&2
folder=$(mktemp -d /tmp/hoard-growth-XXXXXX)
trap 'rm -rf "$folder"' EXIT
for records in "$small" "$large"; do
    .build/release/peers-bench --records "$records" --rounds 1 --peers "GRDB (cached statements)" \
        --out "$folder/$records.json" >&2
done
python3 - "$folder/$small.json" "$folder/$large.json" <<'PYTHON'
import json, sys
small, large = (json.load(open(path)) for path in sys.argv[1:3])
rows = {row["workload"]: row for row in small["rows"]}
print(f"| workload | Hoard at {small['records']:,} → {large['records']:,} | growth | GRDB (cached statements) | growth |")
print("| --- | ---: | ---: | ---: | ---: |")
def human(value, unit):
    if unit in ("store", "process"):
        return f"{value / 1048576:.1f} MiB"
    return f"{value / 1000:.2f} µs" if value >= 1000 else f"{value:.0f} ns"
for row in large["rows"]:
    before = rows[row["workload"]]
    cells = []
    for peer in ("Hoard", "GRDB (cached statements)"):
        if peer in row and peer in before and before[peer]:
            cells.append(f"{human(before[peer], row['unit'])} → {human(row[peer], row['unit'])}")
            cells.append(f"{row[peer] / before[peer]:.2f}×")
        else:
            cells += ["n/a", ""]
    print(f"| {row['workload']} ({row['unit']}) | " + " | ".join(cells) + " |")
PYTHON
