#!/usr/bin/env bash
# Installs what the backend, its tests and the demo need into .venv (idempotent; quick when done).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # constraints.txt pins every package to the versions the tests ran with (the image uses it too).
  .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test,sim]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
