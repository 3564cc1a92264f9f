"""What the pool remembers per reuse fingerprint, and for how long.

Three things, none of them on the pods (a restart may lose them: GoCD re-sends create-agent to every
waiting job every two minutes, which brings them back):
- the jobs waiting for a pod of the fingerprint, each with the registration key of its latest
  create-agent while no pod used it. A key lives in one place only (docs/architecture.md, "Where
  registration keys live"): here, in a pod, or in the warm pool's bank. So every change that takes a
  key out of a waiting job's entry without putting it into a pod (a re-send brought a newer one, the
  job was served by another pod, the job was forgotten) returns it, for the caller to bank or drop;
- the recipe: the latest JobSpec asked for, from which the warm pool and the waiting jobs get pods
  created outside create-agent;
- whether the fingerprint is superseded: a job-completion showed that its profile was edited, so its
  idle pods retire at the next ping instead of at their idle timeout;
- whether it is held because its pods are broken (`holds`, holds.py).

Nothing here may grow without bound on a backend that runs for months while admins edit profiles and
pipelines come and go: a waiting job not re-sent for `WAITING_TTL_S` was assigned elsewhere or cancelled;
a recipe not asked for during `FORGET_AFTER_S`, with no waiting job and no pod left, is forgotten, unless it
wants warm pods (MinIdlePods, a ReuseSchedule period with some, or Predict): that one is kept for
`WARM_RECIPE_KEPT_S`, a week, since a schedule's period comes back within a week and is built from banked
keys before the day's first job asks for the recipe again (a profile unused for a week, or deleted in
GoCD, which tells plugins nothing of elastic profiles, then stops being warmed); a
superseded mark goes with the last pod of its fingerprint, and at once when the fingerprint is asked
for again (an admin reverted the edit: the old pods are exactly right again).

Not thread-safe on its own: the pool's lock guards it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool.holds import Holds
from elastic_agent.pool.job_spec import JobSpec

# GoCD re-sends create-agent to a waiting job every 2 minutes; a job not heard of for longer than this
# was assigned elsewhere or cancelled.
WAITING_TTL_S = 300.0
# A recipe of a fingerprint with no waiting job and no pod is kept this long after it was last asked for.
FORGET_AFTER_S = 3600.0
WARM_RECIPE_KEPT_S = 7 * 86_400.0


def _kept_s(recipe: Recipe) -> float:
    return WARM_RECIPE_KEPT_S if recipe.spec.wants_warm_pods else FORGET_AFTER_S


@dataclass(frozen=True)
class HeldKey:
    """A registration key and when GoCD issued it, at the earliest (its age decides how long it stays
    usable)."""

    key: str
    since: float

    def __repr__(self) -> str:  # a key is a secret: never shown
        return f"HeldKey(since={self.since})"


@dataclass
class WaitingJob:
    job: JobIdentifier
    last_seen: float
    key: HeldKey | None = None  # the registration key of its latest create-agent, while no pod used it


@dataclass
class Recipe:
    spec: JobSpec
    last_asked: float


class FingerprintBook:
    def __init__(self) -> None:
        # Insertion-ordered: the warm pool and the waiting jobs are served in the order fingerprints
        # first came, so that the simulator's results are the same for a seed.
        self._waiting: dict[str, dict[int, WaitingJob]] = {}
        self._recipes: dict[str, Recipe] = {}
        # The recipes with a ReuseSchedule: the simulator asks for their next period change at every event.
        self._scheduled: dict[str, None] = {}
        self._superseded: dict[str, None] = {}
        self.holds = Holds()
        self._changes = 0  # bumped by each change below (`revision`)

    # -- reading -------------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """Changes with every change of the book, its holds included: what a decision derived from the
        book at one revision holds until the next."""
        return self._changes + self.holds.revision

    def waiting_count(self, fingerprint: str) -> int:
        return len(self._waiting.get(fingerprint, ()))

    def is_waiting(self, fingerprint: str, job_id: int) -> bool:
        return job_id in self._waiting.get(fingerprint, ())

    def waiting(self, fingerprint: str) -> list[WaitingJob]:
        return list(self._waiting.get(fingerprint, {}).values())

    def waiting_fingerprints(self) -> list[str]:
        return [fp for fp, jobs in self._waiting.items() if jobs]

    def waiting_counts(self) -> dict[str, int]:
        return {fp: len(jobs) for fp, jobs in self._waiting.items() if jobs}

    def recipe(self, fingerprint: str) -> JobSpec | None:
        recipe = self._recipes.get(fingerprint)
        return recipe.spec if recipe is not None else None

    def recipes(self) -> Iterator[tuple[str, JobSpec]]:
        return ((fp, recipe.spec) for fp, recipe in self._recipes.items())

    def any_scheduled(self) -> bool:
        """Whether a recipe has a ReuseSchedule."""
        return bool(self._scheduled)

    def is_superseded(self, fingerprint: str | None) -> bool:
        return fingerprint in self._superseded

    def sizes(self) -> dict[str, int]:
        """How much is kept (tests and status pages: it must stay bounded)."""
        return {
            "waiting_fingerprints": len(self._waiting),
            "waiting_jobs": sum(len(jobs) for jobs in self._waiting.values()),
            "recipes": len(self._recipes),
            "superseded": len(self._superseded),
            "holds": len(self.holds),
        }

    # -- changing (the Applier's commits) ------------------------------------------------------------

    def wait(
        self, job: JobIdentifier, spec: JobSpec, key: str, now: float, issued: float | None = None
    ) -> HeldKey | None:
        """The job waits for a pod of its fingerprint; a re-send refreshes its key (idempotent), which
        GoCD issued at `issued` at the earliest. Returns the key the entry held before, unused, which the
        newer one replaces (the newest lives longest)."""
        fingerprint, issued = spec.fingerprint, now if issued is None else issued
        self._changes += 1
        self._recipes[fingerprint] = Recipe(spec, now)
        if spec.schedule is not None:
            self._scheduled[fingerprint] = None
        else:
            self._scheduled.pop(fingerprint, None)
        self._superseded.pop(fingerprint, None)  # asked for again: the profile is current (again)
        jobs = self._waiting.setdefault(fingerprint, {})
        entry = jobs.get(job.job_id)
        if entry is None:
            jobs[job.job_id] = WaitingJob(job, now, HeldKey(key, issued))
            return None
        entry.last_seen = now
        if entry.key is not None and entry.key.key == key:
            return None  # the same request again
        displaced, entry.key = entry.key, HeldKey(key, issued)
        return displaced

    def served(self, fingerprint: str, job_id: int) -> HeldKey | None:
        """The job got a pod; returns its key if no pod was created with it."""
        self._changes += 1
        jobs = self._waiting.get(fingerprint)
        entry = jobs.pop(job_id, None) if jobs is not None else None
        return entry.key if entry is not None else None

    def key_used(self, fingerprint: str, job_id: int, key: str) -> None:
        """A pod was created with the job's key: keys register one agent."""
        self._changes += 1
        entry = self._waiting.get(fingerprint, {}).get(job_id)
        if entry is not None and entry.key is not None and entry.key.key == key:
            entry.key = None

    def supersede(self, fingerprint: str) -> None:
        self._changes += 1
        self._superseded[fingerprint] = None

    # -- forgetting ----------------------------------------------------------------------------------

    def expire_waiting(self, now: float) -> list[tuple[str, HeldKey]]:
        """Forget the jobs not re-sent for WAITING_TTL_S; returns their unused keys, by fingerprint."""
        self._changes += 1
        unused: list[tuple[str, HeldKey]] = []
        for fingerprint in list(self._waiting):
            jobs = self._waiting[fingerprint]
            for job_id in [j for j, entry in jobs.items() if now - entry.last_seen > WAITING_TTL_S]:
                key = jobs.pop(job_id).key
                if key is not None:
                    unused.append((fingerprint, key))
            if not jobs:
                del self._waiting[fingerprint]
        return unused

    def next_forgetting(self) -> float:
        """The earliest time `forget_unused` may forget a waiting job or a recipe (clock seconds), whether
        or not it will; infinity when nothing is kept. Holds are not counted: they have times of their
        own (holds.py)."""
        waiting = (entry for jobs in self._waiting.values() for entry in jobs.values())
        times = [entry.last_seen + WAITING_TTL_S for entry in waiting]
        times += [recipe.last_asked + _kept_s(recipe) for recipe in self._recipes.values()]
        return min(times, default=math.inf)

    def forget_unused(self, now: float, with_pods: Collection[str]) -> list[tuple[str, HeldKey]]:
        """Drop what no waiting job, no pod (`with_pods`: the fingerprints pods have) and no recent
        request needs any more; returns the unused keys of the jobs forgotten (`expire_waiting`)."""
        unused = self.expire_waiting(now)
        self._changes += 1
        for fingerprint in [fp for fp in self._superseded if fp not in with_pods]:
            del self._superseded[fingerprint]
        for fingerprint, recipe in list(self._recipes.items()):
            unused_recipe = fingerprint not in self._waiting and fingerprint not in with_pods
            if unused_recipe and now - recipe.last_asked > _kept_s(recipe):
                del self._recipes[fingerprint]
                self._scheduled.pop(fingerprint, None)
        self.holds.forget_except(set(self._recipes) | set(with_pods), now)
        return unused
