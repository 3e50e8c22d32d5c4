import Hoard
import TestSupport
import Testing

@Suite("registry between processes")
struct RegistryRaceTests {
    /// Two processes open the same new collection at the same moment, with models that agree on
    /// key set 1 and name key set 2's key differently. Before the check and the record were one
    /// write transaction, both could read "nothing recorded", both pass, and the last write won:
    /// records one process wrote were then read with the other's key names.
    @Test("two processes opening a collection with conflicting key sets: exactly one is recorded, the other refused")
    func conflictingOpens() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let rounds = 300
            _ = try Store(path: path, options: .init(durability: .riskStoreOnOSCrash, maxCollections: 500))
            let probes = try ["A", "B"].map { _ in try ChildProcess(try builtExecutable("LMDBProbe"), ["store", path]) }
            defer { for probe in probes { try? probe.send("exit"); _ = probe.wait() } }
            for probe in probes { #expect(try probe.readLine() == "open ok") }

            var winners: [String?] = []
            var bothAccepted = 0
            for round in 0..<rounds {
                // Both lines are sent before either answer is read, so the two opens overlap.
                try probes[0].send("collection c\(round) A")
                try probes[1].send("collection c\(round) B")
                let answers = try probes.map { try $0.readLine() ?? "eof" }
                let accepted = zip(["A", "B"], answers).filter { $0.1 == "ok" }.map(\.0)
                if accepted.count == 2 { bothAccepted += 1 }
                #expect(accepted.count >= 1, "round \(round): \(answers)")
                for answer in answers where answer != "ok" {
                    #expect(answer.contains("local key set 2 differs"), "round \(round): \(answer)")
                }
                winners.append(accepted.count == 1 ? accepted[0] : nil)
            }
            #expect(
                bothAccepted == 0, "\(bothAccepted) of \(rounds) rounds recorded both key sets 2 (the last write won)")

            // What is recorded is the key set of the process that was let through.
            let store = try Store(path: path, options: .init(maxCollections: 500, readOnly: true))
            for (round, winner) in winners.enumerated() {
                guard let winner else { continue }
                let schema = try #require(try store.schema(of: "c\(round)"))
                #expect(schema.keyName(of: "name", in: 2) == "NAME_\(winner)", "round \(round)")
            }
        }
    }
}
