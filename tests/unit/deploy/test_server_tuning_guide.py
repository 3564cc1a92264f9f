"""What docs/install.md, "A GoCD server tuned for reuse", tells an administrator is true: its values give
the GoCD server both properties as JVM options through the official chart and the server image's
entrypoint (as gocd/helm-chart 2.18.0 renders `server.env.goServerJvmOpts`, and as gocd/gocd's
docker-entrypoint.sh turns `GOCD_SERVER_JVM_OPTS` into wrapper lines), its check finds those lines, and
the plugin's setting it names reads the server's value as the same lifetime."""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import yaml

from elastic_agent.service.helm_values import merge
from profiles.cluster import ClusterProfile
from profiles.quantities import format_duration
from tests.support.gocd_chart import server_pod
from tests.support.install_guide import block_after, guide, values

KEY_PROPERTY = "gocd.ephemeral.auto.register.key.expiry.millis"
TICK_PROPERTY = "cruise.build.assignment.service.interval"
FIRST_WRAPPER_INDEX = 100  # docker-entrypoint.sh: wrapper.java.additional.<index + 100>


def tuned_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(block_after("server-tuning-values"))
    return loaded


def jvm_options() -> str:
    """GOCD_SERVER_JVM_OPTS of the server container the chart renders from the guide's values merged into
    the project's (step 4's merge-helm-values)."""
    pod = server_pod(merge(values(), tuned_values()).values)
    [server] = [c for c in pod["spec"]["containers"] if c["name"] == "gocd-server"]
    env = {entry["name"]: entry.get("value") for entry in server["env"]}
    options: str = env["GOCD_SERVER_JVM_OPTS"]
    return options


def wrapper_lines(options: str) -> list[str]:
    """What the server image's entrypoint writes to wrapper-properties.conf: the variable split as a
    shell splits words (it `eval`s it into an array), then `-Dgo.console.stdout=true`, each option a
    `wrapper.java.additional.<n>` line from 100 on."""
    words = [*shlex.split(options), "-Dgo.console.stdout=true"]
    return [f"wrapper.java.additional.{FIRST_WRAPPER_INDEX + n}={word}" for n, word in enumerate(words)]


def test_the_guides_values_give_the_server_both_properties_as_jvm_options_through_the_chart() -> None:
    options = jvm_options()
    # The chart writes the value unquoted (`value: {{ .Values.server.env.goServerJvmOpts }}`): it must
    # still read back as the one string.
    assert yaml.safe_load(f"value: {options}") == {"value": options}
    lines = wrapper_lines(options)
    assert f"wrapper.java.additional.100=-D{KEY_PROPERTY}=86400000" in lines
    assert f"wrapper.java.additional.101=-D{TICK_PROPERTY}=1000" in lines


def test_the_guides_check_finds_the_lines_the_entrypoint_writes() -> None:
    check = block_after("server-tuning-check")
    patterns = re.findall(r"-e (\S+)", check)
    assert set(patterns) == {KEY_PROPERTY, TICK_PROPERTY}
    conf = "\n".join(["# wrapper properties", *wrapper_lines(jvm_options())]) + "\n"
    found = subprocess.run(["grep", "-F", *(a for p in patterns for a in ("-e", p))], input=conf,
                           capture_output=True, text=True, check=True, timeout=10).stdout  # fmt: skip
    assert found.splitlines() == wrapper_lines(jvm_options())[:2]


def test_the_plugins_setting_the_guide_names_reads_the_servers_milliseconds_as_the_same_lifetime() -> None:
    millis = int(re.search(rf"-D{re.escape(KEY_PROPERTY)}=(\d+)", jvm_options()).group(1))  # type: ignore[union-attr]
    section = guide()[guide().index("## 12. A GoCD server tuned for reuse") :]
    setting = re.search(r"`auto_register_key_expiry` to the same duration, `(\w+)` here", section)
    assert setting is not None
    profile = ClusterProfile.from_properties(
        {"go_server_url": "https://gocd.example.com/go", "auto_register_key_expiry": setting.group(1)}
    )
    assert profile.auto_register_key_expiry * 1000 == millis
    window = format_duration(profile.auto_register_key_expiry - profile.auto_register_timeout)
    assert f"`{window}` for `{setting.group(1)}`" in section, "as the status page shows it"
