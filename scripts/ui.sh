#!/usr/bin/env bash
# The Dagster UI on this project's instance and store: http://127.0.0.1:3000 (PORT overrides), and
# the report files its links open at http://127.0.0.1:$REPORTS_PORT (default PORT + 10).
# Stops cleanly on Ctrl-C or SIGTERM, also when started in the background (scripts/ui_supervisor.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-3000}"
REPORTS_PORT="${REPORTS_PORT:-$((PORT + 10))}"
VAR="${SABOT_VAR:-$PWD/var}"
export DAGSTER_HOME="$PWD" SABOT_DAGSTER_STORAGE="$VAR/dagster" DAGSTER_DISABLE_TELEMETRY=1
export SABOT_REPORTS_URL="http://127.0.0.1:$REPORTS_PORT"
exec .venv/bin/python scripts/ui_supervisor.py "$VAR/reports" "$REPORTS_PORT" -- \
  .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "$PORT"
