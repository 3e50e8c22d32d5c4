#!/usr/bin/env bash
# Three replicas of the service under read and write load while faults are drawn at random for at
# least MINUTES minutes, and a checker over the history (docs/REPLICAS.md, "The lease"):
#   partition  one replica cut from PostgreSQL (both ways, or one way) for lease + 1 to 4 s
#   pause      one replica stopped (SIGSTOP) for lease + 1 to 3 s, then continued
#   immediate  PostgreSQL restarted -m immediate (a crash, for PostgreSQL)
#   down       PostgreSQL stopped for 30 s, then started
#   sigkill    one replica killed with SIGKILL, then restarted on its store
#   holder     with --shared-fills: one replica killed with SIGKILL while it fetches a user under
#              its fill lease (the upstream holds that fetch), then the others read the user: each
#              must answer within the fill lease and 2 s, after one more call of the upstream for it
# Each kind is drawn at least five times (a shuffled deck of five of each, then at random until
# the time is up), with 5 to 15 s between faults. Every replica reaches PostgreSQL through a proxy
# of its own (tools/scripts/tcp-proxy.py) that the partitions cut.
#
# The checker is replica-load's: every write goes through a replica with a wait for every replica
# (PUT /users/:id?wait=…), which answers the log position it waited for; a read that began after a
# wait for position p returned true must see, of its user, a version at least as new as every
# write announced up to p (every write whose own position is at most p). A read that a replica
# does not answer (killed, paused: refused, reset, or no answer within a second) is asked of
# another, as a load balancer would, and counted as rerouted, not failed; a read that no replica
# answers fails. At the end, once every replica has caught up, `verify` compares every user
# written on every replica with the upstream (an older version is a lost invalidation). A failed
# run keeps the replicas' logs, the load's output and, for the first five users read stale, what
# PostgreSQL and the replicas held for the user when the read was seen (stale.txt).
# Release build with the Replicas trait; lease 3 s, heartbeat 0.5 s.
# With --shared-fills the replicas share the users' fetches (a fill lease of 500 ms).
# Usage: scripts/lease-faults.sh [MINUTES] [READS_PER_SECOND] [--shared-fills]   (defaults 10, 3000)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need curl curl
minutes="${1:-10}"
reads="${2:-3000}"
sharing="${3:-}"
[ -z "$sharing" ] || [ "$sharing" = --shared-fills ] || { echo "usage: $0 [MINUTES] [READS_PER_SECOND] [--shared-fills]" >&2; exit 2; }
lease_ms=3000
heartbeat_ms=500
fill_lease_ms=500
replica_extra=()
[ -n "$sharing" ] && replica_extra=(--shared-fills-lease-ms "$fill_lease_ms")

build_example release --traits Replicas
source "$repo_dir/tools/scripts/postgres.sh"

work=$(mktemp -d)
pids=()
proxies=()
cleanup() {
    local status=$?
    kill -CONT "${pids[@]}" 2>/dev/null || true
    kill "${pids[@]}" "${proxies[@]}" "${upstream_pid:-}" "${load_pid:-}" 2>/dev/null || true
    hoard_pg_stop
    # A failed run keeps what the replicas and the load said, to find the reads it names.
    if [ "$status" != 0 ] && [ -d "$work" ]; then
        kept="${TMPDIR:-/tmp}/lease-faults-$(date +%Y%m%dT%H%M%S)"
        mkdir -p "$kept"
        for n in 1 2 3; do cp "$work/r$n/service.log" "$kept/r$n.log" 2>/dev/null || true; done
        cp "$work/load.out" "$work/stale.txt" "$kept/" 2>/dev/null || true
        echo "lease-faults: the replicas' logs and the load's output are kept in $kept" >&2
    fi
    rm -rf "$work"
}
trap cleanup EXIT
pg_ctl() { $HOARD_PG_AS "$HOARD_PG_BIN/pg_ctl" -D "$HOARD_PG_DATA" -w "$@" >/dev/null; }
pg_log="$(dirname "$HOARD_PG_DATA")/server.log"
# PostgreSQL must be running after each of its faults; otherwise the run stops, with its log.
pg_running() {
    $HOARD_PG_AS "$HOARD_PG_BIN/pg_ctl" -D "$HOARD_PG_DATA" status >/dev/null && return 0
    tail -n 30 "$pg_log" >&2
    echo "error: PostgreSQL is not running (its log above)" >&2
    exit 1
}
pg_start() {
    pg_ctl start -l "$pg_log" \
        -o "-p $HOARD_PG_PORT -k $(dirname "$HOARD_PG_DATA") -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_upstream "$work" --users 200000 --latency-ms 5

# Replica N (1…3): its proxy to PostgreSQL (control file $work/pN.control), then the service on
# its own store and a port of its own that stays the same across a restart.
ports=()
start_replica() {  # start_replica N
    mkdir -p "$work/r$1"
    "$bin/users-service" --port "${ports[$1]}" --store "$work/r$1/store" --upstream "http://127.0.0.1:$upstream_port" \
        --ttl 86400 --sync-interval 86400 --log-level warning \
        --postgres-port "$(cat "$work/p$1.port")" --postgres-user "$HOARD_PG_USER" \
        --postgres-database "$HOARD_PG_DATABASE" --replica-name "r$1" --lease-ms "$lease_ms" \
        --heartbeat-ms "$heartbeat_ms" "${replica_extra[@]}" >>"$work/r$1/service.log" 2>&1 &
    pids[$1]=$!
    for _ in $(seq 600); do
        curl -s -o /dev/null "http://127.0.0.1:${ports[$1]}/replication" && return 0
        kill -0 "${pids[$1]}" 2>/dev/null || { echo "error: replica $1 ended (log: $work/r$1/service.log)" >&2; return 1; }
        sleep 0.1
    done
    echo "error: replica $1 did not listen within 60 s" >&2
    return 1
}
for n in 1 2 3; do
    echo both >"$work/p$n.control"
    python3 "$repo_dir/tools/scripts/tcp-proxy.py" "$HOARD_PG_PORT" "$work/p$n.port" "$work/p$n.control" &
    proxies[$n]=$!
    until [ -s "$work/p$n.port" ]; do sleep 0.05; done
    ports[$n]=$(free_port)
    start_replica "$n"
done
all_ports() { local IFS=,; echo "${ports[*]}"; }
endpoints=(--services "$(all_ports)" --upstream "$upstream_port")
load() { "$bin/replica-load" "$@"; }
load verify "${endpoints[@]}" --ids 1-1000 >/dev/null  # every replica holds the 1,000 users

# The load runs through the whole fault run and a minute and a half after it.
load_seconds=$((minutes * 60 + 90))
load run "${endpoints[@]}" --seconds "$load_seconds" --reads-per-second "$reads" --readers 32 \
    --writes-per-second 50 --wait-ms 10000 --read-timeout-ms 1000 --reroute >"$work/load.out" 2>&1 &
load_pid=$!
began=$(date +%s)
# Each stale read the load names (it says so at once, on its standard error), with what
# PostgreSQL and every replica hold for the user at that moment: kept with a failed run's logs.
psql_rows() { "$HOARD_PG_BIN/psql" -h "$HOARD_PG_HOST" -p "$HOARD_PG_PORT" -U "$HOARD_PG_USER" -d "$HOARD_PG_DATABASE" -Aq -c "$1" 2>&1 || true; }
watch_stale_reads() {
    local seen=" " id port version floor at n
    while kill -0 "$load_pid" 2>/dev/null; do
        sleep 0.2
        while read -r _ id port version floor at; do
            [[ $seen == *" $id "* ]] && continue
            seen+="$id "
            {
                echo "user $id on :$port: version $version below $floor, asked at $at UTC; looked at $(date -u +%T.%N)"
                psql_rows "SELECT began_at, lease_token, lease_until, filled_at, expires_at, encode(record, 'hex') AS record FROM hoard_fills WHERE key = hoard_key_int($id)"
                psql_rows "SELECT id, origin, kind, created_at FROM hoard_changes WHERE hoard_key_int($id) = ANY(keys) OR kind <> 0 ORDER BY id"
                psql_rows "SELECT name, store_id, applied, lease_until, now() FROM hoard_replicas"
                for n in 1 2 3; do
                    echo "r$n :${ports[$n]} $(curl -s --max-time 2 "http://127.0.0.1:${ports[$n]}/users/$id") $(curl -s --max-time 2 "http://127.0.0.1:${ports[$n]}/replication")"
                done
                echo "upstream $(curl -s --max-time 2 "http://127.0.0.1:$upstream_port/users/$id")"
            } >>"$work/stale.txt"
        done < <(grep '^STALE ' "$work/load.out" | head -n 5)
    done
}
watch_stale_reads &
echo "lease-faults: PostgreSQL :$HOARD_PG_PORT, upstream :$upstream_port, replicas $(all_ports) (lease ${lease_ms} ms, heartbeat ${heartbeat_ms} ms); $reads reads/s and 50 writes/s on 1,000 users for ${load_seconds} s"

kinds=(partition pause immediate down sigkill)
[ -n "$sharing" ] && kinds+=(holder)
psql_count() { "$HOARD_PG_BIN/psql" -h "$HOARD_PG_HOST" -p "$HOARD_PG_PORT" -U "$HOARD_PG_USER" -d "$HOARD_PG_DATABASE" -tAq -c "$1" 2>/dev/null || echo 0; }
holders=0
holder_worst_ms=0
mapfile -t deck < <(for kind in "${kinds[@]}"; do for _ in 1 2 3 4 5; do echo "$kind"; done; done | shuf)
declare -A drawn=()
drawn_total=0
# Between faults: the time to show whether the replicas serve again (a pause of 5 to 15 s).
gap() { sleep $((5 + RANDOM % 11)); }
while true; do
    if [ "$drawn_total" -lt "${#deck[@]}" ]; then
        kind="${deck[$drawn_total]}"
    else
        [ $(($(date +%s) - began)) -ge $((minutes * 60)) ] && break
        kind="${kinds[$((RANDOM % ${#kinds[@]}))]}"
    fi
    n=$((RANDOM % 3 + 1))
    at="$(($(date +%s) - began))s (at $(date -u +%T) UTC)"
    case "$kind" in
    partition)
        ways=(none to-server to-client)
        way="${ways[$((RANDOM % 3))]}"
        length=$((lease_ms / 1000 + 1 + RANDOM % 4))
        echo "$way" >"$work/p$n.control"
        sleep "$length"
        echo both >"$work/p$n.control"
        echo "  ${at} partition: r$n, forwarding $way, ${length} s"
        ;;
    pause)
        length=$((lease_ms / 1000 + 1 + RANDOM % 3))
        kill -STOP "${pids[$n]}"
        sleep "$length"
        kill -CONT "${pids[$n]}"
        echo "  ${at} pause: r$n stopped for ${length} s"
        ;;
    immediate)
        start=$(now_ms)
        pg_ctl restart -m immediate -l "$pg_log"
        echo "  ${at} immediate: PostgreSQL back after $(($(now_ms) - start)) ms"
        ;;
    down)
        pg_ctl stop -m fast
        sleep 30
        pg_start
        echo "  ${at} down: PostgreSQL stopped for 30 s"
        ;;
    sigkill)
        kill -KILL "${pids[$n]}"
        wait "${pids[$n]}" 2>/dev/null || true
        start=$(now_ms)
        start_replica "$n"
        echo "  ${at} sigkill: r$n killed, listening again after $(($(now_ms) - start)) ms"
        ;;
    holder)
        # A user the load does not read: only these requests fetch it.
        holders=$((holders + 1))
        id=$((200000 - holders))
        curl -s -o /dev/null -X PUT --data "$id 60000" "http://127.0.0.1:$upstream_port/admin/hold"
        curl -s -o /dev/null --max-time 70 "http://127.0.0.1:${ports[$n]}/users/$id" &
        leased=
        for _ in $(seq 250); do
            [ "$(psql_count "SELECT count(*) FROM hoard_fills WHERE key = hoard_key_int($id) AND lease_token IS NOT NULL")" = 1 ] && { leased=1; break; }
            sleep 0.02
        done
        [ -n "$leased" ] || { echo "error: r$n took no fill lease for user $id within 5 s" >&2; exit 1; }
        kill -KILL "${pids[$n]}"
        wait "${pids[$n]}" 2>/dev/null || true
        start=$(now_ms)
        # Both at once: one takes the lease over once it runs out, the other waits for its fill.
        codes=$(
            for m in 1 2 3; do
                [ "$m" = "$n" ] || curl -s -o /dev/null -w '%{http_code} ' --max-time 10 "http://127.0.0.1:${ports[$m]}/users/$id" &
            done
            wait
        )
        took=$(($(now_ms) - start))
        [ "$took" -gt "$holder_worst_ms" ] && holder_worst_ms=$took
        [ "$codes" = "200 200 " ] || { echo "error: the waiters of r$n's lease answered '$codes'" >&2; exit 1; }
        [ "$took" -le $((fill_lease_ms + 2000)) ] || { echo "error: the waiters of r$n's lease took $took ms" >&2; exit 1; }
        # The killed fetch, then the one that took its lease over: the other waiter took its fill.
        calls=$(curl -s "http://127.0.0.1:$upstream_port/admin/calls?id=$id" | tr -d '\n')
        [ "$calls" = 2 ] || { echo "error: user $id was fetched $calls times, not 2" >&2; exit 1; }
        start_replica "$n"
        echo "  ${at} holder: r$n killed fetching user $id under its fill lease; the others answered in $took ms"
        ;;
    esac
    pg_running
    drawn[$kind]=$((${drawn[$kind]:-0} + 1))
    drawn_total=$((drawn_total + 1))
    gap
done
faults_seconds=$(($(date +%s) - began))

wait "$load_pid"
load_pid=
summary="faults over ${faults_seconds} s:"
for kind in "${kinds[@]}"; do summary+=" $kind ${drawn[$kind]:-0}"; done
echo "$summary"
echo "load: $(grep -v '^STALE ' "$work/load.out")"
echo "upstream: $(curl -s "http://127.0.0.1:$upstream_port/admin/calls" | tr -d '\n') calls of GET /users/:id"
if [ -n "$sharing" ]; then
    echo "holder faults: the waiters answered within $holder_worst_ms ms at worst (fill lease $fill_lease_ms ms)"
    for n in 1 2 3; do echo "r$n: $(curl -s "http://127.0.0.1:${ports[$n]}/replication")"; done
fi

# Every replica caught up: a write on each with a wait until all applied it, then every user
# written, on every replica, against the upstream.
for _ in $(seq 60); do
    applied=1
    for n in 1 2 3; do
        header=$(curl -s -o /dev/null -D - -X PUT "http://127.0.0.1:${ports[$n]}/users/$((199990 + n))?wait=5000")
        grep -qi '^hoard-applied: true' <<<"$header" || applied=0
    done
    [ "$applied" = 1 ] && break
done
load verify "${endpoints[@]}" --ids 1-1000
grep -q "failed 0, stale 0" <<<"$(head -c 200 "$work/load.out")" || { echo "error: failed or stale reads (above)" >&2; exit 1; }
for kind in "${kinds[@]}"; do
    [ "${drawn[$kind]:-0}" -ge 5 ] || { echo "error: $kind was drawn fewer than 5 times" >&2; exit 1; }
done
