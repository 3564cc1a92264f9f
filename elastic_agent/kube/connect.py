"""Building a `kubernetes.client.ApiClient` for a cluster profile.

Order of precedence, as the upstream plugin: the profile's URL (with its token and CA certificate), else
the in-cluster service account (when KUBERNETES_SERVICE_HOST is set), else the local kubeconfig.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from pathlib import Path

import urllib3
from kubernetes import client, config

from elastic_agent.kube.port import ClusterError
from elastic_agent.token_file import TokenFile, TokenFileError

# Where Kubernetes mounts a pod's service account (token, ca.crt, namespace).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
NO_CLUSTER = (
    "the cluster profile has no kubernetes_cluster_url, and the backend runs neither inside Kubernetes "
    "nor with a kubeconfig: set kubernetes_cluster_url (and security_token) in the cluster profile"
)


class KubeRetry(urllib3.Retry):
    """The Kubernetes client's retry policy, a class of its own so that `QuietKubeRetries` can tell its
    reconnects from those of other urllib3 pools (urllib3 keeps the class on every `Retry.new`)."""


class QuietKubeRetries(logging.Filter):
    """Turns urllib3's "Retrying (...) after connection broken by ..." into a DEBUG line when the retry
    is the Kubernetes client's; leaves every other record (and the GoCD callback client's) as it is.

    Why a filter, and not `retries=0` with our loops doing all retrying: the one quick reconnect is worth
    keeping; it hides a keep-alive connection the server closed while idle, which is no outage and must
    not be logged as one. When the server is really gone, urllib3's line would come once per failed
    call, beside the outage tracker's few (outage.py), so the line is demoted rather than dropped: DEBUG
    logging still shows each reconnect. A record's level is decided before handlers see it, and a
    logger's filters run before its handlers and before the record propagates, so demoting it here is
    enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            record.levelno == logging.WARNING
            and isinstance(args, tuple)
            and args
            and isinstance(args[0], KubeRetry)
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_QUIET = QuietKubeRetries()


def quiet_kube_retries() -> None:
    """Install the filter on urllib3's pool logger (once: adding the same filter again does nothing)."""
    logging.getLogger("urllib3.connectionpool").addFilter(_QUIET)


def can_connect_without_url() -> bool:
    """Whether a blank kubernetes_cluster_url can work here: in a pod, or with a kubeconfig file."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    paths = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    return any(os.path.isfile(path) for path in paths.split(os.pathsep) if path)


class ConnectError(ClusterError):
    """The connection settings are unusable (no URL and no in-cluster or kubeconfig configuration, or a
    CA certificate that is not one). Like any ClusterError it is reported with its sentence: in the
    answer, the job's console and GoCD's health messages."""


def pem_from_profile(text: str) -> str:
    """Accept the certificate as PEM text or as base64 of PEM (what kubeconfig's
    certificate-authority-data holds, and what users of the upstream plugin paste)."""
    stripped = text.strip()
    if "-----BEGIN" in stripped:
        return stripped + "\n"
    try:
        decoded = base64.b64decode("".join(stripped.split()), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError) as err:
        raise ConnectError("the cluster CA certificate is neither PEM nor base64-encoded PEM") from err
    if "-----BEGIN" not in decoded:
        raise ConnectError("the cluster CA certificate is neither PEM nor base64-encoded PEM")
    return decoded.strip() + "\n"


def _trust_only(api_client: client.ApiClient, pem: str) -> None:
    """Make `api_client` verify the server against the certificates in `pem`, held in memory.

    The generated client takes a CA only as a file path (`Configuration.ssl_ca_cert`); a file per
    connection would have to go when its connection goes (and at exit for the ones still open), and a
    new connection comes with every credential change. urllib3 takes the certificates as text too
    (`ca_cert_data`), and the client's pool manager hands its keywords to every connection pool it makes,
    so the text goes there, in place of the path: nothing is written, nothing is left to remove."""
    pool_keywords = api_client.rest_client.pool_manager.connection_pool_kw
    pool_keywords["ca_certs"] = None
    pool_keywords["ca_cert_data"] = pem


def disconnect(api_client: client.ApiClient) -> None:
    """Release what `api_client` holds now, not when the last reference to it goes: its thread pool (if
    it made one), its connections and the last answer it kept.

    The client's own close() ends only the thread pool. Clearing the pool manager forgets its connection
    pools without closing them (urllib3 closes a pool when it is collected), and the generated client
    keeps its last response, which keeps its pool: each pool is closed here, which closes its idle
    connections at once and one still in use when its response is released. A closed client may still
    be referenced for a while (by a request that read the pool's port before a takeover); a call
    through it afterwards opens a new connection."""
    api_client.close()
    pools = api_client.rest_client.pool_manager.pools
    for key in list(pools.keys()):  # the container cannot be iterated itself
        pool = pools.get(key)
        if pool is not None:
            pool.close()
    pools.clear()
    api_client.last_response = None


class ServiceAccountToken:
    """The pod's service-account token, read again whenever the kubelet rewrites its file.

    Bound tokens expire (an hour by default) and kubelet replaces the projected file well before that;
    a client that read it once gets 401s from then on, the official plugin's long-open bug
    (kubernetes-elastic-agents #382). The client library's own loader re-reads at most once a minute
    after its first read; this checks the file before every API call (`TokenFile`: one stat)."""

    def __init__(self, path: Path) -> None:
        try:
            self._file = TokenFile(path)
        except TokenFileError as error:
            raise ConnectError(f"the service-account token: {error}") from None

    @property
    def token(self) -> str:
        return self._file.current()

    def refresh(self, configuration: client.Configuration) -> None:
        """The client's `refresh_api_key_hook`: called before each request is signed."""
        configuration.api_key = {"BearerToken": self._file.current()}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}


def _in_cluster(configuration: client.Configuration) -> None:
    """The pod's service account: KUBERNETES_SERVICE_HOST/PORT, the token and the CA in
    SERVICE_ACCOUNT_DIR, as the client library's in-cluster loader reads them, the token kept fresh."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token_file, ca_file = SERVICE_ACCOUNT_DIR / "token", SERVICE_ACCOUNT_DIR / "ca.crt"
    if not token_file.is_file() or not ca_file.is_file():
        raise ConnectError(
            f"running inside Kubernetes (KUBERNETES_SERVICE_HOST is set) but {SERVICE_ACCOUNT_DIR} has no "
            "service-account token or CA: mount the service account, or set kubernetes_cluster_url"
        )
    configuration.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    configuration.ssl_ca_cert = str(ca_file)
    token = ServiceAccountToken(token_file)
    token.refresh(configuration)
    configuration.refresh_api_key_hook = token.refresh


def connect(
    *,
    url: str | None = None,
    token: str | None = None,
    ca_cert: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> client.ApiClient:
    """An ApiClient for the profile's `url` (kubernetes_cluster_url) with `token` (security_token) and
    `ca_cert` (kubernetes_cluster_ca_cert: PEM, or base64 of PEM); without a URL the in-cluster service
    account, else the kubeconfig file `kubeconfig` (default $KUBECONFIG or ~/.kube/config).
    `configuration.host` of the result names the server in messages (it never holds a credential)."""
    configuration = client.Configuration()
    ca_pem: str | None = None  # the profile's CA, for the client built below
    if url:
        configuration.host = url.rstrip("/")
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        if ca_cert and ca_cert.strip():
            ca_pem = pem_from_profile(ca_cert)
        # Without a CA, https is verified against the system's CAs (urllib3's default with certifi).
        configuration.verify_ssl = True
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        _in_cluster(configuration)
    else:
        try:
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        except (config.ConfigException, OSError) as err:
            raise ConnectError(NO_CLUSTER) from err
    # One quick reconnect for a dropped keep-alive connection, but no second attempt after a read
    # timeout (that would double `cluster_request_timeout`); our own loops retry with backoff.
    configuration.retries = KubeRetry(total=1, connect=1, read=0, redirect=0, status=0)
    quiet_kube_retries()
    api_client = client.ApiClient(configuration)
    if ca_pem is not None:
        _trust_only(api_client, ca_pem)
    return api_client
