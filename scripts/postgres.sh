#!/usr/bin/env bash
# A local PostgreSQL (Debian's package) for the Dagster instance: initdb once, start, create the
# database; prints its URL. Idempotent. As root it runs the server as the `postgres` user (initdb
# refuses root). The URL names psycopg2: dagster-postgres 0.29.27 with SQLAlchemy 2.1 picks psycopg 3
# from a plain postgres_db config and fails.
#   SABOT_PG_PORT (55432), SABOT_PG_DIR (/tmp/sabot-pg-PORT), SABOT_PG_DB (dagster)
#   SABOT_PG_LISTEN (127.0.0.1): the addresses it listens on, comma-separated; the URL names the first.
#   SABOT_PG_CLIENTS: a network (CIDR) whose clients it trusts, e.g. worker hosts (deploy/hosts/).
set -euo pipefail
PORT=${SABOT_PG_PORT:-55432}
DIR=${SABOT_PG_DIR:-/tmp/sabot-pg-$PORT}
DB=${SABOT_PG_DB:-dagster}
LISTEN=${SABOT_PG_LISTEN:-127.0.0.1}
HOST=${LISTEN%%,*}
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$BIN" ] || { echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2; exit 1; }
as_pg() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi
}
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  mkdir -p "$DIR" && chown postgres "$DIR"
else
  mkdir -p "$DIR"
fi
[ -f "$DIR/data/PG_VERSION" ] || as_pg "'$BIN/initdb' -A trust -U postgres -D '$DIR/data'" >"$DIR/initdb.log"
if [ -n "${SABOT_PG_CLIENTS:-}" ] && ! grep -q "^host all all $SABOT_PG_CLIENTS trust" "$DIR/data/pg_hba.conf"; then
  as_pg "echo 'host all all $SABOT_PG_CLIENTS trust' >> '$DIR/data/pg_hba.conf'"
  as_pg "'$BIN/pg_ctl' -D '$DIR/data' status" >/dev/null 2>&1 && as_pg "'$BIN/pg_ctl' -D '$DIR/data' reload" >/dev/null
fi
if ! as_pg "'$BIN/pg_ctl' -D '$DIR/data' status" >/dev/null 2>&1; then
  as_pg "'$BIN/pg_ctl' -D '$DIR/data' -l '$DIR/server.log' -w -o \"-p $PORT -k '$DIR' -c listen_addresses=$LISTEN\" start" >/dev/null
fi
LISTENING=$(psql -h "$DIR" -p "$PORT" -U postgres -tAc "SHOW listen_addresses")
[ "$LISTENING" = "$LISTEN" ] || { echo "the server in $DIR listens on $LISTENING, not $LISTEN: stop it first" >&2; exit 1; }
psql -h "$HOST" -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1 \
  || psql -h "$HOST" -p "$PORT" -U postgres -qc "CREATE DATABASE \"$DB\""
echo "postgresql+psycopg2://postgres@$HOST:$PORT/$DB"
