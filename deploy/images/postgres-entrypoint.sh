#!/bin/bash
# The subset of the official postgres image's entrypoint that muster (and testcontainers)
# rely on: initialise PGDATA once from POSTGRES_* and serve on 0.0.0.0:5432 with passwords.
set -euo pipefail
user=${POSTGRES_USER:-postgres} db=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # Single-user mode: no server is listening yet, so no client sees a half-made database.
    echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
echo "postgres-entrypoint: starting PostgreSQL 15 (stand-in for postgres:16)"
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
