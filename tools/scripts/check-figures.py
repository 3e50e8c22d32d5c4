#!/usr/bin/env python3
"""Fails when the README quotes a figure that BENCHMARKS.md does not hold.

The README quotes a few headline numbers; BENCHMARKS.md holds every measured figure with the
command that reproduces it. A figure in the README's prose (outside code blocks) is a number or
a range with a unit: ×, %, ns, µs, ms, s, MiB, GiB or B (a record's bytes). Each number of it
(both ends of a range) must be a number of BENCHMARKS.md rounded as the README writes it (6.9 for
6.90 or 6.93, 8.0 for 7.97): so a figure refreshed in BENCHMARKS.md and forgotten in the README
fails here. (The README may join figures of several rows into one range.)

usage: check-figures.py [--self-test] [REPOSITORY]   (tools/test.sh runs it with --self-test,
       which plants a figure in a copy of the README and expects it found alone)
"""

import decimal
import os
import re
import sys

NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(rf"(?<![\w.,/#-])({NUMBER}(?:[–-]{NUMBER})?)(?: ?(?:×|%|ns|µs|ms|s|MiB|GiB|B)\b|×)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text):
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            yield number, re.sub(r"\]\([^)]*\)|\w+://\S+", "]", line)


def value(text):
    return decimal.Decimal(text.replace(",", ""))


def missing(readme, benchmarks):
    measured = {value(n) for n in re.findall(NUMBER, benchmarks)}
    found = []
    for number, line in prose(readme):
        for match in FIGURE.finditer(line):
            for end in re.split("[–-]", match.group(1)):
                quoted = value(end)
                step = decimal.Decimal(1).scaleb(quoted.as_tuple().exponent)
                if not any(m.quantize(step, decimal.ROUND_HALF_UP) == quoted for m in measured):
                    found.append((number, match.group(0)))
                    break
    return found


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else ".")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    with open(os.path.join(root, "BENCHMARKS.md"), encoding="utf-8") as handle:
        benchmarks = handle.read()
    problems = missing(readme, benchmarks)
    for number, figure in problems:
        print(f"README.md:{number}: {figure!r} is not in BENCHMARKS.md", file=sys.stderr)
    if problems:
        print(f"error: {len(problems)} README figure(s) above that BENCHMARKS.md does not hold", file=sys.stderr)
        return 1
    if "--self-test" in argv:
        planted = missing(readme.rstrip("\n") + "\nA get takes 987.654 µs.\n", benchmarks)
        if planted != [(len(readme.rstrip("\n").splitlines()) + 1, "987.654 µs")]:
            print(f"self-test: a figure planted in the README was not found alone: {planted}", file=sys.stderr)
            return 1
        print(f"self-test: planted figure found: README.md:{planted[0][0]}: {planted[0][1]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
