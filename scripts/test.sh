#!/usr/bin/env bash
# Every check: lint, the import floors, then the tests (package, notebooks via nbval, built site in Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

"$PYTHON" -m ruff check code tests bench scripts
PYTHONPATH="code${PYTHONPATH:+:$PYTHONPATH}" lint-imports  # the floors of pyproject.toml's [tool.importlinter]
"$PYTHON" -m pytest "$@"
