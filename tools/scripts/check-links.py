#!/usr/bin/env python3
"""Fails when a Markdown page of the repository links to a file or a heading that does not exist.

Checked: README.md, BENCHMARKS.md, every docs/*.md and every README.md under Examples/. A link's
target must be a tracked or present file relative to the page, and a `#fragment` must name one of
the target page's headings as GitHub spells its anchors (lower case, punctuation dropped, spaces
as hyphens). Links to other sites are not fetched: the check runs without a network.

Usage: check-links.py [REPOSITORY]   (tools/test.sh runs it)
"""

import glob
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """The page's lines outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as handle:
        for line in handle.read().splitlines():
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield line


def anchor(heading):
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    for line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            base = anchor(match.group(1))
            name, number = base, 0
            while name in found:  # GitHub numbers repeated headings: name, name-1, name-2, …
                number += 1
                name = f"{base}-{number}"
            found.add(name)
    return found


def main():
    repository = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = [os.path.join(repository, name) for name in ("README.md", "BENCHMARKS.md")]
    pages += sorted(glob.glob(os.path.join(repository, "docs", "*.md")))
    pages += sorted(glob.glob(os.path.join(repository, "Examples", "*", "README.md")))
    broken = []
    for page in pages:
        for number, line in enumerate(prose_lines(page), start=1):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                path, _, fragment = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = os.path.relpath(page, repository)
                if not os.path.exists(resolved):
                    broken.append(f"{where}: '{target}': no file {os.path.relpath(resolved, repository)}")
                elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                    broken.append(f"{where}: '{target}': no heading with the anchor #{fragment}")
    if broken:
        print("\n".join(broken), file=sys.stderr)
        print(f"error: {len(broken)} broken link(s) in the Markdown pages", file=sys.stderr)
        return 1
    print(f"links: {len(pages)} pages checked, every link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
