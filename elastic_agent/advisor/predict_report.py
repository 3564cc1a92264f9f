"""What Predict buys a profile, for the report: how many of its jobs follow another stage (followers.py),
and each `Predict=true` candidate beside the same IdleTimeout without it.

Predict is judged on the whole installation, like warm pools (installation.py), and can only start pods
for jobs that follow another stage, so a profile whose jobs all begin pipelines gains nothing from it but
idle pods. The comparison is with the flat candidate of the same IdleTimeout and no warm pool, the
setting Predict adds to; when the search did not run that one (search.py), the report says so rather
than compare with another.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_agent.advisor.advise import Candidate, ProfileAdvice, flat_label
from elastic_agent.advisor.followers import Following


@dataclass(frozen=True)
class PredictGain:
    """A Predict candidate and the flat candidate it adds to (None: not run)."""

    predict: Candidate
    without: Candidate | None


def predict_gains(advice: ProfileAdvice) -> list[PredictGain]:
    by_label = {c.label: c for c in advice.candidates}
    gains = []
    for c in advice.candidates:
        if c.properties.get("Predict", "").lower() == "true" and c.schedule is None:
            plain = flat_label(c.properties.get("IdleTimeout", ""), int(c.properties.get("MinIdlePods", "0")))
            gains.append(PredictGain(c, by_label.get(plain)))
    return gains


def render_predict(advice: ProfileAdvice, follow: Following | None) -> str:
    lines = []
    if follow is not None:
        lines.append(
            f"Predict: {follow.followers} of this profile's {follow.jobs} jobs in the trace "
            f"({follow.share:.0%}) follow another stage, in their pipeline run or downstream of another "
            "pipeline; Predict can start pods ahead for those only."
        )
    for gain in predict_gains(advice):
        p = gain.predict.result
        if gain.without is None:
            lines.append(f"- {gain.predict.label}: the same IdleTimeout without Predict was not run.")
            continue
        w = gain.without.result
        lines.append(
            f"- {gain.predict.label} against {gain.without.label}: mean wait {w.wait_mean:.1f} -> "
            f"{p.wait_mean:.1f} s, p95 {w.wait_p95:.1f} -> {p.wait_p95:.1f} s, idle "
            f"{advice.per_day(w):.1f} -> {advice.per_day(p):.1f} pod-h/day "
            f"({w.idle_pod_s_per_job:.1f} -> {p.idle_pod_s_per_job:.1f} pod-s/job)."
        )
    return "\n".join(lines) + "\n" if lines else ""
