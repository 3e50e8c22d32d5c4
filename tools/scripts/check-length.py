#!/usr/bin/env python3
"""Fails when a page that is read whole grows past its length.

The README is read in ten minutes; BENCHMARKS.md gives current figures only, each section a
command, a table and what it means (how a figure got there belongs in the commit history);
docs/ARCHITECTURE.md is a map, not a second copy of the code. A cap keeps each so: a page that
grows past it has to lose what is no longer current first.

Usage: check-length.py [REPOSITORY]   (tools/test.sh runs it)
"""

import sys

LIMITS = {"BENCHMARKS.md": 450, "README.md": 150, "docs/ARCHITECTURE.md": 400}


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
