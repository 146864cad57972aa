#!/usr/bin/env bash
# Create .venv and install doceval with its pinned dependencies. Idempotent: reruns only when inputs change.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null || PY=python3
stamp=.venv/.installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# torch first, pinned: on these machines 2.13.0 is a CPU wheel on disk; an unpinned torch pulls a CUDA build.
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev]"
echo "$want" > "$stamp"
echo "setup: .venv ready"
