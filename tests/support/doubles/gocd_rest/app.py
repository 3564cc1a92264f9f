"""The WSGI application answering GoCD's REST API for a world, in the order a request meets GoCD's layers:

1. the security filters (newsecurity AuthenticationFilterChain, AuthorizeFilterChain), before anything
   else: with security on, no bearer token is anonymous and refused 401 "You are not authenticated!"
   (VerifyAuthorityFilter, with `WWW-Authenticate: Basic realm="GoCD"`); a token GoCD does not know is
   401 "Invalid Personal Access Token." (AccessTokenAuthenticationFilter); `/api/admin/**` outside the
   paths the chain opens to every user needs a system administrator, else 403 "You are not authorized
   to access this resource!" (here: site_urls). With security off a bearer token is itself refused 401
   ("Bearer authentication credentials are not required, since security has been disabled on this
   server."). These bodies are Gson-pretty, typed after the Accept header (ContentTypeNegotiation
   MessageRenderer: a versioned GoCD type or application/json);
2. the Accept header (SparkPreFilter): anything but exactly one of GoCD's media types
   (`application/vnd.go.cd.vN+json`, N 1 to 11, or `application/vnd.go.cd+json`, the latest) is 404
   text/plain "The url you are trying to reach appears to be incorrect."; a valid type of another
   version than the controller's finds no Spark route, answered the same here (what the servlet behind
   answers then is not modelled);
3. the controller's before-filters and action: 403 `forbiddenMessage` and 404 "Pipeline with name 'x'
   was not found!" from ApiAuthorizationHelper, 400 for a bad page_size or cursor (ApiController), and
   the answer, typed `application/vnd.go.cd.vN+json;charset=utf-8` (setContentType).

Halts (HaltApiResponses) are Jackson-pretty `{"message" : ...}`; HttpExceptions (BadRequestException,
RecordNotFoundException) Gson-compact (RoutesHelper.httpException); a Java NumberFormatException (a
counter that is not a number) meets the RuntimeException mapper ServerSiteUrlsConfigControllerV1
registers globally: 422 with the exception's message.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from tests.support.doubles.gocd_rest import config_json
from tests.support.doubles.gocd_rest.access import ANONYMOUS, Access, Index
from tests.support.doubles.gocd_rest.history_json import HistoryWriter, job_instance, null_stage
from tests.support.doubles.gocd_rest.jsonwriters import gson, gson_pretty, pretty
from tests.support.doubles.gocd_rest.sentences import (
    BEARER_WITHOUT_SECURITY,
    FORBIDDEN,
    INVALID_TOKEN,
    LATEST,
    NOT_AUTHENTICATED,
    NOT_AUTHORIZED_RESOURCE,
    WRONG_URL,
)
from tests.support.doubles.gocd_rest.world import World

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse

BAD_PAGE_SIZE = "The query parameter 'page_size', if specified must be a number between 10 and 100."
BAD_CURSOR = "The query parameter '{}', if specified, must be a positive integer."
_BEARER = re.compile(r"bearer (.*)", re.IGNORECASE | re.DOTALL)
_JAVA_INT = re.compile(r"[+-]?\d+")
_GOCD_JSON = re.compile(r"application/vnd\.go\.cd\.v([1-9]\d?)\+json")


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


class Refused(Exception):
    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.status)
        self.answer = answer


@dataclass(frozen=True)
class Request:
    params: tuple[str, ...]
    query: dict[str, list[str]]
    access: Access
    base: str  # scheme://host[:port]/go, as RequestContext builds links
    media: str  # the controller's media type


@dataclass(frozen=True)
class Route:
    name: str
    pattern: re.Pattern[str]
    version: int
    supervisor: bool = False  # AuthorizeFilterChain's blanket "/api/admin/**": ROLE_SUPERVISOR


ROUTES = (
    Route("stage_history", re.compile(r"/go/api/stages/([^/]+)/([^/]+)/history/?"), 3),
    Route("stage_instance", re.compile(r"/go/api/stages/([^/]+)/([^/]+)/([^/]+)/([^/]+)/?"), 3),
    Route("job_history", re.compile(r"/go/api/jobs/([^/]+)/([^/]+)/([^/]+)/history/?"), 1),
    Route("job_instance", re.compile(r"/go/api/jobs/([^/]+)/([^/]+)/([^/]+)/([^/]+)/([^/]+)/?"), 1),
    Route("pipeline_groups", re.compile(r"/go/api/admin/pipeline_groups/?"), 1),
    Route("pipeline_config", re.compile(r"/go/api/admin/pipelines/([^/]+)/?"), 11),
    Route("template_config", re.compile(r"/go/api/admin/templates/([^/]+)/?"), 7),
    Route("environments", re.compile(r"/go/api/admin/environments/?"), 3),
    Route("site_urls", re.compile(r"/go/api/admin/config/server/site_urls"), 1, supervisor=True),
)


def route_of(path: str) -> tuple[Route | None, tuple[str, ...]]:
    for route in ROUTES:
        if matched := route.pattern.fullmatch(path):
            return route, matched.groups()
    return None, ()


def request_path(environ: dict[str, Any]) -> str:
    """PATH_INFO as text: WSGI hands it over as latin-1 decoded bytes."""
    raw: str = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return raw


class GoCDRestApp:
    def __init__(self, world: World) -> None:
        self.world = world
        self.index = Index(world)
        self.history = HistoryWriter(self.index)
        self._actions: dict[str, Callable[[Request], Answer]] = {
            "stage_history": self._stage_history,
            "stage_instance": self._stage_instance,
            "job_history": self._job_history,
            "job_instance": self._job_instance,
            "pipeline_groups": self._pipeline_groups,
            "pipeline_config": self._pipeline_config,
            "template_config": self._template_config,
            "environments": self._environments,
            "site_urls": self._site_urls,
        }

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return write(self.answer(environ), start_response)

    def answer(self, environ: dict[str, Any]) -> Answer:
        route, params = route_of(request_path(environ))
        try:
            access = self._authenticate(environ)
            if route is None or environ.get("REQUEST_METHOD") != "GET":
                return _wrong_url()
            if route.supervisor and not access.admin:
                return _filter_refusal(environ, 403, NOT_AUTHORIZED_RESOURCE)
            if environ.get("HTTP_ACCEPT", "") not in (LATEST, f"application/vnd.go.cd.v{route.version}+json"):
                return _wrong_url()
            request = Request(params, _query(environ), access, _base(environ), route_media(route))
            return self._actions[route.name](request)
        except Refused as refused:
            return refused.answer

    def _authenticate(self, environ: dict[str, Any]) -> Access:
        header = environ.get("HTTP_AUTHORIZATION", "")
        bearer = _BEARER.fullmatch(header) if header.strip() else None
        if not self.world.security:
            if bearer:
                raise Refused(_filter_refusal(environ, 401, BEARER_WITHOUT_SECURITY))
            return Access(self.world, ANONYMOUS)
        if bearer is None:
            raise Refused(_filter_refusal(environ, 401, NOT_AUTHENTICATED, challenge=True))
        user = self.index.users_by_token.get(bearer[1]) if len(bearer[1]) == 40 else None
        if user is None:
            raise Refused(_filter_refusal(environ, 401, INVALID_TOKEN))
        return Access(self.world, user)

    # --- the history controllers -------------------------------------------------------------------

    def _stage_history(self, request: Request) -> Answer:
        pipeline, stage = request.params
        self._check_view(request, pipeline)
        after, before, size = _cursors(request)
        self._check_exists(request, pipeline)
        body = self.history.stage_history(request.base, pipeline, stage, after, before, size)
        return Answer(200, body, request.media)

    def _stage_instance(self, request: Request) -> Answer:
        pipeline, counter, stage, stage_counter = request.params
        self._check_view(request, pipeline)
        number = _java_int(request, counter)
        if self.index.pipeline(pipeline) is None:
            return _message(request, 404, f"Not Found {{ Pipeline '{pipeline}' not found }}")
        if (pipeline.lower(), number) not in self.index.pipeline_runs:
            return _message(
                request, 404, f"Not Found {{ Pipeline '{pipeline}' with counter '{number}' not found }}"
            )
        run = self.index.stage_runs.get(
            (pipeline.lower(), number, stage.lower(), _java_int(request, stage_counter))
        )
        if run is None:
            return Answer(200, pretty(null_stage(stage, self.world.now_ms)), request.media)
        return Answer(200, self.history.stage_instance(run), request.media)

    def _job_history(self, request: Request) -> Answer:
        pipeline, stage, job = request.params
        self._check_view(request, pipeline)
        after, before, size = _cursors(request)
        self._check_exists(request, pipeline)
        body = self.history.job_history(request.base, pipeline, stage, job, after, before, size)
        return Answer(200, body, request.media)

    def _job_instance(self, request: Request) -> Answer:
        pipeline, counter, stage, stage_counter, job = request.params
        self._check_view(request, pipeline)
        numbers = [
            _positive_param(request, name, value)
            for name, value in (("pipeline_counter", counter), ("stage_counter", stage_counter))
        ]
        self._check_exists(request, pipeline)
        found = self.index.job_instance(pipeline, numbers[0], stage, numbers[1], job)
        if found is None:
            where = f"{pipeline}/{numbers[0]}/{stage}/{numbers[1]}/{job}"
            raise Refused(_http_exception(request, 404, f"No job instance was found for '{where}'."))
        return Answer(200, pretty(job_instance(found, transitions=True)), request.media)

    def _check_view(self, request: Request, pipeline: str) -> None:
        """ApiAuthorizationHelper.checkPipelineViewPermissionsAnd403."""
        if not self.world.security:
            return
        self._check_exists(request, pipeline)
        if not request.access.admin and not self.index.views_pipeline(request.access, pipeline):
            raise Refused(_message(request, 403, FORBIDDEN))

    def _check_exists(self, request: Request, pipeline: str) -> None:
        if self.index.pipeline(pipeline) is None:
            raise Refused(_http_exception(request, 404, f"Pipeline with name '{pipeline}' was not found!"))

    # --- the config controllers --------------------------------------------------------------------

    def _pipeline_groups(self, request: Request) -> Answer:
        if not request.access.any_group_admin:  # checkAnyPipelineGroupAdminUserAnd403
            return _message(request, 403, FORBIDDEN)
        groups = config_json.visible_groups(request.access, self.world.groups)
        return _with_etag(request, config_json.pipeline_groups(request.base, groups))

    def _pipeline_config(self, request: Request) -> Answer:
        (name,) = request.params
        group = self.index.group_of.get(name.lower())
        if not request.access.admin:  # checkPipelineGroupAdminViaNameParamsAnd403
            if group is None:
                raise Refused(_http_exception(request, 404, f"Pipeline with name '{name}' was not found!"))
            if not request.access.admin_of(group):
                return _message(request, 403, FORBIDDEN)
        config = self.index.pipeline(name)
        if config is None:
            raise Refused(_http_exception(request, 404, f"Pipeline with name '{name}' was not found!"))
        return _with_etag(request, config_json.pipeline_config(request.base, config))

    def _template_config(self, request: Request) -> Answer:
        (name,) = request.params
        template = self.index.templates.get(name.lower())
        if template is None:
            raise Refused(_http_exception(request, 404, f"Template with name '{name}' was not found!"))
        if not request.access.admin and not request.access.views_template(template):
            return _message(request, 403, FORBIDDEN)
        return _with_etag(request, config_json.template_config(request.base, template))

    def _environments(self, request: Request) -> Answer:
        found = config_json.visible_environments(request.access, self.world.environments)
        return _with_etag(request, config_json.environments(request.base, found))

    def _site_urls(self, request: Request) -> Answer:
        if not request.access.admin:  # checkAdminUserAnd403
            return _message(request, 403, FORBIDDEN)
        world = self.world
        return Answer(
            200,
            pretty(config_json.site_urls(request.base, world.site_url, world.secure_site_url)),
            request.media,
        )


def write(answer: Answer, start_response: StartResponse) -> Iterable[bytes]:
    body = answer.body.encode()
    headers = [("Content-Type", answer.content_type), ("Content-Length", str(len(body))), *answer.headers]
    start_response(f"{answer.status} {_REASONS.get(answer.status, 'Error')}", headers)
    return [body]


def route_media(route: Route) -> str:
    return f"application/vnd.go.cd.v{route.version}+json;charset=utf-8"


def _cursors(request: Request) -> tuple[int, int, int]:
    """ApiController.getCursor (after, then before) and getPageSize, then HistoryUtil.validateCursor."""
    after, before = (_cursor(request, key) for key in ("after", "before"))
    raw = request.query.get("page_size", ["10"])[0]
    if not _JAVA_INT.fullmatch(raw) or not 10 <= int(raw) <= 100:
        raise Refused(_http_exception(request, 400, BAD_PAGE_SIZE))
    for key, value in (("after", after), ("before", before)):
        if value < 0:
            raise Refused(_http_exception(request, 400, BAD_CURSOR.format(key)))
        if value:
            break
    return after, before, int(raw)


def _cursor(request: Request, key: str) -> int:
    value = request.query.get(key, [""])[0]
    if not value.strip():
        return 0
    if not _JAVA_INT.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
        raise Refused(_http_exception(request, 400, BAD_CURSOR.format(key)))
    return int(value)


def _java_int(request: Request, value: str) -> int:
    """Integer.parseInt; its NumberFormatException meets the global RuntimeException mapper: 422."""
    if not _JAVA_INT.fullmatch(value) or not -(2**31) <= int(value) < 2**31:
        raise Refused(_message(request, 422, f'For input string: "{value}"'))
    return int(value)


def _positive_param(request: Request, name: str, value: str) -> int:
    """JobInstanceControllerV1.getValue."""
    if not _JAVA_INT.fullmatch(value) or not 0 <= int(value) < 2**31:
        raise Refused(_http_exception(request, 400, f"The params '{name}' must be a number greater than 0."))
    return int(value)


def _message(request: Request, status: int, message: str) -> Answer:
    """A halt or an operation result: MessageJson, written by Jackson."""
    return Answer(status, pretty({"message": message}), request.media)


def _http_exception(request: Request, status: int, message: str) -> Answer:
    return Answer(status, gson({"message": message}), request.media)


def _with_etag(request: Request, document: dict[str, Any]) -> Answer:
    body = pretty(document)
    return Answer(200, body, request.media, (("ETag", f'"{hashlib.md5(body.encode()).hexdigest()}"'),))


def _filter_refusal(environ: dict[str, Any], status: int, message: str, *, challenge: bool = False) -> Answer:
    """BasicAuthenticationWithChallengeFailureResponseHandler and AccessTokenAuthenticationFilter."""
    media = "application/json"
    for part in environ.get("HTTP_ACCEPT", "").split(","):
        candidate = part.split(";")[0].strip().lower()
        if candidate == "application/json" or _GOCD_JSON.fullmatch(candidate):
            media = candidate
            break
    headers = (("WWW-Authenticate", 'Basic realm="GoCD"'),) if challenge or status == 403 else ()
    return Answer(status, gson_pretty({"message": message}), f"{media};charset=utf-8", headers)


def _wrong_url() -> Answer:
    return Answer(404, WRONG_URL + "\r\n", "text/plain;charset=utf-8")


def _query(environ: dict[str, Any]) -> dict[str, list[str]]:
    return parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)


def _base(environ: dict[str, Any]) -> str:
    scheme = environ.get("wsgi.url_scheme", "http")
    host = (
        environ.get("HTTP_HOST")
        or f"{environ.get('SERVER_NAME', '127.0.0.1')}:{environ.get('SERVER_PORT', '80')}"
    )
    return f"{scheme}://{host}/go"


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
