#!/usr/bin/env bash
# What an application that depends on Hoard alone builds: a new package beside a temporary copy
# of nothing but its own main.swift, depending on this clone by path without traits, built clean
# (debug, its own build folder). Prints the time, the packages SwiftPM fetched, the modules it
# compiled, and fails if any of them is Vapor, Hummingbird, PostgreSQL's client or SwiftNIO.
#
#   tools/bench/app-build.sh [debug|release]
set -euo pipefail
repo_dir="$(cd "$(dirname "$0")/../.." && pwd)"
config="${1:-debug}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/App/Sources/App"
cat >"$work/App/Package.swift" <<SWIFT
// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Hoard", path: "$repo_dir")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "Hoard", package: "Hoard")])]
)
SWIFT
cat >"$work/App/Sources/App/main.swift" <<'SWIFT'
import Foundation
import Hoard

@VariablyCoded
struct Note: Identifiable, Sendable {
    var id: Int64
    var text: String
    static let keySets = KeySets<Note>(local: [1: [\.id: "ID", \.text: "TEXT"]])
}

let store = try Store(path: NSTemporaryDirectory() + "app-build-\(getpid())")
let notes = try store.collection(Note.self)
try notes.put(Note(id: 1, text: "hello"))
print(try notes.get(1)?.text ?? "missing")
SWIFT
cd "$work/App"
start=$(date +%s.%N)
swift build -c "$config" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
end=$(date +%s.%N)
"$(swift build -c "$config" --show-bin-path)/App" >/dev/null
modules=$(grep -oE '^\[[0-9]+/[0-9]+\] (Compiling|Emitting module) [A-Za-z0-9_]+' "$work/build.log" \
    | awk '{print $NF}' | sort -u)
fetched=$(ls .build/checkouts | sort)
echo "clean $config build of an app that depends on Hoard alone: $(python3 -c "print(round($end - $start))") s"
echo "packages fetched: $(echo "$fetched" | paste -sd' ')"
echo "modules compiled ($(echo "$modules" | wc -l)): $(echo "$modules" | paste -sd' ')"
if echo "$modules" | grep -qE '^(Vapor|Hummingbird|HummingbirdCore|PostgresNIO|NIOCore|NIOPosix)$'; then
    echo "error: a web framework, PostgreSQL's client or SwiftNIO was compiled" >&2
    exit 1
fi
