"""A double of a GoCD server's REST API, in two halves that share GoCD's filters (sentences.py) and JSON
writers (jsonwriters.py):
- the job history and config, served over real HTTP on loopback: what `python -m elastic_agent trace`
  is tested against end to end and measured on (the modules below, and the rest of this docstring);
- the admin API, its profiles, plugin info, site URLs and pipelines (admin_model.py: who sees what, how
  a setting is stored, the representers' JSON; admin_api.py: the Flask app, over HTTP or through
  `responses`): what `migrate-profiles` and the chart's preconfigure script are tested against.
The two halves keep their own worlds (`World`, `AdminState`): no test needs one server holding both.

Modelled on gocd/gocd's source (the controllers, representers and SQL maps each module names), not on
its documentation. The pieces:
- world.py: the installation (users and tokens, groups, pipelines, templates, environments) and its
  stage runs and job instances, and `World.truth()`, the ground truth of every job instance;
- from_trace.py: `world_from_trace`, an installation whose history is a trace; extras.py the cases a
  trace lacks (a run_instance_count job, a stage rerun with copies, a rescheduled job, cancelled jobs,
  runs still going, a static-agent job, a template with parameters, a group only admins see);
- access.py: permissions and the indexes; history_json.py, config_json.py: the answers;
  jsonwriters.py: GoCD's three JSON styles; app.py: the WSGI application, layer by layer;
  server.py: `serve`, the call counts and `Faults`; sentences.py: what the filters and halts say.

Endpoints (all GET, under `/go`; Accept, version):
`/api/stages/:p/:s/history` (v3), `/api/stages/:p/:pc/:s/:sc` (v3), `/api/jobs/:p/:s/:j/history` (v1),
`/api/jobs/:p/:pc/:s/:sc/:j` (v1), `/api/admin/pipeline_groups` (v1), `/api/admin/pipelines/:name` (v11),
`/api/admin/templates/:name` (v7), `/api/admin/environments` (v3), `/api/admin/config/server/site_urls`
(v1). `application/vnd.go.cd+json` reaches each one too (RerouteLatestApisImpl: the latest version).

What the source says that one might not expect (and that a client must live with):
- The job history (JobInstance.xml getJobHistoryViaCursor) matches the job's name exactly: a
  `run_instance_count` job's history is asked for by instance name (`shard-runInstance-1`); by its config
  name it is empty. It leaves out copies in rerun stages (`originalJobId IS NULL`) but keeps the old
  instances of rescheduled jobs (no `ignored` filter): state `Rescheduled`, result `Unknown`. Its
  `job_state_transitions` is always `[]`: only the stage instance and job instance APIs have them.
- The job instance API (`/api/jobs/:p/:pc/:s/:sc/:j`) of a copy answers the job it was copied from, with
  that job's own stage counter (JobInstanceSqlMapDao.mostRecentJobWithTransitions, findJobId).
- The stage instance API of a pipeline run that exists but has no such stage (or stage counter) answers
  200 with a NullStage: `counter` 0, `scheduled_at` now, result Unknown, no pipeline fields, no jobs. A
  missing pipeline is 404 from the before-filter, `{"message":"Pipeline with name 'p' was not found!"}`
  (Gson, so `'` arrives as `\\u0027`); with security off it reaches StageService instead: 404
  `Not Found { Pipeline 'p' not found }`; a missing pipeline counter is 404 `Not Found { Pipeline 'p'
  with counter 'n' not found }` (HttpOperationResult.fullMessage). A counter that is not a number is 422
  `For input string: "x"` (the RuntimeException mapper ServerSiteUrlsConfigControllerV1 registers for
  every route).
- History links are absolute (`http://host:port/go/api/...?after=ID`) and carry no `page_size`: a client
  that follows them as they are gets pages of 10. Names in them are not URL-encoded.
- A non-admin on site_urls is refused by the security filter chain (`/api/admin/**` needs
  ROLE_SUPERVISOR) before the controller: 403 `You are not authorized to access this resource!`, Gson
  pretty-printed, with `WWW-Authenticate`, not the controller's `forbiddenMessage`.
- Every call without a bearer token, with security on, is 401 `You are not authenticated!` before any
  Accept check; an unknown token (or one not 40 characters long) 401 `Invalid Personal Access Token.`;
  with security off a bearer token is itself refused 401. An Accept that is not exactly a GoCD media
  type is 404 text/plain `The url you are trying to reach appears to be incorrect.` (SparkPreFilter).
- At this HEAD a pipeline group without authorization is visible to system admins only (no "everyone
  may view" default); the pipeline groups index needs a group admin (a viewer gets 403) and then lists
  the groups the user may view. Environments are listed to non-admins only by role rules: a user
  without any sees `[]`.
- `elastic_profile_id` is left out (not null) for a job on static agents; a template's job keeps
  `#{PARAM}` as written, the parameter's value is in the pipeline's `parameters`.
- The stage history's jobs and the stage instance leave out rescheduled (ignored) instances; a stage
  history `counter` is a string, the stage instance's a number; the job APIs' `stage_counter` a string.
- GoCD itself does not rate-limit these APIs (`Faults`, server.py).
Not modelled: other HTTP methods, basic authentication, ETag/If-None-Match (an ETag is sent), the exact
answer to a valid media type of another version (GoCD finds no Spark route; the double answers as for
a bad Accept), the `Server` header (waitress's).
"""

from tests.support.doubles.gocd_rest.from_trace import world_from_trace
from tests.support.doubles.gocd_rest.server import CallCounter, Faults, ServedGoCD, serve
from tests.support.doubles.gocd_rest.world import TruthRecord, World

__all__ = ["CallCounter", "Faults", "ServedGoCD", "TruthRecord", "World", "serve", "world_from_trace"]
