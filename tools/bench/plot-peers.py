#!/usr/bin/env python3
"""Draws peers-bench's results (peers.json) as bar charts on a log scale, one per workload family.

usage: plot-peers.py RESULTS.json OUTPUT_DIRECTORY
"""

import json
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FAMILIES = {
    "peers-reads.png": ("Reads (time per operation, lower is better)", [
        "get, all in one read", "get, a read each", "miss, a read each", "range scan of 100", "full scan"]),
    "peers-writes.png": ("Writes (time per record or commit, lower is better)", [
        "bulk insert, one transaction", "synchronize 1% changed, 0.5% new, 0.5% gone",
        "durable update, a commit each"]),
    "peers-footprint.png": ("Open and footprint (lower is better)", [
        "cold open + first get", "bytes on disk", "peak memory"]),
}
COLOURS = ["#1f5fa8", "#6fa8dc", "#b45f06", "#e69138", "#38761d", "#999999"]


def label(value, unit):
    if unit in ("store", "process"):
        return f"{value / 1048576:.0f} MiB"
    if value >= 1e6:
        return f"{value / 1e6:.1f} ms"
    if value >= 1e3:
        return f"{value / 1e3:.1f} µs"
    return f"{value:.0f} ns"


def draw(results, title, workloads, path, axes=None):
    rows = {row["workload"]: row for row in results["rows"]}
    peers = results["peers"]
    own = axes is None
    if own:
        figure, axes = plt.subplots(figsize=(11, 4.8))
    width = 0.8 / len(peers)
    for index, peer in enumerate(peers):
        xs, ys = [], []
        for position, workload in enumerate(workloads):
            value = rows[workload].get(peer)
            if value:
                xs.append(position + (index - (len(peers) - 1) / 2) * width)
                ys.append(value)
        bars = axes.bar(xs, ys, width, label=peer, color=COLOURS[index % len(COLOURS)])
        for bar, workload_value, x in zip(bars, ys, xs):
            unit = next(rows[w]["unit"] for w in workloads if rows[w].get(peer) == workload_value)
            axes.annotate(label(workload_value, unit), (x, workload_value), rotation=90, fontsize=6,
                          ha="center", va="bottom", xytext=(0, 2), textcoords="offset points")
    axes.set_yscale("log")
    axes.set_xticks(range(len(workloads)))
    axes.set_xticklabels([textwrap.fill(w, 16) + f"\n(per {rows[w]['unit']})" for w in workloads], fontsize=8)
    in_bytes = rows[workloads[0]]["unit"] in ("store", "process")
    axes.set_ylabel("bytes (log scale)" if in_bytes else "nanoseconds (log scale)", fontsize=8)
    axes.set_title(title, fontsize=10)
    axes.margins(y=0.25)
    if own:
        axes.legend(fontsize=7, ncol=3)
        figure.text(0.01, 0.01, f"{results['records']:,} records, medians of {results['rounds']} rounds; "
                    "n/a bars are missing (a file per key has no range scan)", fontsize=7)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as file:
        results = json.load(file)
    for name, (title, workloads) in FAMILIES.items():
        if name != "peers-footprint.png":
            draw(results, title, workloads, os.path.join(sys.argv[2], name))
    # Times and sizes do not share an axis: one panel each.
    title, workloads = FAMILIES["peers-footprint.png"]
    figure, panels = plt.subplots(1, len(workloads), figsize=(13, 4.8))
    for panel, workload in zip(panels, workloads):
        draw(results, workload, [workload], None, panel)
    panels[1].legend(fontsize=7, loc="upper left")
    figure.suptitle(title, fontsize=10)
    figure.text(0.01, 0.01, f"{results['records']:,} records, medians of {results['rounds']} rounds", fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(sys.argv[2], "peers-footprint.png"), dpi=110)
    plt.close(figure)
    # The main plot, for the README: reads and writes side by side.
    figure, (reads, writes) = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [5, 3]})
    draw(results, FAMILIES["peers-reads.png"][0], FAMILIES["peers-reads.png"][1], None, reads)
    draw(results, FAMILIES["peers-writes.png"][0], FAMILIES["peers-writes.png"][1], None, writes)
    reads.legend(fontsize=7, ncol=2, loc="upper left")
    figure.text(0.01, 0.01, f"Hoard and its peers on {results['records']:,} records, medians of "
                f"{results['rounds']} rounds (log scale; lower is better)", fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(sys.argv[2], "peers.png"), dpi=110)
    plt.close(figure)
    print(f"plots: {', '.join(sorted(list(FAMILIES) + ['peers.png']))} in {sys.argv[2]}")


if __name__ == "__main__":
    main()
