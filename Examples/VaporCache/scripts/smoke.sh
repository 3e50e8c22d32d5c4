#!/usr/bin/env bash
# The Vapor example's check, run by the project's test command (tools/test.sh): the application
# on loopback with a store in a temporary directory; a cached route (a miss, then a hit), a
# session that counts visits; SIGTERM (exit 0); a restart on the same store that keeps the
# cached value and the session; a destroyed session; `hoard verify` of the store.
set -euo pipefail
example_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo_dir="$(cd "$example_dir/../.." && pwd)"
source "$example_dir/scripts/lib.sh"
need curl curl

# Whether two JSON texts hold the same value (the encoder's key order is not fixed).
same_json() {  # same_json A B
    python3 -c 'import json, sys; sys.exit(json.loads(sys.argv[1]) != json.loads(sys.argv[2]))' "$1" "$2"
}

build_example debug
make_work
fail() {
    echo "smoke: FAILED: $*" >&2
    echo "--- application log" >&2; tail -n 30 "$work/app.log" >&2 || true
    exit 1
}

start_app "$work" hoard
echo "smoke: the application on $app_port, store $work/store"
request GET /quotes/7
[ "$status" = 200 ] && [ "$cache" = miss ] && [[ "$body" == *'"number":7'* ]] || fail "GET /quotes/7: $status $cache $body"
first="$body"
request GET /quotes/7
[ "$status" = 200 ] && [ "$cache" = hit ] && same_json "$body" "$first" || fail "GET /quotes/7 again: $status $cache $body (first: $first)"
request POST /visits
[ "$body" = '{"visits":1}' ] || fail "POST /visits: $status $body"
request POST /visits
[ "$body" = '{"visits":2}' ] || fail "POST /visits again: $status $body"
echo "smoke: a miss then a hit; a session counted two visits"

stop_app
echo "smoke: SIGTERM: exited 0"

start_app "$work" hoard
request GET /quotes/7
[ "$status" = 200 ] && [ "$cache" = hit ] && same_json "$body" "$first" || fail "after a restart, GET /quotes/7: $status $cache $body"
request GET /visits
[ "$body" = '{"visits":2}' ] || fail "after a restart, GET /visits: $status $body"
request POST /visits
[ "$body" = '{"visits":3}' ] || fail "after a restart, POST /visits: $status $body"
request DELETE /visits
[ "$status" = 204 ] || fail "DELETE /visits: $status"
request GET /visits
[ "$body" = '{"visits":0}' ] || fail "after the session was destroyed, GET /visits: $status $body"
stop_app
echo "smoke: restart: the cached value and the session were kept; a destroyed session is gone"

"$(hoard_tool)" verify "$work/store" || fail "hoard verify found problems"
echo "smoke: passed"
