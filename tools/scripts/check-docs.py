#!/usr/bin/env python3
"""Checks the public API's doc comments in the symbol graphs tools/docs.sh extracted.

DocC itself (with --warnings-as-errors) fails on a broken link or an undocumented parameter;
it does not fail on a public symbol that has no doc comment at all, nor on a throwing function
that does not say what it throws. This script does both, for the modules named on the command
line, and prints every offender with its file and line.

usage: check-docs.py SYMBOLS_DIR MODULE...
"""

import glob
import json
import os
import sys


def declaration(symbol):
    return "".join(fragment["spelling"] for fragment in symbol.get("declarationFragments", []))


def throws(symbol):
    """Whether the function itself throws: a `throws` outside its parentheses, not one in the type
    of a closure it takes (nor a property of a throwing closure type)."""
    if symbol["kind"]["identifier"] not in ("swift.func", "swift.method", "swift.type.method", "swift.init"):
        return False
    depth = 0
    for fragment in symbol.get("declarationFragments", []):
        if fragment["kind"] == "text":
            depth += fragment["spelling"].count("(") - fragment["spelling"].count(")")
        elif fragment["kind"] == "keyword" and fragment["spelling"] in ("throws", "rethrows") and depth == 0:
            return True
    return False


def where(symbol):
    location = symbol.get("location")
    if not location:
        return "?"
    path = location["uri"].removeprefix("file://")
    return f"{os.path.relpath(path)}:{location['position']['line'] + 1}"


def check(symbols_dir, module):
    # tools/scripts/symbol-graphs.py writes <dir>/<module>/<module>[@Other].symbols.json; the
    # @Other files hold this module's extensions of other modules' types.
    paths = glob.glob(os.path.join(symbols_dir, module, "*.symbols.json"))
    if not paths:
        sys.exit(f"error: no symbol graphs for {module} under {symbols_dir}; run tools/docs.sh")
    problems = []
    for path in paths:
        with open(path) as file:
            graph = json.load(file)
        for symbol in graph["symbols"]:
            if symbol["accessLevel"] not in ("public", "open"):
                continue
            # Without a location the symbol is a protocol's default (Equatable's !=, OptionSet's
            # algebra), documented where it is declared; an `extension Int` block is no symbol of its own.
            if "location" not in symbol or symbol["kind"]["identifier"] == "swift.extension":
                continue
            name = ".".join(symbol["pathComponents"])
            comment = symbol.get("docComment")
            # A comment inherited from another module's protocol is that module's words, not ours.
            lines = [line["text"].strip() for line in comment["lines"]] if comment else []
            if not comment or comment.get("module", module) != module or not any(lines):
                problems.append(f"{where(symbol)}: {module}.{name} has no doc comment  [{declaration(symbol)}]")
                continue
            if throws(symbol) and not any(line.startswith("- Throws:") for line in lines):
                problems.append(f"{where(symbol)}: {module}.{name} throws but has no '- Throws:'")
    return problems


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    problems = [problem for module in sys.argv[2:] for problem in check(sys.argv[1], module)]
    for problem in sorted(problems):
        print(problem)
    if problems:
        sys.exit(f"error: {len(problems)} public symbols are not documented as the house style asks")
    print(f"docs: every public symbol of {', '.join(sys.argv[2:])} has a summary, and every throwing one '- Throws:'")


if __name__ == "__main__":
    main()
