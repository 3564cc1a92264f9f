"""What a blank `go_server_url` stands for: the URL GoCD itself names as its secure site URL.

The official plugin (gocd/kubernetes-elastic-agents, KubernetesInstanceFactory.environmentFrom) gives a
pod `GO_EA_SERVER_URL = go_server_url`, or, when that is blank, the `secure_site_url` of the server
info GoCD sends it (GoCD's ServerConfig.getSecureSiteUrl, Admin > Server Configuration). It never takes
the plain `site_url`: with no secure site URL its ClusterProfileValidateRequestExecutor refuses the blank
("Secure site url is not configured. Please specify Go Server Url."), and a pod made anyway would get an
empty server URL. This plugin takes the same URL, and checks it as it checks a typed one
(values.go_server_url: ending in /go, not localhost), so that a URL the agents would refuse, or that
would lead each pod to itself, is a sentence here and not a pod that never registers. GoCD's own check
of a secure site URL is only `https://.+` (SecureSiteUrl.validate), so one without /go is common: the
GoCD agent refuses a server URL that does not end in /go (ServerUrlValidator).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from profiles.errors import ProfileError
from profiles.values import go_server_url, safe_url

KEY = "go_server_url"
_WHERE = "GoCD's secure site URL (Admin > Server Configuration)"


def pods_server_url(secure_site_url: object, site_url: object = None) -> str:
    """The server URL for pods of a profile whose go_server_url is blank, from GoCD's site URLs as GoCD
    reports them (text, null, absent or blank); ProfileError with a sentence when there is none to use."""
    secure = secure_site_url.strip() if isinstance(secure_site_url, str) else ""
    if not secure:
        plain = site_url.strip() if isinstance(site_url, str) else ""
        unused = (
            f" (its site URL {safe_url(plain)} is not used: like the official plugin, this plugin takes "
            "only the secure one)"
            if plain
            else ""
        )
        raise ProfileError(
            KEY,
            f"blank, which means {_WHERE}, and GoCD has none{unused}: set go_server_url "
            "in the cluster profile, or a secure site URL in GoCD",
        )
    try:
        return go_server_url(secure)
    except ValueError as error:
        raise ProfileError(
            KEY,
            f"blank, which means {_WHERE}, and that one cannot be used: {error}. {_advice(secure)}",
        ) from None


def _advice(secure: str) -> str:
    """A site URL is often the server's address alone; then the same with /go is what agents need."""
    try:
        parts = urlsplit(secure)
        with_go = go_server_url(secure.rstrip("/") + "/go") if parts.path in ("", "/") else None
    except ValueError:
        with_go = None
    if with_go is not None:
        return f"Set go_server_url to {safe_url(with_go)}, or change the secure site URL"
    return "Set go_server_url in the cluster profile, or change the secure site URL"
