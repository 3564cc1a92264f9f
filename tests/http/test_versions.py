"""The jar and the backend know each other's version (elastic_agent/gocd/versions.py): each says its own
on every request and answer, the backend warns in GoCD's health messages and at the top of the plugin
status page while they differ, and both come from one version in the repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
import yaml

from elastic_agent import __version__
from elastic_agent.clock import ManualClock
from elastic_agent.gocd.versions import (
    BACKEND_VERSION_HEADER,
    BRIDGE_VERSION_HEADER,
    BridgeVersions,
    Versions,
    readable,
    version_problem,
)
from elastic_agent.service.app import MAX_BODY_BYTES
from elastic_agent.simulation.gocd_transport import (
    REQUEST_PREFIX,
    HttpPluginTransport,
    encode,
    server_ping_body,
)
from elastic_agent.simulation.stack import TOKEN, Stack
from elastic_agent.status.pages import render_plugin_status
from tests.support import browser
from tests.support import raw_http as body_limit
from tests.support.paths import ROOT

OTHER = "0.0.9"
PING = REQUEST_PREFIX + "server-ping"
STATUS = REQUEST_PREFIX + "plugin-status-report"
CAPABILITIES = REQUEST_PREFIX + "get-capabilities"


@pytest.fixture
def stack(make_stack: Callable[..., Stack]) -> Stack:
    return make_stack(start_gocd=False)


def url(stack: Stack) -> str:
    assert stack.service is not None
    return stack.service.url


def send(
    stack: Stack, name: str, body: str = "", bridge: str | None = None, token: str = TOKEN
) -> requests.Response:
    headers = {
        "Authorization": f"Bearer {token}",
        "X-GoCD-Extension-Version": "5.0",
        "X-GoCD-Callback-URL": stack.callback_url,
    }
    if bridge is not None:
        headers[BRIDGE_VERSION_HEADER] = bridge
    return requests.post(f"{url(stack)}/gocd/plugin/{name}", data=body, headers=headers, timeout=30)


def ping(stack: Stack, bridge: str | None) -> None:
    answer = send(stack, PING, encode(server_ping_body([])), bridge)
    assert answer.status_code == 200, answer.text


def health(stack: Stack) -> list[tuple[str, str]]:
    return [(m.type, m.message) for m in stack.gocd.health_messages]


def status_view(stack: Stack, bridge: str | None) -> str:
    answer = send(stack, STATUS, json.dumps({"all_cluster_profiles_properties": []}), bridge)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["view"])


# ----- the headers, both ways, through the real service ----------------------------------------------


def test_every_answer_says_the_backends_version(stack: Stack) -> None:
    answers = {
        "healthz": requests.get(f"{url(stack)}/healthz", timeout=10),
        "readyz": requests.get(f"{url(stack)}/readyz", timeout=10),
        "metrics": requests.get(f"{url(stack)}/metrics", timeout=10),
        "unknown path": requests.get(f"{url(stack)}/no-such-page", timeout=10),
        "plugin request": send(stack, CAPABILITIES, bridge=__version__),
        "no bridge version": send(stack, CAPABILITIES),
        "wrong token": send(stack, CAPABILITIES, token="wrong"),
        "unknown request": send(stack, REQUEST_PREFIX + "no-such-request"),
        "GET of a plugin path": requests.get(f"{url(stack)}/gocd/plugin/{CAPABILITIES}", timeout=10),
    }
    assert answers["plugin request"].status_code == 200
    assert answers["wrong token"].status_code == 401
    for what, answer in answers.items():
        assert answer.headers.get(BACKEND_VERSION_HEADER) == __version__, what
    # waitress refuses a body over the limit itself, from its declared length, before it is sent.
    with body_limit.connect(stack) as sock:
        sock.sendall(body_limit.head(f"Content-Length: {MAX_BODY_BYTES + 1}"))
        refused = body_limit.answer(sock)
    assert refused.startswith("HTTP/1.1 413"), refused
    assert f"{BACKEND_VERSION_HEADER}: {__version__}\r\n".lower() in refused.lower(), refused


def test_the_backend_remembers_the_version_the_last_authorized_request_carried(stack: Stack) -> None:
    assert stack.backend.versions.current() is None  # nothing heard yet

    send(stack, CAPABILITIES, bridge=OTHER)
    assert stack.backend.versions.current() == Versions(OTHER, __version__)

    send(stack, CAPABILITIES, bridge="6.6.6", token="wrong")  # refused: it tells nothing
    assert stack.backend.versions.current() == Versions(OTHER, __version__)

    send(stack, CAPABILITIES)  # a jar too old to say its version
    assert stack.backend.versions.current() == Versions(None, __version__)


def test_the_simulated_gocd_speaks_as_the_jar_of_this_build(stack: Stack) -> None:
    transport = HttpPluginTransport(url(stack), TOKEN, stack.callback_url)
    assert transport.send(CAPABILITIES, "")[0] == 200
    assert stack.backend.versions.current() == Versions(__version__, __version__)


# ----- GoCD's health messages ---------------------------------------------------------------------------


def test_a_jar_of_another_version_gets_a_health_warning_until_both_agree(stack: Stack) -> None:
    ping(stack, __version__)
    assert health(stack) == []

    ping(stack, OTHER)
    expected = version_problem(OTHER, __version__)
    assert health(stack) == [("warning", expected)]
    assert f"The plugin's jar is version {OTHER} but its backend is version {__version__}" in str(expected)
    assert "docs/install.md, Upgrading" in str(expected)

    ping(stack, __version__)
    assert health(stack) == []


def test_a_jar_too_old_to_say_its_version_gets_a_health_warning(stack: Stack) -> None:
    ping(stack, None)
    [(kind, message)] = health(stack)
    assert kind == "warning"
    assert "does not say its version" in message and __version__ in message

    ping(stack, __version__)
    assert health(stack) == []


# ----- the plugin status page ---------------------------------------------------------------------------


def _shown(view: str, attribute: str) -> str:
    found = re.search(rf"<span [^>]*{attribute}>([^<]*)</span>", view)
    assert found, f"no {attribute} in the page"
    return found.group(1)


def test_the_status_page_shows_both_versions_and_the_difference_at_the_top(stack: Stack) -> None:
    ping(stack, OTHER)  # the health messages now hold the warning too: the page shows it once
    view = status_view(stack, OTHER)

    assert _shown(view, "data-bridge-version") == OTHER
    assert _shown(view, "data-backend-version") == __version__
    problem = re.search(r"<p [^>]*data-version-problem>([^<]*)</p>", view)
    assert problem, view
    assert problem.group(1) == str(version_problem(OTHER, __version__)).replace("'", "&#39;")
    assert view.index("data-version-problem") < view.index("<h2>"), "the difference comes first"
    assert view.count("is version " + OTHER) == 1, "shown once, not again among the health messages"


def test_the_status_page_of_one_release_shows_both_versions_and_no_warning(stack: Stack) -> None:
    view = status_view(stack, __version__)
    assert _shown(view, "data-bridge-version") == __version__
    assert _shown(view, "data-backend-version") == __version__
    assert "data-version-problem" not in view


def test_the_status_page_says_when_the_jar_did_not_say_its_version(stack: Stack) -> None:
    view = status_view(stack, None)
    assert _shown(view, "data-bridge-version") == "none (the jar does not say it)"
    assert "data-version-problem" in view and "does not say its version" in view


def test_a_status_page_rendered_before_any_request_shows_the_backends_version() -> None:
    view = render_plugin_status([], [], ManualClock())
    assert _shown(view, "data-backend-version") == __version__
    assert _shown(view, "data-bridge-version") == "not heard from yet"
    assert "data-version-problem" not in view


@pytest.mark.browser
def test_the_version_warning_renders_at_the_top_in_headless_chromium(tmp_path: Path) -> None:
    view = render_plugin_status([], [], ManualClock(), Versions(OTHER, __version__))
    rendered = browser.render_all({"plugin-status": browser.html_page("Plugin status", view)}, tmp_path)
    dom = rendered["plugin-status"].dom
    assert "data-version-problem" in dom
    assert dom.index("data-version-problem") < dom.index("<h2>")
    assert f"The plugin's jar is version {OTHER} but its backend is version {__version__}" in dom


# ----- the sentence, and what a header may hold ---------------------------------------------------------


def test_one_release_is_no_problem() -> None:
    assert version_problem("1.2.0", "1.2.0") is None
    assert Versions("1.2.0", "1.2.0").problem is None


def test_another_release_is_named_with_what_to_do() -> None:
    assert version_problem("1.1.0", "1.2.0") == (
        "The plugin's jar is version 1.1.0 but its backend is version 1.2.0: install the jar and the "
        "backend of one release (docs/install.md, Upgrading)."
    )


def test_a_jar_without_a_version_is_told_apart_from_another_release() -> None:
    problem = version_problem(None, "1.2.0")
    assert problem is not None
    assert "does not say its version" in problem and "1.2.0" in problem and "Upgrading" in problem


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        (" 0.1.0 ", "0.1.0"),
        ("1.2.0-SNAPSHOT", "1.2.0-SNAPSHOT"),
        ("<script>alert(1)</script>", "'?script?alert?1???script?' (not a version)"),
        ("x" * 500, f"'{'x' * 64}' (not a version)"),
    ],
)
def test_a_header_is_read_as_a_version_or_shown_cut_and_cleaned(
    header: str | None, shown: str | None
) -> None:
    assert readable(header) == shown


def test_a_version_that_is_no_version_is_a_problem_never_an_error() -> None:
    versions = BridgeVersions("1.2.0")
    assert versions.seen("\x00\n<b>")
    current = versions.current()
    assert current is not None and current.bridge is not None
    assert "not a version" in str(current.problem)


def test_bridge_versions_say_when_the_jars_version_changed() -> None:
    versions = BridgeVersions("1.2.0")
    assert versions.current() is None
    assert versions.seen("1.2.0") is True
    assert versions.seen("1.2.0") is False
    assert versions.seen(" 1.2.0") is False  # another header, the same version
    assert versions.seen("1.1.0") is True
    assert versions.seen(None) is True
    assert versions.current() == Versions(None, "1.2.0")


def test_bridge_versions_keep_one_whole_state_under_concurrent_requests() -> None:
    versions = BridgeVersions("1.2.0")
    start = threading.Barrier(8)

    def requests_of(version: str) -> None:
        start.wait()
        for _ in range(2000):
            versions.seen(version)
            current = versions.current()
            assert current is not None and current.backend == "1.2.0"
            assert current.bridge in {"1.1.0", "1.2.0"}

    threads = [threading.Thread(target=requests_of, args=(("1.1.0", "1.2.0")[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = versions.current()
    assert final is not None and final.bridge in {"1.1.0", "1.2.0"}


# ----- one version, from one place ----------------------------------------------------------------------


def test_version_prints_the_backends_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "elastic_agent", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == __version__


def test_the_jars_version_is_the_backends() -> None:
    pom = ET.parse(ROOT / "bridge" / "pom.xml").getroot()
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = pom.find("m:version", namespace)
    assert version is not None and version.text == __version__, "bridge/pom.xml's <version>"


def test_the_packages_version_is_read_from_elastic_agent() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "elastic_agent.__version__"}


def test_the_jar_learns_its_version_from_the_build() -> None:
    properties = ROOT / "bridge" / "src" / "main" / "resources" / "bridge-version.properties"
    assert "version=${project.version}" in properties.read_text().splitlines()


def test_the_documented_contract_declares_both_headers() -> None:
    document = yaml.safe_load((ROOT / "docs" / "bridge-openapi.yaml").read_text())
    parameter = document["components"]["parameters"]["BridgeVersion"]
    assert (parameter["name"], parameter["in"]) == (BRIDGE_VERSION_HEADER, "header")
    header = {"$ref": "#/components/headers/BackendVersion"}
    for path, operations in document["paths"].items():
        for operation in operations.values():
            if path.startswith("/gocd/plugin/"):
                assert {"$ref": "#/components/parameters/BridgeVersion"} in operation["parameters"], path
            for code, answer in operation["responses"].items():
                if "$ref" not in answer:
                    assert answer["headers"] == {BACKEND_VERSION_HEADER: header}, (path, code)
    for name, answer in document["components"]["responses"].items():
        assert answer["headers"] == {BACKEND_VERSION_HEADER: header}, name
