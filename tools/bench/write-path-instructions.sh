#!/usr/bin/env bash
# What the main paths cost in this clone's HEAD against an older revision (by default the last one
# before change observation), in instructions counted by callgrind: the same small driver is
# built against both, each in a temporary worktree, in place of sync-bench's main.swift (a target
# both revisions have, with the same dependencies). Its workloads, on Member records in a store
# without subscribers (MDB_NOSYNC): 2,000 single puts; a put of 10,000; 2,000 typed gets; puts of
# 2,000 new records into a collection bounded at 10,000, each evicting one; a synchronize of
# 10,000 records with 1% changed. Each runs with 1 and with 4 rounds; the difference over the 3
# rounds' operations is the cost of one, free of opening and filling the store. Two clean release
# builds: about 10 minutes on two cores.
#
#   tools/bench/write-path-instructions.sh [REVISION [WORKLOAD...]]
set -euo pipefail
repo_dir="$(cd "$(dirname "$0")/../.." && pwd)"
old_revision="${1:-aac0853}"
shift || true
[ $# -gt 0 ] && workloads=("$@") || workloads=(single bulk)
# shellcheck source=../scripts/apt-install.sh
. "$repo_dir/tools/scripts/apt-install.sh"
command -v valgrind >/dev/null 2>&1 || hoard_apt_install "counting instructions" valgrind
command -v objcopy >/dev/null 2>&1 || hoard_apt_install "stripping debug info for valgrind" binutils

work=$(mktemp -d)
cleanup() {
    for tree in old new; do git -C "$repo_dir" worktree remove --force "$work/$tree" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/driver.swift" <<'SWIFT'
import BenchModels
import BenchSupport
import Dispatch
import Hoard

let rounds = option("rounds", default: 1)
let workload = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "single"
let members = (0..<Int64(10_000)).map { i in
    Member(id: i, name: "Member \(i)", email: "m\(i)@example.com", age: Int(i % 90), city: "Lisbon", followers: Int(i))
}
let store = try Store(
    path: temporaryDirectory("write-path") + "/store", options: Store.Options(durability: .riskStoreOnOSCrash))
let collection = try store.collection(Member.self)
try collection.put(members)
let bounded = try store.collection(Member.self, named: "bounded", capacity: .records(10_000))
if workload == "evict" { try bounded.put(members) }
// A second thread, as in observation-bench: a process with one takes the C library's slower
// paths for good, and a service always has one.
let started = DispatchSemaphore(value: 0)
DispatchQueue.global().async { started.signal() }
started.wait()
for round in 0..<rounds {
    switch workload {
    case "bulk": try collection.put(members)
    case "get": for index in 0..<2_000 { _ = try collection.get(Int64(index)) }
    case "evict":
        let first = Int64(10_000 + round * 2_000)
        try bounded.put(
            (first..<first + 2_000).map { i in
                Member(id: i, name: "New \(i)", email: "n\(i)@example.com", age: 1, city: "Porto", followers: 0)
            })
    case "sync":
        var fresh = members
        for index in stride(from: round, to: fresh.count, by: 100) { fresh[index].followers += 1 + round }
        _ = try collection.synchronize(with: fresh)
    default: for index in 0..<2_000 { try collection.put(members[index]) }
    }
}
SWIFT

# Instructions of the main thread (callgrind's first part) for `$1 $2 --rounds $3`.
count() {
    local out
    out=$(mktemp -d)
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg" "$1" "$2" --rounds "$3" >/dev/null 2>&1
    awk '/^totals:/ { print $2 }' "$out/cg-01"
    rm -rf "$out"
}

for tree in old new; do
    revision=$([ "$tree" = old ] && echo "$old_revision" || echo HEAD)
    git -C "$repo_dir" worktree add --detach "$work/$tree" "$revision" >/dev/null 2>&1
    cp "$work/driver.swift" "$work/$tree/tools/bench/Sources/SyncBench/main.swift"
    echo "building $revision…" >&2
    (cd "$work/$tree/tools/bench" && swift build -c release --product sync-bench >"$work/$tree.log" 2>&1) || {
        cat "$work/$tree.log" >&2
        exit 1
    }
    # valgrind 3.19 cannot read Swift's DWARF 5.
    objcopy --strip-debug "$work/$tree/tools/bench/.build/release/sync-bench" "$work/$tree.bin"
done

echo "| workload | $old_revision | HEAD | ratio |"
echo "| --- | ---: | ---: | ---: |"
for workload in "${workloads[@]}"; do
    case "$workload" in
    bulk | sync) writes=30000 ;;
    *) writes=6000 ;;
    esac
    old=$(($(count "$work/old.bin" "$workload" 4) - $(count "$work/old.bin" "$workload" 1)))
    new=$(($(count "$work/new.bin" "$workload" 4) - $(count "$work/new.bin" "$workload" 1)))
    awk -v w="$workload" -v o="$old" -v n="$new" -v c="$writes" \
        'BEGIN {
            name["single"] = "a single put"; name["bulk"] = "a record of a put of 10,000"; name["get"] = "a typed get"
            name["evict"] = "a record of an evicting put of 2,000"; name["sync"] = "a record of a synchronize of 10,000, 1% changed"
            printf "| %s | %.0f | %.0f | %.3f× |\n", name[w], o / c, n / c, n / o }'
done
