"""What prediction learned, as the data of a ConfigMap in the agents' namespace, so that it survives a
restart of the backend.

Only the shape is kept: pipeline and stage names, fingerprints and environments, counts and delays.
Never profile properties or registration keys (they may carry secrets): after a restart, the recipe
(profile properties) of a fingerprint comes back with its next create-agent, as the warm pool's do, and
prediction starts that fingerprint's pods from then on. Stage runs in progress are not kept either: a
run that was open at the restart is simply not predicted from.

The ConfigMap holds one key, `shape.json`, versioned so that a later encoding can tell this one apart.
An edge to a downstream pipeline carries that pipeline's name (`pipeline`); an edge without it is one
of the same pipeline, so a ConfigMap written before downstream edges reads as it did.
A ConfigMap that cannot be read (another version, damaged by hand) is ignored with a log line: the shape
is learned again in a few runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Mapping
from typing import Any

from elastic_agent.forecast.shape import Edge, Shape, Stage

log = logging.getLogger(__name__)

CONFIG_MAP = "gocd-reuse-predictions"
KEY = "shape.json"
VERSION = 1


def config_map_name(server_id: str) -> str:
    """One ConfigMap per GoCD server: two servers sharing a namespace never read each other's."""
    return f"{CONFIG_MAP}-{hashlib.sha256(server_id.encode()).hexdigest()[:12]}"


def to_data(shape: Shape, fingerprints: Collection[str] | None = None) -> dict[str, str]:
    """The ConfigMap's data: the learned stages, sorted, as compact JSON. `fingerprints`: only the
    stages that schedule one of these, or are followed by such a stage (one cluster's part)."""
    kept = {
        key
        for key, stage in shape.stages.items()
        if fingerprints is None or set(stage.fanout) & set(fingerprints)
    }
    for key, stage in shape.stages.items():
        if any(edge.target(key[0]) in kept for edge in stage.edges.values()):
            kept.add(key)
    stages = [
        {
            "pipeline": pipeline,
            "stage": name,
            "fanout": [
                {"fingerprint": fp, "environment": stage.environments.get(fp), "jobs": jobs}
                for fp, jobs in sorted(stage.fanout.items())
            ],
            "judged": stage.judged,
            "began": stage.began,
            "next": [
                {
                    "stage": edge.next_stage,
                    **({} if edge.pipeline is None else {"pipeline": edge.pipeline}),
                    "came_true": edge.came_true,
                    "after_start_s": round(edge.after_start_s, 3),
                    "spread_s": round(edge.spread_s, 3),
                    "after_done_s": None if edge.after_done_s is None else round(edge.after_done_s, 3),
                }
                for edge in sorted(stage.edges.values(), key=lambda e: (e.pipeline or "", e.next_stage))
            ],
        }
        for (pipeline, name), stage in sorted(shape.stages.items())
        if (pipeline, name) in kept
    ]
    return {KEY: json.dumps({"version": VERSION, "stages": stages}, sort_keys=True, separators=(",", ":"))}


def from_data(data: Mapping[str, str] | None) -> Shape:
    """The shape a ConfigMap's data holds; an empty one when there is none or it cannot be read."""
    shape = Shape()
    text = (data or {}).get(KEY)
    if not text:
        return shape
    try:
        document = json.loads(text)
        if document.get("version") != VERSION:
            raise ValueError(f"version {document.get('version')!r}, this backend reads {VERSION}")
        for item in document["stages"]:
            shape.stages[(str(item["pipeline"]), str(item["stage"]))] = _stage(item)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        log.warning("ignoring the learned pipeline shapes in ConfigMap %s: %s", CONFIG_MAP, error)
        return Shape()
    return shape


def _stage(item: Mapping[str, Any]) -> Stage:
    stage = Stage(judged=int(item["judged"]), began=int(item.get("began", 0)))
    for entry in item["fanout"]:
        fingerprint = str(entry["fingerprint"])
        stage.fanout[fingerprint] = int(entry["jobs"])
        environment = entry.get("environment")
        stage.environments[fingerprint] = None if environment is None else str(environment)
    for entry in item["next"]:
        done, downstream = entry.get("after_done_s"), entry.get("pipeline")
        name = str(entry["stage"]) if downstream is None else f"{downstream}/{entry['stage']}"
        stage.edges[name] = Edge(
            str(entry["stage"]),
            int(entry["came_true"]),
            float(entry["after_start_s"]),
            None if done is None else float(done),
            None if downstream is None else str(downstream),
            float(entry.get("spread_s", 0.0)),  # written since the margin was added
        )
    stage.bound_downstream()  # a ConfigMap written before the bound may hold more
    return stage


def merge(into: Shape, learned: Shape) -> None:
    """Stages read from a ConfigMap join those learned since the start (the first requests may come
    before the read): counts add up, and what was learned here wins where both know a value."""
    for key, stage in learned.stages.items():
        mine = into.stages.get(key)
        if mine is None:
            into.stages[key] = stage
            continue
        mine.judged += stage.judged
        mine.began += stage.began
        for name, edge in stage.edges.items():
            if name in mine.edges:
                mine.edges[name].came_true += edge.came_true
            else:
                mine.edges[name] = edge
        mine.bound_downstream()
        for fingerprint, jobs in stage.fanout.items():
            mine.fanout.setdefault(fingerprint, jobs)
            mine.environments.setdefault(fingerprint, stage.environments.get(fingerprint))
    into.revision += 1
    into.touch()
