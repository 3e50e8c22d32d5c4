#!/usr/bin/env python3
"""Reads a Hoard store following docs/FORMAT.md only, with the `lmdb` and `cbor2` packages.

    read_store.py PATH

Prints one JSON object per line: the store format, then every collection's registry entry, then
every record with its decoded header, its payload, and its values named by property through the
registry (nested models held directly in a property included). Exits 1 (with the reason on stderr) on any
record that breaks the format.
"""
import json
import struct
import sys
import zlib

import cbor2
import lmdb


def plain(value):
    """CBOR values as JSON: tags as {"tag": n, "value": v}, bytes as hex."""
    if isinstance(value, cbor2.CBORTag):
        return {"tag": value.tag, "value": plain(value.value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": value.hex()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    # cbor2 turns tag 1 into datetime and tag 32 into a URL string on its own; keep them readable.
    if hasattr(value, "isoformat"):
        return {"tag": 1, "value": value.timestamp()}
    return value


def lookup(payload, key_name):
    """The value under a key name; dots reach into nested maps. None when absent."""
    value = payload
    for part in key_name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def named(payload, entry, version):
    """The payload's values by property name, through the registry entry: the model's own key
    names of `version`, and for a nested model held directly in a property, its key names of the
    nested version that `used` gives for `version` ("frame.width")."""
    result = {}
    for prop, key_name in entry["versions"].get(str(version), {}).items():
        value = lookup(payload, key_name)
        if value is not None:
            result[prop] = plain(value)
    for path, nested in entry.get("nested", {}).items():
        used = nested["used"].get(str(version))
        inner = lookup(payload, entry["versions"].get(str(version), {}).get(path, ""))
        if used is None or "." in path or not isinstance(inner, dict):
            continue
        for prop, key_name in nested["versions"][str(used)].items():
            if key_name in inner:
                result[path + "." + prop] = plain(inner[key_name])
    return result


def numbers(entry, version):
    """What the numbers keying a record of format 3 stand for: the version's top-level key names
    (a dotted name gives its part before the first dot), in UTF-8 byte order."""
    names = {name.split(".")[0] for name in entry["versions"].get(str(version), {}).values()}
    return sorted(names, key=lambda name: name.encode("utf-8"))


def header(record):
    """A record's (version, written, expires, payload, numbered), in record format 3, 2 or 1;
    ValueError when it breaks the format."""
    if record[:2] == b"HR":  # format 1: a fixed 28-byte header
        if len(record) < 28:
            raise ValueError("record shorter than the header")
        magic, fmt, flags, version, written, expires, crc = struct.unpack(">2sBBIqqI", record[:28])
        if fmt != 1 or flags & ~1:
            raise ValueError("bad header")
        if zlib.crc32(record[:24] + record[28:]) != crc:
            raise ValueError("checksum mismatch")
        return version, written, expires if flags & 1 else None, record[28:], False
    if len(record) < 14 or record[:1] != b"H" or record[1] not in (2, 3) or record[6] & ~1:
        raise ValueError("bad header")
    # Format 3's checksum covers its format byte too.
    covered = record[1:2] + record[6:] if record[1] == 3 else record[6:]
    if zlib.crc32(covered) != int.from_bytes(record[2:6], "big"):
        raise ValueError("checksum mismatch")
    written, at, expires = int.from_bytes(record[7:13], "big"), 13, None
    if record[6] & 1:
        expires, at = int.from_bytes(record[13:19], "big"), 19
    version = shift = 0
    while True:  # unsigned LEB128
        byte = record[at]
        version, shift, at = version | (byte & 0x7F) << shift, shift + 7, at + 1
        if byte < 0x80:
            return version, written, expires, record[at:], record[1] == 3


def main(path):
    env = lmdb.open(path, readonly=True, lock=True, max_dbs=64, subdir=True)
    with env.begin() as txn:
        names = [key for key, _ in txn.cursor()]
    meta = env.open_db(b"hoard.meta", create=False)
    registry = {}
    with env.begin(db=meta) as txn:
        print(json.dumps({"format": int(txn.get(b"format").decode("ascii"))}))
        for key, value in txn.cursor():
            if key.startswith(b"collection:"):
                entry = cbor2.loads(value)
                registry[key[len(b"collection:"):].decode()] = entry
                print(json.dumps({"registry": key[len(b"collection:"):].decode(), "entry": entry}, sort_keys=True))
    for name in names:
        if not name.startswith(b"c:"):
            continue
        db = env.open_db(name, create=False)
        with env.begin(db=db) as txn:
            for key, record in txn.cursor():
                entry = registry[name[2:].decode()]
                try:
                    version, written, expires, body, numbered = header(record)
                except (ValueError, IndexError) as error:
                    sys.exit(f"{name.decode()}[{key.hex()}]: {error or 'bad header'}")
                payload = cbor2.loads(body)
                if numbered:
                    names = numbers(entry, version)
                    if not isinstance(payload, dict) or not all(
                        type(number) is int and 0 <= number < len(names) for number in payload
                    ):
                        sys.exit(f"{name.decode()}[{key.hex()}]: a key is not one of version {version}'s numbers")
                    payload = {names[number]: value for number, value in payload.items()}
                print(json.dumps({
                    "collection": name[2:].decode(),
                    "key": key.hex(),
                    "version": version,
                    "written": written,
                    "expires": expires,
                    "payload": plain(payload),
                    "named": named(payload, entry, version),
                }, sort_keys=True))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: read_store.py PATH")
    main(sys.argv[1])
