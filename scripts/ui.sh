#!/usr/bin/env bash
# The Dagster UI on this project's instance and store: http://127.0.0.1:3000
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME="$PWD" SABOT_DAGSTER_STORAGE="${SABOT_VAR:-$PWD/var}/dagster" DAGSTER_DISABLE_TELEMETRY=1
exec .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${PORT:-3000}"
