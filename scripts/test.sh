#!/usr/bin/env bash
# The whole test suite: lint, types, declared dependencies, layers, dead code, Python tests (incl.
# headless-browser checks of the status pages, and the image built and run with podman) and the bridge
# jar's Maven build with its JUnit and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's packages the suite needs: chromium for the status-page tests, libjemalloc2 for the soak and
# the allocator tests (the image preloads it: docker/Dockerfile), and for the real node
# (tests/support/real_node.py) containerd, runc, the CNI plugins (loopback) and mmdebstrap (its test image).
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
[ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
.venv/bin/python -c 'import ctypes.util, sys; sys.exit(ctypes.util.find_library("jemalloc") is None)' \
  || missing+=(libjemalloc2)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian's ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
.venv/bin/ruff check elastic_agent executors profiles tests benchmarks
.venv/bin/mypy
.venv/bin/deptry .  # every import declared, nothing declared unused (pyproject.toml, [tool.deptry])
.venv/bin/lint-imports  # no module imports a layer above its own (pyproject.toml, [tool.importlinter])
.venv/bin/vulture elastic_agent executors profiles tests benchmarks scripts/vulture_whitelist.py --min-confidence 60
.venv/bin/python -m tests.support.control_plane build  # the real kube-apiserver and etcd (minutes the first time, then cached)
.venv/bin/python -m tests.support.container_image build  # the image, with podman on Debian-made bases (minutes the first time, then cached)
.venv/bin/python -m tests.support.agent_image build  # the stand-in agent's image, an OCI archive made with mmdebstrap (a minute the first time, then cached)
.venv/bin/python -m tests.support.real_node build  # kubelet, kube-scheduler, the pause and Debian test images (minutes the first time, then cached)
.venv/bin/python -m pytest -q "$@"
.venv/bin/python -m benchmarks.soak --minutes 2 --check --output .venv/soak-short.json  # the soak, short: growth must be flat (benchmarks/soak_rules.py)
mvn_log=.venv/mvn-verify.log
if ! (cd bridge && PATH="$PWD/../.venv/bin:$PATH" mvn -B -ntp verify >"../$mvn_log" 2>&1); then
  tail -n 150 "$mvn_log"
  echo "the bridge's Maven build failed (full log: $mvn_log)"
  exit 1
fi
grep -E "Tests run:|BUILD" "$mvn_log"
echo "all checks passed"
