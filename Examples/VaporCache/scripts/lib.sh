# Shared by the Vapor example's scripts: starting and stopping the application on loopback,
# requests. Sourced, not run; expects $example_dir and $repo_dir, and `set -euo pipefail`.

source "$repo_dir/Examples/scripts/common.sh"

# Makes the temporary directory $work, removed (and the application stopped) when the script exits.
make_work() {
    work=$(mktemp -d)
    trap 'kill "${app_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
}

# Starts the application with CACHE (hoard, memory or none) on the store WORKDIR/store; sets
# $app_pid and $app_port once /health answers (fails after 60 s or when the process ended).
start_app() {  # start_app WORKDIR CACHE
    app_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    HOARD_EXAMPLE_CACHE="$2" HOARD_EXAMPLE_STORE="$1/store" "$bin/VaporCache" serve --hostname 127.0.0.1 \
        --port "$app_port" >>"$1/app.log" 2>&1 &
    app_pid=$!
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$app_port/health" >/dev/null 2>&1 && return 0
        kill -0 "$app_pid" 2>/dev/null || { echo "error: the application ended before listening" >&2; return 1; }
        sleep 0.1
    done
    echo "error: the application did not listen within 60 s" >&2
    return 1
}

# Sends SIGTERM and waits: the application must exit 0 within 10 s.
stop_app() {
    local started code=0
    started=$(date +%s)
    kill -TERM "$app_pid"
    wait "$app_pid" || code=$?
    [ "$code" = 0 ] || fail "the application exited with $code after SIGTERM"
    [ $(( $(date +%s) - started )) -le 10 ] || fail "the application took more than 10 s to stop"
}

# A request with the session's cookie jar ($work/cookies): sets $status, $body and $cache (the
# X-Cache header, empty when absent).
request() {  # request METHOD PATH
    local out headers="$work/headers"
    out=$(curl -s -o - -w '\n%{http_code}' -X "$1" -b "$work/cookies" -c "$work/cookies" -D "$headers" \
        "http://127.0.0.1:$app_port$2")
    status="${out##*$'\n'}"
    body="${out%$'\n'*}"
    cache=$(tr -d '\r' <"$headers" | awk -F': ' 'tolower($1) == "x-cache" { print $2 }')
}
