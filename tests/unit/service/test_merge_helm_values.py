"""`merge-helm-values` (elastic_agent/service/helm_values.py): your values for the GoCD chart with the
plugin's merged in, rendered by the model of the official chart 2.18.0 (tests/support/gocd_chart.py), so that
each test says what the GoCD server's pod and the chart's access objects become. Lists of named entries
merge by name; settings of yours the plugin needs are kept, or stop the command with what they mean; and
every key of yours it changed is printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_agent.service.helm_values import merge, service_account
from tests.support.gocd_chart import OFFICIAL_PLUGIN_INSTALL, RELEASE, access_objects, merged, server_pod
from tests.support.gocd_chart import service_account_name as charts_account
from tests.support.paths import ROOT

VALUES = ROOT / "docker" / "helm" / "values-gocd.yaml"
# What an older copy of values-gocd.yaml set, which the plugin now leaves to yours.
OLDER_PLUGIN_KEYS = {"rbac": {"create": True}, "serviceAccount": {"create": True, "name": "gocd"}}

YOURS = {
    "server": {
        "env": {"extraEnvVars": [{"name": "TZ", "value": "Europe/Berlin"},
                                 {"name": "GOCD_REUSE_BACKEND_URL", "value": "http://127.0.0.1:9999"}]},
        "persistence": {"extraVolumes": [{"name": "ssh-keys", "secret": {"secretName": "ssh"}}],
                        "extraVolumeMounts": [{"name": "ssh-keys", "mountPath": "/home/go/.ssh"}]},
        "sidecarContainers": [{"name": "log-shipper", "image": "fluent/fluent-bit:3"}],
        "initContainers": [{"name": "fetch-config", "image": "busybox:1"}],
        "service": {"type": "ClusterIP"},
    },
}  # fmt: skip


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(VALUES.read_text())
    return loaded


def names(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["name"] for entry in entries]


def run_merge(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elastic_agent", "merge-helm-values", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def merge_file(tmp_path: Path, yours: dict[str, Any], *args: str,
               plugin: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    path = tmp_path / "values-gocd.yaml"
    path.write_text(yaml.safe_dump(plugin if plugin is not None else values()))
    return run_merge("-", str(path), *args, stdin=yaml.safe_dump(yours))


def test_two_values_files_lose_your_list_entries_and_the_merge_keeps_them() -> None:
    helm = server_pod(merged(YOURS, values()))  # `-f yours.yaml -f values-gocd.yaml`: lists replaced
    assert "TZ" not in names(helm["spec"]["containers"][-1]["env"])
    assert "log-shipper" not in names(helm["spec"]["containers"])
    result = merge(YOURS, values()).values
    pod = server_pod(result)
    server = pod["spec"]["containers"][-1]
    env = {entry["name"]: entry["value"] for entry in server["env"]}
    assert env["TZ"] == "Europe/Berlin"
    assert env["GOCD_REUSE_BACKEND_URL"] == "http://127.0.0.1:8155", "the plugin's entry replaces yours"
    assert names(pod["spec"]["containers"]) == ["log-shipper", "kubernetes-reuse-backend", "gocd-server"]
    assert names(pod["spec"]["initContainers"]) == ["fetch-config", "install-kubernetes-reuse-plugin"]
    assert {"ssh-keys", "gocd-reuse-token", "gocd-reuse-tmp"} <= set(names(pod["spec"]["volumes"]))
    mounts = {m["mountPath"] for m in server["volumeMounts"]}
    assert {"/home/go/.ssh", "/var/run/secrets/gocd-reuse"} <= mounts
    assert result["server"]["service"] == {"type": "ClusterIP"}


def test_merging_again_changes_nothing_and_says_so(tmp_path: Path) -> None:
    once = merge(YOURS, values()).values
    again = merge(once, values())
    assert again.values == once and again.changed == []
    done = merge_file(tmp_path, once)
    assert done.returncode == 0 and yaml.safe_load(done.stdout) == once
    assert "nothing of yours changed" in done.stderr


def differences(yours: Any, result: Any, path: str = "") -> set[tuple[str, str]]:
    """Every key of `result` that is not what `yours` has, as (dotted path, entry name or "")."""
    if isinstance(yours, dict) and isinstance(result, dict):
        found: set[tuple[str, str]] = set()
        for key in yours.keys() | result.keys():
            at = f"{path}.{key}" if path else key
            found |= differences(yours.get(key), result.get(key), at)
        return found
    if isinstance(result, list) and result and all(isinstance(e, dict) and "name" in e for e in result):
        before = {e.get("name"): e for e in yours or [] if isinstance(e, dict)}
        return {(path, entry["name"]) for entry in result if before.get(entry["name"]) != entry}
    return set() if yours == result else {(path, "")}


@pytest.mark.parametrize("yours", [{}, YOURS, {"server": {"terminationGracePeriodSeconds": 30,
                                                          "shouldPreconfigure": True}}],
                         ids=["no-values", "lists-of-yours", "scalars-of-yours"])  # fmt: skip
def test_every_key_the_merge_changes_is_printed(tmp_path: Path, yours: dict[str, Any]) -> None:
    done = merge_file(tmp_path, yours)
    assert done.returncode == 0, done.stderr
    changed = [line for line in done.stderr.splitlines()
               if re.match(r"merge-helm-values: (added|changed|replaced) ", line)]  # fmt: skip
    diff = differences(yours, yaml.safe_load(done.stdout))
    assert diff, "the plugin's values change something of these"
    for path, name in diff:
        assert [line for line in changed if f" {path}" in line and name in line], (path, name, done.stderr)


def test_the_merge_says_that_the_charts_default_entry_installing_the_official_plugin_is_dropped(
    tmp_path: Path,
) -> None:
    done = merge_file(tmp_path, {})
    [line] = [line for line in done.stderr.splitlines() if OFFICIAL_PLUGIN_INSTALL in line]
    assert "dropped the chart's default server.env.extraEnvVars entry" in line
    own = {"server": {"env": {"extraEnvVars": [{"name": OFFICIAL_PLUGIN_INSTALL, "value": "https://..."}]}}}
    kept = merge_file(tmp_path, own)
    assert OFFICIAL_PLUGIN_INSTALL not in kept.stderr, "yours listed it: the merge keeps it"


@pytest.mark.parametrize(
    "plugin", [values(), {**values(), **OLDER_PLUGIN_KEYS}], ids=["plugin", "older-copy"]
)
def test_your_rbac_create_false_stays_false_so_the_chart_makes_no_cluster_role(
    plugin: dict[str, Any],
) -> None:
    result = merge({"rbac": {"create": False}}, plugin)
    assert result.values["rbac"] == {"create": False}
    assert {o["kind"] for o in access_objects(result.values)} == {"ServiceAccount"}
    assert ("rbac" in plugin) == any(line.startswith("kept yours rbac.create: false") for line in result.kept)


@pytest.mark.parametrize(
    "plugin", [values(), {**values(), **OLDER_PLUGIN_KEYS}], ids=["plugin", "older-copy"]
)
def test_your_service_account_is_kept_and_the_rolebinding_to_point_at_it_is_named(
    plugin: dict[str, Any],
) -> None:
    """Renaming the chart's account makes Helm delete the old one, and with it what was bound to it."""
    yours = {"serviceAccount": {"name": "ci-server"}}
    result = merge(yours, plugin)
    assert server_pod(result.values)["spec"]["serviceAccountName"] == "ci-server"
    [account] = [o for o in access_objects(result.values) if o["kind"] == "ServiceAccount"]
    assert account["metadata"]["name"] == "ci-server", "the same account: Helm deletes nothing"
    [note] = result.notes
    assert "runs as ServiceAccount ci-server" in note
    assert "set the name of the subject of both to ci-server" in note
    assert "kubectl apply -k docker/kubernetes/rbac`" in note
    assert "rbac-nodes/clusterrolebinding.yaml" in note
    assert "kubectl apply -k docker/kubernetes/rbac-nodes" in note


@pytest.mark.parametrize(
    "yours",
    [{}, {"serviceAccount": {"create": False}}, {"serviceAccount": {"name": "gocd"}}],
)
def test_the_account_the_merge_names_is_the_one_the_chart_gives_the_pod(yours: dict[str, Any]) -> None:
    result = merge(yours, values())
    account, _ = service_account(result.values, RELEASE)
    assert account == charts_account(result.values) == server_pod(result.values)["spec"]["serviceAccountName"]
    assert bool(result.notes) == (account != "gocd"), "a note exactly when the RoleBinding names another"


def test_for_another_release_the_merge_names_the_charts_account_of_that_release() -> None:
    """gocd/templates/_helpers.tpl: the chart's fullname is the release's when it contains "gocd"."""
    assert service_account({}, "ci")[0] == "ci-gocd"
    assert service_account({}, "my-gocd")[0] == "my-gocd"
    assert service_account({"nameOverride": "ci"}, "gocd")[0] == "gocd-ci"
    assert service_account({"fullnameOverride": "tools-"}, "gocd")[0] == "tools", 'trimSuffix "-"'
    [note] = merge({}, values(), release="ci").notes
    assert "ServiceAccount ci-gocd" in note


def test_your_should_preconfigure_false_is_kept_and_no_hook_runs() -> None:
    result = merge({"server": {"shouldPreconfigure": False}}, values())
    [server] = [c for c in server_pod(result.values)["spec"]["containers"] if c["name"] == "gocd-server"]
    assert "lifecycle" not in server
    assert any(line.startswith("kept yours server.shouldPreconfigure: false") and "step 6" in line
               for line in result.kept)  # fmt: skip


def test_a_preconfigure_command_of_your_own_stops_the_merge_unless_you_take_ours(tmp_path: Path) -> None:
    yours = {"server": {"preconfigureCommand": ["/bin/bash", "/my-setup.sh"]}}
    done = merge_file(tmp_path, yours)
    assert done.returncode == 3 and done.stdout == ""
    assert "nothing written: 1 setting(s) of yours conflict" in done.stderr
    assert "  server.preconfigureCommand: yours is a postStart command of your own" in done.stderr
    assert "--take-ours" in done.stderr
    taken = merge_file(tmp_path, yours, "--take-ours")
    assert taken.returncode == 0
    assert (
        yaml.safe_load(taken.stdout)["server"]["preconfigureCommand"]
        == values()["server"]["preconfigureCommand"]
    )
    assert "replaced yours server.preconfigureCommand (--take-ours)" in taken.stderr


EARLIER_PLUGIN_COMMAND = ["/bin/bash", "-c", "touch /godata/logs/kubernetes-reuse-preconfigure.done"]


@pytest.mark.parametrize("command", [["/bin/bash", "/preconfigure_server.sh"], EARLIER_PLUGIN_COMMAND],
                         ids=["the-charts-script", "an-earlier-plugin-command"])  # fmt: skip
def test_the_charts_script_or_an_earlier_plugin_command_is_replaced_without_a_conflict(
    command: list[str],
) -> None:
    result = merge({"server": {"preconfigureCommand": command}}, values())
    assert not result.conflicts
    assert result.values["server"]["preconfigureCommand"] == values()["server"]["preconfigureCommand"]
    assert any(line.startswith("replaced server.preconfigureCommand") for line in result.changed)


def test_your_grace_period_is_kept_when_it_leaves_the_backend_time_to_stop(tmp_path: Path) -> None:
    longer = merge({"server": {"terminationGracePeriodSeconds": 120}}, values())
    assert server_pod(longer.values)["spec"]["terminationGracePeriodSeconds"] == 120
    assert any(
        line.startswith("kept yours server.terminationGracePeriodSeconds: 120") for line in longer.kept
    )
    assert server_pod(merge({}, values()).values)["spec"]["terminationGracePeriodSeconds"] == 60
    short = merge_file(tmp_path, {"server": {"terminationGracePeriodSeconds": 5}})
    assert short.returncode == 3 and "server.terminationGracePeriodSeconds: yours is 5" in short.stderr
    taken = merge_file(tmp_path, {"server": {"terminationGracePeriodSeconds": 5}}, "--take-ours")
    assert yaml.safe_load(taken.stdout)["server"]["terminationGracePeriodSeconds"] == 60


def test_the_merge_command_writes_one_values_file_from_helms_output() -> None:
    done = run_merge("-", str(VALUES), stdin=yaml.safe_dump(YOURS))
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == merge(YOURS, values()).values
    assert "*" not in re.sub(r"'[^']*'|\"[^\"]*\"", "", done.stdout.split("preconfigureCommand")[0]), (
        "no YAML aliases: the output reads as a person's values file"
    )
    empty = run_merge("-", str(VALUES), stdin="null\n")  # `helm get values` of a release without values
    assert empty.returncode == 0 and yaml.safe_load(empty.stdout) == values()


@pytest.mark.parametrize(
    "content, message",
    [
        ("server: [unclosed", "not valid YAML"),
        ("- a\n- b\n", "a values file is a map of keys, this is a list"),
    ],
)
def test_the_merge_command_names_the_file_it_cannot_use(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "current-values.yaml"
    bad.write_text(content)
    done = run_merge(str(bad), str(VALUES))
    assert done.returncode == 2 and done.stdout == ""
    assert f"merge-helm-values: {bad}: {message}" in done.stderr
    missing = run_merge(str(tmp_path / "nope.yaml"), str(VALUES))
    assert missing.returncode == 2
    assert "nope.yaml: cannot be read (No such file or directory)" in missing.stderr


@pytest.mark.parametrize("written", ["120", 120.0, " 120 "], ids=["string", "float", "spaced-string"])
def test_a_grace_period_written_otherwise_is_compared_as_the_chart_renders_it(written: Any) -> None:
    """The chart writes the value unquoted (gocd-server-deployment.yaml line 158): "120" is 120 s."""
    result = merge({"server": {"terminationGracePeriodSeconds": written}}, values())
    assert result.conflicts == []
    assert result.values["server"]["terminationGracePeriodSeconds"] == written
    assert any("which the chart renders as 120" in line for line in result.kept) == (written != 120)
    short = merge({"server": {"terminationGracePeriodSeconds": "5"}}, values())
    assert [c for c in short.conflicts if c.startswith("server.terminationGracePeriodSeconds")]
    wrong = merge({"server": {"terminationGracePeriodSeconds": "two minutes"}}, values())
    assert wrong.conflicts, "the API server would refuse what the chart renders of it"


def tuned(values_in: dict[str, Any]) -> dict[str, Any]:
    """Merged values an operator then tuned as docs/install.md step 11 suggests: more log, more memory."""
    tuned_values = yaml.safe_load(yaml.safe_dump(values_in))
    [backend] = [c for c in tuned_values["server"]["sidecarContainers"]
                 if c["name"] == "kubernetes-reuse-backend"]  # fmt: skip
    backend["args"] += ["--log-level", "DEBUG"]
    backend["resources"]["limits"]["memory"] = "1Gi"
    backend["env"].append({"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"})
    return tuned_values


def test_merging_again_keeps_the_operators_args_env_and_resources_of_the_plugins_containers(
    tmp_path: Path,
) -> None:
    yours = tuned(merge(YOURS, values()).values)
    newer = values()  # a new image in the plugin's values, as after an upgrade
    for entry in newer["server"]["initContainers"] + newer["server"]["sidecarContainers"]:
        entry["image"] = "registry.example.com/gocd-kubernetes-reuse-elastic-agent:0.2.0"
    done = merge_file(tmp_path, yours, plugin=newer)
    assert done.returncode == 0, done.stderr
    [backend] = [c for c in yaml.safe_load(done.stdout)["server"]["sidecarContainers"]
                 if c["name"] == "kubernetes-reuse-backend"]  # fmt: skip
    assert backend["args"] == ["--token-file", "/var/run/secrets/gocd-reuse/token", "--log-level", "DEBUG"]
    assert backend["resources"]["limits"]["memory"] == "1Gi"
    [plugins] = values()["server"]["sidecarContainers"]
    assert backend["resources"]["requests"] == plugins["resources"]["requests"]
    assert {"TMPDIR", "HTTPS_PROXY"} <= set(names(backend["env"]))
    assert backend["image"].endswith(":0.2.0"), "the plugin's image"
    for what in ("args", "resources", "env HTTPS_PROXY"):
        assert f"kept yours server.sidecarContainers[kubernetes-reuse-backend].{what}" in done.stderr, what
    assert "replaced server.sidecarContainers: kubernetes-reuse-backend's image" in done.stderr


def test_args_of_yours_that_lack_one_of_the_plugins_stop_the_merge_with_what_they_lack(
    tmp_path: Path,
) -> None:
    yours = tuned(merge({}, values()).values)
    newer = values()
    newer["server"]["sidecarContainers"][0]["args"] += ["--bind", "127.0.0.1:8156"]
    done = merge_file(tmp_path, yours, plugin=newer)
    assert done.returncode == 3 and done.stdout == ""
    assert 'server.sidecarContainers[kubernetes-reuse-backend].args: yours' in done.stderr
    assert 'lack the plugin\'s ["--bind", "127.0.0.1:8156"]' in done.stderr
    taken = merge_file(tmp_path, yours, "--take-ours", plugin=newer)
    [backend] = yaml.safe_load(taken.stdout)["server"]["sidecarContainers"]
    assert backend["args"] == newer["server"]["sidecarContainers"][0]["args"]


def test_without_persistence_the_jar_goes_into_a_godata_both_containers_mount_and_merging_again_keeps_it(
    tmp_path: Path,
) -> None:
    off = merge({"server": {"persistence": {"enabled": False}}}, values())
    pod = server_pod(off.values)
    volumes = {volume["name"] for volume in pod["spec"]["volumes"]}
    [init] = pod["spec"]["initContainers"]
    assert {mount["name"] for mount in init["volumeMounts"]} <= volumes
    assert [note for note in off.notes if "persistence.enabled is false" in note], "said in a sentence"
    again = merge(off.values, values())
    assert again.values == off.values and again.changed == []
    back_on = yaml.safe_load(yaml.safe_dump(off.values))
    back_on["server"]["persistence"]["enabled"] = True
    on = merge(back_on, values())
    assert server_pod(on.values) == server_pod(merge({}, values()).values), "as if never turned off"
    assert any(line.startswith("removed server.persistence.extraVolumes") for line in on.changed)
