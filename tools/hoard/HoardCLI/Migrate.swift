import ArgumentParser
@_spi(LMDB) import Hoard

/// `hoard migrate`: rewrite old-version records in the current version where names suffice.
struct Migrate: StoreCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rewrite records of older key-set versions in the current one (writes).",
        discussion: """
            Without the app's code only spelling can change: a key renamed between versions is \
            renamed, a property the current version dropped is dropped. A record is left alone, \
            and listed with the reason, when the current version has a property the record's \
            version lacks (its value must come from the app), or when a value's CBOR type differs \
            from what current-version records hold for that property (a type change: the app's \
            init(from:) converts it), or when a nested model's key names or an enum's aliased raw \
            values differ between the two versions. Write and expiry times are kept. Batches of 10,000 records \
            per transaction; a live writer is not blocked for longer than one batch.
            """
    )

    @OptionGroup var store: StoreOptions

    @Argument(help: "Only this collection.")
    var collection: String?

    @Flag(name: .customLong("dry-run"), help: "Report what would change; write nothing.")
    var dryRun = false

    func run() throws {
        let opened = try openStore(store.path, writable: !dryRun)
        let handles = try openCollections(collection, in: opened)
        var outcomes: [SchemaMigrationResult] = []
        for handle in handles {
            outcomes.append(try opened.migrateByKeyNames(handle.name, dryRun: dryRun, beforeBatch: checkInterrupt))
        }
        if store.json {
            say(
                JSON.array(
                    outcomes.map { outcome in
                        .object([
                            ("collection", .string(outcome.collection)),
                            ("migrated", .int(Int64(outcome.migrated))),
                            ("upToDate", .int(Int64(outcome.upToDate))),
                            ("dryRun", .bool(dryRun)),
                            (
                                "needsAppCode",
                                .array(
                                    outcome.left.map {
                                        .object([("id", .string($0.key.text)), ("reason", .string($0.reason))])
                                    })
                            ),
                        ])
                    }
                ).text)
            return
        }
        for outcome in outcomes {
            let verb = dryRun ? "would rewrite" : "rewrote"
            say(
                "\(Terminal.bold(outcome.collection)): \(verb) \(outcome.migrated) record\(outcome.migrated == 1 ? "" : "s") in the current version; \(outcome.upToDate) already current; \(outcome.left.count) left for the app's code"
            )
            for left in outcome.left { say("  \(outcome.collection)[\(left.key.text)]: \(left.reason)") }
        }
    }
}
