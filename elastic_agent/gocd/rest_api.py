"""A small client for GoCD's REST API (the admin API people and scripts use, not the plugin protocol of
`server.py`): list and create cluster profiles and elastic agent profiles.

Facts it relies on (GoCD's API reference, api.gocd.org, and gocd/gocd's controllers and representers):

- Cluster profiles: `GET|POST /go/api/admin/elastic/cluster_profiles`, `Accept:
  application/vnd.go.cd.v1+json` (since 19.3). The list is `_embedded.cluster_profiles[]`, each with
  `id`, `plugin_id` and `properties`.
- Elastic agent profiles: `GET|POST /go/api/elastic/profiles`, `Accept: application/vnd.go.cd.v2+json`
  (since 19.3). The list is `_embedded.profiles[]`, each with `id`, `cluster_profile_id` and `properties`:
  an elastic profile has no plugin id of its own, it belongs to its cluster profile's plugin.
- A property is `{"key": K, "value": V}`, or `{"key": K, "encrypted_value": E}` when the plugin declares it
  secure; a blank one is `{"key": K}`. On a POST GoCD takes `encrypted_value` of a secure key as it is (it
  only encrypts a plain `value` of one), so a secret is copied without ever being decrypted here. For a
  key the plugin does not declare secure it refuses a cluster profile's (422) and drops an elastic
  profile's (saved blank): migrate_plan.py never sends one.
- Creating is a POST of the same shape with `Content-Type: application/json`; ETag/If-Match are only for
  updates. An error answer is `{"message": M}`; most 422s also carry `"data"`: the entity, with
  `"errors": {field: [messages]}` and, for settings the plugin refused, `properties[i].errors` (an
  elastic profile naming a cluster profile that does not exist gets the message alone).
- Authentication: `Authorization: bearer <personal access token>` (since 19.2).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.util.retry import Retry

from profiles.values import safe_url

log = logging.getLogger(__name__)

CLUSTER_PROFILES_PATH = "/api/admin/elastic/cluster_profiles"
ELASTIC_PROFILES_PATH = "/api/elastic/profiles"
CLUSTER_PROFILES_ACCEPT = "application/vnd.go.cd.v1+json"
ELASTIC_PROFILES_ACCEPT = "application/vnd.go.cd.v2+json"
DEFAULT_TIMEOUT_S = 30.0
# Reads are retried on what passes (a proxy's 429 or 502, GoCD's 503 while it starts, a timeout): the
# back-off doubles from RETRY_BACKOFF_S, 5 tries at most; a 429's or 503's Retry-After is obeyed.
RETRIES = 5
RETRY_BACKOFF_S = 0.5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# What a reverse proxy or gateway in front of GoCD answers when GoCD does not (nginx's titles). GoCD's own
# error answers are JSON (api-base MessageJson, RoutesHelper), so these without a JSON body are the proxy's.
GATEWAY_STATUSES = {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


class GoCDApiError(Exception):
    """GoCD refused a call or could not be reached. `str(error)` is a sentence for a person; `status` is
    GoCD's HTTP status (None: no answer at all)."""

    def __init__(self, sentence: str, status: int | None = None, said: str | None = None) -> None:
        super().__init__(sentence)
        self.status = status
        self.said = said  # GoCD's own `message`, when its answer had one

    @property
    def affects_every_call(self) -> bool:
        """True when the next call would fail the same way (no answer, the token refused, the wrong URL, a
        redirect, GoCD unavailable), so a migration stops; False when only this one entity was refused
        (422, 409, 500)."""
        return self.status is None or self.status in (401, 403, 404, 503) or 300 <= self.status < 400


@dataclass(frozen=True)
class Property:
    """One setting as GoCD stores it. `encrypted_value` is GoCD's cipher text of a secure setting: it is
    copied as it is and never shown (repr included)."""

    key: str
    value: str | None = None
    encrypted_value: str | None = field(default=None, repr=False)

    @property
    def encrypted(self) -> bool:
        return self.encrypted_value is not None

    def to_json(self) -> dict[str, str]:
        body = {"key": self.key}
        if self.encrypted_value is not None:
            body["encrypted_value"] = self.encrypted_value
        elif self.value is not None:
            body["value"] = self.value
        return body


@dataclass(frozen=True)
class ClusterProfileRecord:
    id: str
    plugin_id: str
    properties: tuple[Property, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "plugin_id": self.plugin_id,
            "properties": [p.to_json() for p in self.properties],
        }


@dataclass(frozen=True)
class ElasticProfileRecord:
    id: str
    cluster_profile_id: str
    properties: tuple[Property, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cluster_profile_id": self.cluster_profile_id,
            "properties": [p.to_json() for p in self.properties],
        }


class _BearerAuth(AuthBase):
    """Sets GoCD's bearer header. As an `auth` (not a plain header) it also keeps requests from replacing
    it with a ~/.netrc entry; the token is in no repr. Without a token no header is sent: a GoCD with
    security off refuses any bearer token (401, "Bearer authentication credentials are not required,
    since security has been disabled on this server": gocd/gocd's AccessTokenAuthenticationFilter)."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    @property
    def sends_token(self) -> bool:
        return self._token is not None

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._token is not None:
            request.headers["Authorization"] = f"bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_BearerAuth(****)"


class GoCDRestClient:
    """GoCD's REST API at `server_url` (the server's URL ending in /go, e.g. https://gocd.example.com/go)."""

    def __init__(
        self,
        server_url: str,
        token: str | None,
        *,
        session: requests.Session | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        backoff_s: float = RETRY_BACKOFF_S,
        pool_size: int = 10,
    ) -> None:
        self.server_url = server_url.rstrip("/")
        self.shown_url = safe_url(self.server_url)
        self._auth = _BearerAuth(token)
        self._given_session = session
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._pool_size = pool_size
        self._local = threading.local()  # one Session per thread: requests does not promise more
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()  # requests sent, by `what` kind; retries counted apart
        self.retries = 0

    def __repr__(self) -> str:
        return f"GoCDRestClient({self.shown_url!r})"

    # --- the four calls ----------------------------------------------------------------------------

    def list_cluster_profiles(self) -> list[ClusterProfileRecord]:
        answer = self._call("GET", CLUSTER_PROFILES_PATH, CLUSTER_PROFILES_ACCEPT, "the cluster profiles")
        return [
            ClusterProfileRecord(_text(item, "id"), _text(item, "plugin_id"), _properties(item))
            for item in _embedded(answer, "cluster_profiles", "the cluster profiles")
        ]

    def list_elastic_profiles(self) -> list[ElasticProfileRecord]:
        answer = self._call(
            "GET", ELASTIC_PROFILES_PATH, ELASTIC_PROFILES_ACCEPT, "the elastic agent profiles"
        )
        return [
            ElasticProfileRecord(_text(item, "id"), _text(item, "cluster_profile_id"), _properties(item))
            for item in _embedded(answer, "profiles", "the elastic agent profiles")
        ]

    def create_cluster_profile(self, profile: ClusterProfileRecord) -> None:
        self._call(
            "POST",
            CLUSTER_PROFILES_PATH,
            CLUSTER_PROFILES_ACCEPT,
            f"cluster profile '{profile.id}'",
            body=profile.to_json(),
        )

    def create_elastic_profile(self, profile: ElasticProfileRecord) -> None:
        self._call(
            "POST",
            ELASTIC_PROFILES_PATH,
            ELASTIC_PROFILES_ACCEPT,
            f"elastic agent profile '{profile.id}'",
            body=profile.to_json(),
        )

    def get_json(
        self,
        path: str,
        accept: str,
        what: str,
        params: Mapping[str, str] | None = None,
        kind: str | None = None,
    ) -> Any:
        """GoCD's JSON answer to a GET of `path` (below the server URL, with query `params`), or
        GoCDApiError with a sentence that names `what`, the thing asked for (history.py's read-only calls).
        `kind` names the endpoint in `calls` (default: the path)."""
        return self._call("GET", path, accept, what, params=params, kind=kind)

    # --- one call ------------------------------------------------------------------------------------

    def _session(self) -> requests.Session:
        """This thread's session, with GETs retried (never a POST: it may have been carried out)."""
        if self._given_session is not None:
            return self._given_session
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            retry = Retry(
                total=RETRIES,
                connect=RETRIES,
                read=RETRIES,
                status=RETRIES,
                status_forcelist=RETRY_STATUSES,
                allowed_methods=frozenset({"GET"}),
                backoff_factor=self._backoff_s,
                respect_retry_after_header=True,
                raise_on_status=False,  # the last answer is turned into a sentence below
            )
            adapter = HTTPAdapter(max_retries=retry, pool_maxsize=self._pool_size)
            session = requests.Session()
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    def _count(self, kind: str, response: requests.Response) -> int:
        """Counts the call and its retries; the number of tries it took."""
        retried = getattr(getattr(response.raw, "retries", None), "history", ())
        again = len(retried) if isinstance(retried, tuple) else 0
        with self._lock:
            self.calls[kind] += 1
            self.retries += again
        return 1 + again

    def _call(
        self,
        method: str,
        path: str,
        accept: str,
        what: str,
        body: dict[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        kind: str | None = None,
    ) -> Any:
        """GoCD's JSON answer to a GET (None for a POST: success is all that counts, and the entity it
        echoes is not needed), or GoCDApiError with a sentence. Redirects are not followed: a POST would
        turn into a GET, and a redirect to a login page or another host is something to fix in --server."""
        url = self.server_url + path
        shown = self.shown_url + path
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = self._session().request(
                method,
                url,
                headers=headers,
                json=body,
                params=params,
                auth=self._auth,
                timeout=self._timeout_s,
                allow_redirects=False,
            )
        except requests.exceptions.SSLError:
            raise GoCDApiError(
                f"could not reach GoCD at {shown}: the TLS handshake failed (is the server's certificate "
                "trusted? REQUESTS_CA_BUNDLE names a CA file to trust)"
            ) from None
        except requests.exceptions.Timeout:
            raise GoCDApiError(
                f"could not reach GoCD at {shown}: no answer within {self._timeout_s:g} s"
            ) from None
        except requests.exceptions.RequestException as error:
            raise GoCDApiError(
                f"could not reach GoCD at {shown}: {_connection_reason(error)} (is --server right, and is "
                "the server up?)"
            ) from None
        log.debug("%s %s: %s", method, shown, response.status_code)  # never headers or bodies
        tries = self._count(kind or f"{method} {path}", response)
        if response.status_code >= 300:
            said = _message(response)
            sentence = _refusal(method, shown, what, response, tries)
            if response.status_code == 401 and not self._auth.sends_token:
                sentence = (
                    "GoCD wants a token: give --token-file (a personal access token of an admin). "
                    f"GoCD said: {said}"
                )
            elif response.status_code == 401 and said and "security has been disabled" in said:
                sentence += " Leave out --token-file for this server."
            raise GoCDApiError(sentence, response.status_code, said)
        if body is not None:
            return None
        try:
            return response.json()
        except ValueError:
            raise GoCDApiError(
                f"GoCD's answer to {method} {shown} is not JSON: is --server the GoCD server's URL, "
                "ending in /go (e.g. https://gocd.example.com/go)?",
                response.status_code,
            ) from None


# --- reading answers -----------------------------------------------------------------------------------


def _embedded(answer: Any, name: str, what: str) -> list[Mapping[str, Any]]:
    items = answer.get("_embedded", {}).get(name) if isinstance(answer, Mapping) else None
    if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
        raise GoCDApiError(
            f"GoCD's answer is not the list of {what} expected (`_embedded.{name}`): is --server a GoCD "
            "server of version 19.3 or later?"
        )
    return items


def _text(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise GoCDApiError(
            f"GoCD listed a profile without a text `{key}`: the answer is not what was expected"
        )
    return value


def _properties(item: Mapping[str, Any]) -> tuple[Property, ...]:
    raw = item.get("properties") or []
    if not isinstance(raw, list):
        raise GoCDApiError(f"GoCD listed profile {item.get('id')!r} with `properties` that are not a list")
    properties: list[Property] = []
    for entry in raw:
        key = entry.get("key") if isinstance(entry, Mapping) else None
        value = entry.get("value") if isinstance(entry, Mapping) else None
        encrypted = entry.get("encrypted_value") if isinstance(entry, Mapping) else None
        if not isinstance(key, str) or not all(v is None or isinstance(v, str) for v in (value, encrypted)):
            raise GoCDApiError(
                f"GoCD listed profile {item.get('id')!r} with a setting that is not key and text"
            )
        properties.append(Property(key, value, encrypted))
    return tuple(properties)


# --- error answers as sentences ------------------------------------------------------------------------


def _message(response: requests.Response) -> str | None:
    """GoCD's `message` in an error answer ({"message": M}: api-base MessageJson), if it has one."""
    try:
        answer = response.json()
    except ValueError:
        return None
    message = answer.get("message") if isinstance(answer, Mapping) else None
    return message.strip() if isinstance(message, str) and message.strip() else None


def _refusal(method: str, shown: str, what: str, response: requests.Response, tries: int = 1) -> str:
    """GoCD's error answer as a sentence; only its messages are quoted, never the entity it echoes (its
    settings may hold values people keep private). A gateway status without GoCD's JSON is the proxy's,
    and said to be: GoCD's log has nothing about it."""
    status = response.status_code
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if status in GATEWAY_STATUSES and not isinstance(answer, Mapping):
        after = f" after {tries} tries" if tries > 1 else ""
        return (
            f"a proxy or gateway in front of GoCD answered {method} {shown} with {status} "
            f"({GATEWAY_STATUSES[status]}){after}, not GoCD itself (the answer is not GoCD's JSON): GoCD may "
            "be restarting or overloaded, or the proxy cannot reach it in time. Check the proxy and GoCD's "
            "health, then run this again."
        )
    message = answer.get("message") if isinstance(answer, Mapping) else None
    said = f" GoCD said: {_sentence(message)}" if isinstance(message, str) and message.strip() else ""
    if status == 401:
        return f"GoCD refused the token: check --token-file (a personal access token of an admin).{said}"
    if status == 403:
        return (
            f"GoCD says the token's user may not read or change {what}: migrating profiles needs the "
            f"personal access token of a system administrator.{said}"
        )
    if status == 404:
        return (
            f"GoCD has no API at {shown} (404): is the URL the server's, ending in /go (e.g. "
            f"https://gocd.example.com/go), and is GoCD 19.3 or later?{said}"
        )
    if 300 <= status < 400:
        location = safe_url(response.headers.get("Location", "")) if response.headers.get("Location") else ""
        to = f" to {location}" if location else ""
        return (
            f"GoCD answered {method} {shown} with a redirect{to}: give the URL it redirects to as --server "
            "(a redirect to a login page means the token was not accepted)."
        )
    if status == 422:
        details = "".join(f" {sentence}" for sentence in _field_errors(answer))
        return f"GoCD refused to create {what} (422).{said}{details}"
    if status == 503:
        return (
            f"GoCD is not taking requests at {shown} (503: in maintenance mode, or starting up): try again "
            f"later.{said}"
        )
    if status >= 500:
        return f"GoCD failed on {method} {shown} ({status}): see the GoCD server's log.{said}"
    return f"GoCD answered {method} {shown} with {status} for {what}.{said}"


def _field_errors(answer: Any) -> Iterator[str]:
    """Each field error of a 422 answer as a sentence naming the field or setting."""
    data = answer.get("data") if isinstance(answer, Mapping) else None
    if not isinstance(data, Mapping):
        return
    for name, messages in _error_map(data.get("errors")):
        yield f"Field {name}: {messages}"
    for entry in data.get("properties") or []:
        if isinstance(entry, Mapping):
            for _, messages in _error_map(entry.get("errors")):
                yield f"Setting {entry.get('key')}: {messages}"


def _error_map(errors: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(errors, Mapping):
        return
    for name, messages in errors.items():
        texts = messages if isinstance(messages, list) else [messages]
        joined = " ".join(_sentence(str(text)) for text in texts if str(text).strip())
        if joined:
            yield str(name), joined


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _connection_reason(error: requests.exceptions.RequestException) -> str:
    """A short reason, not urllib3's nested repr (long, and naming internals)."""
    if isinstance(error, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema):
        return "the URL is not valid"
    if isinstance(error, requests.exceptions.ConnectionError):
        reason = getattr(error.args[0], "reason", None) if error.args else None
        if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
            return f"no answer in time, {RETRIES + 1} tries"
        return "the connection failed (refused, or the host is unknown)"
    return f"the request failed ({type(error).__name__})"
