#!/usr/bin/env python3
"""Keeps every snippet that adds Hoard to a package right: one URL, held in tools/package-url.

A snippet in the docs (README, docs/, the DocC catalogs, the examples' READMEs, Package.swift's
comments) that depends on Hoard writes `.package(url: "URL", …)` with URL exactly as the file
tools/package-url holds it. This fails on any other spelling of Hoard's URL (a placeholder, an old
address); `--set URL` writes the new URL to tools/package-url and into every snippet, which is
all that publishing the package under another address takes.

usage: check-package-url.py [REPOSITORY] [--set URL]   (tools/test.sh runs it without --set)
"""

import os
import re
import subprocess
import sys

# A dependency on Hoard: the URL of a `.package(url:` whose path ends in /hoard (or a placeholder).
SNIPPET = re.compile(r'\.package\(url: (?:"([^"]*?/hoard(?:\.git)?)"|(…))')


def documents(root):
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if p.endswith(".md") or p == "Package.swift"]


def main(argv):
    args = argv[1:]
    new = None
    if "--set" in args:
        index = args.index("--set")
        if index + 1 >= len(args):
            print("usage: check-package-url.py [REPOSITORY] [--set URL]", file=sys.stderr)
            return 2
        new = args[index + 1]
        del args[index : index + 2]
    root = os.path.abspath(args[0] if args else ".")
    holder = os.path.join(root, "tools", "package-url")
    if new:
        with open(holder, "w", encoding="utf-8") as handle:
            handle.write(new + "\n")
    with open(holder, encoding="utf-8") as handle:
        url = handle.read().strip()
    wrong = []
    for path in documents(root):
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as handle:
            text = handle.read()
        if new:
            text = SNIPPET.sub(f'.package(url: "{url}"', text)
            with open(full, "w", encoding="utf-8") as handle:
                handle.write(text)
        for number, line in enumerate(text.splitlines(), 1):
            for match in SNIPPET.finditer(line):
                if match.group(1) != url:
                    wrong.append(f"{path}:{number}: {match.group(0)!r} is not {url!r} (tools/package-url)")
    for line in wrong:
        print(line, file=sys.stderr)
    if wrong:
        print("error: snippets above name Hoard's package by another URL; `--set URL` rewrites them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
