"""Keeps access tokens out of urllib3's request lines.

At DEBUG, urllib3's connection pool logs every request as `http://host:port "GET /path?query HTTP/1.1"
200 123`, query string and all. A remote pod template's URL (RemoteFile) is often a pre-signed or
token-carrying link, a resolved `{{SECRET:...}}`: with the backend at --log-level DEBUG its token would
be in the log. A filter on that logger hides query values, but for the parameters of the Kubernetes API
(selectors, resource versions, watch settings): those carry no secret and are what a DEBUG log is read
for. An allow list, since a deny list of names that look secret (token, signature...) misses some.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode

# Query parameters of the Kubernetes API calls the backend makes.
SHOWN_PARAMETERS = frozenset(
    {
        "allowWatchBookmarks",
        "continue",
        "dryRun",
        "fieldManager",
        "fieldSelector",
        "gracePeriodSeconds",
        "labelSelector",
        "limit",
        "propagationPolicy",
        "resourceVersion",
        "resourceVersionMatch",
        "tailLines",
        "timeoutSeconds",
        "watch",
    }
)
HIDDEN = "hidden"
# The pool logs each request line and each retry; the retry counter logs the URL it retries.
_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry")


def shown_target(target: str) -> str:
    """A request target (path and query) with the values of other parameters hidden."""
    path, separator, query = target.partition("?")
    if not separator:
        return target
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        return f"{path}?{HIDDEN}"
    return path + "?" + urlencode([(k, v if k in SHOWN_PARAMETERS else HIDDEN) for k, v in pairs])


class HideQueryValues(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, str) and "?" in a for a in args):
            record.args = tuple(shown_target(a) if isinstance(a, str) and "?" in a else a for a in args)
        return True


def hide_query_values() -> None:
    """Install the filter once (idempotent; any number of fetchers may ask)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, HideQueryValues) for f in logger.filters):
            logger.addFilter(HideQueryValues())
