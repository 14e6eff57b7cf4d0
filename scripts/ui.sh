#!/usr/bin/env bash
# The Dagster UI on this project's instance and store: http://127.0.0.1:3000 (PORT overrides), and
# the file server its links open (reports, run records, number pages) at SABOT_REPORTS_URL, default
# http://127.0.0.1:3010 (REPORTS_PORT moves it): the address every command links, so a wave run from
# the command line links it too (sabot_assets/file_server/addresses.py).
# Stops cleanly on Ctrl-C or SIGTERM, also when started in the background (scripts/ui_supervisor.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-3000}"
REPORTS_PORT="${REPORTS_PORT:-3010}"
VAR="${SABOT_VAR:-$PWD/var}"
STORE_DIR="$(dirname "${SABOT_DB:-$VAR/sabot.duckdb}")"
export DAGSTER_HOME="$PWD" SABOT_DAGSTER_STORAGE="$VAR/dagster" DAGSTER_DISABLE_TELEMETRY=1
export SABOT_REPORTS_URL="http://127.0.0.1:$REPORTS_PORT"
exec .venv/bin/python scripts/ui_supervisor.py "$STORE_DIR" "$REPORTS_PORT" "http://127.0.0.1:$PORT" -- \
  .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "$PORT"
