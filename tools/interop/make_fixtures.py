#!/usr/bin/env python3
"""Writes Tests/Fixtures/note-records.json: records of the test model `Note` as versions 1, 2
and 3 of an app stored them, built from docs/FORMAT.md alone (cbor2 + zlib, no Hoard code).

Generated once and committed; never regenerate it: the point of a fixture is that today's code
still reads the bytes that older code wrote. (Add new fixture files for new versions instead.)
"""
import json
import struct
import sys
import zlib

import cbor2

NOTES = [
    # (id, text, stars, pinned)
    (-7, "minus seven", 4, True),
    (0, "", 0, False),
    (42, "Grüße, 水, 🦊", 5, True),
]


def payload(version, note):
    ident, text, stars, pinned = note
    if version == 1:
        fields = {"ID": ident, "BODY": text, "STARS": str(stars)}
    elif version == 2:
        fields = {"ID": ident, "TEXT": text, "STARS": str(stars)}
    else:
        fields = {"ID": ident, "TEXT": text, "STARS": stars, "PINNED": pinned}
    return cbor2.dumps(fields, canonical=True)


def record(version, written, body):
    header = struct.pack(">2sBBIqq", b"HR", 1, 0, version, written, 0)
    return header + struct.pack(">I", zlib.crc32(header + body)) + body


def main(out):
    fixtures = []
    for version in (1, 2, 3):
        for note in NOTES:
            ident, text, stars, pinned = note
            fixtures.append({
                "version": version,
                "id": ident,
                "record": record(version, 1_600_000_000_000 + version, payload(version, note)).hex(),
                "expected": {"id": ident, "text": text, "stars": stars, "pinned": pinned if version >= 3 else False},
            })
    with open(out, "w") as f:
        json.dump(fixtures, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "Tests/Fixtures/note-records.json")
