# Sourced by the scripts that need a system package: hoard_apt_install WHAT PACKAGE… installs the
# packages with apt-get when running as root on Debian or Ubuntu, and otherwise fails with the
# command to run. WHAT says what they are for. It exits the sourcing script on failure.

hoard_apt_install() {
    local what=$1
    shift
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "Installing $* with apt-get ($what)…" >&2
        local log
        log=$(mktemp)
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            echo "error: apt-get install $* failed (output above)" >&2
            exit 1
        fi
        rm -f "$log"
    else
        echo "error: missing system packages for $what: $*" >&2
        echo "       run: sudo apt-get install -y $*" >&2
        exit 1
    fi
}
