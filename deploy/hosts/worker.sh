#!/usr/bin/env bash
# A worker host: a Celery worker of Dagster's Celery executor (dagster-celery) running the steps
# the coordinator's runs hand to the broker. Every host has the same checkout at the same path and
# the same locked .venv (scripts/setup.sh): a step's job is loaded by module name from the code
# location, and the run root and step storage are paths every host mounts.
# One step at a time per worker process: `--pool solo` runs it in the worker's main process,
# because a run step forks its pipeline runs and Celery's default prefork pool forbids that (its
# children are daemonic: "daemonic processes are not allowed to have children", measured). For
# several steps at once on a host, start several, each with its own SABOT_WORKER_NAME.
#   SABOT_HOST_LABEL (required)  this host's name in launcher tags and in the worker's name; unique
#                                per host even where hosts share a host name (containers, namespaces)
#   SABOT_DAGSTER_PG_URL, SABOT_CELERY_BROKER, SABOT_DAGSTER_STORAGE, SABOT_RUN_ROOT, SABOT_DB: as on the
#                                coordinator (deploy/hosts/coordinator.sh prints them)
#   SABOT_WORKER_NAME (the label), SABOT_WORKER_QUEUE (dagster: the executor's default queue)
#   SABOT_WORKER_HOME (/tmp/sabot-worker-NAME): this worker's DAGSTER_HOME, holding a link to the
#                                instance file and the settings module dagster-celery writes
set -euo pipefail
PROJECT=$(cd "$(dirname "$0")/../.." && pwd)
for name in SABOT_HOST_LABEL SABOT_DAGSTER_PG_URL SABOT_CELERY_BROKER SABOT_DAGSTER_STORAGE SABOT_RUN_ROOT SABOT_DB; do
  [ -n "${!name:-}" ] || { echo "worker.sh: $name is not set (see the header of $0)" >&2; exit 2; }
done
NAME=${SABOT_WORKER_NAME:-$SABOT_HOST_LABEL}
export DAGSTER_HOME=${SABOT_WORKER_HOME:-/tmp/sabot-worker-$NAME}
mkdir -p "$DAGSTER_HOME"
ln -sfn "$PROJECT/deploy/hosts/dagster.yaml" "$DAGSTER_HOME/dagster.yaml"
export PATH="$PROJECT/.venv/bin:$PATH" DAGSTER_DISABLE_TELEMETRY=1
cd "$PROJECT"
exec dagster-celery worker start -A dagster_celery.app -y deploy/hosts/celery.yaml -n "$NAME" \
  -q "${SABOT_WORKER_QUEUE:-dagster}" -- --pool solo
