"""What `migrate-profiles` asks GoCD besides the profiles: whether the token's user sees every profile,
whether this plugin is installed, and what a blank `go_server_url` stands for there.

Facts from gocd/gocd's controllers, on which the calls and their readings are built:

- GoCD lists to each user only the profiles that user may view (ClusterProfilesControllerV1.index and
  ElasticProfileControllerV2.index filter by `doesUserHasPermissions`): a token whose user is not an
  administrator gets 200 and an empty list, never a refusal. So an empty list alone cannot tell "no
  profiles" from "may not see them". `GET /api/admin/config/server/site_urls`
  (ServerSiteUrlsConfigControllerV1, `checkAdminUserAnd403`) answers only administrators: 200 says the
  user sees every profile, 403 that the user is not an administrator.
- The same answer carries GoCD's secure site URL (ServerSiteUrlsConfigRepresenter: `site_url` and
  `secure_site_url`, always text, "" when not set), which a blank go_server_url stands for
  (profiles/server_url.py), in both plugins.
- `GET /api/admin/plugin_info/:id` (PluginInfosControllerV7.show, any signed-in user): 404 with GoCD's
  JSON `{"message": ...}` when GoCD has no such plugin, else the plugin with `status.state` (`active`,
  `invalid` with `status.messages` for a jar GoCD could not load, or `disabled`). GoCD refuses a cluster
  profile of a plugin it has not loaded ("Plugin with id `x` is not found.",
  ClusterProfilesService.validatePluginProperties). Version 7 of this API came with GoCD 20.4.0; an
  older GoCD has no route for it and answers 404 too, but from Rails' catch-all (ApplicationController
  #unresolved: "The url you are trying to reach appears to be incorrect.", not JSON): that is no word
  about the plugin, and is said as what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elastic_agent import PLUGIN_ID
from elastic_agent.gocd.rest_api import GoCDApiError, GoCDRestClient
from profiles.errors import ProfileError
from profiles.server_url import pods_server_url

SITE_URLS_PATH = "/api/admin/config/server/site_urls"
SITE_URLS_ACCEPT = "application/vnd.go.cd.v1+json"
PLUGIN_INFO_PATH = "/api/admin/plugin_info/"
PLUGIN_INFO_ACCEPT = "application/vnd.go.cd.v7+json"
PLUGIN_INFO_SINCE = "20.4.0"  # the first GoCD with api-plugin-infos-v7
ADMIN_TOKEN = "give the personal access token of a system administrator"


@dataclass(frozen=True)
class BlankServerUrl:
    """What a blank go_server_url stands for on this GoCD: the URL, why it cannot be used, or why that
    could not be found out."""

    url: str | None = None
    problem: str | None = None  # GoCD would refuse the profile: this plugin's validation says this
    unknown_because: str = ""


@dataclass(frozen=True)
class NoProfiles:
    """What an empty list of cluster profiles means, as the command says it, and its exit status."""

    text: str
    status: int


class GoCDChecks:
    """The calls, each made at most once (the site URLs are read for two reasons)."""

    def __init__(self, client: GoCDRestClient) -> None:
        self._client = client
        self._site_urls: dict[str, Any] | GoCDApiError | None = None

    def _site_urls_answer(self) -> dict[str, Any]:
        if self._site_urls is None:
            try:
                answer = self._client.get_json(SITE_URLS_PATH, SITE_URLS_ACCEPT, "the server's site URLs")
                if not isinstance(answer, dict):
                    raise GoCDApiError("GoCD's answer about its site URLs is not what was expected")
                self._site_urls = answer
            except GoCDApiError as error:
                self._site_urls = error
        if isinstance(self._site_urls, GoCDApiError):
            raise self._site_urls
        return self._site_urls

    def no_profiles(self) -> NoProfiles:
        """Why GoCD listed no cluster profile: none exist (0), or the token may not see them (2)."""
        shown = self._client.shown_url
        listed = (
            f"GoCD at {shown} lists no cluster profile to this token. GoCD lists to each user only the "
            "profiles that user may see (none at all to a user who is not an administrator and has no "
            "role that grants it)"
        )
        try:
            self._site_urls_answer()
        except GoCDApiError as error:
            if error.status == 403:
                return NoProfiles(
                    f"{listed}, and this token's user is not a system administrator: GoCD refused it "
                    f"{SITE_URLS_PATH}, which only administrators may read. To migrate, {ADMIN_TOKEN}.",
                    2,
                )
            if error.affects_every_call and error.status is None:
                return NoProfiles(str(error), 2)
            return NoProfiles(
                f"{listed}, and whether this token's user is a system administrator could not be "
                f"checked ({error}). If GoCD has profiles of the official plugin, {ADMIN_TOKEN}.",
                2,
            )
        return NoProfiles(
            f"GoCD at {shown} has no cluster profiles at all (the token is a system administrator's, to "
            "whom GoCD lists every profile): nothing to migrate.",
            0,
        )

    def plugin_problem(self) -> str | None:
        """Why GoCD would refuse every profile of this plugin (not installed, or not loaded); None when
        it is active."""
        try:
            answer = self._client.get_json(PLUGIN_INFO_PATH + PLUGIN_ID, PLUGIN_INFO_ACCEPT, "this plugin")
        except GoCDApiError as error:
            if error.status != 404:
                raise
            if error.said is None:  # not GoCD's "no such plugin" (JSON), but no route at all
                return (
                    f"GoCD at {self._client.shown_url} does not have version 7 of the plugin info API "
                    f"(GET {PLUGIN_INFO_PATH}{PLUGIN_ID} answered 404 without GoCD's JSON, as a GoCD older "
                    f"than {PLUGIN_INFO_SINCE} or a proxy in front of it does), so whether this plugin is "
                    "installed cannot be checked; nothing is known to be wrong with the plugin. This command "
                    f"needs GoCD {PLUGIN_INFO_SINCE} or later: upgrade GoCD (or let the proxy pass "
                    f"{PLUGIN_INFO_PATH}), then run this again"
                )
            return (
                f"this plugin ({PLUGIN_ID}) is not installed on GoCD at {self._client.shown_url}: GoCD has "
                f'no plugin of that id, and would refuse every new profile ("Plugin with id `{PLUGIN_ID}` '
                'is not found."). Install its jar first (docs/install.md, step 4), then run this again'
            )
        status = answer.get("status") if isinstance(answer, dict) else None
        state = status.get("state") if isinstance(status, dict) else None
        if state == "active":
            return None
        if not isinstance(state, str):
            return f"GoCD's answer about this plugin ({PLUGIN_ID}) has no status: it is not what was expected"
        messages = status.get("messages") if isinstance(status, dict) else None
        said = [m.strip() for m in messages or () if isinstance(m, str) and m.strip()]
        why = f": GoCD said: {' '.join(said).rstrip('.')}" if said else ""
        return (
            f"GoCD has this plugin ({PLUGIN_ID}) but has not loaded it: its state is {state}{why}. GoCD "
            "would refuse every new profile of it: fix the jar (the GoCD server's log says more) and "
            "restart GoCD, then run this again"
        )

    def blank_server_url(self) -> BlankServerUrl:
        """What a blank go_server_url stands for here: GoCD's secure site URL, checked as this plugin's
        validation checks it when GoCD creates the profile (executors/profile_requests.py)."""
        try:
            answer = self._site_urls_answer()
        except GoCDApiError as error:
            if error.status is None:
                raise
            return BlankServerUrl(unknown_because=str(error))
        try:
            return BlankServerUrl(pods_server_url(answer.get("secure_site_url"), answer.get("site_url")))
        except ProfileError as error:
            return BlankServerUrl(problem=f"go_server_url is {error.message}")
