// codec-bench: the CBOR coder against Foundation's JSONEncoder/JSONDecoder on the same models,
// in the same run. Budget: CBOR encode + decode ≥ 5× faster than JSON.
//
//   swift run -c release --package-path tools/bench codec-bench [--models N] [--rounds R]
import BenchModels
import BenchSupport
import CBOR
import Foundation
import VariableCoding

/// A typical cached model: 6 fields, strings and integers.
struct User: Codable, Equatable {
    var id: Int
    var name: String
    var email: String
    var age: Int
    var city: String
    var followers: Int
}

let count = option("models", default: 20_000)
let rounds = option("rounds", default: 9)
var rng = SplitMix64(seed: 7)
let cities = ["Berlin", "Lisbon", "Osaka", "Nairobi", "Montréal", "São Paulo"]
let users = (0..<count).map { i in
    User(
        id: 1_000_000 + i, name: "User Number \(i)", email: "user\(i)@example.com",
        age: Int(rng.next() % 90), city: cities[Int(rng.next() % 6)], followers: Int(rng.next() % 100_000)
    )
}

let jsonEncoder = JSONEncoder()
let jsonDecoder = JSONDecoder()
let cborEncoder = CBOREncoder()
let cborDecoder = CBORDecoder()
let json = try users.map { try jsonEncoder.encode($0) }
let cbor = try users.map { try cborEncoder.encode($0) }
// The two coders must agree on the values before their speed means anything.
for i in stride(from: 0, to: count, by: 97) {
    let viaJSON = try jsonDecoder.decode(User.self, from: json[i])
    let viaCBOR = try cborDecoder.decode(User.self, from: cbor[i])
    precondition(viaJSON == users[i] && viaCBOR == users[i], "the coders disagree on model \(i)")
}
let jsonBytes = json.reduce(0) { $0 + $1.count }
let cborBytes = cbor.reduce(0) { $0 + $1.count }

nonisolated(unsafe) var sink = 0  // keeps results alive; single-threaded benchmark
func jsonRoundTrip() throws -> UInt64 {
    try time {
        for user in users {
            let data = try jsonEncoder.encode(user)
            sink &+= try jsonDecoder.decode(User.self, from: data).age
        }
    }
}
func cborRoundTrip() throws -> UInt64 {
    try time {
        for user in users {
            let bytes = try cborEncoder.encode(user)
            sink &+= try cborDecoder.decode(User.self, from: bytes).age
        }
    }
}

// `--only NAME` runs one workload `rounds` times and nothing else, for instruction counting
// under callgrind (tools/bench/instructions.sh): wall-clock time on a shared machine is noisy,
// instruction counts are not.
let variableUsers = users.map {
    Member(id: Int64($0.id), name: $0.name, email: $0.email, age: $0.age, city: $0.city, followers: $0.followers)
}
let remoteEncoder = JSONEncoder()
remoteEncoder.userInfo[.keySet] = KeySetID.remote("v1")
let remoteDecoder = JSONDecoder()
remoteDecoder.userInfo[.keySet] = KeySetID.remote("v1")
let cborLocalEncoder = CBOREncoder(userInfo: [.keySet: KeySetID.currentLocal])
let cborLocalDecoder = CBORDecoder(userInfo: [.keySet: KeySetID.currentLocal])
let variableCBOR = try variableUsers.map { try cborLocalEncoder.encode($0) }
// The store's own configuration: deterministic maps, the current local key set.
let cborStoreEncoder = CBOREncoder(deterministic: true, userInfo: [.keySet: KeySetID.currentLocal])
let workloads: [String: () throws -> Void] = [
    "json-roundtrip": { _ = try jsonRoundTrip() },
    "cbor-roundtrip": { _ = try cborRoundTrip() },
    "json-plain-decode": { for data in json { sink &+= try jsonDecoder.decode(User.self, from: data).age } },
    "json-variable-decode": { for data in json { sink &+= try remoteDecoder.decode(Member.self, from: data).age } },
    "json-plain-encode": { for user in users { sink &+= try jsonEncoder.encode(user).count } },
    "json-variable-encode": { for user in variableUsers { sink &+= try remoteEncoder.encode(user).count } },
    "json-variable-decode-call": {
        for data in json { sink &+= try jsonDecoder.decode(Member.self, from: data, keySet: .remote("v1")).age }
    },
    "json-variable-encode-call": {
        for user in variableUsers { sink &+= try jsonEncoder.encode(user, keySet: .remote("v1")).count }
    },
    "cbor-plain-decode": { for bytes in cbor { sink &+= try cborDecoder.decode(User.self, from: bytes).age } },
    "cbor-store-encode": { for user in variableUsers { sink &+= try cborStoreEncoder.encode(user).count } },
    "cbor-store-decode": {
        for bytes in variableCBOR {
            sink &+= try withKeySet(.currentLocal) { try cborDecoder.decode(Member.self, from: bytes) }.age
        }
    },
    "cbor-plain-encode": { for user in users { sink &+= try cborEncoder.encode(user).count } },
    "cbor-variable-decode": {
        for bytes in variableCBOR { sink &+= try cborLocalDecoder.decode(Member.self, from: bytes).age }
    },
]
if let index = CommandLine.arguments.firstIndex(of: "--only"), index + 1 < CommandLine.arguments.count {
    guard let workload = workloads[CommandLine.arguments[index + 1]] else {
        print("unknown workload; known: \(workloads.keys.sorted().joined(separator: ", "))")
        exit(2)
    }
    for _ in 0..<rounds { try workload() }
    exit(0)
}

print(
    "codec-bench: \(count) models of 6 fields, \(rounds) rounds (medians); average size JSON \(jsonBytes / count) B, CBOR \(cborBytes / count) B"
)
print("")
let roundTrip = try compare(
    "encode + decode", baseline: "Foundation JSON", operations: count, rounds: rounds,
    baselineRound: jsonRoundTrip, candidateRound: cborRoundTrip)
let encode = try compare(
    "encode", baseline: "JSONEncoder", operations: count, rounds: rounds,
    baselineRound: { try time { for user in users { sink &+= try jsonEncoder.encode(user).count } } },
    candidateRound: { try time { for user in users { sink &+= try cborEncoder.encode(user).count } } })
let decode = try compare(
    "decode", baseline: "JSONDecoder", operations: count, rounds: rounds,
    baselineRound: { try time { for data in json { sink &+= try jsonDecoder.decode(User.self, from: data).age } } },
    candidateRound: { try time { for bytes in cbor { sink &+= try cborDecoder.decode(User.self, from: bytes).age } } })
// Here the budget is a speed-up: JSON time / CBOR time ≥ 5, i.e. CBOR/JSON ≤ 0.2.
var rows = [roundTrip, encode, decode]
rows[0].budget = 0.2
let ok = report("CBOR vs Foundation JSON (ratio = CBOR time / JSON time)", rows)
for row in rows { print("\(row.name): CBOR is \(format(1 / row.ratio, 2))× faster than JSON") }
print("")

// VariablyCodable against the same type with plain CodingKeys, both through Foundation JSON.
let variableJSON = try variableUsers.map { try remoteEncoder.encode($0) }
// Both types must read the same documents for the comparison to mean anything.
let crossCheck = try remoteDecoder.decode(Member.self, from: json[0])
precondition(crossCheck.email == users[0].email && variableJSON.count == count, "Member does not read User's JSON")
var variableRows = [
    try compare(
        "decode (JSONDecoder, keySet: in the call)", baseline: "plain Codable", operations: count, rounds: rounds,
        budget: 1.2,
        baselineRound: { try time { for data in json { sink &+= try jsonDecoder.decode(User.self, from: data).age } } },
        candidateRound: {
            try time {
                for data in json { sink &+= try jsonDecoder.decode(Member.self, from: data, keySet: .remote("v1")).age }
            }
        }),
    try compare(
        "encode (JSONEncoder, keySet: in the call)", baseline: "plain Codable", operations: count, rounds: rounds,
        budget: 1.2,
        baselineRound: { try time { for user in users { sink &+= try jsonEncoder.encode(user).count } } },
        candidateRound: {
            try time {
                for user in variableUsers { sink &+= try jsonEncoder.encode(user, keySet: .remote("v1")).count }
            }
        }),
    try compare(
        "decode (JSONDecoder, userInfo)", baseline: "plain Codable", operations: count, rounds: rounds,
        baselineRound: { try time { for data in json { sink &+= try jsonDecoder.decode(User.self, from: data).age } } },
        candidateRound: {
            try time { for data in json { sink &+= try remoteDecoder.decode(Member.self, from: data).age } }
        }),
    try compare(
        "encode (JSONEncoder, userInfo)", baseline: "plain Codable", operations: count, rounds: rounds,
        baselineRound: { try time { for user in users { sink &+= try jsonEncoder.encode(user).count } } },
        candidateRound: { try time { for user in variableUsers { sink &+= try remoteEncoder.encode(user).count } } }),
]
variableRows.append(
    try compare(
        "decode (CBORDecoder)", baseline: "plain Codable", operations: count, rounds: rounds,
        baselineRound: {
            try time { for bytes in cbor { sink &+= try cborDecoder.decode(User.self, from: bytes).age } }
        },
        candidateRound: {
            try time {
                for bytes in variableCBOR { sink &+= try cborLocalDecoder.decode(Member.self, from: bytes).age }
            }
        }))
let variableOK = report("VariablyCodable vs plain Codable (ratio = VariablyCodable time / plain time)", variableRows)
if sink == 42 { print("") }
exit(ok && variableOK ? 0 : 1)
