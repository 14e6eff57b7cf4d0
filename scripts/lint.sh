#!/usr/bin/env bash
# The layers and the lint the build enforces (pyproject.toml: [tool.ruff], [tool.importlinter]):
# ruff over every file, then import-linter's contracts (layers point down, no cycle). Fails on either.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache
