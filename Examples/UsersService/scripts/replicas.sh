#!/usr/bin/env bash
# Three replicas of the service on one PostgreSQL (a throwaway cluster on loopback, as the tests
# use), held under load in five phases; one summary line per phase (figures in BENCHMARKS.md and
# docs/RELIABILITY.md):
#   1 writes     reads on every replica and writes with a wait until every replica applied them;
#                a read older than a write acknowledged as applied everywhere is a stale read
#   2 restart    the same, with PostgreSQL restarted (-m fast) in the middle
#   3 immediate  the same, with PostgreSQL restarted -m immediate (a crash, for PostgreSQL)
#   4 down       PostgreSQL stopped for 60 s under load, then started
#   5 sigkill    a replica killed with SIGKILL while 100,000 users change through another, then
#                restarted on its store
# After each fault: the time until every replica has applied every change (a write on each
# replica, with a wait, once PostgreSQL accepts connections), and a check that every replica
# serves the upstream's version of every user written (an older one is a lost invalidation).
# Release build with the Replicas trait. Takes about 5 minutes once built.
# Usage: scripts/replicas.sh [READS_PER_SECOND] [SECONDS_PER_PHASE] [READERS]   (defaults 10000, 30, 64)
# READERS: the load generator's concurrent readers; each waits for its answer, so the reads a
# second are at most READERS over a read's latency.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need curl curl
reads="${1:-10000}"
seconds="${2:-30}"
readers="${3:-64}"

build_example release --traits Replicas
source "$repo_dir/tools/scripts/postgres.sh"

work=$(mktemp -d)
pids=()
cleanup() {
    kill "${pids[@]}" "${upstream_pid:-}" "${load_pid:-}" 2>/dev/null || true
    hoard_pg_stop
    rm -rf "$work"
}
trap cleanup EXIT
psql() { "$HOARD_PG_BIN/psql" -h "$HOARD_PG_HOST" -p "$HOARD_PG_PORT" -U "$HOARD_PG_USER" -d "$HOARD_PG_DATABASE" -tAq "$@"; }
pg_ctl() { $HOARD_PG_AS "$HOARD_PG_BIN/pg_ctl" -D "$HOARD_PG_DATA" -w "$@" >/dev/null; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Replica N (1…3) on its own store; its port in ports[N].
ports=()
start_replica() {  # start_replica N
    mkdir -p "$work/r$1"
    start_service "$work/r$1" --ttl 86400 --sync-interval 86400 --log-level warning \
        --postgres-port "$HOARD_PG_PORT" --postgres-user "$HOARD_PG_USER" --postgres-database "$HOARD_PG_DATABASE" \
        --replica-name "r$1"
    pids[$1]=$service_pid
    ports[$1]=$service_port
}
all_ports() { local IFS=,; echo "${ports[*]}"; }

start_upstream "$work" --users 200000 --latency-ms 5
for n in 1 2 3; do start_replica "$n"; done
load() { "$bin/replica-load" "$@"; }
endpoints=(--services "$(all_ports)" --upstream "$upstream_port")

# Until every replica is connected again, then until a write on each (at once, with a wait) is
# applied by all: each write's publication carries its replica's whole outbox, so every change
# made before is then applied everywhere. (An outbox is never empty on all three replicas at one
# moment under 100 writes/s, so "every outbox empty" is not what is waited for.) Prints the
# milliseconds since $1.
caught_up() {  # caught_up SINCE_MS
    local n status
    for _ in $(seq 12000); do
        local ready=1
        for n in 1 2 3; do
            status=$(curl -s "http://127.0.0.1:${ports[$n]}/replication")
            [[ "$status" == *'"connected":true'* ]] || ready=0
        done
        [ "$ready" = 1 ] && break
        sleep 0.01
    done
    local ready_ms=$(($(now_ms) - $1))
    for _ in $(seq 30); do
        local writes=() applied=1
        for n in 1 2 3; do
            curl -s -o /dev/null -D "$work/marker$n" -X PUT "http://127.0.0.1:${ports[$n]}/users/$((199990 + n))?wait=2000" &
            writes+=($!)
        done
        wait "${writes[@]}" || true
        for n in 1 2 3; do grep -qi '^hoard-applied: true' "$work/marker$n" || applied=0; done
        if [ "$applied" = 1 ]; then echo "$(($(now_ms) - $1)) ms (all connected: $ready_ms ms)"; return 0; fi
    done
    echo "error: the replicas did not catch up" >&2
    return 1
}

verify() { load verify "${endpoints[@]}" --ids 1-1000 | sed 's/^/          /'; }

echo "replicas: PostgreSQL :$HOARD_PG_PORT, upstream :$upstream_port (5 ms), replicas $(all_ports); $reads reads/s, 100 writes/s on 1,000 users"
load verify "${endpoints[@]}" --ids 1-1000 >/dev/null  # every replica holds the 1,000 users

# 1. Writes with reads on every replica.
echo "writes    $(load run "${endpoints[@]}" --seconds "$seconds" --reads-per-second "$reads" --readers "$readers")"
verify

# 2 and 3. PostgreSQL restarted under load.
for mode in fast immediate; do
    load run "${endpoints[@]}" --seconds "$seconds" --reads-per-second "$reads" --readers "$readers" >"$work/load.out" &
    load_pid=$!
    sleep $((seconds / 3))  # let the load run before the fault (timing of the fault, not synchronization)
    began=$(now_ms)
    pg_ctl restart -m "$mode"
    up=$(now_ms)
    caught=$(caught_up "$up")
    wait "$load_pid"
    echo "restart   -m $mode: PostgreSQL back after $((up - began)) ms, every replica caught up $caught later; $(cat "$work/load.out")"
    verify
done

# 4. PostgreSQL down for 60 s under load: reads from the stores, writes into the outboxes.
load run "${endpoints[@]}" --seconds 80 --reads-per-second "$reads" --readers "$readers" --wait-ms 100 >"$work/load.out" &
load_pid=$!
sleep 5
pg_ctl stop -m fast
most=0
for _ in $(seq 60); do  # the outboxes' depth, once a second while PostgreSQL is down
    for n in 1 2 3; do
        depth=$(curl -s "http://127.0.0.1:${ports[$n]}/replication" | sed 's/.*"pending":\([0-9]*\).*/\1/')
        [ "${depth:-0}" -gt "$most" ] && most=$depth
    done
    sleep 1
done
pg_ctl start -l "$(dirname "$HOARD_PG_DATA")/server.log" -o "-p $HOARD_PG_PORT -k $(dirname "$HOARD_PG_DATA") -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
up=$(now_ms)
caught=$(caught_up "$up")
wait "$load_pid"
echo "down 60 s: the largest outbox $most keys (of 1,000 users); every replica caught up $caught after PostgreSQL was back; $(cat "$work/load.out")"
verify

# 5. A replica killed while 100,000 users change through another, then restarted.
load verify --services "${ports[3]}" --upstream "$upstream_port" --ids 100001-110000 >/dev/null  # stored, never changed
load verify --services "${ports[3]}" --upstream "$upstream_port" --ids 1-20000 >/dev/null        # stored, then changed
kill -KILL "${pids[3]}"
wait "${pids[3]}" 2>/dev/null || true
bulk=$(load bulk --service "${ports[1]}" --ids 1-100000 --seconds 60)
until [[ "$(curl -s "http://127.0.0.1:${ports[1]}/replication")" == *'"pending":0,'* ]]; do sleep 0.01; done
head=$(psql -c "SELECT greatest(trimmed_through, coalesce((SELECT max(id) FROM hoard_changes), 0)) FROM hoard_bus")
began=$(now_ms)
start_replica 3
for _ in $(seq 6000); do  # until it has applied the log's head
    applied=$(curl -s "http://127.0.0.1:${ports[3]}/replication" | sed 's/.*"applied":\([0-9]*\).*/\1/')
    [ "${applied:-0}" -ge "$head" ] && break
    sleep 0.01
done
caught=$(($(now_ms) - began))
echo "sigkill   $bulk while r3 was down; r3 applied them all ${caught} ms after it was started (listening included)"
load verify --services "${ports[3]}" --upstream "$upstream_port" --ids 1-100000 | sed 's/^/          /'
load verify --services "${ports[3]}" --upstream "$upstream_port" --ids 100001-110000 --expect-stored | sed 's/^/          /'
