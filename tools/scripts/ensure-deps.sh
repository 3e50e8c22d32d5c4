# Sourced by tools/demo.sh and tools/test.sh: makes sure the system packages Hoard builds
# against are installed. Hoard links the system liblmdb (Debian: liblmdb-dev); nothing of
# LMDB is vendored. As root it installs what is missing with apt; otherwise it says what to run.

hoard_missing=()
command -v swift >/dev/null 2>&1 || { echo "error: the Swift toolchain (swift) is not on PATH; install it from swift.org first" >&2; exit 1; }
if ! { [ -f /usr/include/lmdb.h ] || [ -f /usr/local/include/lmdb.h ] || [ -f /opt/homebrew/include/lmdb.h ]; }; then
    hoard_missing+=(liblmdb-dev)
fi
command -v pkg-config >/dev/null 2>&1 || hoard_missing+=(pkg-config)
# The interoperability test reads a store from Python (the lmdb and cbor2 packages, in a venv).
command -v python3 >/dev/null 2>&1 || hoard_missing+=(python3)
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || hoard_missing+=(python3-venv)

if [ ${#hoard_missing[@]} -gt 0 ]; then
    if [ "$(uname -s)" = Darwin ]; then
        echo "error: missing ${hoard_missing[*]}; run: brew install lmdb pkg-config python3" >&2
        exit 1
    fi
    source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
    hoard_apt_install "building Hoard" "${hoard_missing[@]}"
fi
unset hoard_missing
