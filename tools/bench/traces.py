"""Hit ratios on real request traces: a bounded Hoard collection beside libCacheSim's policies.

Run by tools/bench/hitratio.sh after the synthetic traces (or alone, as below). Every trace of
TRACES_DIR (one object ID a line, gzip; the shared traces' README tells where they come from) is
replayed at 5%, 10% and 25% of its distinct objects: by libCacheSim's LRU, ARC, LIRS, 2Q, SIEVE,
S3-FIFO and W-TinyLFU in C, by Belady's optimum on the same requests, and by hitratio-bench
through a Hoard collection opened with capacity .records(N) (a get; on a miss, a put). Writes
traces.json and traces.md (the table in BENCHMARKS.md) into OUT_DIR and prints the table; exits 1
when a case misses its budget: Hoard at least the best of the seven less one point, at least LRU
less 0.2 points, and Hoard's hits at least 0.92 of the optimum's on average over the cases.

    python traces.py BENCH_BINARY TRACES_DIR OUT_DIR
"""

import gzip
import json
import os
import sys
import tempfile

import libcachesim as lcs
import numpy as np

from hitratio import hoard_hit_ratios, reference_hit_ratio, write_trace

SHARES = [5, 10, 25]
SEVEN = [("LRU", "LRU"), ("ARC", "ARC"), ("LIRS", "LIRS"), ("2Q", "TwoQ"), ("SIEVE", "Sieve"),
         ("S3-FIFO", "S3FIFO"), ("W-TinyLFU", "WTinyLFU")]
OPTIMUM = ("OPT", "Belady")
BELOW_BEST, BELOW_LRU, OF_OPTIMUM = 0.01, 0.002, 0.92


def read_ids(path):
    with gzip.open(path, "rt") as lines:
        return np.array([int(line) for line in lines if line.strip()], dtype=np.uint64)


def replay(bench, traces_dir, folder):
    rows = []
    for file in sorted(os.listdir(traces_dir)):
        if not file.endswith(".ids.gz"):
            continue
        name = file[: -len(".ids.gz")]
        ids = read_ids(os.path.join(traces_dir, file))
        objects = len(np.unique(ids))
        path = os.path.join(folder, name + ".oracleGeneral")
        write_trace(ids, path)
        capacities = [max(1, objects * share // 100) for share in SHARES]
        hoard = hoard_hit_ratios(bench, path, capacities)
        for share, capacity in zip(SHARES, capacities):
            row = {"trace": name, "requests": int(len(ids)), "objects": objects, "share": share,
                   "capacity": capacity}
            for label, policy in SEVEN + [OPTIMUM]:
                row[label] = reference_hit_ratio(policy, path, capacity)
            row["Hoard"], row["hoardSeconds"] = hoard[capacity]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def best_of_seven(row):
    return max((row[label], label) for label, _ in SEVEN)


def misses(row):
    best, _ = best_of_seven(row)
    return row["Hoard"] < best - BELOW_BEST or row["Hoard"] < row["LRU"] - BELOW_LRU


def of_optimum(row):
    return row["Hoard"] / row["OPT"] if row["OPT"] > 0 else 1.0


def table_of(rows):
    lines = [
        "| trace @ share of its objects | best of the seven | LRU | OPT | **Hoard** | Hoard − best | Hoard − LRU "
        "| Hoard / OPT | budget |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        best, label = best_of_seven(r)
        lines.append(
            f"| {r['trace']} @ {r['share']}% ({r['capacity']:,}) | {label} {100 * best:.1f}% | {100 * r['LRU']:.1f}% "
            f"| {100 * r['OPT']:.1f}% | **{100 * r['Hoard']:.1f}%** | {100 * (r['Hoard'] - best):+.1f} pt "
            f"| {100 * (r['Hoard'] - r['LRU']):+.1f} pt | {of_optimum(r):.3f} | {'missed' if misses(r) else 'met'} |")
    within = sum(not misses(r) for r in rows)
    mean = sum(of_optimum(r) for r in rows) / len(rows)
    best_mean = sum(best_of_seven(r)[0] / r["OPT"] if r["OPT"] > 0 else 1.0 for r in rows) / len(rows)
    lines.append("")
    lines.append(f"Within budget in {within} of {len(rows)} cases; Hoard keeps {mean:.3f} of the optimum's hits "
                 f"on average (the best of the seven in each case: {best_mean:.3f}).")
    return "\n".join(lines) + "\n", within == len(rows) and mean >= OF_OPTIMUM


def main():
    if len(sys.argv) != 4:
        print("usage: python traces.py BENCH_BINARY TRACES_DIR OUT_DIR", file=sys.stderr)
        return 2
    bench, traces_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.isdir(traces_dir):
        print(f"error: no traces folder at {traces_dir} (set HOARD_TRACES to the shared traces)", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hoard-traces-") as folder:
        rows = replay(bench, traces_dir, folder)
    if not rows:
        print(f"error: no *.ids.gz traces in {traces_dir}", file=sys.stderr)
        return 2
    table, met = table_of(rows)
    print(table)
    with open(os.path.join(out, "traces.json"), "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    with open(os.path.join(out, "traces.md"), "w") as f:
        f.write(table)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
