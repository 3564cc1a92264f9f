"""What a decision wants done, as data.

The decisions (`decisions.py`, `reaping.py`, `warm.py`) read the pool's state and return a `Plan`: a
list of intents and, where a request needs one, a sentence. They never change anything themselves. The
`Applier` carries a plan out in two steps: `commit` makes the in-memory intents take effect under the
pool's lock, in the same critical section as the decision (so that no other request can decide on the
state in between), and `carry_out` does the slow part (Kubernetes and GoCD calls) after the lock is let
go. That split is what lets one decision code run unchanged in production, in tests and in the
simulator, and what makes a decision testable by looking at the plan.

In memory, under the lock:
- `Mark`: write these annotations and labels on a pod (they count at once; the writer persists them).
- `Reserve`: a pod is about to be created for a fingerprint; it counts as supply until it exists.
- `Wait`: a job waits for a pod of its fingerprint (GoCD re-sends create-agent until it is assigned),
  holding its registration key until a pod is created with it or another pod serves the job (then the
  key goes to the warm pool's bank).
- `Assign`: a pod said `true` to a job; the job is no longer waiting.
- `Release`: the pod's job is over (job-completion, or GoCD says the agent is idle).
- `Supersede`: the profile behind a fingerprint was edited: its pods are stale.
- `HoldBack`: a pod of the fingerprint is broken: one more in its row; its pods are created one at a
  time, and from the second in a row not before the hold's next try (holds.py).
- `Recovered`: a pod of a held fingerprint registered: the row ends.
- `KeyRefused`: GoCD refused a pod's registration key (key_refusals.py): read as expiry, older keys are
  dropped from the bank and the refusal bounds the keys used for a while (key_lifetime.py); read as a
  spent key, it is counted and shown.
- `KeyAccepted`: GoCD registered a pod's agent: its key's age is a lifetime GoCD's keys reach.
- `KeysShort`: what a decision (the warm pool's, Predict's) wanted and could not start for want of a key.

Carried out after the lock, in plan order:
- `Create`: create a pod (its reservation was taken with the decision).
- `Retire`: the ordered retirement of pods already marked retiring.
- `Say`: explain the decision in the log and, when there is a job, in its console.

A plan of a server-ping's decision also says when that decision is next due (`Plan.due`): the earliest
of the times the decision compared `now` with that are still ahead (an idle pod's expiry, the end of an
assignment grace, a schedule period's change, a hold's next try). Until then, on the same state, the
decision decides the same: the advisor's simulation skips the pings that would change nothing on that
word alone (quiet.py), so the times live where the rules that compare them are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from elastic_agent.gocd.messages import JobIdentifier
from elastic_agent.pool.job_spec import JobSpec
from elastic_agent.pool.key_lifetime import Refusal, Spent

Changes = Mapping[str, str | None]  # annotation or label -> value, None removes it


@dataclass(frozen=True)
class Mark:
    pod: str
    annotations: Changes
    labels: Changes = field(default_factory=dict)


@dataclass(frozen=True)
class Reserve:
    token: object  # a job id, ("waiting", job id) or ("warm", n)
    fingerprint: str


@dataclass(frozen=True)
class Wait:
    job: JobIdentifier
    spec: JobSpec
    key: str


@dataclass(frozen=True)
class Assign:
    pod: str
    job_id: int
    fingerprint: str


@dataclass(frozen=True)
class Release:
    pod: str


@dataclass(frozen=True)
class Supersede:
    fingerprint: str


@dataclass(frozen=True)
class HoldBack:
    fingerprint: str
    pod: str
    reason: str  # Kubernetes' reason and message (broken.Breakage.text)


@dataclass(frozen=True)
class Recovered:
    fingerprint: str


@dataclass(frozen=True)
class KeyRefused:
    """`refusal`: the refusal read as expiry, which bounds the keys; `spent`: read as a key spent before
    (neither: it says nothing of the keys' lifetime; key_lifetime.KeyLifetime.refused); `issued_at`: when
    GoCD issued the refused key at the earliest, if known."""

    pod: str
    refusal: Refusal | None
    issued_at: float | None
    spent: Spent | None = None


@dataclass(frozen=True)
class KeyAccepted:
    """GoCD registered a pod's agent with a key `age_s` old when the pod was created: keys live that long
    at least (key_lifetime.KeyLifetime.registered)."""

    pod: str
    age_s: float


@dataclass(frozen=True)
class KeysShort:
    source: str  # key_lifetime.WARM_POOL or PREDICT
    pods: Mapping[str, int]  # fingerprint considered -> pods wanted, not started for want of a key (or 0)


@dataclass(frozen=True)
class Create:
    """`key` None: take the oldest usable banked key when creating (the warm pool)."""

    token: object
    job: JobIdentifier | None
    spec: JobSpec
    key: str | None
    said: str  # what was done, with `{pod}` for the new pod's name
    # The request's own pod (create-agent): a failure fails the request, which explains itself. Other
    # pods are created in the background: a failure is logged and ends that plan's creations for the
    # fingerprint.
    for_request: bool = False
    # Annotations of the new pod beyond the pool's own (a pod started ahead says for which stage).
    annotations: Mapping[str, str] = field(default_factory=dict)
    key_since: float | None = None  # when GoCD issued `key`, at the earliest (None: now)


@dataclass(frozen=True)
class Retire:
    pods: tuple[tuple[str, str], ...]  # (pod, reason)
    # The caller knows the agents are not building (job-completion); otherwise GoCD is asked.
    agents_idle: bool = False


@dataclass(frozen=True)
class Say:
    text: str
    job: JobIdentifier | None = None


Intent = (
    Mark | Reserve | Wait | Assign | Release | Supersede | HoldBack | Recovered | KeyRefused | KeyAccepted
    | KeysShort
    | Create | Retire | Say
)


@dataclass(frozen=True)
class Plan:
    intents: tuple[Intent, ...] = ()
    message: str = ""  # for the job's console or the log, when the request needs words
    # A server-ping's decisions: the earliest clock time, at or after the decision's `now`, at which the
    # same decision on the same state may decide otherwise, but for registration keys growing too old
    # (that only takes pods away: warm.py); infinity when only a change of the state can. A request's
    # decision is made afresh at each request and leaves it at infinity.
    due: float = math.inf

    def __add__(self, other: Plan) -> Plan:
        return Plan(self.intents + other.intents, self.message or other.message, min(self.due, other.due))


NOTHING = Plan()
