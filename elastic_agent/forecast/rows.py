"""The status report's rows for Predict: per pipeline, what the backend learned of its stages and how
often it was right. Built by the forecaster (elastic_agent/forecast) as plain rows, so that the pages
need nothing of it; names of pipelines and stages, fingerprints' label forms, counts and delays only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LearnedEdge:
    stage: str
    next_stage: str
    came_true: int
    judged: int  # runs of `stage` that were followed, or left without a successor past its time
    fanout: str  # e.g. "6 jobs of v1-0123abcd (no environment)"
    delay: str  # e.g. "90s after the stage starts, 10s after its last job"
    fires: bool  # often enough true to start pods


@dataclass(frozen=True)
class PredictionRow:
    pipeline: str
    edges: tuple[LearnedEdge, ...]
    started: int  # pods started ahead
    hit: int  # of those, assigned a job of the stage they were started for
    other_job: int  # assigned a job of another stage first
    idled_out: int  # gone without a job
    without_key: int  # pods wanted that no banked key could start
