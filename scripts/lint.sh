#!/usr/bin/env bash
# The layers and the lint the build enforces (pyproject.toml: [tool.ruff], [tool.importlinter]):
# ruff over every file, the layout `ruff format` gives it (120 columns; [tool.ruff.format] names the files
# left as written), then import-linter's contracts (layers point down, no cycle). Fails on any.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports --no-cache
# No Python file over 450 lines (docs/development.md): a room a newcomer can read in one sitting. Checked
# after the formatter, which is what grows a file past the line.
git ls-files -z '*.py' | xargs -0 wc -l | awk '$2 != "total" && $1 > 450 { print $2 ": " $1 " lines, over 450"; over = 1 } END { exit over }'
