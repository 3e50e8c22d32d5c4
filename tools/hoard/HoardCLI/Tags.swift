import ArgumentParser
@_spi(LMDB) import Hoard

/// `hoard tags`: how many records of a collection carry each tag.
struct Tags: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count a collection's records by tag.",
        discussion: """
            One row per tag that a record of the collection carries, in the order of the tags' \
            UTF-8 bytes, with how many records carry it (a record counts once under each of its \
            tags). `hoard get` shows one record's tags; `hoard verify` checks the index against the \
            records. From one read snapshot; read-only.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "The collection.")
    var collection: String

    func run() throws {
        let opened = try openStore(store.path)
        _ = try openCollection(collection, in: opened)
        let counts = try opened.tagCounts(in: collection)
        if store.json {
            say(
                JSON.array(
                    counts.map { JSON.object([("tag", .string($0.tag)), ("records", .int(Int64($0.records)))]) }
                ).text)
            return
        }
        guard !counts.isEmpty else {
            say("no record of \(collection) has tags")
            return
        }
        var table = Table("tag", "records")
        for (tag, records) in counts { table.add([tag, String(records)]) }
        table.print()
    }
}
