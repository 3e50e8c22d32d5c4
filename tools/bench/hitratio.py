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


def shifting(alpha, phases, seed=11):
    """Zipf over OBJECTS objects whose whole hot set moves to objects never asked for before at
    the start of each of `phases` equal phases (the popularity ranks map to new IDs)."""
    ids = zipf(alpha, seed=seed)
    length = len(ids) // phases
    for phase in range(1, phases):
        ids[phase * length:] += np.uint64(OBJECTS)
    return ids


def with_one_hit_wonders(ids, share, seed=13):
    """`share` of the requests replaced by objects asked for once and never again."""
    rng = np.random.default_rng(seed)
    once = rng.random(len(ids)) < share
    result = ids.copy()
    result[once] = np.arange(2_000_000_000, 2_000_000_000 + int(once.sum()), dtype=np.uint64)
    return result


def recency_phase(length, seed, start):
    """Recency-heavy requests: a stream that keeps asking for new objects, each asked again a few
    times soon after (the distance back is exponential, a mean of 500 new objects), rarely later."""
    rng = np.random.default_rng(seed)
    ids = np.empty(length, dtype=np.uint64)
    newest = start
    for index in range(length):
        if rng.random() < 0.3:
            newest += 1
            ids[index] = newest
        else:
            ids[index] = max(start, newest - int(rng.exponential(500)))
    return ids, newest + 1


def alternating(phases=4, seed=17):
    """Phases that alternate between recency-heavy requests (above) and Zipf 0.9 over a fixed set."""
    frequent = zipf(0.9, seed=seed)
    length = REQUESTS // phases
    parts, fresh = [], 3_000_000_000
    for phase in range(phases):
        if phase % 2 == 0:
            part, fresh = recency_phase(length, seed + phase, fresh)
            parts.append(part)
        else:
            parts.append(frequent[phase * length:(phase + 1) * length])
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
        traces.append(("Zipf 1.0, hot set moves once", shifting(1.0, 2), CAPACITIES))
        traces.append(("Zipf 1.0, hot set moves 5×", shifting(1.0, 5), CAPACITIES))
        for share in (0.1, 0.3):
            traces.append(
                (f"Zipf 0.9 + {int(share * 100)}% one-hit wonders", with_one_hit_wonders(zipf(0.9), share), CAPACITIES))
        traces.append(("recency and frequency phases", alternating(), CAPACITIES))
        only = os.environ.get("HITRATIO_ONLY")  # a substring of the trace names to run, for a quick look
        for name, ids, capacities in traces:
            if only and only not in name:
                continue
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
        if only:
            return finish(out, rows, None)
        path = os.path.join(folder, "trace.oracleGeneral")
        write_trace(zipf(0.9), path)
        hoard = hoard_hit_ratios(bench, path, PLOT_CAPACITIES)
        for capacity in PLOT_CAPACITIES:
            point = {"capacity": capacity, "Hoard": hoard[capacity][0]}
            for label, policy in REFERENCES + [OPTIMUM]:
                point[label] = reference_hit_ratio(policy, path, capacity)
            plot.append(point)
    return finish(out, rows, plot)


def finish(out, rows, plot):
    """Writes the table (and, after a full run, the JSON and the plot); 1 when Hoard is more than
    a point below the best of the five anywhere."""
    table = table_of(rows)
    print(table)
    if plot is not None:
        with open(os.path.join(out, "hitratio.json"), "w") as f:
            json.dump({"rows": rows, "zipf09": plot}, f, indent=1)
        with open(os.path.join(out, "hitratio.md"), "w") as f:
            f.write(table)
        draw(plot, os.path.join(out, "hitratio.png"))
    failed = [r for r in rows if r["Hoard"] < max(r[label] for label, _ in REFERENCES) - 0.01]
    return 1 if failed else 0


def table_of(rows):
    labels = [label for label, _ in REFERENCES]
    lines = [
        "| trace | capacity | " + " | ".join(labels)
        + " | Belady (optimum) | **Hoard** | Hoard − best of five | Hoard − ARC |",
        "| --- | ---: | " + " | ".join("---:" for _ in labels) + " | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        best = max(r[label] for label in labels)
        cells = [f"{100 * r[label]:.1f}%" for label in labels]
        lines.append(
            f"| {r['trace']} | {r['capacity']:,} | " + " | ".join(cells)
            + f" | {100 * r['Belady']:.1f}% | **{100 * r['Hoard']:.1f}%**"
            + f" | {100 * (r['Hoard'] - best):+.1f} pt | {100 * (r['Hoard'] - r['ARC']):+.1f} pt |")
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
