"""What both fault matrices (tests/support/fault_churn.py: the control plane's faults;
tests/support/fault_backend_churn.py: the backend's and GoCD's) report of a case: each adds the timings its
faults have."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ChurnOutcome:
    case: str
    jobs: int = 0
    passed: int = 0
    rescheduled: int = 0
    pods_created: int = 0
    backlog_s: float | None = None  # until every job scheduled before the fault's end was assigned
    health_during: list[str] = field(default_factory=list)
    health_after: list[str] = field(default_factory=list)
    warnings: int = 0
    warning_summary: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)  # refused registrations among them
    registrations_refused: int = 0  # an invariant (a key in two pods, or kept too long): always 0
    evidence: list[str] = field(default_factory=list)  # the fault's own check: empty is good
    reused_pod: str | None = None  # the idle pod the probe job ran on after recovery
    leftovers: list[str] = field(default_factory=list)  # pods or agents still there at the end
    seconds: float = 0.0
