#!/usr/bin/env bash
# The Dagster UI on this project's instance and store: http://127.0.0.1:3000 (PORT overrides).
# Stops cleanly on Ctrl-C or SIGTERM, also when started in the background: a background job of a
# script inherits SIGINT as ignored, bash cannot reset a signal ignored on entry, and dagster dev
# turns SIGTERM into its SIGINT handling. So SIGINT is reset to default by a tiny exec shim.
set -euo pipefail
cd "$(dirname "$0")/.."
export DAGSTER_HOME="$PWD" SABOT_DAGSTER_STORAGE="${SABOT_VAR:-$PWD/var}/dagster" DAGSTER_DISABLE_TELEMETRY=1
exec .venv/bin/python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
  .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${PORT:-3000}"
