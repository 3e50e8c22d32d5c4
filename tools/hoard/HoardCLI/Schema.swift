import ArgumentParser
@_spi(LMDB) import Hoard

/// `hoard schema`: the key-set registry, versions side by side.
struct Schema: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show every local key-set version's key names, side by side.",
        discussion: """
            One row per property, one column per version, so that a key renamed, added or \
            removed between versions shows at a glance. Read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    func run() throws {
        let opened = try openStore(store.path)
        let handles = try openCollections(collection, in: opened)
        if store.json {
            say(JSON.array(handles.map(\.shape.schemaJSON)).text)
            return
        }
        if handles.isEmpty { say("no collections") }
        for (index, handle) in handles.enumerated() {
            if index > 0 { say("") }
            let schema = handle.schema
            say(
                Terminal.bold(handle.name)
                    + " (type \(schema.type), current version \(schema.currentVersion), \(handle.keyKind.rawValue) IDs)"
            )
            keyNameTable(schema.versions, current: schema.currentVersion).print()
            for nested in schema.nested {
                let uses = nested.versionUsed.sorted { $0.key < $1.key }.map { "v\($0.key) → v\($0.value)" }.joined(
                    separator: ", ")
                say("nested \(nested.type) at \(nested.path) (\(uses))")
                keyNameTable(nested.keyNames, current: nil).print()
            }
            for enumeration in schema.enums {
                let versions = enumeration.aliases.sorted { $0.key < $1.key }.map { version, aliases in
                    "v\(version): "
                        + (aliases.isEmpty
                            ? "canonical raw values"
                            : aliases.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }.joined(
                                separator: ", "))
                }
                say("enum \(enumeration.type) at \(enumeration.path) (\(versions.joined(separator: "; ")))")
            }
        }
    }

    /// One row per property, one column per version, and what changes between versions.
    private func keyNameTable(_ keyNames: [Int: [String: String]], current: Int?) -> Table {
        let versions = keyNames.keys.sorted()
        var table = Table(
            header: ["property"] + versions.map { "v\($0)" + ($0 == current ? " (current)" : "") } + ["changes"])
        for property in Set(keyNames.values.flatMap(\.keys)).sorted() {
            let names = versions.map { keyNames[$0]?[property] }
            table.add([property] + names.map { $0 ?? "-" } + [changes(names, versions)])
        }
        return table
    }

    /// "renamed in v2, removed in v3": what happens to one property from version to version.
    private func changes(_ names: [String?], _ versions: [Int]) -> String {
        var notes: [String] = []
        for index in names.indices.dropFirst() {
            switch (names[index - 1], names[index]) {
            case let (old?, new?) where old != new: notes.append("renamed in v\(versions[index])")
            case (nil, _?): notes.append("added in v\(versions[index])")
            case (_?, nil): notes.append("removed in v\(versions[index])")
            default: break
            }
        }
        return notes.joined(separator: ", ")
    }
}

extension Table {
    init(header: [String]) { self.header = header }
}

extension CollectionShape {
    /// The registry entry as JSON; `nested` and `enums` only when there are some, so that
    /// entries without them read as before (and old dumps still load).
    var schemaJSON: JSON {
        var members: [(String, JSON)] = [
            ("collection", .string(name)),
            ("type", .string(schema.type)),
            ("currentVersion", .int(Int64(schema.currentVersion))),
            ("keyKind", .string(keyKind.rawValue)),
            ("versions", versionsJSON(schema.versions)),
        ]
        if !schema.nested.isEmpty {
            members.append(
                (
                    "nested",
                    .array(
                        schema.nested.map { nested in
                            .object([
                                ("path", .string(nested.path)),
                                ("type", .string(nested.type)),
                                (
                                    "used",
                                    .object(
                                        nested.versionUsed.sorted { $0.key < $1.key }.map {
                                            (String($0.key), .int(Int64($0.value)))
                                        })
                                ),
                                ("versions", versionsJSON(nested.keyNames)),
                            ])
                        })
                ))
        }
        if !schema.enums.isEmpty {
            members.append(
                (
                    "enums",
                    .array(
                        schema.enums.map { enumeration in
                            .object([
                                ("path", .string(enumeration.path)),
                                ("type", .string(enumeration.type)),
                                ("aliases", versionsJSON(enumeration.aliases)),
                            ])
                        })
                ))
        }
        return .object(members)
    }

    private func versionsJSON(_ versions: [Int: [String: String]]) -> JSON {
        .object(
            versions.sorted { $0.key < $1.key }.map { version, names in
                (String(version), .object(names.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
            })
    }
}
