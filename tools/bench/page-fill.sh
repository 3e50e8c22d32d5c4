#!/usr/bin/env bash
# LMDB's own page fill, with the C library through Python's lmdb package: 100,000 values of one
# size under 8-byte big-endian keys in one transaction, written in key order with and without
# MDB_APPEND and in random order, then the random-order file copied with MDB_CP_COMPACT (what
# `hoard compact` does). Prints the file size of each in MiB. The floor under a store's records:
# what LMDB itself takes for records of these sizes, without Hoard.
#   tools/bench/page-fill.sh [SIZE...]   (default: 122 108 72 60)
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/ensure-deps.sh
source ../scripts/python-venv.sh
hoard_venv .build-py lmdb "Python lmdb, for the page-fill figures" lmdb
.build-py/bin/python - "${@:-122 108 72 60}" <<'PY'
import os, random, struct, sys, tempfile, lmdb

def fill(size, order, append):
    with tempfile.TemporaryDirectory() as path:
        env = lmdb.open(path, map_size=1 << 30)
        with env.begin(write=True) as txn:
            for key in order:
                txn.put(struct.pack(">Q", key), b"x" * size, append=append)
        written = os.path.getsize(os.path.join(path, "data.mdb"))
        with tempfile.TemporaryDirectory() as copy:
            env.copy(copy, compact=True)
            compacted = os.path.getsize(os.path.join(copy, "data.mdb"))
        env.close()
        return written / 2**20, compacted / 2**20

count = 100_000
shuffled = list(range(count))
random.Random(1).shuffle(shuffled)
print("| value bytes | key order, MDB_APPEND | key order | random order | random order, compacted |")
print("| ---: | ---: | ---: | ---: | ---: |")
for size in (int(s) for s in " ".join(sys.argv[1:]).split()):
    appended = fill(size, range(count), True)[0]
    ordered = fill(size, range(count), False)[0]
    random_order, compacted = fill(size, shuffled, False)
    print(f"| {size} | {appended:.1f} MiB | {ordered:.1f} MiB | {random_order:.1f} MiB | {compacted:.1f} MiB |")
PY
