#!/bin/sh
# Initialises the cluster on first start from POSTGRES_USER (postgres), POSTGRES_PASSWORD
# (required) and POSTGRES_DB (the user's name), then runs the server as the postgres user,
# listening on every address with password (scram-sha-256) authentication.
set -eu
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid postgres --regid postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
    user="${POSTGRES_USER:-postgres}"
    database="${POSTGRES_DB:-$user}"
    password_file="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
    initdb --username="$user" --pwfile="$password_file" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    rm -f "$password_file"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$database" != postgres ]; then
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        psql -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres --set=database="$database" \
            --set=owner="$user" >/dev/null <<'SQL'
CREATE DATABASE :"database" OWNER :"owner";
SQL
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    fi
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
fi
exec "$@"
