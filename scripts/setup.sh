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
# A CJK font, so that the screenshots of the zh-TW pages show their text (the readers' browsers have one).
if ! fc-list :lang=zh 2>/dev/null | grep -q . && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y fonts-noto-cjk
fi

# torch first, and only where it is missing. The package asks for a version range (never ==) so that
# Colab keeps its own build; resolved from that range on a fresh machine, pip would pick a multi-GB
# CUDA build, while this exact version is a CPU wheel that installs in seconds.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
    "$PYTHON" -m pip install torch==2.13.0
fi

"$PYTHON" -m pip install -r requirements.txt -r requirements-dev.txt

# The book's in-page widget (book/web): onnxruntime-web, exactly as package-lock.json pins it. node and
# npm come from apt where they are missing; node also runs the tokenizer's test (tests/test_tokenizer_js.py).
if ! command -v npm >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
fi
if command -v npm >/dev/null; then
    (cd book/web && npm ci --ignore-scripts --no-audit --no-fund)
else  # the notebooks run without it; the book's build and its tests do not
    echo "setup: npm is missing, so the book's in-page widget is not installed. The chapters run" \
         "without it; to build the book or run the tests, install node and npm, then run this again" >&2
fi
