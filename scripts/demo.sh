#!/usr/bin/env bash
# The demo: backend + simulated GoCD server + fake Kubernetes cluster running a short workload.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m elastic_agent demo "$@"
