"""The config answers, written as gocd/gocd's representers write them, field for field and in order:

- pipeline groups, api-pipeline-groups-v1 PipelineGroupsRepresenter / PipelineGroupRepresenter /
  AuthorizationRepresenter (only the non-empty of view, operate, admins) /
  PipelineConfigSummaryRepresenter: `_links`, `_embedded.groups[]` of `_links`, `name`, `authorization`,
  `pipelines[]` of `{_links, name}`;
- a pipeline, api-shared-v11 PipelineConfigRepresenter, StageRepresenter, JobRepresenter: `stages` null
  when it uses a template (writeStages), `elastic_profile_id` left out, not null, for a job without one
  (addIfNotNull), `run_instance_count` and `timeout` null when unset, `tracking_tool` and `timer` null
  when unset; its material is one git repository and each job one exec task (what the double does not
  model in detail);
- a template, api-template-config-v7 TemplateConfigRepresenter: `_links`, `name`, `stages`;
- environments, api-environments-v3 EnvironmentsRepresenter / EnvironmentRepresenter /
  PipelineRepresenter: `_embedded.environments[]` of `_links`, `name`, `pipelines[]`,
  `environment_variables[]`; a pipeline's `find` link is GoCD's relative `/api/admin/pipelines/
  :pipeline_name` (addAbsoluteLink of a relative path);
- site URLs, api-server-site-urls-config-v1 ServerSiteUrlsConfigRepresenter: `""` when unset
  (ServerSiteUrlConfig.toString).

Documentation links are the fixed `https://api.gocd.org/current/...` ones where Routes has them, else
CurrentGoCDVersion.apiDocsUrl: `https://api.gocd.org/<version>/#...`, the version build.gradle names.
"""

from __future__ import annotations

from typing import Any

from tests.support.doubles.gocd_rest.access import Access
from tests.support.doubles.gocd_rest.world import (
    Environment,
    JobConfig,
    PipelineConfig,
    PipelineGroup,
    StageConfig,
    TemplateConfig,
)

GOCD_VERSION = "26.2.0"  # build.gradle's GO_VERSION_SEGMENTS at the HEAD the double was read from
GROUPS_DOC = "https://api.gocd.org/current/#pipeline-group-config"
ENVIRONMENTS_DOC = "https://api.gocd.org/current/#environment-config"
PIPELINES_DOC = "https://api.gocd.org/current/#pipelines"


def api_docs(fragment: str) -> str:
    return f"https://api.gocd.org/{GOCD_VERSION}/#{fragment}"


def pipeline_groups(base: str, groups: list[PipelineGroup]) -> dict[str, Any]:
    path = f"{base}/api/admin/pipeline_groups"
    return {
        "_links": _links(path, GROUPS_DOC, f"{path}/:group_name"),
        "_embedded": {"groups": [_group(base, group) for group in groups]},
    }


def _group(base: str, group: PipelineGroup) -> dict[str, Any]:
    path = f"{base}/api/admin/pipeline_groups"
    authorization: dict[str, Any] = {}
    if group.viewers:
        authorization["view"] = {"users": list(group.viewers), "roles": []}
    if group.admins:
        authorization["admins"] = {"users": list(group.admins), "roles": []}
    return {
        "_links": _links(f"{path}/{group.name}", GROUPS_DOC, f"{path}/:group_name"),
        "name": group.name,
        "authorization": authorization,
        "pipelines": [{"_links": _pipeline_links(base, name), "name": name} for name in group.pipelines],
    }


def pipeline_config(base: str, config: PipelineConfig) -> dict[str, Any]:
    return {
        "_links": _pipeline_links(base, config.name),
        "label_template": "${COUNT}",
        "lock_behavior": "none",
        "name": config.name,
        "template": config.template,
        "group": config.group,
        "origin": {
            "_links": {
                "self": {"href": f"{base}/admin/config_xml"},
                "doc": {"href": api_docs("get-configuration")},
            },
            "type": "gocd",
        },
        "parameters": [{"name": name, "value": value} for name, value in config.parameters],
        "environment_variables": [],
        "materials": [_git(config.name)],
        "stages": [_stage(stage) for stage in config.stages] if config.stages else None,
        "tracking_tool": None,
        "timer": {"spec": config.timer, "only_on_changes": False} if config.timer else None,
    }


def template_config(base: str, template: TemplateConfig) -> dict[str, Any]:
    path = f"{base}/api/admin/templates"
    return {
        "_links": _links(f"{path}/{template.name}", api_docs("template-config"), f"{path}/:template_name"),
        "name": template.name,
        "stages": [_stage(stage) for stage in template.stages] if template.stages else None,
    }


def environments(base: str, found: list[Environment]) -> dict[str, Any]:
    path = f"{base}/api/admin/environments"
    return {
        "_links": {"self": {"href": path}, "doc": {"href": ENVIRONMENTS_DOC}},
        "_embedded": {"environments": [_environment(base, environment) for environment in found]},
    }


def _environment(base: str, environment: Environment) -> dict[str, Any]:
    path = f"{base}/api/admin/environments"
    return {
        "_links": _links(f"{path}/{environment.name}", ENVIRONMENTS_DOC, f"{path}/:name"),
        "name": environment.name,
        "pipelines": [
            {
                "_links": {
                    "self": {"href": f"{base}/api/pipelines/{name}/history"},
                    "doc": {"href": PIPELINES_DOC},
                    "find": {"href": "/api/admin/pipelines/:pipeline_name"},
                },
                "name": name,
            }
            for name in environment.pipelines
        ],
        "environment_variables": [],
    }


def site_urls(base: str, site_url: str, secure_site_url: str) -> dict[str, Any]:
    return {
        "_links": {
            "doc": {"href": api_docs("siteurls-config")},
            "self": {"href": f"{base}/api/admin/config/server/site_urls"},
        },
        "site_url": site_url,
        "secure_site_url": secure_site_url,
    }


def visible_groups(access: Access, groups: list[PipelineGroup]) -> list[PipelineGroup]:
    """PipelineConfigsService.getGroupsForUser, in config order."""
    return [group for group in groups if access.views(group)]


def visible_environments(access: Access, found: list[Environment]) -> list[Environment]:
    """EnvironmentsControllerV3.index: those the user may view, sorted by name (sortEnvConfigs)."""
    return sorted((e for e in found if access.views_environment(e)), key=lambda e: e.name.lower())


def _links(self_href: str, doc: str, find: str) -> dict[str, Any]:
    return {"self": {"href": self_href}, "doc": {"href": doc}, "find": {"href": find}}


def _pipeline_links(base: str, name: str) -> dict[str, Any]:
    path = f"{base}/api/admin/pipelines"
    return _links(f"{path}/{name}", api_docs("pipeline-config"), f"{path}/:pipeline_name")


def _git(pipeline: str) -> dict[str, Any]:
    return {
        "type": "git",
        "attributes": {
            "url": f"https://git.example.com/{pipeline}.git",
            "destination": None,
            "filter": None,
            "invert_filter": False,
            "name": None,
            "auto_update": True,
            "branch": "master",
            "submodule_folder": None,
            "shallow_clone": False,
        },
    }


def _stage(stage: StageConfig) -> dict[str, Any]:
    return {
        "name": stage.name,
        "fetch_materials": True,
        "clean_working_directory": False,
        "never_cleanup_artifacts": False,
        "approval": {
            "type": "success",
            "allow_only_on_success": False,
            "authorization": {"roles": [], "users": []},
        },
        "environment_variables": [],
        "jobs": [_job(job) for job in stage.jobs],
    }


def _job(job: JobConfig) -> dict[str, Any]:
    profile = {"elastic_profile_id": job.elastic_profile_id} if job.elastic_profile_id is not None else {}
    return {
        "name": job.name,
        "run_instance_count": job.run_instance_count,
        "timeout": None,
        **profile,
        "environment_variables": [],
        "resources": list(job.resources),
        "tasks": [
            {
                "type": "exec",
                "attributes": {"run_if": ["passed"], "command": "make", "arguments": [job.name]},
            }
        ],
        "tabs": [],
        "artifacts": [],
    }
