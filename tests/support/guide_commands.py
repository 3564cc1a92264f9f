"""The shell commands of docs/install.md, run one by one, in the order written, against a real
kube-apiserver (tests/support/control_plane.py), as kubectl would send them: so that a test can start from a
cluster with nothing on it and find out whether the steps work in that order. Each form of command the
guide uses is translated to the API calls kubectl makes for it; a command of any other form fails the
test, so that the guide cannot gain a command this runner does not know.

What kubectl does, as modelled here: `create namespace` POSTs a Namespace (409 if it exists: exit 1);
`get namespace N` succeeds when it exists; `label namespace` PATCHes its labels; `apply -k DIR` renders
the kustomization (the kustomize the suite builds, the same v5 as kubectl's) and creates each object in
the rendered order, reporting each refusal and exiting 1 at the end if there was one (`apply` of an
object that exists patches it; the steps tested here create everything anew). `openssl rand -hex 32 >
F` and `rm F` act on a copy of the repository's docker/ folder. `A || B` runs B when A fails."""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.control_plane import Binaries, ControlPlane
from tests.support.manifests import collection, kustomize


class UnknownCommand(Exception):
    """A command of the guide that this runner does not translate."""


@dataclass
class GuideShell:
    """Runs the guide's commands in `workdir` (a copy of the repository's docker/) on `plane`."""

    plane: ControlPlane
    binaries: Binaries
    workdir: Path
    errors: list[str] = field(default_factory=list)  # what kubectl would have printed for failed commands

    @classmethod
    def in_copy_of(cls, root: Path, plane: ControlPlane, binaries: Binaries, workdir: Path) -> GuideShell:
        shutil.copytree(root / "docker", workdir / "docker")
        return cls(plane, binaries, workdir)

    def run_block(self, block: str) -> list[tuple[str, bool]]:
        """Each line of a fenced block of the guide (comments dropped), in order: (command, succeeded)."""
        done = []
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command:
                done.append((command, self.run(command)))
        return done

    def run(self, command: str) -> bool:
        first, _, otherwise = command.partition(" || ")
        if otherwise:
            return self.run(first) or self.run(otherwise)
        for pattern, action in self._commands():
            found = re.fullmatch(pattern, command)
            if found:
                return action(*found.groups())
        raise UnknownCommand(f"the test does not know the guide's command `{command}`")

    def _commands(self) -> list[tuple[str, Callable[..., bool]]]:
        return [
            (r"kubectl create namespace ([\w-]+)", self._create_namespace),
            (r"kubectl get namespace ([\w-]+) >/dev/null 2>&1", self._namespace_exists),
            (r"kubectl label namespace ([\w-]+) ([\w./-]+)=([\w.-]+)", self._label_namespace),
            (r"openssl rand -hex 32 > ([\w./-]+)", self._random_token),
            (r"kubectl apply -k ([\w./-]+)", self._apply_kustomization),
            (r"rm ([\w./-]+)", self._remove),
        ]

    def _answer(self, what: str, status: int, answer: object) -> bool:
        if 200 <= status < 300:
            return True
        message = answer.get("message") if isinstance(answer, dict) else answer
        self.errors.append(f"{what}: {status} {message}")
        return False

    def _create_namespace(self, name: str) -> bool:
        status, answer = self.plane.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        return self._answer(f"create namespace {name}", status, answer)

    def _namespace_exists(self, name: str) -> bool:
        status, _ = self.plane.request("GET", f"/api/v1/namespaces/{name}")
        return status == 200

    def _label_namespace(self, name: str, key: str, value: str) -> bool:
        core = client.CoreV1Api(self.plane.admin_api_client())
        try:
            core.patch_namespace(name, {"metadata": {"labels": {key: value}}})
        except ApiException as error:
            return self._answer(f"label namespace {name}", error.status, error.reason)
        return True

    def _random_token(self, path: str) -> bool:
        (self.workdir / path).write_text(secrets.token_hex(32) + "\n")
        return True

    def _apply_kustomization(self, folder: str) -> bool:
        succeeded = True
        for obj in kustomize(self.binaries, self.workdir / folder):
            status, answer = self.plane.request("POST", collection(obj), body=obj)
            what = f"apply {obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            succeeded = self._answer(what, status, answer) and succeeded
        return succeeded

    def _remove(self, path: str) -> bool:
        (self.workdir / path).unlink()
        return True
