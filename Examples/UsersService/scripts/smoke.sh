#!/usr/bin/env bash
# The example's check, run by the project's test command (tools/test.sh): its build (a warning
# fails it), then both processes on loopback with a store in a temporary directory, a few requests, SIGTERM
# (the service must exit 0 within its shutdown timeout), a restart on the same store with the
# upstream gone (what was stored is served), conditional requests answered 304 by an upstream that
# sends max-age, and `hoard verify` of the store.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need curl curl

build_example debug

work=$(mktemp -d)
cleanup() {
    kill "${service_pid:-}" "${upstream_pid:-}" "${events_pid:-}" "${otlp_pid:-}" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "smoke: FAILED: $*" >&2
    echo "--- service log" >&2; tail -n 30 "$work/service.log" >&2 || true
    exit 1
}

start_upstream "$work" --users 100 --latency-ms 1
# A stand-in collector: the service exports its traces to it over OTLP/HTTP (checked after SIGTERM).
python3 "$example_dir/scripts/otlp-receiver.py" "$work/traces" "$work/otlp.port" &
otlp_pid=$!
otlp_port=$(wait_for_port "$work/otlp.port" "$otlp_pid" otlp-receiver)
start_service "$work" --sync-interval 3600 --shutdown-timeout 10 --otlp-endpoint "http://127.0.0.1:$otlp_port"
echo "smoke: upstream on $upstream_port, service on $service_port, store $work/store"

request GET /users/7
[ "$status" = 200 ] && [[ "$body" == *'"user_name":"user7"'* ]] || fail "GET /users/7: $status $body"
request GET /users/1000
[ "$status" = 404 ] || fail "GET /users/1000 (absent upstream): $status"
# A write: the upstream makes version 1 of user 7, the service drops its stored version 0, and the
# next read fetches the new one.
request PUT /users/7
[ "$status" = 200 ] && [[ "$body" == *'"version":1'* ]] || fail "PUT /users/7: $status $body"
request GET /users/7
[ "$status" = 200 ] && [[ "$body" == *'"version":1'* ]] || fail "GET /users/7 after the write: $status $body"
request GET '/users?ids=1,2,3,1000'
[ "$status" = 200 ] && [ "$(grep -o '"id":' <<<"$body" | wc -l)" = 3 ] || fail "GET /users?ids=…: $status $body"
request GET /users/7
request POST /sessions '{"userID": 7}'
[ "$status" = 201 ] || fail "POST /sessions: $status $body"
token=$(sed -E 's/.*"token":"([^"]+)".*/\1/' <<<"$body")
request GET "/sessions/$token"
[ "$status" = 200 ] && [[ "$body" == *'"userID":7'* ]] || fail "GET /sessions/$token: $status $body"
# Server-sent events of user 9, fed by observe: absent (nothing stored yet), stored by a read
# that fetched it, absent again after a write (its invalidation), then the new version once a
# read fetched that. The stream stays open until the SIGTERM below ends it.
curl -sN "http://127.0.0.1:$service_port/users/9/events" >"$work/events" &
events_pid=$!
events_reach() {  # events_reach COUNT: waits (at most 10 s) until the stream holds COUNT events
    for _ in $(seq 100); do
        [ "$(grep -c '^event: ' "$work/events")" -ge "$1" ] && return 0
        sleep 0.1
    done
    fail "the event stream holds $(grep -c '^event: ' "$work/events") events, not $1: $(cat "$work/events")"
}
events_reach 1
request GET /users/9
events_reach 2
request PUT /users/9
[ "$status" = 200 ] || fail "PUT /users/9: $status $body"
events_reach 3
request GET /users/9
events_reach 4
kinds=$(grep '^event: ' "$work/events" | cut -d' ' -f2 | paste -sd, -)
[ "$kinds" = "absent,user,absent,user" ] || fail "events of user 9: $kinds"
grep '^data: ' "$work/events" | sed -n 4p | grep -q '"version":1' || fail "the last event is not version 1: $(cat "$work/events")"
echo "smoke: server-sent events of user 9: $kinds"

request GET /metrics
hits=$(metric_sum "$body" hoard_gets_total 'collection="User"' 'result="hit"')
[ "$hits" -ge 1 ] || fail "no hit counted in /metrics"
echo "smoke: requests answered as expected ($hits hits counted in /metrics)"

# SIGTERM: a graceful shutdown, exit status 0, within the 10 s timeout.
started=$(date +%s)
kill -TERM "$service_pid"
code=0
wait "$service_pid" || code=$?
took=$(( $(date +%s) - started ))
[ "$code" = 0 ] || fail "the service exited with $code after SIGTERM"
[ "$took" -le 10 ] || fail "the service took ${took}s to stop"
grep -q 'stopped' "$work/service.log" || fail "no 'stopped' in the log"
# The graceful shutdown ended the event stream, so curl ends too.
for _ in $(seq 50); do kill -0 "$events_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$events_pid" 2>/dev/null && fail "the event stream outlived the service"
wait "$events_pid" || true
echo "smoke: SIGTERM: exited 0 in ${took}s"
# The exporter flushed at the shutdown: Hoard's spans reached the collector with the requests'.
for span in "read_through User" "fetch User" "commit" "http.route"; do
    grep -aqF "$span" "$work/traces" 2>/dev/null || fail "no span '$span' among the exported traces"
done
kill "$otlp_pid" 2>/dev/null || true
echo "smoke: traces exported over OTLP/HTTP (read-through miss, fetch, commit, the requests)"

# The upstream gone, a restarted service serves what it stored (a session and a user).
kill -TERM "$upstream_pid"; wait "$upstream_pid" || true
start_service "$work" --sync-interval 3600
request GET /users/7
[ "$status" = 200 ] || fail "after a restart without the upstream, GET /users/7: $status"
request GET "/sessions/$token"
[ "$status" = 200 ] || fail "after a restart, the session: $status"
request GET /users/8
[ "$status" = 502 ] || fail "GET /users/8 with the upstream gone and nothing stored: $status (expected 502)"
kill -TERM "$service_pid"; wait "$service_pid" || fail "the restarted service did not exit 0"
echo "smoke: restart: stored user and session served without the upstream; a miss is 502"

# Conditional requests: an upstream that sends each user's ETag and `Cache-Control: max-age=1`.
# User 20, read once, is stored for a second; a read after that revalidates it with its ETag in
# If-None-Match, the upstream answers 304, and the service renews the record without rewriting it
# (counted by the upstream and by the service's metric). Reads go on until both have counted one.
start_upstream "$work" --users 100 --latency-ms 1 --max-age 1
start_service "$work" --sync-interval 3600
request GET /users/20
[ "$status" = 200 ] && [[ "$body" == *'"user_name":"user20"'* ]] || fail "GET /users/20: $status $body"
renewed=0
for _ in $(seq 100); do
    request GET /users/20
    [ "$status" = 200 ] && [[ "$body" == *'"user_name":"user20"'* ]] || fail "GET /users/20 again: $status $body"
    request GET /metrics
    renewed=$(metric_sum "$body" hoard_fetch_not_modified_total 'collection="User"')
    [ "$renewed" -ge 1 ] && break
    sleep 0.2
done
[ "$renewed" -ge 1 ] || fail "no 304 renewed user 20 within 20 s (hoard_fetch_not_modified_total $renewed)"
answered=$(curl -s "http://127.0.0.1:$upstream_port/admin/not-modified")
[ "$answered" -ge 1 ] || fail "the upstream answered no request 304"
kill -TERM "$service_pid"; wait "$service_pid" || fail "the third service did not exit 0"
kill -TERM "$upstream_pid"; wait "$upstream_pid" || true
echo "smoke: conditional requests: $answered answered 304 by the upstream, $renewed renewed by the service"

"$(hoard_tool)" verify "$work/store" || fail "hoard verify found problems"
echo "smoke: passed"
