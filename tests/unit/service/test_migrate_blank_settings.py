"""`migrate-profiles` carries blank settings over blank where they mean the same to both plugins: a blank
go_server_url (GoCD's secure site URL, checked as GoCD will check the new profile) and a blank namespace
(the GoCD server pod's own); `--server-namespace` and `--namespace` as they change that."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
import responses

from elastic_agent.gocd.rest_api import RETRIES
from tests.support.doubles.gocd_rest.admin_api import route
from tests.support.doubles.gocd_rest.admin_model import (
    AdminState,
    message_json,
)
from tests.support.migrate_world import (
    ACCEPT,
    CLUSTERS_URL,
    NEW,
    OLD,
    SERVER,
    SITE_URLS_URL,
    STAGING_AGENT_PROPERTIES,
    TOKEN,
    asked,
    cluster,
    elastic,
    posts,
    run,
    server,
)

# --- blank settings keep the official plugin's meaning ---------------------------------------------------

BLANK_URL_PROPERTIES = [{"key": "go_server_url"}, {"key": "namespace", "value": "gocd-agents"}]


def test_a_blank_go_server_url_is_carried_over_blank_and_named_as_gocds_secure_site_url(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """To both plugins a blank go_server_url is GoCD's secure site URL (KubernetesInstanceFactory.
    environmentFrom of the official plugin; profiles/server_url.py): the new profile says blank too."""
    state = server(cluster("k8s-site", OLD, BLANK_URL_PROPERTIES))
    route(gocd, state, SERVER)

    assert run(token_file) == 0

    sent = next(body for _, body in posts(gocd) if body["id"] == "k8s-site-reuse")
    assert sent["properties"] == BLANK_URL_PROPERTIES
    assert state.cluster_profiles["k8s-site-reuse"]["properties"] == BLANK_URL_PROPERTIES  # GoCD took it
    assert "GET /api/admin/config/server/site_urls" in asked(gocd)
    assert (
        "    go_server_url: blank, as in the old profile: GoCD's secure site URL, to both plugins, here "
        "https://gocd.example.com/go\n"
    ) in capsys.readouterr().out


@pytest.mark.parametrize(
    ("secure_site_url", "expected"),
    [
        (
            "",
            "not migrated: go_server_url is blank, which means GoCD's secure site URL (Admin > Server "
            "Configuration), and GoCD has none (its site URL http://gocd.example.com:8153 is not used: like "
            "the official plugin, this plugin takes only the secure one): set go_server_url in the cluster "
            "profile, or a secure site URL in GoCD.",
        ),
        (
            "https://gocd.example.com:8154",
            "not migrated: go_server_url is blank, which means GoCD's secure site URL (Admin > Server "
            "Configuration), and that one cannot be used: 'https://gocd.example.com:8154' must end in /go "
            "(e.g. https://gocd.example.com/go). Set go_server_url to https://gocd.example.com:8154/go, or "
            "change the secure site URL.",
        ),
    ],
    ids=["none", "without-go"],
)
def test_a_blank_go_server_url_without_a_usable_secure_site_url_is_reported_not_sent(
    gocd: responses.RequestsMock,
    token_file: Path,
    capsys: pytest.CaptureFixture[str],
    secure_site_url: str,
    expected: str,
) -> None:
    """GoCD would refuse it: this plugin's validate-cluster-profile checks the secure site URL a blank
    stands for (as the official plugin's ClusterProfileValidateRequestExecutor refuses a blank when GoCD
    has none); the double's validation does the same, so the dry run's verdict is GoCD's."""
    state = server(cluster("k8s-site", OLD, BLANK_URL_PROPERTIES), secure_site_url=secure_site_url)
    route(gocd, state, SERVER)

    assert run(token_file) == 1

    assert "k8s-site-reuse" not in {body["id"] for _, body in posts(gocd)}
    assert f"cluster profile 'k8s-site' -> 'k8s-site-reuse': {expected}" in capsys.readouterr().out
    # What GoCD answers when it is sent anyway: 422 with the plugin's sentence on go_server_url.
    gocd.calls.reset()
    body = {"id": "by-hand", "plugin_id": NEW, "properties": BLANK_URL_PROPERTIES}
    answer = requests.post(
        CLUSTERS_URL,
        json=body,
        headers={"Accept": ACCEPT["/api/admin/elastic/cluster_profiles"], "Authorization": f"bearer {TOKEN}"},
        timeout=5,
    )
    assert answer.status_code == 422
    [setting] = [p for p in answer.json()["data"]["properties"] if p["key"] == "go_server_url"]
    assert (
        expected.removeprefix("not migrated: go_server_url is ").rstrip(".")
        in setting["errors"]["go_server_url"][0]
    )


def test_a_blank_go_server_url_that_cannot_be_checked_is_carried_over_with_a_warning(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(RETRIES + 1):  # a lasting failure: the client retries a failed read RETRIES times
        gocd.get(SITE_URLS_URL, status=500, json=message_json("An error occurred."))
    route(gocd, server(cluster("k8s-site", OLD, BLANK_URL_PROPERTIES)), SERVER)

    assert run(token_file, "--dry-run") == 0

    site = capsys.readouterr().out.split("cluster profile 'k8s-site'")[1]
    assert ": would be created.\n" in site
    assert (
        "    go_server_url: blank, as in the old profile: GoCD's secure site URL, to both plugins\n" in site
    )
    assert (
        "    warning: go_server_url is blank, and GoCD's secure site URL, which it stands for, could not be "
        f"checked (GoCD failed on GET {SITE_URLS_URL} (500): see the GoCD server's log. GoCD said: An error "
        "occurred); GoCD refuses the new profile if it has none, or one that does not end in /go.\n"
    ) in site


def namespace_sent(gocd: responses.RequestsMock, id_: str) -> list[dict[str, str]]:
    body = next(body for _, body in posts(gocd) if body["id"] == id_)
    return [p for p in body["properties"] if p["key"] == "namespace"]


# A blank namespace as GoCD lists it (the key alone), and a profile saved before the field existed.
HOME_PROPERTIES = [{"key": "go_server_url", "value": "https://gocd.example.com/go"}, {"key": "namespace"}]
NO_KEY_PROPERTIES = [{"key": "go_server_url", "value": "https://gocd.example.com/go"}]


def blank_namespaces() -> AdminState:
    return server(
        cluster("k8s-home", OLD, HOME_PROPERTIES),
        cluster("k8s-old", OLD, NO_KEY_PROPERTIES),
        elastics=(elastic("home-agent", "k8s-home", STAGING_AGENT_PROPERTIES),),
    )


def test_a_blank_namespace_is_carried_over_blank_as_both_plugins_read_it_alike(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both read a blank as fabric8's Config.autoConfigure does where they run (the GoCD server's pod,
    this plugin's backend as its sidecar: elastic_agent/kube/namespace.py), so it stays blank, also
    outside a pod, where which namespace that is cannot be seen."""
    route(gocd, blank_namespaces(), SERVER)

    assert run(token_file) == 0

    assert namespace_sent(gocd, "k8s-home-reuse") == [{"key": "namespace"}]
    assert namespace_sent(gocd, "k8s-old-reuse") == []
    assert namespace_sent(gocd, "k8s-prod-reuse") == [{"key": "namespace", "value": "gocd-agents"}]
    out = capsys.readouterr().out
    assert (
        "cluster profile 'k8s-home' -> 'k8s-home-reuse': created.\n    settings: go_server_url, namespace\n"
        "    namespace: blank, as in the old profile: both plugins read a blank as the namespace of the GoCD "
        "server's pod, where this plugin's backend runs, not known here (this command is not running "
        "inside a pod (no "
    ) in out
    assert (
        "give --server-namespace NS to check that the new pods do not share it with the official plugin's)"
        in out
    )
    assert "    namespace: gocd-agents, as in the old profile\n" in out
    assert "home-agent-reuse" in {body["id"] for _, body in posts(gocd)}
    assert "Summary: created 8 profiles; 0 skipped (they exist already); 0 not migrated." in out


def test_inside_a_pod_a_blank_namespace_stays_blank_and_is_named(
    gocd: responses.RequestsMock, token_file: Path, not_in_a_pod: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_in_a_pod.parent.mkdir()
    not_in_a_pod.write_text("gocd", encoding="utf-8")  # as Kubernetes writes it: no newline
    route(gocd, blank_namespaces(), SERVER)

    assert run(token_file, "--server-namespace", "gocd") == 0

    assert namespace_sent(gocd, "k8s-home-reuse") == [{"key": "namespace"}]
    assert (
        "    namespace: blank, as in the old profile: both plugins read a blank as the namespace of the GoCD "
        "server's pod, where this plugin's backend runs: gocd (from --server-namespace)\n"
    ) in capsys.readouterr().out


def test_a_gocd_server_namespace_other_than_this_pods_is_written_out(
    gocd: responses.RequestsMock, token_file: Path, not_in_a_pod: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run in the backend's pod, and told the GoCD server runs elsewhere: a blank would mean two different
    namespaces, so the official plugin's is written out."""
    not_in_a_pod.parent.mkdir()
    not_in_a_pod.write_text("gocd-reuse", encoding="utf-8")
    route(gocd, blank_namespaces(), SERVER)

    assert run(token_file, "--server-namespace", "gocd") == 0

    assert namespace_sent(gocd, "k8s-home-reuse") == [{"key": "namespace", "value": "gocd"}]
    assert namespace_sent(gocd, "k8s-old-reuse") == [{"key": "namespace", "value": "gocd"}]
    home = next(body for _, body in posts(gocd) if body["id"] == "k8s-home-reuse")
    assert [p["key"] for p in home["properties"]] == ["go_server_url", "namespace"]  # in its place
    assert (
        "    namespace: blank in the old profile, which the official plugin reads as the GoCD server's "
        "namespace: gocd (from --server-namespace); this plugin's backend, running in this pod's namespace "
        "gocd-reuse, would read a blank as gocd-reuse, so gocd is written out in the new profile\n"
    ) in capsys.readouterr().out


def test_a_namespace_the_official_plugin_also_uses_is_warned_about_and_namespace_moves_the_new_pods(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other_cluster = [
        {"key": "go_server_url", "value": "https://gocd.example.com/go"},
        {"key": "kubernetes_cluster_url", "value": "https://k8s.other.example.com:6443/"},
        {"key": "namespace", "value": "gocd-agents"},  # same name, another cluster: nothing shared
    ]
    state = server(cluster("k8s-home", OLD, HOME_PROPERTIES), cluster("k8s-far", OLD, other_cluster))
    route(gocd, state, SERVER)

    # The blank one is the GoCD server's namespace, gocd-agents, so it shares with k8s-prod too.
    assert run(token_file, "--server-namespace", "gocd-agents", "--dry-run") == 0
    out = capsys.readouterr().out
    warning = (
        "    warning: namespace gocd-agents is also where the official plugin's cluster profiles "
        "'k8s-prod', 'k8s-home' put their pods: both plugins' pods share that namespace, its resource "
        "quotas and its RBAC (Roles, RoleBindings); give --namespace NS to put the new profiles' pods in "
        "another one.\n"
    )
    prod = out.split("cluster profile 'k8s-prod'")[1].split("  elastic profile")[0]
    assert warning in prod
    assert "namespace staging is also where the official plugin's cluster profile 'k8s-staging' puts" in out
    # A blank URL is the GoCD server's own cluster, which may be any; two URLs that differ are two clusters.
    far = out.split("cluster profile 'k8s-far'")[1]
    assert "cluster profiles 'k8s-home', 'k8s-far' put their pods" in far and "k8s-prod" not in far
    assert "Summary: would create 7 profiles; 0 skipped (they exist already); 0 not migrated." in out

    assert run(token_file, "--server-namespace", "gocd-agents", "--namespace", "reuse-agents") == 0
    out = capsys.readouterr().out
    assert "warning" not in out
    assert (
        "    namespace: reuse-agents (from --namespace); blank in the old profile, which the official plugin "
        "reads as the GoCD server's namespace: gocd-agents (from --server-namespace)\n"
    ) in out
    assert "    namespace: reuse-agents (from --namespace); gocd-agents in the old profile\n" in out
    for _, body in posts(gocd):
        if "plugin_id" in body:
            assert [p for p in body["properties"] if p["key"] == "namespace"] == [
                {"key": "namespace", "value": "reuse-agents"}
            ]


@pytest.mark.parametrize("option", ["--namespace", "--server-namespace"])
def test_a_namespace_option_that_is_no_namespace_name_is_one_line(
    gocd: responses.RequestsMock, token_file: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    assert run(token_file, option, "GoCD_Agents") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {option}: 'GoCD_Agents' is not a Kubernetes namespace name")
    assert len(err.strip().splitlines()) == 1 and not gocd.calls
