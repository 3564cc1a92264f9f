"""What GoCD's filters and halts say, word for word, once for both halves of the double: the history and
config API that `trace` reads (app.py) and the admin API that `migrate-profiles` and the chart's
preconfigure script call (admin_api.py). They stand for one server, whose filters run before any
controller, so their sentences are one copy.

Sources (gocd/gocd): AccessTokenAuthenticationFilter (an unknown token; a token while security is off),
VerifyAuthorityFilter (anonymous, and `/api/admin/**` without a supervisor), SparkPreFilter (an Accept
header that is no API version; Rails' ApplicationController#unresolved writes the same sentence),
HaltApiMessages (forbiddenMessage, notFoundMessage), RerouteLatestApisImpl (the latest version's media
type).
"""

from __future__ import annotations

LATEST = "application/vnd.go.cd+json"  # routed to each path's latest version (RerouteLatestApisImpl)
NOT_AUTHENTICATED = "You are not authenticated!"
INVALID_TOKEN = "Invalid Personal Access Token."
BEARER_WITHOUT_SECURITY = (
    "Bearer authentication credentials are not required, since security has been disabled on this server."
)
NOT_AUTHORIZED_RESOURCE = "You are not authorized to access this resource!"  # the filter chain's 403
WRONG_URL = "The url you are trying to reach appears to be incorrect."  # each half's answer adds its line end
FORBIDDEN = "You are not authorized to perform this action."  # HaltApiMessages.forbiddenMessage
NOT_FOUND = (
    "Either the resource you requested was not found, or you are not authorized to perform this action."
)
