#!/usr/bin/env python3
"""Fails when a page a user reads to find a figure grows past its length.

BENCHMARKS.md gives current figures only, each section a command, a table and what it means; how
a figure got there belongs in the commit history. A cap keeps it that way: a section that grows
past it has to lose what is no longer current first.

Usage: check-length.py [REPOSITORY]   (tools/test.sh runs it)
"""

import sys

LIMITS = {"BENCHMARKS.md": 450}


def main():
    repository = sys.argv[1] if len(sys.argv) > 1 else "."
    failed = False
    for name, limit in LIMITS.items():
        with open(f"{repository}/{name}", encoding="utf-8") as handle:
            count = len(handle.read().splitlines())
        if count > limit:
            print(f"error: {name} has {count} lines, more than its {limit}: keep current figures only", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
