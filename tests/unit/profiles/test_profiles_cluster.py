"""Cluster profile validation and the typed ClusterProfile."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from profiles import ClusterProfile, ProfileError, validate_cluster_profile

GOOD: dict[str, Any] = {"go_server_url": "https://gocd.example.com/go"}

# A syntactically valid PEM block (validation checks the shape, not the cryptography).
PEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ0FGRQ==\n-----END CERTIFICATE-----"


def problems(**props: Any) -> dict[str, str]:
    return {p["key"]: p["message"] for p in validate_cluster_profile({**GOOD, **props})}


def test_minimal_profile_is_valid_and_takes_defaults() -> None:
    assert validate_cluster_profile(GOOD) == []
    profile = ClusterProfile.from_properties(GOOD)
    assert profile == ClusterProfile(
        go_server_url="https://gocd.example.com/go",
        kubernetes_cluster_url=None,
        namespace="default",
        cluster_request_timeout=10.0,
        auto_register_timeout=600.0,
        pending_pods_count=10,
        idle_timeout=600.0,
        max_pods=None,
        max_pod_lifetime=None,
    )


def test_every_setting_is_read() -> None:
    profile = ClusterProfile.from_properties(
        {
            "go_server_url": "http://gocd-server.gocd.svc:8153/go",
            "kubernetes_cluster_url": "https://10.0.0.1:6443",
            "namespace": "build-agents",
            "security_token": " abc.def \n",
            "kubernetes_cluster_ca_cert": PEM,
            "cluster_request_timeout": "30s",
            "auto_register_timeout": "15",
            "pending_pods_count": "3",
            "idle_timeout": "2h",
            "max_pods": "50",
            "max_pod_lifetime": "1d",
        }
    )
    assert profile.kubernetes_cluster_url == "https://10.0.0.1:6443"
    assert profile.namespace == "build-agents"
    assert profile.security_token == "abc.def"
    assert profile.kubernetes_cluster_ca_cert == PEM + "\n"
    assert profile.cluster_request_timeout == 30
    assert profile.auto_register_timeout == 900
    assert profile.pending_pods_count == 3
    assert profile.idle_timeout == 7200
    assert profile.max_pods == 50
    assert profile.max_pod_lifetime == 86400


def test_a_blank_go_server_url_is_valid_and_left_to_gocds_secure_site_url() -> None:
    """The official plugin accepts a blank one (GoServerURLMetadata.doValidate returns no error for a
    blank input, gocd/kubernetes-elastic-agents 5.0.2) and then takes GoCD's secure site URL, which only
    the backend knows (tests/scenarios/test_official_defaults.py): the profile says None."""
    assert validate_cluster_profile({}) == []
    assert validate_cluster_profile({"go_server_url": "  "}) == []
    assert ClusterProfile.from_properties({}).go_server_url is None
    assert ClusterProfile.from_properties({"go_server_url": " "}).go_server_url is None


def test_a_blank_namespace_is_the_one_the_caller_says_a_blank_means() -> None:
    blank = {**GOOD, "namespace": "  "}
    assert ClusterProfile.from_properties(blank, blank_namespace="gocd").namespace == "gocd"
    assert ClusterProfile.from_properties(GOOD, blank_namespace="gocd").namespace == "gocd"
    named = {**GOOD, "namespace": "agents"}
    assert ClusterProfile.from_properties(named, blank_namespace="gocd").namespace == "agents"
    # The pool of a blank namespace and of the same name typed out is one: their cluster keys are equal.
    assert (
        ClusterProfile.from_properties(GOOD, blank_namespace="agents").cluster_key
        == ClusterProfile.from_properties(named).cluster_key
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://gocd.example.com/go",
        "http://gocd:8153/go",
        "https://10.1.2.3/ci/go",
        "https://[2001:db8::1]/go",
    ],
)
def test_reachable_go_server_urls_are_accepted(url: str) -> None:
    assert problems(go_server_url=url) == {}


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("https://gocd.example.com", "must end in /go"),
        ("https://gocd.example.com/go/", "must end in /go"),
        ("https://gocd.example.com/go?x=1", "query"),
        ("ftp://gocd.example.com/go", "http:// or https://"),
        ("gocd.example.com/go", "http:// or https://"),
        ("https://gocd.example.com:port/go", "not a valid URL"),
        ("https://gocd example.com/go", "spaces"),
    ],
)
def test_malformed_go_server_url_is_explained(url: str, fragment: str) -> None:
    assert fragment in problems(go_server_url=url)["go_server_url"]


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "gocd.localhost",
        "127.0.0.1",
        "127.1.2.3",
        "[::1]",
        "0.0.0.0",
        "[::ffff:127.0.0.1]",
    ],
)
def test_go_server_url_on_localhost_is_refused_because_pods_would_reach_themselves(host: str) -> None:
    assert "reach itself" in problems(go_server_url=f"http://{host}:8153/go")["go_server_url"]


@pytest.mark.parametrize(
    "url", ["https://k8s.example.com:6443", "http://127.0.0.1:8001", "https://kubernetes.default.svc"]
)
def test_kubernetes_cluster_url_accepts_http_urls_including_local_proxies(url: str) -> None:
    assert problems(kubernetes_cluster_url=url) == {}


@pytest.mark.parametrize("url", ["k8s.example.com", "file:///etc/k8s", "https://"])
def test_malformed_kubernetes_cluster_url_is_explained(url: str) -> None:
    assert "kubernetes_cluster_url" in problems(kubernetes_cluster_url=url)


@pytest.mark.parametrize("namespace", ["default", "gocd-agents", "a", "a" * 63, "x1"])
def test_dns_label_namespaces_are_accepted(namespace: str) -> None:
    assert problems(namespace=namespace) == {}


@pytest.mark.parametrize("namespace", ["Default", "-agents", "agents-", "a_b", "a.b", "a" * 64])
def test_invalid_namespace_is_explained(namespace: str) -> None:
    assert "not a Kubernetes namespace name" in problems(namespace=namespace)["namespace"]


def test_token_with_inner_whitespace_is_refused_without_echoing_it() -> None:
    message = problems(security_token="abc def")["security_token"]
    assert "one line" in message and "abc" not in message


def test_ca_certificate_accepts_pem_and_kubeconfig_base64() -> None:
    encoded = base64.b64encode(PEM.encode()).decode()
    assert problems(kubernetes_cluster_ca_cert=PEM) == {}
    assert problems(kubernetes_cluster_ca_cert=encoded) == {}
    profile = ClusterProfile.from_properties({**GOOD, "kubernetes_cluster_ca_cert": encoded})
    assert profile.kubernetes_cluster_ca_cert == PEM + "\n"


@pytest.mark.parametrize(
    "cert",
    ["not a certificate", "-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----", "bm90IHBlbQ=="],
)
def test_malformed_ca_certificate_is_explained(cert: str) -> None:
    assert "kubernetes_cluster_ca_cert" in problems(kubernetes_cluster_ca_cert=cert)


def test_bare_cluster_request_timeout_means_milliseconds_as_upstream() -> None:
    assert (
        ClusterProfile.from_properties({**GOOD, "cluster_request_timeout": "10000"}).cluster_request_timeout
        == 10
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cluster_request_timeout", "10x"),
        ("cluster_request_timeout", "10ms"),
        ("auto_register_timeout", "soon"),
        ("auto_register_timeout", "0"),
        ("idle_timeout", "-1m"),
        ("max_pod_lifetime", "forever"),
    ],
)
def test_bad_durations_are_reported_on_their_key(key: str, value: str) -> None:
    assert key in problems(**{key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pending_pods_count", "0"),
        ("pending_pods_count", "ten"),
        ("pending_pods_count", "1.5"),
        ("max_pods", "-1"),
        ("max_pods", "2x"),
    ],
)
def test_bad_counts_are_reported_on_their_key(key: str, value: str) -> None:
    assert key in problems(**{key: value})


def test_zero_or_blank_limits_mean_no_limit() -> None:
    for value in ("0", "", None):
        profile = ClusterProfile.from_properties({**GOOD, "max_pods": value, "max_pod_lifetime": value})
        assert profile.max_pods is None and profile.max_pod_lifetime is None


def test_idle_timeout_may_be_zero() -> None:
    assert ClusterProfile.from_properties({**GOOD, "idle_timeout": "0"}).idle_timeout == 0


def test_unknown_key_is_reported() -> None:
    assert problems(foo="1") == {"foo": "'foo' is not a setting of this plugin"}


def test_null_values_take_defaults() -> None:
    props = {**GOOD, "namespace": None, "pending_pods_count": None, "security_token": None}
    assert validate_cluster_profile(props) == []
    assert ClusterProfile.from_properties(props).namespace == "default"


@pytest.mark.parametrize("value", [10, 1.5, True, ["a"], {"a": 1}])
def test_non_string_values_are_reported_not_raised(value: Any) -> None:
    assert problems(pending_pods_count=value)["pending_pods_count"].startswith("must be text, not ")


@pytest.mark.parametrize("props", [None, [], "text", 42, {1: "a"}, {None: None}])
def test_any_input_gets_an_answer(props: Any) -> None:
    answer = validate_cluster_profile(props)
    assert answer and all(set(item) == {"key", "message"} for item in answer)
    assert all(isinstance(item["key"], str) and isinstance(item["message"], str) for item in answer)


def test_every_problem_is_reported_at_once() -> None:
    keys = {p["key"] for p in validate_cluster_profile({"namespace": "A", "max_pods": "x", "bar": "1"})}
    assert keys == {"namespace", "max_pods", "bar"}


def test_from_properties_raises_with_the_validation_message() -> None:
    props = {"go_server_url": "http://localhost:8153/go"}
    with pytest.raises(ProfileError) as error:
        ClusterProfile.from_properties(props)
    assert error.value.key == "go_server_url"
    assert error.value.message == validate_cluster_profile(props)[0]["message"]


def test_from_properties_ignores_unknown_keys_so_running_jobs_keep_working() -> None:
    assert ClusterProfile.from_properties({**GOOD, "foo": "bar"}).namespace == "default"


def test_secrets_stay_out_of_repr() -> None:
    profile = ClusterProfile.from_properties(
        {**GOOD, "security_token": "s3cr3t", "kubernetes_cluster_ca_cert": PEM}
    )
    assert "s3cr3t" not in repr(profile) and "BEGIN" not in repr(profile)


def test_cluster_key_ignores_how_the_url_was_typed() -> None:
    a = ClusterProfile.from_properties({**GOOD, "kubernetes_cluster_url": "HTTPS://K8s.Example.com:6443/"})
    b = ClusterProfile.from_properties({**GOOD, "kubernetes_cluster_url": "https://k8s.example.com:6443"})
    assert a.cluster_key == b.cluster_key == "https://k8s.example.com:6443\ndefault"


def test_cluster_key_differs_by_namespace_and_covers_in_cluster() -> None:
    a = ClusterProfile.from_properties({**GOOD, "namespace": "a"})
    b = ClusterProfile.from_properties({**GOOD, "namespace": "b"})
    assert a.cluster_key == "\na" and a.cluster_key != b.cluster_key


def test_cluster_key_never_holds_url_credentials() -> None:
    profile = ClusterProfile.from_properties({**GOOD, "kubernetes_cluster_url": "https://user:pw@k8s:6443"})
    assert "pw" not in profile.cluster_key
