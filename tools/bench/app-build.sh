#!/usr/bin/env bash
# What an application pays to build with Hoard, against the same application on GRDB: two new
# one-file packages, built from clean side by side, in debug and in release, RUNS times each
# (default 3), the two sides alternating.
#
#   Hoard: the README's first model (its declaration, taken from Tests/HoardTests/ReadmeModel.swift,
#          which a test keeps equal to the README), a store, one put and one get; depending on
#          this clone by path with no trait.
#   GRDB:  the same fields as a GRDB 7 record, a DatabaseQueue, one insert and one fetch.
#
# Packages are fetched before the clock starts (from this machine's mirror); each build starts
# from an empty build folder. Prints each build's seconds and modules compiled, the medians and
# the ratios, and fails if the Hoard app compiled a swift-syntax module, a web framework,
# PostgreSQL's client or SwiftNIO.
#
#   tools/bench/app-build.sh [RUNS]
set -euo pipefail
repo_dir="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-3}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The two applications' sources.
mkdir -p "$work/hoard/Sources/App" "$work/grdb/Sources/App"
cat >"$work/hoard/Package.swift" <<SWIFT
// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Hoard", path: "$repo_dir")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "Hoard", package: "Hoard")])]
)
SWIFT
{
    sed -n '/README begin: declaration/,/README end/p' "$repo_dir/Tests/HoardTests/ReadmeModel.swift" | sed '1d;$d'
    cat <<'SWIFT'

let store = try Store(path: NSTemporaryDirectory() + "app-build-\(getpid())")
let users = try store.collection(User.self)
try users.put(User(id: 1, name: "ada", age: 36))
print(try users.get(1)?.name ?? "missing")
SWIFT
} >"$work/hoard/Sources/App/main.swift"
grep -q "^struct User" "$work/hoard/Sources/App/main.swift" || {
    echo "error: the README's model was not found in Tests/HoardTests/ReadmeModel.swift" >&2
    exit 1
}
cat >"$work/grdb/Package.swift" <<'SWIFT'
// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [.package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "GRDB", package: "GRDB.swift")])]
)
SWIFT
cat >"$work/grdb/Sources/App/main.swift" <<'SWIFT'
import Foundation
import GRDB

struct User: Codable, FetchableRecord, PersistableRecord, Identifiable, Equatable {
    var id: Int64
    var name: String
    var age = 0
    var nickname: String?
}

let queue = try DatabaseQueue(path: NSTemporaryDirectory() + "app-build-\(getpid()).sqlite")
try queue.write { db in
    try db.create(table: "user", ifNotExists: true) { table in
        table.primaryKey("id", .integer)
        table.column("name", .text).notNull()
        table.column("age", .integer).notNull()
        table.column("nickname", .text)
    }
    try User(id: 1, name: "ada", age: 36).upsert(db)
}
print(try queue.read { db in try User.fetchOne(db, key: 1)?.name } ?? "missing")
SWIFT

for side in hoard grdb; do
    (cd "$work/$side" && swift package resolve >"$work/resolve-$side.log" 2>&1) || {
        cat "$work/resolve-$side.log" >&2
        exit 1
    }
done

results="$work/results"
: >"$results"
# One clean build: prints "<seconds> <modules>" and keeps the list of modules.
build() {
    local side=$1 config=$2 log="$work/build-$1-$2.log"
    (cd "$work/$side" && rm -rf .build/debug .build/release .build/*-unknown-linux-gnu .build/*-apple-macosx \
        .build/*.yaml .build/build.db)
    local start end
    start=$(date +%s.%N)
    (cd "$work/$side" && swift build -c "$config" >"$log" 2>&1) || {
        cat "$log" >&2
        exit 1
    }
    end=$(date +%s.%N)
    (cd "$work/$side" && "$(swift build -c "$config" --show-bin-path)/App" >/dev/null)
    # A package plugin (swift-argument-parser's, which SwiftPM compiles as a build tool) as plugin:NAME.
    grep -oE '^\[[0-9]+/[0-9]+\] (Compiling|Emitting module) (plugin )?[A-Za-z0-9_]+' "$log" \
        | sed -E 's/.* (Compiling|Emitting module) //; s/^plugin /plugin:/' | sort -u >"$work/modules-$side-$config"
    local seconds modules
    seconds=$(python3 -c "print(f'{$end - $start:.1f}')")
    modules=$(wc -l <"$work/modules-$side-$config")
    echo "$side $config $seconds $modules" >>"$results"
    echo "  $side $config: $seconds s, $modules modules"
}

for run in $(seq 1 "$runs"); do
    echo "run $run of $runs"
    # The sides alternate which goes first, so that neither always builds on a cooler machine.
    if ((run % 2)); then order="grdb hoard"; else order="hoard grdb"; fi
    for config in debug release; do
        for side in $order; do build "$side" "$config"; done
    done
done

echo
echo "modules the Hoard app compiled: $(paste -sd' ' "$work/modules-hoard-release")"
echo "modules the GRDB app compiled: $(paste -sd' ' "$work/modules-grdb-release")"
python3 - "$results" <<'PYTHON'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print()
print("| build | GRDB alone: runs | median | Hoard alone: runs | median | Hoard ÷ GRDB |")
print("| --- | --- | ---: | --- | ---: | ---: |")
for config in ("debug", "release"):
    times = {side: [float(r[2]) for r in rows if r[0] == side and r[1] == config] for side in ("grdb", "hoard")}
    medians = {side: statistics.median(values) for side, values in times.items()}
    spread = {side: ", ".join(f"{v:.0f}" for v in values) for side, values in times.items()}
    print(f"| {config} | {spread['grdb']} s | **{medians['grdb']:.0f} s** | {spread['hoard']} s | "
          f"**{medians['hoard']:.0f} s** | **{medians['hoard'] / medians['grdb']:.2f}×** |")
PYTHON
if grep -qE '^(Swift(Syntax|Parser|Diagnostics|Operators|BasicFormat|CompilerPlugin|IfConfig|Lexical)[A-Za-z]*|_SwiftSyntax[A-Za-z]*|VariableCodingMacrosPlugin|Vapor|Hummingbird|HummingbirdCore|PostgresNIO|NIOCore|NIOPosix)$' \
    "$work/modules-hoard-debug" "$work/modules-hoard-release"; then
    echo "error: the Hoard app compiled swift-syntax, a web framework, PostgreSQL's client or SwiftNIO" >&2
    exit 1
fi
