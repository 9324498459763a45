#!/usr/bin/env bash
# Every check: lint, the import floors, then the tests, two processes at a time (one per core).
#   bash scripts/test.sh                  everything: the chapters first, then the package and the site
#   bash scripts/test.sh tests/test_x.py  only what you name (any pytest arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

"$PYTHON" -m ruff check code tests bench scripts chapters book/_ext  # chapters/ruff.toml: 79 columns
PYTHONPATH="code${PYTHONPATH:+:$PYTHONPATH}" lint-imports  # the floors of pyproject.toml's [tool.importlinter]
if [ $# -gt 0 ]; then
    exec "$PYTHON" -m pytest "$@"
fi
# The chapters, whole, in a Colab-like kernel (tests/test_chapters.py): two at a time. They go in
# a run of their own because pytest-xdist hands a long run of tests to one worker at a time.
"$PYTHON" -m pytest -n 2 -m notebook
"$PYTHON" -m pytest -n 2 -m "not notebook"
