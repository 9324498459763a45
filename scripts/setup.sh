#!/usr/bin/env bash
# Prepare a fresh machine to build the book and run the tests. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"

# Chromium, for the browser test of the built site (tests/test_site.py).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi

# torch first, and only where it is missing. The package asks for a version range (never ==) so that
# Colab keeps its own build; resolved from that range on a fresh machine, pip would pick a multi-GB
# CUDA build, while this exact version is a CPU wheel that installs in seconds.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
    "$PYTHON" -m pip install torch==2.13.0
fi

"$PYTHON" -m pip install -r requirements.txt -r requirements-dev.txt
