# Shared by the example's scripts: building, starting the two processes on loopback, requests.
# Sourced, not run. Expects `set -euo pipefail` in the caller.

example_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_dir="$(cd "$example_dir/../.." && pwd)"

source "$repo_dir/Examples/scripts/common.sh"

# Waits until FILE holds a port (the process writes it once listening); fails after 60 s or
# when the process PID has ended.
wait_for_port() {  # wait_for_port FILE PID NAME
    for _ in $(seq 600); do
        if [ -s "$1" ]; then cat "$1"; return 0; fi
        kill -0 "$2" 2>/dev/null || { echo "error: $3 ended before listening (log above)" >&2; return 1; }
        sleep 0.1
    done
    echo "error: $3 did not listen within 60 s" >&2
    return 1
}

# Starts the upstream; sets $upstream_pid and $upstream_port. Extra arguments go to it.
start_upstream() {  # start_upstream WORKDIR [ARGS…]
    local work="$1"; shift
    rm -f "$work/upstream.port"
    "$bin/upstream" --port 0 --port-file "$work/upstream.port" "$@" >>"$work/upstream.log" 2>&1 &
    upstream_pid=$!
    upstream_port=$(wait_for_port "$work/upstream.port" "$upstream_pid" upstream)
}

# Starts the service on the store WORKDIR/store; sets $service_pid and $service_port.
start_service() {  # start_service WORKDIR [ARGS…]
    local work="$1"; shift
    rm -f "$work/service.port"
    "$bin/users-service" --port 0 --port-file "$work/service.port" --store "$work/store" \
        --upstream "http://127.0.0.1:$upstream_port" "$@" >>"$work/service.log" 2>&1 &
    service_pid=$!
    service_port=$(wait_for_port "$work/service.port" "$service_pid" users-service)
}

# The status code and body of a request: sets $status and $body.
request() {  # request METHOD PATH [DATA]
    local out
    out=$(curl -s -o - -w '\n%{http_code}' -X "$1" ${3:+-H 'Content-Type: application/json' -d "$3"} \
        "http://127.0.0.1:$service_port$2")
    status="${out##*$'\n'}"
    body="${out%$'\n'*}"
}

# Sums the Prometheus samples of METRIC whose label text contains every MATCH (e.g. result="hit").
metric_sum() {  # metric_sum METRICS_TEXT METRIC [MATCH…]
    local text="$1" name="$2"; shift 2
    printf '%s\n' "$text" | awk -v name="$name" -v matches="$*" '
        BEGIN { n = split(matches, want, " ") }
        index($0, name "{") == 1 {
            for (i = 1; i <= n; i++) if (index($0, want[i]) == 0) next
            sum += $NF
        }
        END { printf "%d\n", sum }'
}
