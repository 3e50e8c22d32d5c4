#!/usr/bin/env python3
"""One writer: only Sources/Hoard/Records/RecordWriter.swift writes a collection's records.

Every change to a collection's records goes through `RecordWriter`, which makes its side effects
(the bound's bookkeeping, the tag index, the change journal, the counters) once, in one order. A
write to LMDB anywhere else in the product (Sources/Hoard*, the `hoard` tool) must name a database
that holds no records: the meta database (`meta`), the outbox (`outbox`), or, in the file that
owns it, the tag index or the change log. This check finds every LMDB write call, a call that
spans lines included, and names each one that breaks the rule.

    tools/scripts/check-writes.py ROOT              the check (exit 1 on a violation)
    tools/scripts/check-writes.py --self-test ROOT  plants writes into copies and expects each found
"""
import pathlib
import re
import sys

WRITER = "Sources/Hoard/Records/RecordWriter.swift"
# Databases that hold no records, by the name the code gives them.
EVERYWHERE = {"meta", "outbox"}
# A file that owns a database of its own may write it (and move its cursors' entries).
OWNED = {
    "Sources/Hoard/Tags/TagIndex.swift": {"database"},
    "Sources/Hoard/Observation/ChangeLogFormat.swift": {"log"},
}
# Test fixtures that plant damaged records on purpose are not the product.
SKIPPED = ("Sources/HoardTestSupport/", "Sources/TestSupport/")
# Names a write transaction goes by: `x.delete(id, in: txn)` is Hoard's own API, not LMDB's.
TRANSACTIONS = {"txn", "transaction"}

CALL = re.compile(r"([\w)\]]*)\.(put|reserve|delete|clear|drop|deleteCurrent|replaceCurrent)\s*\(")


def code_only(text):
    """The text with comments and string literals blanked (lengths and lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            quote = '"""' if text.startswith('"""', i) else '"'
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + len(quote))
            out.append(quote + re.sub(r"[^\n]", " ", text[i + len(quote) : j - len(quote)]) + quote)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def arguments(code, start):
    """The text between the parenthesis at `start` and the one that closes it."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] in "([{":
            depth += 1
        elif code[j] in ")]}":
            depth -= 1
            if depth == 0:
                return code[start + 1 : j]
    return code[start + 1 :]


def violations(path, text):
    if path == WRITER or path.startswith(SKIPPED):
        return []
    allowed = EVERYWHERE | OWNED.get(path, set())
    code = code_only(text)
    found = []
    for match in CALL.finditer(code):
        receiver, verb = match.group(1), match.group(2)
        args = " ".join(arguments(code, match.end() - 1).split())
        line = code.count("\n", 0, match.start()) + 1
        if verb in ("deleteCurrent", "replaceCurrent"):
            if path not in OWNED:
                found.append((line, f"a cursor's {verb}(): a records database is written only by RecordWriter"))
            continue
        if verb in ("clear", "drop"):
            # LMDB's take one database, on a transaction (a sketch's `clear(hash)` is not one).
            database = args.strip()
            if not re.fullmatch(r"(?i).*(txn|transaction)", receiver) or not database or ":" in database:
                continue
        else:
            where = re.search(r"\bin:\s*([A-Za-z_][\w.!?]*)", args)
            if not where:
                continue  # no database named: not an LMDB write
            database = where.group(1)
            if database in TRANSACTIONS:
                continue  # Hoard's own API, which goes through the writer
        if database.split(".")[-1].rstrip("!?") in allowed:
            continue
        found.append((line, f"{verb}(… {database}): a records database is written only by RecordWriter"))
    return found


def product_files(root):
    files = {}
    for pattern in ("Sources/**/*.swift", "tools/hoard/**/*.swift"):
        for file in sorted(root.glob(pattern)):
            relative = file.relative_to(root).as_posix()
            if relative.startswith("Sources/LMDB/"):
                continue
            files[relative] = file.read_text(encoding="utf-8")
    return files


def check(files):
    return [(path, line, why) for path, text in files.items() for line, why in violations(path, text)]


def self_test(files):
    """Each planted write must be found, and only it."""
    plants = [
        ("Sources/Hoard/Collection/HoardCollection+Reading.swift", "\n    func planted() throws { _ = try txn.delete(key, in: database) }\n"),
        ("Sources/Hoard/Synchronize/HoardCollection+Synchronize.swift", "\n    func planted() throws { try cursor.deleteCurrent() }\n"),
        ("tools/hoard/HoardCLI/Put.swift", "\nfunc planted() throws {\n    try t.put(\n        record, forKey: key,\n        in: handle.database)\n}\n"),
        ("Sources/Hoard/Tags/TagIndex.swift", "\n    func planted() throws { try txn.clear(records) }\n"),
    ]
    failures = 0
    for path, planted in plants:
        changed = dict(files)
        changed[path] = files[path] + planted
        found = [v for v in check(changed) if v[0] == path]
        if len(found) != 1:
            print(f"self-test: a write planted in {path} was not found alone: {found}", file=sys.stderr)
            failures += 1
        else:
            print(f"self-test: planted write found: {found[0][0]}:{found[0][1]}: {found[0][2]}")
    return failures


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    root = pathlib.Path(args[0] if args else ".")
    files = product_files(root)
    problems = check(files)
    for path, line, why in problems:
        print(f"{path}:{line}: {why}", file=sys.stderr)
    if problems:
        print(f"error: {len(problems)} write(s) of a records database outside {WRITER}", file=sys.stderr)
        return 1
    if "--self-test" in argv and self_test(files):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
