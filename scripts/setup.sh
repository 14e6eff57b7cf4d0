#!/usr/bin/env bash
# Set up the project on a fresh machine: a pinned uv, then the locked environment in .venv.
# Idempotent; everything comes from the package registry (no Python download: the machine's 3.11 is used).
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
PY=${SABOT_PYTHON:-python3.11}
if ! "$PY" -m uv --version 2>/dev/null | grep -q "$UV_VERSION"; then
  "$PY" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
"$PY" -m uv sync --frozen --python "$PY" --quiet
# T3 runs generated code only inside bubblewrap: without it the sandbox refuses to run anything.
bash scripts/install_bubblewrap.sh
