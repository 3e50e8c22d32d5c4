import BenchModels
import BenchSupport
@_spi(LMDB) import Hoard
import LMDB

/// The records Hoard stores for `members`, byte for byte (header and payload, the write time
/// included), read back from a scratch store they were put into: the C baseline puts and gets the
/// same bytes.
func exactRecords(of members: [Member]) throws -> [[UInt8]] {
    let directory = temporaryDirectory("exact")
    defer { removeStore(in: directory) }
    let store = try Store(path: directory + "/store", options: .init(durability: .riskStoreOnOSCrash))
    try store.collection(Member.self).put(members)
    let database = try store.environment.openDatabase("c:Member")
    return try store.environment.read { txn in
        try members.map { member in
            guard let record = try txn.value(forKey: member.id.keyBytes, in: database) else {
                throw ExactRecordMissing(id: member.id)
            }
            return record
        }
    }
}

struct ExactRecordMissing: Error {
    let id: Int64
}
