# Shared by the examples' scripts (Examples/*/scripts/lib.sh source it): installing a missing
# command, building an example, the `hoard` tool of this clone. Sourced, not run; expects
# $example_dir and $repo_dir, and `set -euo pipefail` in the caller.

# Installs a Debian package when its command is missing (as root), or says what to run.
need() {  # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    source "$repo_dir/tools/scripts/apt-install.sh"
    hoard_apt_install "the example's scripts" "$2"
}

# Builds the example in CONFIG (debug or release), with any further arguments (`--traits …`), and
# sets $bin to its binaries' directory. The examples build in the clone's own build folder (.build),
# where the test command has built SwiftNIO, Hummingbird, Vapor and postgres-nio already: only
# Hoard's modules are compiled again (an example asks for other traits), and the example's own
# code. (The next build of Hoard itself compiles its modules back.) An error or a warning in the
# example's own sources fails the script.
# HOARD_BUILD_FLAGS (tools/test.sh sets it) are added to every build, as the clone's own build had them.
build_example() {  # build_example CONFIG [ARGS…]
    local config="$1" scratch="$repo_dir/.build" log
    shift
    # Run on its own, on a fresh machine, a script needs liblmdb as the test command does.
    source "$repo_dir/tools/scripts/ensure-deps.sh"
    # shellcheck disable=SC2206
    local flags=(${HOARD_BUILD_FLAGS:-})
    set -- "${flags[@]}" "$@"
    log=$(mktemp)
    if ! (cd "$example_dir" && swift build -c "$config" --scratch-path "$scratch" "$@") >"$log" 2>&1; then
        grep -E "error:" "$log" >&2 || tail -n 20 "$log" >&2
        rm -f "$log"
        return 1
    fi
    if grep -E "^$example_dir/Sources/.*: (warning|error):" "$log" >&2; then
        echo "error: the example builds with warnings (above)" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
    bin="$(cd "$example_dir" && swift build -c "$config" --scratch-path "$scratch" "$@" --show-bin-path)"
}

# Prints the path of this clone's `hoard` tool (debug, or CONFIG), built when missing.
hoard_tool() {  # hoard_tool [CONFIG]
    local config="${1:-debug}" path
    # shellcheck disable=SC2206
    local flags=(${HOARD_BUILD_FLAGS:-})
    path="$(cd "$repo_dir" && swift build "${flags[@]}" -c "$config" --show-bin-path)/hoard"
    [ -x "$path" ] || (cd "$repo_dir" && swift build "${flags[@]}" -c "$config" --product hoard >/dev/null)
    echo "$path"
}
