#!/usr/bin/env python3
"""Keeps comments and docs true as the code changes: two checks over the tracked files.

1. Code comments carry no measurements. A figure measured once ("costs 21 instructions", "some
   5 µs", "0.98–1.02×", "3.4% more") goes stale with the next change; it belongs in BENCHMARKS.md
   or in the commit that measured it. Flagged in a comment of a Swift, C, Python or shell file: a
   number followed by ns, µs, instructions, cycles or a × (written against the number), or a
   decimal percentage. Not flagged: a figure after ≤, ≥, < or > (a budget, a bound) and the
   few lines of ALLOWED (a setting or a derivation, which do not go stale).
2. Every file a comment or a doc names exists. A path with a folder ("Sources/Hoard/Records/
   RecordWriter.swift", "docs/FORMAT.md") must lead to a file or folder from the repository's
   root, from the naming file's folder or from the package it is in; a bare file name
   ("TagIndex.swift") must be the name of some file of the repository. Checked: the comments
   of the code files above and all Markdown (README, docs/, the DocC catalogs, the examples) but
   CHANGELOG.md, which names what a change removed or renamed.

usage: check-comments.py [--self-test] [REPOSITORY]   (tools/test.sh runs it with --self-test,
       which plants one violation of each kind in a copy of a file and expects each found alone)
"""

import os
import re
import subprocess
import sys

CODE = {".swift": "//", ".c": "//", ".h": "//", ".py": "#", ".sh": "#"}
UNIT = r"(?:ns|µs|instructions?|cycles)\b"
NUMBER = r"\d[\d,]*(?:\.\d+)?"
MEASUREMENT = re.compile(
    rf"(?<![≤≥<>\w.,])(?<![≤≥<>] )(?<!≤ ~)({NUMBER}(?:[–-]{NUMBER})? ?{UNIT}|{NUMBER}(?:[–-]{NUMBER})?×|\d+\.\d+(?:[–-]\d+(?:\.\d+)?)?%)"
)
# A setting or a derivation that reads like a figure: (path, text on the line).
ALLOWED = [
    ("Sources/Hoard/Observation/Store+OtherProcessChanges.swift", "every 100 µs"),
    ("tools/bench/Sources/PeersBench/main.swift", "1% changed, 0.5% new"),
    ("tools/bench/Sources/SyncBench/main.swift", "1% changed, 0.5% new"),
]
FILE = re.compile(
    r"(?<![\w/.:*<${-])((?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:swift|md|py|sh|c|h|json|png|modulemap|gz|lua|yml|docc|mdb))(?![\w/])"
)
# Names that are not files of this repository: files a tool writes, other projects' files (LMDB's
# header, the shared CBOR test vectors).
NOT_OURS = re.compile(
    r"(^|/)(Package\.resolved|.*\.symbols\.json|index\.html|data\.mdb|lock\.mdb|lmdb\.h|fail\.json)$|^\.build"
)


def tracked(root):
    command = ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [path for path in out.splitlines() if os.path.isfile(os.path.join(root, path))]


def comments(path, text):
    """(line number, comment text) of a code file; every line of a Markdown file outside URLs."""
    extension = os.path.splitext(path)[1]
    if extension == ".md":
        for number, line in enumerate(text.splitlines(), 1):
            yield number, re.sub(r"\w+://\S+", "", line)
        return
    marker = CODE.get(extension)
    if not marker:
        return
    for number, line in enumerate(text.splitlines(), 1):
        index = comment_start(line, marker)
        if index is not None:
            yield number, re.sub(r"\w+://\S+", "", line[index:])


def comment_start(line, marker):
    """Where a comment starts on the line, outside string literals (a good approximation)."""
    quote = None
    index = 0
    while index < len(line):
        character = line[index]
        if quote:
            if character == "\\":
                index += 1
            elif character == quote:
                quote = None
        elif character in "\"'" and not (marker == "//" and character == "'"):
            quote = character
        elif line.startswith(marker, index) and (marker != "#" or index == 0 or line[index - 1] in " \t"):
            if marker == "#" and line.startswith("#!", index) and index == 0:
                return None
            return index
        index += 1
    return None


def measurements(files):
    found = []
    for path, text in files.items():
        if os.path.splitext(path)[1] not in CODE:
            continue
        for number, comment in comments(path, text):
            for match in MEASUREMENT.finditer(comment):
                if not any(path == allowed and phrase in comment for allowed, phrase in ALLOWED):
                    found.append((path, number, f"a measurement in a comment: {match.group(1)!r}"))
    return found


def packages(path):
    """The folders a relative name in this file may start from: its own, and its package's."""
    parts = path.split("/")
    bases = ["", os.path.dirname(path)]
    if parts[0] == "Examples" and len(parts) > 2:
        bases.append("/".join(parts[:2]))
    if parts[0] == "tools" and len(parts) > 2:
        bases.append("/".join(parts[:2]))
    return bases


class Paths:
    """The repository's files and folders, indexed once for the look-ups of `exists`."""

    def __init__(self, names):
        self.all = set(names)
        for name in names:  # every folder above every file
            while (name := os.path.dirname(name)) and name not in self.all:
                self.all.add(name)
        self.basenames = {os.path.basename(path) for path in self.all}
        self.tails = {path.split("/", depth)[-1] for path in self.all for depth in range(1, path.count("/") + 1)}

    def exists(self, name, path):
        """Whether a name leads to a file or folder: from the root, the naming file's folder, its
        package, or as the tail of a path of the repository (a path inside a module: Records/…)."""
        if "/" not in name:
            return name in self.basenames
        if any(os.path.normpath(os.path.join(base, name)) in self.all for base in packages(path)):
            return True
        return name in self.tails


def references(files, paths):
    found = []
    for path, text in files.items():
        if path == "CHANGELOG.md":  # history: it names what a change removed or renamed
            continue
        for number, line in comments(path, text):
            for match in FILE.finditer(line):
                name = match.group(1).rstrip(".")
                if NOT_OURS.search(name) or "…" in name:
                    continue
                if not paths.exists(name, path):
                    found.append((path, number, f"names a file that does not exist: {name}"))
    return found


def check(files, names):
    return measurements(files) + references(files, Paths(set(names) | set(files)))


def self_test(files, names):
    plants = [
        ("Sources/Hoard/Records/RecordWriter.swift", "\n// A put costs 1,234 instructions here.\n", "measurement"),
        ("tools/bench/Sources/BenchSupport/BenchSupport.swift", "\n/// 1.07–1.12× against it.\n", "measurement"),
        ("Sources/LMDB/Environment.swift", "\n// See Records/Gone.swift for the format.\n", "does not exist"),
        ("docs/FORMAT.md", "\nThe reader lives in tools/reader/absent.py.\n", "does not exist"),
    ]
    failures = 0
    for path, planted, kind in plants:
        changed = dict(files)
        changed[path] = files[path] + planted
        found = [v for v in check(changed, names) if v[0] == path and kind in v[2]]
        if len(found) != 1:
            print(f"self-test: a {kind} planted in {path} was not found alone: {found}", file=sys.stderr)
            failures += 1
        else:
            print(f"self-test: planted violation found: {found[0][0]}:{found[0][1]}: {found[0][2]}")
    return failures


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else ".")
    files = {}
    names = tracked(root)
    for path in names:
        if os.path.splitext(path)[1] in CODE or path.endswith(".md"):
            with open(os.path.join(root, path), encoding="utf-8") as handle:
                files[path] = handle.read()
    problems = check(files, names)
    for path, line, why in problems:
        print(f"{path}:{line}: {why}", file=sys.stderr)
    if problems:
        print(f"error: {len(problems)} comment(s) or doc line(s) above to fix", file=sys.stderr)
        return 1
    if "--self-test" in argv and self_test(files, names):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
