package import CBOR
@_spi(LMDB) package import Hoard

// Key names across versions, over untyped payloads: what a tool without the app's Swift types
// can do to a record of an older version (the `hoard` CLI's --as-current and `migrate`).

extension CollectionSchema {
    /// `value` (a payload of `version`) with its keys renamed to the current version's names;
    /// properties the current version lacks are dropped and returned in `dropped`. Maps come out
    /// in deterministic order, as the store's encoder writes them.
    package func renaming(_ value: CBORValue, from version: Int) -> (value: CBORValue, dropped: [String]) {
        guard version != currentVersion, let old = versions[version], let new = versions[currentVersion] else {
            return (value, [])
        }
        var result = value
        var moved: [(path: [String], value: CBORValue)] = []
        var dropped: [String] = []
        for (property, oldName) in old.sorted(by: { $0.key < $1.key }) {
            let path = keyPath(oldName)
            guard let found = lookup(result, path) else { continue }
            result = removing(result, path)
            if let newName = new[property] {
                moved.append((keyPath(newName), found))
            } else {
                dropped.append(property)
            }
        }
        for (path, found) in moved { result = setting(result, path, found) }
        return (result.deterministicallyOrdered(), dropped)
    }
}

/// A key name's path through nested maps ("frame.width" → ["frame", "width"]).
func keyPath(_ name: String) -> [String] { name.split(separator: ".").map(String.init) }

/// The value at `path` through nested maps, or `nil`.
func lookup(_ value: CBORValue, _ path: [String]) -> CBORValue? {
    guard let first = path.first else { return value }
    guard let inner = value[first] else { return nil }
    return lookup(inner, Array(path.dropFirst()))
}

private func removing(_ value: CBORValue, _ path: [String]) -> CBORValue {
    guard case .map(var entries) = value, let first = path.first,
        let index = entries.firstIndex(where: { $0.key == .text(first) })
    else { return value }
    if path.count == 1 {
        entries.remove(at: index)
    } else {
        entries[index].value = removing(entries[index].value, Array(path.dropFirst()))
        if case .map(let rest) = entries[index].value, rest.isEmpty { entries.remove(at: index) }
    }
    return .map(entries)
}

private func setting(_ value: CBORValue, _ path: [String], _ new: CBORValue) -> CBORValue {
    guard let first = path.first else { return new }
    var entries: [CBORValue.Entry] = if case .map(let existing) = value { existing } else { [] }
    if let index = entries.firstIndex(where: { $0.key == .text(first) }) {
        entries[index].value = setting(entries[index].value, Array(path.dropFirst()), new)
    } else {
        entries.append(CBORValue.Entry(.text(first), setting(.map([]), Array(path.dropFirst()), new)))
    }
    return .map(entries)
}
