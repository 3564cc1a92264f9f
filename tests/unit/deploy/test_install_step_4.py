"""docs/install.md step 4, "With the official Helm chart", followed as a new user follows it: its shell
blocks run in order, in a copy of the clone, each way the guide offers (GoCD running already: merge your
values; no GoCD yet), with `helm` standing in as `FAKE_HELM` (no cluster and no chart repository here).

The stand-in does what Helm 3 does with what these commands touch (helm/helm, `cmd/helm/repo_add.go`,
`pkg/action/install.go` `LocateChart`): `repo add NAME URL` remembers the repository; a chart written
`REPO/CHART` of a repository not added fails with `Error: repo REPO not found`; `-f FILE` of a file that
is not there fails with Helm's `open FILE: no such file or directory`; `get values` prints the release's
values. It keeps the files each `upgrade` was given, so that the test can read what was installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.install_guide import guide
from tests.support.paths import ROOT

FAKE_HELM = r'''#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_HELM_STATE"])
seen = json.loads(state.read_text()) if state.exists() else {"repos": [], "upgrades": []}
args = sys.argv[1:]
def done(code=0, message=""):
    state.write_text(json.dumps(seen))
    if message:
        print(message, file=sys.stderr)
    sys.exit(code)
if args[:2] == ["repo", "add"]:
    seen["repos"].append(args[2]); done()
if args[:2] == ["repo", "update"]:
    done(0 if seen["repos"] else 1, "" if seen["repos"] else "Error: no repositories found")
if args[:2] == ["get", "values"]:
    print(os.environ["FAKE_HELM_RELEASE_VALUES"]); done()
if args[0] == "upgrade":
    positional = [a for i, a in enumerate(args[1:], 1) if not a.startswith("-")
                  and not args[i - 1] in ("--version", "--namespace", "-f")]
    chart = positional[1]
    if "/" in chart and chart.split("/")[0] not in seen["repos"]:
        done(1, f"Error: repo {chart.split('/')[0]} not found")
    files = [args[i + 1] for i, a in enumerate(args) if a == "-f"]
    for name in files:
        if not Path(name).exists():
            done(1, f"Error: open {name}: no such file or directory")
    seen["upgrades"].append([Path(name).read_text() for name in files]); done()
done(1, f"fake helm: no such command {args}")
'''
RELEASE_VALUES = {"server": {"env": {"extraEnvVars": [{"name": "TZ", "value": "Europe/Berlin"}]}}}
PLACEHOLDER_IMAGE = "registry.example.com/gocd-kubernetes-reuse-elastic-agent:0.1.0"


def helm_part() -> str:
    """Step 4's "With the official Helm chart", up to what the merge keeps (the commands come before)."""
    step = guide().split("### With the official Helm chart", 1)[1]
    return step.split("**What the merge keeps of yours.**", 1)[0]


def blocks(way: str) -> list[str]:
    """The shell blocks in order for one way: "merge" leaves out the "No GoCD yet" one, "new" the merge."""
    chosen = []
    for before, block in re.findall(r"(.*?)```sh\n(.*?)```", helm_part(), re.S):
        other_way = "**No GoCD yet**" in before if way == "merge" else "merge-helm-values" in block
        if other_way:
            continue
        chosen.append(block)
    return chosen


@pytest.mark.parametrize("way", ["merge", "new"], ids=["gocd-running-already", "no-gocd-yet"])
def test_step_4s_commands_work_in_the_order_written_and_install_your_image(tmp_path: Path, way: str) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "docker", clone / "docker")
    (clone / "scripts").mkdir()
    (clone / "scripts" / "setup.sh").write_text("exit 0\n")  # the .venv below is what it makes
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (clone / ".venv" / "bin" / "python").chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "helm").write_text(FAKE_HELM)
    (bin_dir / "helm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "FAKE_HELM_STATE": str(tmp_path / "helm.json"),
           "FAKE_HELM_RELEASE_VALUES": json.dumps(RELEASE_VALUES)}  # fmt: skip
    for block in blocks(way):
        done = subprocess.run(["bash", "-e", "-c", block], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, (block, done.stderr)
    upgrades = json.loads((tmp_path / "helm.json").read_text())["upgrades"]
    assert len(upgrades) == 1, "one helm upgrade installs it"
    installed: dict[str, object] = {}
    for text in upgrades[0]:
        installed |= yaml.safe_load(text)
    images = {container["image"] for key in ("initContainers", "sidecarContainers")
              for container in installed["server"][key]}  # type: ignore[index]  # fmt: skip
    assert PLACEHOLDER_IMAGE not in images
    assert images == {"REGISTRY/gocd-kubernetes-reuse-elastic-agent:0.1.0"}, "the image of step 1"
    if way == "merge":
        extra = installed["server"]["env"]["extraEnvVars"]  # type: ignore[index]
        env_names = {entry["name"] for entry in extra}
        assert "TZ" in env_names, "the release's own values are kept"
