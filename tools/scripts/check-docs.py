#!/usr/bin/env python3
"""Checks the public API's doc comments in the symbol graphs tools/docs.sh extracted.

DocC itself (with --warnings-as-errors) fails on a broken link or an undocumented parameter;
it does not fail on a public symbol that has no doc comment at all, nor on a throwing function
that does not say what it throws. This script does both, for the modules named on the command
line, and prints every offender with its file and line.

It also keeps the boundary of `import Hoard`: no public symbol of Hoard may name a declaration
of the LMDB module (a parameter, a result, a property's type, a conformance, an extension of an
LMDB type), and Hoard's sources may not re-export LMDB. SPI (`@_spi(LMDB)`) is not in the graph.

And it keeps every public type of a module that has a DocC catalog in one of the catalog's topic
groups, so that its landing page reaches every type.

usage: check-docs.py SYMBOLS_DIR MODULE...
"""

import glob
import json
import os
import re
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


TYPE_KINDS = ("swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias", "swift.actor")


def unlisted(symbols_dir, module):
    """The top-level public types of a module with a DocC catalog that no topic group of the
    catalog lists (a ``Name`` line under a Topics heading): a reader of the catalog could reach
    them only by searching. (A module without a catalog gets DocC's automatic topics.)"""
    catalog = os.path.join(os.path.dirname(__file__), "..", "..", "Sources", module, "Documentation.docc")
    if not os.path.isdir(catalog):
        return []
    listed = set()
    for page in glob.glob(os.path.join(catalog, "*.md")):
        with open(page) as file:
            listed |= set(re.findall(r"^- ``([A-Za-z0-9_]+)``", file.read(), re.MULTILINE))
    problems = []
    with open(os.path.join(symbols_dir, module, f"{module}.symbols.json")) as file:
        graph = json.load(file)
    for symbol in graph["symbols"]:
        if (symbol["accessLevel"] in ("public", "open") and symbol["kind"]["identifier"] in TYPE_KINDS
                and len(symbol["pathComponents"]) == 1 and "location" in symbol
                and symbol["pathComponents"][0] not in listed):
            problems.append(f"{where(symbol)}: {module}.{symbol['pathComponents'][0]} is in no topic group of "
                            f"Sources/{module}/Documentation.docc")
    return problems


# Swift's mangled names of the LMDB module's declarations start so (`s:` then the module's name).
LMDB_PREFIX = "s:4LMDB"


def boundary(symbols_dir, module="Hoard", hidden="LMDB"):
    """Where the public API of `module` shows a declaration of `hidden`."""
    problems = []
    for path in glob.glob(os.path.join(symbols_dir, module, "*.symbols.json")):
        if os.path.basename(path) == f"{module}@{hidden}.symbols.json":
            problems.append(f"{path}: {module} extends types of {hidden} in its public API")
            continue
        with open(path) as file:
            graph = json.load(file)
        named = {symbol["identifier"]["precise"]: symbol for symbol in graph["symbols"]}
        for symbol in graph["symbols"]:
            if symbol["accessLevel"] not in ("public", "open"):
                continue
            for fragment in symbol.get("declarationFragments", []):
                if fragment.get("preciseIdentifier", "").startswith(LMDB_PREFIX):
                    problems.append(
                        f"{where(symbol)}: {module}.{'.'.join(symbol['pathComponents'])} names {hidden}'s "
                        f"{fragment['spelling']}  [{declaration(symbol)}]")
                    break
        for relationship in graph.get("relationships", []):
            if relationship["target"].startswith(LMDB_PREFIX) and relationship["source"] in named:
                source = named[relationship["source"]]
                problems.append(
                    f"{where(source)}: {module}.{'.'.join(source['pathComponents'])} {relationship['kind']} "
                    f"{relationship.get('targetFallback', relationship['target'])} of {hidden}")
    sources = os.path.join(os.path.dirname(__file__), "..", "..", "Sources", module)
    for path in glob.glob(os.path.join(sources, "**", "*.swift"), recursive=True):
        with open(path) as file:
            for number, line in enumerate(file, 1):
                if line.lstrip().startswith("@_exported") and f"import {hidden}" in line:
                    problems.append(f"{os.path.relpath(path)}:{number}: re-exports {hidden}")
    return problems


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if "Hoard" in sys.argv[2:]:
        leaks = boundary(sys.argv[1])
        for leak in sorted(leaks):
            print(leak)
        if leaks:
            sys.exit(f"error: the public API of Hoard shows LMDB in {len(leaks)} places (use Hoard's own types, or @_spi(LMDB))")
    problems = [problem for module in sys.argv[2:] for problem in check(sys.argv[1], module)]
    problems += [problem for module in sys.argv[2:] for problem in unlisted(sys.argv[1], module)]
    for problem in sorted(problems):
        print(problem)
    if problems:
        sys.exit(f"error: {len(problems)} public symbols are not documented as the house style asks")
    print(f"docs: every public symbol of {', '.join(sys.argv[2:])} has a summary, every throwing one '- Throws:',"
          " and every public type of a catalog's module is in one of its topic groups")


if __name__ == "__main__":
    main()
