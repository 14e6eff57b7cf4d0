#!/usr/bin/env bash
# The coordinator of a deployment with worker hosts. It holds the Dagster instance's Postgres and
# the Celery broker (Debian's postgresql and redis-server), both listening on its address for the
# worker hosts, and runs the daemon (and the UI) whose runs orchestrate here and execute their
# steps on the workers (deploy/hosts/worker.sh).
#   coordinator.sh services   start Postgres and Redis; print the environment every host needs
#   coordinator.sh daemon     the daemon, in the foreground (queued runs, backfills, run monitoring)
#   coordinator.sh ui         the UI, in the foreground, on the coordinator's address
#   coordinator.sh store-worker  the one worker of the store queue: steps that write the store
#                                run here, one at a time (sabot_assets/hosts.py)
#   SABOT_COORDINATOR_ADDRESS (required)  the address the workers reach this host on
#   SABOT_WORKER_NETWORK (required for services)  the network (CIDR) Postgres trusts the workers from
#   SABOT_PG_PORT (55432), SABOT_REDIS_PORT (56379), SABOT_UI_PORT (3000)
#   SABOT_SHARED (/srv/sabot): the path every host mounts; step storage and the run root live in it.
#     The store (SABOT_DB) is named there too, so every host derives the same run root beside it;
#     only the coordinator's store-queue worker ever opens it.
set -euo pipefail
PROJECT=$(cd "$(dirname "$0")/../.." && pwd)
ADDRESS=${SABOT_COORDINATOR_ADDRESS:?the address the worker hosts reach this host on}
SHARED=${SABOT_SHARED:-/srv/sabot}

services() {
  local network=${SABOT_WORKER_NETWORK:?the network the worker hosts are on, e.g. 10.0.0.0/24}
  local pg broker
  pg=$(SABOT_PG_LISTEN="$ADDRESS" SABOT_PG_CLIENTS="$network" bash "$PROJECT/scripts/postgres.sh")
  broker=$(SABOT_REDIS_BIND="$ADDRESS" bash "$PROJECT/scripts/redis.sh")
  mkdir -p "$SHARED/dagster" "$SHARED/runroot"
  cat <<ENV
export DAGSTER_HOME=$PROJECT/deploy/hosts
export SABOT_DAGSTER_PG_URL=$pg
export SABOT_CELERY_BROKER=$broker
export SABOT_DAGSTER_STORAGE=$SHARED/dagster
export SABOT_RUN_ROOT=$SHARED/runroot
export SABOT_DB=$SHARED/sabot.duckdb
export SABOT_SHARED_STATE_URL=$pg
ENV
}

needs_environment() {
  for name in SABOT_DAGSTER_PG_URL SABOT_CELERY_BROKER SABOT_DAGSTER_STORAGE SABOT_RUN_ROOT SABOT_DB; do
    [ -n "${!name:-}" ] || { echo "coordinator.sh: $name is not set: eval \"\$($0 services)\" first" >&2; exit 2; }
  done
  export DAGSTER_HOME="$PROJECT/deploy/hosts" DAGSTER_DISABLE_TELEMETRY=1
  cd "$PROJECT"
}

case "${1:-}" in
  services) services ;;
  daemon) needs_environment; exec .venv/bin/dagster-daemon run -w workspace.yaml ;;
  ui) needs_environment; exec .venv/bin/dagster-webserver -w workspace.yaml -h "$ADDRESS" -p "${SABOT_UI_PORT:-3000}" ;;
  store-worker) needs_environment
    SABOT_HOST_LABEL=${SABOT_HOST_LABEL:-coordinator} SABOT_WORKER_NAME=store SABOT_WORKER_QUEUE=sabot-store \
      exec bash "$PROJECT/deploy/hosts/worker.sh" ;;
  *) echo "usage: $0 services | daemon | ui | store-worker" >&2; exit 2 ;;
esac
