"""Hit ratios of a bounded Hoard collection beside libCacheSim's policies, on the same traces.

Run by tools/bench/hitratio.sh (which installs libcachesim and matplotlib in a venv and builds
hitratio-bench). Every trace is written once in libCacheSim's oracleGeneral format; libCacheSim's
caches process it in C, and hitratio-bench replays it against a Hoard collection opened with
capacity .records(N) (a get; on a miss, a put). Writes hitratio.json, hitratio.md (the table) and
hitratio.png (hit ratio against capacity on Zipf 0.9) into the output folder.

    python hitratio.py BENCH_BINARY OUT_DIR [--quick]
"""

import json
import os
import subprocess
import sys
import tempfile

import libcachesim as lcs
import numpy as np

OBJECTS = 100_000
REQUESTS = 1_000_000
SCAN_EVERY = 100_000
SCAN_LENGTH = 20_000
CAPACITIES = [OBJECTS // 100, OBJECTS // 10]
PLOT_CAPACITIES = [500, 1_000, 2_000, 5_000, 10_000, 20_000]
# The five the hit-ratio budget (best of five less one point) is measured against, then the optimum
# for reference.
REFERENCES = [("LRU", "LRU"), ("ARC", "ARC"), ("SIEVE", "Sieve"), ("S3-FIFO", "S3FIFO"), ("W-TinyLFU", "WTinyLFU")]
OPTIMUM = ("Belady", "Belady")


def zipf(alpha, seed=7):
    generator = lcs.create_zipf_requests(OBJECTS, REQUESTS, alpha=alpha, obj_size=1, seed=seed)
    return np.fromiter((r.obj_id for r in generator), dtype=np.uint64, count=REQUESTS)


def with_scans(ids):
    """A one-time scan of SCAN_LENGTH objects never asked for before or after, every SCAN_EVERY requests."""
    parts = []
    fresh = 1_000_000_000
    for start in range(0, len(ids), SCAN_EVERY):
        parts.append(ids[start:start + SCAN_EVERY])
        parts.append(np.arange(fresh, fresh + SCAN_LENGTH, dtype=np.uint64))
        fresh += SCAN_LENGTH
    return np.concatenate(parts)


def loop(length):
    return (np.arange(REQUESTS, dtype=np.uint64) % np.uint64(length)).astype(np.uint64)


def write_trace(ids, path):
    """oracleGeneral: per request a 32-bit time, the 64-bit ID, a 32-bit size, the 64-bit index of
    the ID's next request (-1 for none), which Belady's optimum needs."""
    n = len(ids)
    following = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((np.arange(n), ids))
    same = ids[order][1:] == ids[order][:-1]
    following[order[:-1][same]] = order[1:][same]
    records = np.zeros(n, dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    records["t"] = np.arange(n)
    records["id"] = ids
    records["size"] = 1
    records["next"] = following
    records.tofile(path)


def reference_hit_ratio(policy, path, capacity):
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = getattr(lcs, policy)(cache_size=capacity)
    miss_ratio, _ = cache.process_trace(reader)
    return 1 - miss_ratio


def hoard_hit_ratios(bench, path, capacities):
    output = subprocess.run([bench, path] + [str(c) for c in capacities], check=True, capture_output=True, text=True)
    result = {}
    for line in output.stdout.split("\n"):
        if line.strip():
            capacity, ratio, seconds = line.split()
            result[int(capacity)] = (float(ratio), float(seconds))
    return result


def main():
    bench, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hoard-hitratio-") as folder:
        traces = []
        for alpha in (0.7, 0.9, 1.1):
            ids = zipf(alpha)
            traces.append((f"Zipf {alpha}", ids, CAPACITIES))
            traces.append((f"Zipf {alpha} + scans", with_scans(ids), CAPACITIES))
        for capacity in CAPACITIES:
            traces.append((f"loop of {capacity * 11 // 10}", loop(capacity * 11 // 10), [capacity]))
        for name, ids, capacities in traces:
            path = os.path.join(folder, "trace.oracleGeneral")
            write_trace(ids, path)
            hoard = hoard_hit_ratios(bench, path, capacities)
            for capacity in capacities:
                row = {"trace": name, "requests": int(len(ids)), "capacity": capacity}
                for label, policy in REFERENCES + [OPTIMUM]:
                    row[label] = reference_hit_ratio(policy, path, capacity)
                row["Hoard"], row["hoardSeconds"] = hoard[capacity]
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
        plot = []
        path = os.path.join(folder, "trace.oracleGeneral")
        write_trace(zipf(0.9), path)
        hoard = hoard_hit_ratios(bench, path, PLOT_CAPACITIES)
        for capacity in PLOT_CAPACITIES:
            point = {"capacity": capacity, "Hoard": hoard[capacity][0]}
            for label, policy in REFERENCES + [OPTIMUM]:
                point[label] = reference_hit_ratio(policy, path, capacity)
            plot.append(point)
    with open(os.path.join(out, "hitratio.json"), "w") as f:
        json.dump({"rows": rows, "zipf09": plot}, f, indent=1)
    table = table_of(rows)
    with open(os.path.join(out, "hitratio.md"), "w") as f:
        f.write(table)
    print(table)
    draw(plot, os.path.join(out, "hitratio.png"))
    failed = [r for r in rows if r["Hoard"] < max(r[label] for label, _ in REFERENCES) - 0.01]
    return 1 if failed else 0


def table_of(rows):
    labels = [label for label, _ in REFERENCES]
    lines = [
        "| trace | capacity | " + " | ".join(labels) + " | Belady (optimum) | **Hoard** | Hoard − best of five |",
        "| --- | ---: | " + " | ".join("---:" for _ in labels) + " | ---: | ---: | ---: |",
    ]
    for r in rows:
        best = max(r[label] for label in labels)
        cells = [f"{100 * r[label]:.1f}%" for label in labels]
        lines.append(
            f"| {r['trace']} | {r['capacity']:,} | " + " | ".join(cells)
            + f" | {100 * r['Belady']:.1f}% | **{100 * r['Hoard']:.1f}%** | {100 * (r['Hoard'] - best):+.1f} pt |")
    return "\n".join(lines) + "\n"


def draw(points, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(8, 5))
    capacities = [p["capacity"] for p in points]
    for label, _ in REFERENCES + [OPTIMUM]:
        style = ":" if label == "Belady" else "-"
        axes.plot(capacities, [100 * p[label] for p in points], style, marker="o", markersize=3, label=label)
    axes.plot(capacities, [100 * p["Hoard"] for p in points], "-", color="black", linewidth=2.5, marker="s",
              label="Hoard (bounded collection)")
    axes.set_xscale("log")
    axes.set_xlabel("capacity (objects), of 100,000; log scale")
    axes.set_ylabel("hit ratio (%)")
    axes.set_title("Zipf α 0.9, 1,000,000 requests: Hoard beside libCacheSim's policies")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
