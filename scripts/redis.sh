#!/usr/bin/env bash
# A local Redis (Debian's redis-server) as the Celery broker and result backend of worker hosts
# (deploy/hosts/): start it if it is not answering, print its URL. Idempotent. It binds only the
# addresses given; with no password it must not be reachable from an untrusted network.
#   SABOT_REDIS_PORT (56379), SABOT_REDIS_BIND (127.0.0.1; e.g. the coordinator's LAN address),
#   SABOT_REDIS_DIR (/tmp/sabot-redis-PORT: its pid file, log and dump)
set -euo pipefail
PORT=${SABOT_REDIS_PORT:-56379}
BIND=${SABOT_REDIS_BIND:-127.0.0.1}
DIR=${SABOT_REDIS_DIR:-/tmp/sabot-redis-$PORT}
command -v redis-server >/dev/null || { echo "Redis is not installed: apt-get install -y redis-server" >&2; exit 1; }
FIRST=${BIND%% *}
mkdir -p "$DIR"
if ! redis-cli -h "$FIRST" -p "$PORT" ping 2>/dev/null | grep -q PONG; then
  # protected-mode off: it refuses every non-loopback client without a password, and the bind
  # addresses are what limits who can connect.
  redis-server --port "$PORT" --bind $BIND --protected-mode no --daemonize yes --dir "$DIR" \
    --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --save "" --appendonly yes
  for _ in $(seq 50); do redis-cli -h "$FIRST" -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  redis-cli -h "$FIRST" -p "$PORT" ping | grep -q PONG || { echo "redis did not start: see $DIR/redis.log" >&2; exit 1; }
fi
echo "redis://$FIRST:$PORT/0"
