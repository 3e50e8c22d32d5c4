#!/usr/bin/env python3
"""Fails when a doc, a source comment or a tool's output names the project's own history.

The docs describe the product as it is: a reader cannot look up a session or an issue of ours by
its number, and the history it stands for lives in the commit messages. Checked: every tracked text file
under docs/, Sources/, Tests/, tools/ and Examples/, plus README.md, BENCHMARKS.md and
Package.swift. A reference to another project's tracker stays, written with that project's name
directly before the number (`etcd#16596`, `FusionCache #628`); a bare number after "#" does not.

Usage: check-history.py [REPOSITORY]   (tools/test.sh runs it)
"""

import re
import subprocess
import sys

PATHS = ["docs", "Sources", "Tests", "tools", "Examples", "README.md", "BENCHMARKS.md", "Package.swift"]

# The word session or issue (either number, any case) followed by a number, with or without "#";
# and the word issue after "the" or "this".
NAMED = re.compile(r"\b(sessions?|issues?) #?[0-9]+|\b(the|this) issue\b", re.IGNORECASE)
# "#23", unless a project's name comes first: joined to it ("etcd#16596") or, capitalized, a space
# before it ("FusionCache #628"). A colour in quotes ("#999999") is not a reference.
NUMBER = re.compile(r"#[0-9]{2,}\b")
NAME_BEFORE = re.compile(r"""([\w.\-"']|\b[A-Z][\w.-]* )$""")


def bare_number(line):
    for match in NUMBER.finditer(line):
        if not NAME_BEFORE.search(line[: match.start()]):
            return match
    return None


def tracked_files(repository):
    listing = subprocess.run(
        ["git", "-C", repository, "ls-files", "-z", "--", *PATHS], check=True, capture_output=True
    ).stdout
    return [name for name in listing.decode().split("\0") if name]


def main():
    repository = sys.argv[1] if len(sys.argv) > 1 else "."
    found = []
    for name in tracked_files(repository):
        try:
            with open(f"{repository}/{name}", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # a plot, a binary fixture, or a file deleted but not yet committed
        for number, line in enumerate(lines, start=1):
            for match in (NAMED.search(line), bare_number(line)):
                if match:
                    found.append(f"{name}:{number}: '{match.group(0)}': {line.strip()[:120]}")
    if found:
        print("\n".join(found), file=sys.stderr)
        print(
            f"error: {len(found)} line(s) name the project's history (a session or an issue); "
            "say what was measured or decided instead",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
