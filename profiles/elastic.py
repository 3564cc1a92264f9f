"""The elastic agent profile: what an agent pod looks like, and whether and how it is reused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profiles.errors import ProfileError
from profiles.fields import ELASTIC_FIELDS
from profiles.placeholders import TemplateError, parse_pod_template
from profiles.quantities import Cpu, Memory
from profiles.reading import Problem, read_properties
from profiles.schedule import Schedule


def _pod_spec_type(values: dict[str, Any]) -> str:
    """PodSpecType, else the legacy flag: the official plugin's older profiles only set
    SpecifiedUsingPodConfiguration=true to mean a pod template."""
    if values["PodSpecType"]:
        return str(values["PodSpecType"])
    return "yaml" if values["SpecifiedUsingPodConfiguration"] else "properties"


def check_elastic_properties(
    props: Any, *, report_unknown: bool = True
) -> tuple[dict[str, Any], list[Problem]]:
    """Parsed values and every problem, including the rules across fields; the single source for
    validation and `ElasticProfile`."""
    values, problems = read_properties(ELASTIC_FIELDS, props, report_unknown=report_unknown)
    if not isinstance(props, Mapping) or any(key == "PodSpecType" for key, _ in problems):
        return values, problems  # the mode is unknown, so which settings it needs is too
    mode = _pod_spec_type(values)
    bad = {key for key, _ in problems}
    needed = {
        "properties": ("Image", "an agent image"),
        "yaml": ("PodConfiguration", "a pod template"),
        "remote": ("RemoteFile", "the URL of a pod template"),
    }
    key, what = needed[mode]
    if values[key] is None and key not in bad:
        problems.append((key, f"{key} must be set: pod specification '{mode}' needs {what}"))
    if mode == "yaml" and values["PodConfiguration"] is not None:
        try:
            parse_pod_template(values["PodConfiguration"])
        except TemplateError as error:
            problems.append(("PodConfiguration", str(error)))
    if values["MinIdlePods"] and not values["Reuse"] and "Reuse" not in bad:
        # Without reuse a pod only ever runs the job it was made for, so warm pods would never be used.
        problems.append(
            ("MinIdlePods", "idle pods are only kept ready for reuse: set Reuse to true, or 0 here")
        )
    if values["Predict"] and not values["Reuse"] and "Reuse" not in bad:
        # A pod started ahead has no job of its own: only reuse lets the next stage's jobs take it.
        problems.append(
            ("Predict", "pods started ahead only help if they can be reused: set Reuse to true, or "
             "Predict to false")
        )
    if values["ReuseSchedule"] is not None and not values["Reuse"] and "Reuse" not in bad:
        problems.append(("ReuseSchedule", "a reuse schedule needs reuse: set Reuse to true, or clear it"))
    return values, problems


@dataclass(frozen=True)
class ElasticProfile:
    """Parsed elastic profile settings. `pod_spec_type` is resolved (legacy flag included); durations
    in seconds; `None` means not set (no limit, or the cluster profile's value)."""

    pod_spec_type: str = "properties"
    image: str | None = None
    max_memory: Memory | None = None
    max_cpu: Cpu | None = None
    privileged: bool = False
    pod_configuration: str | None = None
    remote_file: str | None = None
    remote_file_type: str = "yaml"
    environment: tuple[tuple[str, str], ...] = ()
    reuse: bool = False
    max_jobs_per_pod: int | None = None
    idle_timeout: float | None = None
    min_idle_pods: int = 0
    reuse_scope: str = "profile"
    reuse_schedule: Schedule | None = None
    predict: bool = False

    @classmethod
    def from_properties(cls, props: Any) -> ElasticProfile:
        """Raise ProfileError with validation's message if a setting is unusable. Unknown keys are
        ignored here (validation reports them) so that a stray key never stops running jobs."""
        values, problems = check_elastic_properties(props, report_unknown=False)
        if problems:
            raise ProfileError(*problems[0], problems=tuple(problems))
        return cls(
            pod_spec_type=_pod_spec_type(values),
            image=values["Image"],
            max_memory=values["MaxMemory"],
            max_cpu=values["MaxCPU"],
            privileged=values["Privileged"],
            pod_configuration=values["PodConfiguration"],
            remote_file=values["RemoteFile"],
            remote_file_type=values["RemoteFileType"],
            environment=values["Environment"],
            reuse=values["Reuse"],
            max_jobs_per_pod=values["MaxJobsPerPod"],
            idle_timeout=values["IdleTimeout"],
            min_idle_pods=values["MinIdlePods"],
            reuse_scope=values["ReuseScope"],
            reuse_schedule=values["ReuseSchedule"],
            predict=values["Predict"],
        )
