#!/usr/bin/env bash
# Fuzzes the CBOR decoder with libFuzzer for a bounded time.
#   tools/fuzz/run.sh [SECONDS]        (default 60)
# Builds the CBOR sources and tools/fuzz/FuzzCBOR.swift with -sanitize=fuzzer,address into
# .build-fuzz/, seeds the corpus with the shared RFC vectors, and prints libFuzzer's summary.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
out=.build-fuzz
mkdir -p "$out/corpus"
swiftc -O -sanitize=fuzzer,address -parse-as-library -module-name CBORFuzz -package-name Hoard \
    Sources/CBOR/*.swift Sources/CBOR/Internals/*.swift tools/fuzz/FuzzCBOR.swift \
    -o "$out/fuzz-cbor" 2>&1 | grep -v "^$" || true
[ -x "$out/fuzz-cbor" ] || { echo "error: the fuzz target did not build" >&2; exit 1; }
# Seed corpus: every valid and invalid vector of ../shared/testdata/cbor.
python3 - "$out/corpus" <<'PY'
import json, sys, os, pathlib
root = pathlib.Path("..") / "shared" / "testdata" / "cbor"
for name in ("appendix_a.json", "fail.json"):
    path = root / name
    if not path.exists():
        continue
    for i, vector in enumerate(json.load(open(path))):
        (pathlib.Path(sys.argv[1]) / f"{name}-{i}").write_bytes(bytes.fromhex(vector["hex"]))
# Maps of the scanner check's keys (FuzzCBOR.swift), which random bytes would hardly spell.
out = pathlib.Path(sys.argv[1])
def text(s):
    b = s.encode()
    return (bytes([0x60 + len(b)]) if len(b) < 24 else bytes([0x78, len(b)])) + b
long = "a longer key of more than 23 bytes"
entries = [text("id") + b"\x18\x2a", text("name") + text("Ada"), text("a") + b"\xfb\x3f\xf8\x00\x00\x00\x00\x00\x00",
           text("b") + b"\xf5", text(long) + b"\x07"]
(out / "scan-all").write_bytes(bytes([0xA0 + len(entries)]) + b"".join(entries))
(out / "scan-null").write_bytes(b"\xa2" + text("name") + b"\xf6" + text("id") + b"\x01")
PY
# A crash is libFuzzer's to report (and to save as an artifact), not the Swift backtracer's.
export SWIFT_BACKTRACE=enable=no
exec "$out/fuzz-cbor" "$out/corpus" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/"
