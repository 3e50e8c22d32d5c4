# Sourced by tools/test.sh (and scripts that need one): starts a throwaway PostgreSQL cluster on
# loopback for the tests, and stops it when the sourcing shell exits. Installs Debian's
# `postgresql` with apt when it is missing (as root). PostgreSQL refuses to run as root, so as
# root the cluster belongs to the `postgres` system user the package creates.
#
# Exports: HOARD_PG_HOST, HOARD_PG_PORT, HOARD_PG_USER (a superuser, trust authentication on
# loopback), HOARD_PG_DATABASE, HOARD_PG_DATA and HOARD_PG_BIN (for tests that restart it),
# HOARD_PG_AS (the command prefix that runs pg_ctl as the cluster's owner).

hoard_pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

if [ -z "$(hoard_pg_bin)" ]; then
    source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
    hoard_apt_install "a throwaway PostgreSQL server" postgresql
fi

HOARD_PG_BIN=$(hoard_pg_bin)
hoard_pg_dir=$(mktemp -d /tmp/hoard-pg.XXXXXX)
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "error: no 'postgres' user to run PostgreSQL as" >&2; exit 1; }
    chown postgres: "$hoard_pg_dir"
    # From /: the postgres user may not enter the directory this runs in (a clone in a 0700
    # folder), and PostgreSQL's tools warn when they cannot.
    # (Absolute paths: the tests run the prefix's first word as the program.)
    HOARD_PG_AS="$(command -v env) -C / $(command -v runuser) -u postgres --"
else
    HOARD_PG_AS=""
fi
HOARD_PG_DATA="$hoard_pg_dir/data"
HOARD_PG_HOST=127.0.0.1
HOARD_PG_USER=hoard
HOARD_PG_DATABASE=hoard
# A port the kernel says is free now.
HOARD_PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

hoard_pg_stop() {
    $HOARD_PG_AS "$HOARD_PG_BIN/pg_ctl" -D "$HOARD_PG_DATA" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$hoard_pg_dir"
}

if ! $HOARD_PG_AS "$HOARD_PG_BIN/initdb" -D "$HOARD_PG_DATA" -U "$HOARD_PG_USER" -A trust -E UTF8 \
    --no-sync >"$hoard_pg_dir/initdb.log" 2>&1; then
    cat "$hoard_pg_dir/initdb.log" >&2
    echo "error: initdb failed (output above)" >&2
    exit 1
fi
if ! $HOARD_PG_AS "$HOARD_PG_BIN/pg_ctl" -D "$HOARD_PG_DATA" -l "$hoard_pg_dir/server.log" -w -t 60 \
    -o "-p $HOARD_PG_PORT -k $hoard_pg_dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" \
    start >/dev/null; then
    cat "$hoard_pg_dir/server.log" >&2
    echo "error: PostgreSQL did not start (its log is above)" >&2
    hoard_pg_stop
    exit 1
fi
"$HOARD_PG_BIN/psql" -h "$HOARD_PG_HOST" -p "$HOARD_PG_PORT" -U "$HOARD_PG_USER" -d postgres -q \
    -c "CREATE DATABASE $HOARD_PG_DATABASE" >/dev/null
export HOARD_PG_HOST HOARD_PG_PORT HOARD_PG_USER HOARD_PG_DATABASE HOARD_PG_DATA HOARD_PG_BIN HOARD_PG_AS
echo "PostgreSQL $("$HOARD_PG_BIN/postgres" --version | awk '{print $3}') on $HOARD_PG_HOST:$HOARD_PG_PORT for the tests" >&2
