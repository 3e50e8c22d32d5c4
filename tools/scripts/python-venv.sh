# Sourced by the scripts that run Python (tools/test.sh, tools/bench/peers.sh, hitratio.sh):
#   hoard_venv DIR MODULES WHY PACKAGE...
# makes DIR a Python venv in which `import MODULES` works, installing PACKAGE... with pip when it
# does not yet; WHY says what it is for while it is set up. Python itself is ensure-deps.sh's job.
hoard_venv() {
    local dir=$1 modules=$2 why=$3
    shift 3
    if [ ! -x "$dir/bin/python" ] || ! "$dir/bin/python" -c "import $modules" >/dev/null 2>&1; then
        echo "Setting up $dir ($why)…" >&2
        python3 -m venv "$dir" >&2
        "$dir/bin/pip" install --quiet "$@" >&2
    fi
}
